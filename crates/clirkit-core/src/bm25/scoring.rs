//! Lucene 9's BM25Similarity, bit for bit: document lengths are stored as Lucene's one-byte
//! norm (`SmallFloat.intToByte4`), and every score is computed in `f32` with Lucene's operation
//! order, so rankings (ties included) match Anserini's.

use crate::error::{Error, Result};
use crate::postings::{BlockMeta, PostingScorer};

/// Anserini's defaults.
pub const DEFAULT_K1: f32 = 0.9;
pub const DEFAULT_B: f32 = 0.4;

/// BM25's free parameters, settable per search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    pub k1: f32,
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params {
            k1: DEFAULT_K1,
            b: DEFAULT_B,
        }
    }
}

impl Bm25Params {
    pub(crate) fn check(&self) -> Result<()> {
        let k1_ok = self.k1.is_finite() && self.k1 > 0.0;
        if !k1_ok || !(0.0..=1.0).contains(&self.b) {
            return Err(Error::invalid(format!(
                "BM25 needs k1 > 0 and 0 <= b <= 1 (got k1={}, b={})",
                self.k1, self.b
            )));
        }
        Ok(())
    }
}

/// Lucene's `SmallFloat.longToInt4`: a 4-bit-mantissa float of a non-negative integer.
fn long_to_int4(i: u64) -> u32 {
    let num_bits = 64 - i.leading_zeros();
    if num_bits < 4 {
        i as u32
    } else {
        let shift = num_bits - 4;
        let mut encoded = ((i >> shift) as u32) & 0x07;
        encoded |= (shift + 1) << 3;
        encoded
    }
}

/// Lucene's `SmallFloat.int4ToLong`.
fn int4_to_long(i: u32) -> u64 {
    let bits = (i & 0x07) as u64;
    let shift = (i >> 3) as i32 - 1;
    if shift == -1 {
        bits
    } else {
        (bits | 0x08) << shift
    }
}

/// Small lengths are stored exactly in the byte values below this one.
const NUM_FREE_VALUES: u32 = 255 - 231; // 255 - longToInt4(i32::MAX)

/// Lucene's `SmallFloat.intToByte4`: the one-byte norm of a document length.
pub fn length_to_norm(length: u32) -> u8 {
    let length = length.min(i32::MAX as u32);
    if length < NUM_FREE_VALUES {
        length as u8
    } else {
        (NUM_FREE_VALUES + long_to_int4((length - NUM_FREE_VALUES) as u64)) as u8
    }
}

/// Lucene's `SmallFloat.byte4ToInt`: the (approximate) length a norm byte stands for.
pub fn norm_to_length(norm: u8) -> u32 {
    let i = norm as u32;
    if i < NUM_FREE_VALUES {
        i
    } else {
        (NUM_FREE_VALUES as u64 + int4_to_long(i - NUM_FREE_VALUES)).min(i32::MAX as u64) as u32
    }
}

/// `BM25Similarity.idf`: computed in f64, rounded to f32.
pub fn idf(doc_freq: u64, doc_count: u64) -> f32 {
    (1.0 + (doc_count as f64 - doc_freq as f64 + 0.5) / (doc_freq as f64 + 0.5)).ln() as f32
}

/// `BM25Similarity.avgFieldLength`: sumTotalTermFreq / docCount, rounded to f32.
pub fn avg_length(sum_total_term_freq: u64, doc_count: u64) -> f32 {
    if doc_count == 0 {
        return 1.0;
    }
    (sum_total_term_freq as f64 / doc_count as f64) as f32
}

/// Per-search constants: for each norm byte, `1 / (k1 * (1 - b + b * dl / avgdl))` (Lucene's
/// `cache`), computed once per (k1, b) and shared by every term of every query.
#[derive(Debug, Clone)]
pub struct NormCache {
    pub inverse: [f32; 256],
    /// The (k1, b, avgdl) the table was computed for.
    pub key: ScoringKey,
}

/// The parameters a norm table, and the block maxima stored for it, depend on: equal keys
/// (bit for bit) give the same table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoringKey {
    pub k1_bits: u32,
    pub b_bits: u32,
    pub avgdl_bits: u32,
}

impl NormCache {
    pub fn new(k1: f32, b: f32, avgdl: f32) -> Self {
        let mut inverse = [0f32; 256];
        for (i, slot) in inverse.iter_mut().enumerate() {
            let length = norm_to_length(i as u8) as f32;
            *slot = 1f32 / (k1 * ((1f32 - b) + b * length / avgdl));
        }
        let key = ScoringKey {
            k1_bits: k1.to_bits(),
            b_bits: b.to_bits(),
            avgdl_bits: avgdl.to_bits(),
        };
        NormCache { inverse, key }
    }
}

/// The part of a BM25 score that depends on the posting, `freq * normInverse` in f32: the
/// score rises with it whatever the term's weight, so the largest in a block, with the same
/// weight, gives the largest score in the block exactly ([`TermScorer::score_of_saturation`]).
#[inline(always)]
pub fn saturation(freq: u32, norm_inverse: f32) -> f32 {
    freq as f32 * norm_inverse
}

/// One query term's scorer: `weight = boost * idf`, where boost is the term's multiplicity in
/// the query (Anserini's bag-of-words query).
#[derive(Debug, Clone, Copy)]
pub struct TermScorer {
    pub weight: f32,
}

impl TermScorer {
    pub fn new(boost: f32, idf: f32) -> Self {
        TermScorer {
            weight: boost * idf,
        }
    }

    /// Lucene's `weight - weight / (1 + freq * normInverse)`; monotone in `freq` and in
    /// `norm_inverse`, so a score from a block's max tf and min norm bounds every posting in it.
    #[inline(always)]
    pub fn score(&self, freq: u32, norm_inverse: f32) -> f32 {
        self.score_of_saturation(saturation(freq, norm_inverse))
    }

    /// The score of a posting whose [`saturation`] is `saturation`: every step (an add, a
    /// division by the sum, a subtraction) rounds monotonically, so a larger saturation never
    /// gives a smaller f32 score for a positive weight.
    #[inline(always)]
    pub fn score_of_saturation(&self, saturation: f32) -> f32 {
        self.weight - self.weight / (1f32 + saturation)
    }
}

/// A query term's [`PostingScorer`] over a BM25 index: a posting's value is its term frequency,
/// and the document's length comes from the index's norms.
#[derive(Clone, Copy)]
pub struct Bm25PostingScorer<'a> {
    pub term: TermScorer,
    pub cache: &'a NormCache,
    pub norms: &'a [u8],
}

impl PostingScorer for Bm25PostingScorer<'_> {
    #[inline(always)]
    fn score(&self, doc: u32, tf: u32) -> f32 {
        let norm = self.norms[doc as usize];
        self.term.score(tf, self.cache.inverse[norm as usize])
    }

    /// The block's max tf and min norm: [`TermScorer::score`] is monotone in both.
    #[inline(always)]
    fn block_bound(&self, meta: &BlockMeta) -> f32 {
        self.term
            .score(meta.max_value, self.cache.inverse[meta.min_norm as usize])
    }

    /// The stored maximum is the block's largest [`saturation`] for this search's norm table,
    /// so this is the block's largest score itself.
    #[inline(always)]
    fn stored_block_bound(&self, stored: f32) -> f32 {
        self.term.score_of_saturation(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norm_table_matches_lucene() {
        // Exact below 24, then buckets with a 4-bit mantissa.
        for l in 0..24 {
            assert_eq!(norm_to_length(length_to_norm(l)), l);
        }
        assert_eq!(length_to_norm(24), 24);
        assert_eq!(norm_to_length(length_to_norm(100)), 96);
        assert_eq!(norm_to_length(255), 24 + (15 << 27));
        assert_eq!(length_to_norm(i32::MAX as u32), 255);
        // Decoding never overstates the length and the byte order follows the length order.
        let mut last = 0;
        for n in 0..=255u8 {
            let l = norm_to_length(n);
            assert!(l >= last);
            assert_eq!(length_to_norm(l), n);
            last = l;
        }
        for l in [25u32, 77, 1000, 123_456] {
            assert!(norm_to_length(length_to_norm(l)) <= l);
        }
    }

    #[test]
    fn score_formula() {
        let avgdl = avg_length(30, 3);
        assert_eq!(avgdl, 10.0);
        let cache = NormCache::new(0.9, 0.4, avgdl);
        let idf = idf(1, 3);
        assert!((idf - (1.0f64 + 2.5 / 1.5).ln() as f32).abs() < 1e-7);
        let s = TermScorer::new(1.0, idf).score(2, cache.inverse[length_to_norm(10) as usize]);
        let expect = idf as f64 * 2.0 / (2.0 + 0.9 * (1.0 - 0.4 + 0.4 * 10.0 / 10.0));
        assert!((s as f64 - expect).abs() < 1e-6, "{s} vs {expect}");
    }
}
