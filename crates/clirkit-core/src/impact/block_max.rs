//! Exact top-k for impact indexes by block-max pruning over document-id blocks: BMP's idea
//! (Mallia, Suel, Tonellotto, SIGIR 2024) on the inverted index, with integer accumulation.
//!
//! The documents are cut into blocks of [`DOC_BLOCK`] consecutive ids. A query first bounds every
//! document block: per term, the largest stored impact of its postings that can fall in the block
//! (from the postings blocks' metadata where a postings block is dense, from the postings
//! themselves where it is sparser than the document blocks it spans), times the term's query
//! impact, summed over the terms. It then scores exactly, term at a time into a block-local
//! integer accumulator, a few blocks with the largest bounds (so the k-th score starts high), and
//! then, in document order, every other block whose bound can still reach the k-th score. Both
//! passes walk each term's postings forward only.
//!
//! Exactness. Scores are integer dot products (query impact × stored impact, summed in `u32`:
//! the index refuses queries whose largest possible score reaches 2^24, so no sum overflows and
//! every score is an exact f32), so the order of addition cannot matter and the scores equal the
//! generic algorithms' f64 sums. A block is skipped only when its bound is strictly below the
//! k-th score (a document at that score may still win on the tie key), and the best k are kept
//! by the canonical rule (score, then the higher doc-id rank), as everywhere else.

use crate::postings::codec::{decode_docs, decode_values};
use crate::postings::query::{DocRanks, Hit};
use crate::postings::{BlockMeta, TermPostings, BLOCK_LEN};

/// log2 of [`DOC_BLOCK`].
const DOC_BLOCK_SHIFT: u32 = 6;
/// Documents per block bound.
pub const DOC_BLOCK: usize = 1 << DOC_BLOCK_SHIFT;

/// One query term: its postings and its quantized query impact.
#[derive(Clone, Copy)]
pub struct QueryTerm<'a> {
    pub postings: TermPostings<'a>,
    pub impact: u32,
}

/// The top `k` documents for `terms` (each term at most once), exactly.
pub fn top_k(terms: &[QueryTerm<'_>], k: usize, ranks: DocRanks<'_>) -> Vec<Hit> {
    let num_docs = ranks.num_docs();
    if k == 0 || terms.is_empty() || num_docs == 0 {
        return Vec::new();
    }
    let mut bounds = block_bounds(terms, num_docs);
    let mut readers: Vec<Reader<'_>> = terms.iter().map(|t| Reader::new(*t)).collect();
    let mut top = BestK::new(k, ranks);
    let mut acc = [0u32; DOC_BLOCK];

    // Pass 1: the blocks with the largest bounds, in document order.
    let seeds = seed_blocks(&bounds, k);
    for &b in &seeds {
        score_block(&mut readers, b, num_docs, &mut acc, &mut top);
        bounds[b] = 0; // scored: pass 2 passes over it
    }
    // Pass 2: every other block that can still reach the k-th score, in document order.
    readers.iter_mut().for_each(Reader::rewind);
    for (b, &bound) in bounds.iter().enumerate() {
        if bound != 0 && top.admits(bound) {
            score_block(&mut readers, b, num_docs, &mut acc, &mut top);
        }
    }
    top.into_hits()
}

/// Score every document of block `b` and offer those that may enter the top k.
#[inline]
fn score_block(
    readers: &mut [Reader<'_>],
    b: usize,
    num_docs: usize,
    acc: &mut [u32; DOC_BLOCK],
    top: &mut BestK<'_>,
) {
    let lo = (b << DOC_BLOCK_SHIFT) as u32;
    let hi = ((b + 1) << DOC_BLOCK_SHIFT).min(num_docs) as u32;
    for r in readers.iter_mut() {
        r.accumulate(lo, hi, acc);
    }
    for (i, score) in acc[..(hi - lo) as usize].iter_mut().enumerate() {
        let s = std::mem::take(score);
        if s != 0 && top.admits(s) {
            top.push(s, lo + i as u32);
        }
    }
}

/// The blocks pass 1 scores: the largest bounds, enough to hold about twice k documents, in
/// document order.
fn seed_blocks(bounds: &[u32], k: usize) -> Vec<usize> {
    let want = (2 * k).div_ceil(DOC_BLOCK) + 2;
    let mut nonzero: Vec<usize> = (0..bounds.len()).filter(|&b| bounds[b] != 0).collect();
    if nonzero.len() > want {
        nonzero.select_nth_unstable_by(want - 1, |&a, &b| bounds[b].cmp(&bounds[a]));
        nonzero.truncate(want);
    }
    nonzero.sort_unstable();
    nonzero
}

/// Each document block's bound: the sum over terms of the query impact times the largest impact
/// the term may hold in the block. A postings block spanning fewer document blocks than it has
/// postings bounds them all by its stored maximum; a sparser one is decoded and bounds each
/// document block by the postings that fall in it.
fn block_bounds(terms: &[QueryTerm<'_>], num_docs: usize) -> Vec<u32> {
    let mut bounds = vec![0u32; num_docs.div_ceil(DOC_BLOCK)];
    let (mut docs, mut values) = ([0u32; BLOCK_LEN], [0u32; BLOCK_LEN]);
    for t in terms {
        let p = &t.postings;
        let mut raise = Raise::default();
        let mut prev_last = u32::MAX;
        for j in 0..p.blocks {
            let meta = BlockMeta::decode(p.metas, j);
            let first = prev_last.wrapping_add(1) as usize >> DOC_BLOCK_SHIFT;
            let last = meta.last_doc as usize >> DOC_BLOCK_SHIFT;
            if last - first + 1 > meta.len as usize
                && decode_docs(p.data, &meta, prev_last, &mut docs)
            {
                decode_values(p.data, &meta, &mut values);
                for i in 0..meta.len as usize {
                    let b = docs[i] as usize >> DOC_BLOCK_SHIFT;
                    raise.raise(&mut bounds, b, t.impact * values[i]);
                }
            } else {
                // A block that does not decode is reported by the reader that scores it; its
                // metadata (checked) still bounds the range it claims.
                let contribution = t.impact * meta.max_value;
                for b in first..=last {
                    raise.raise(&mut bounds, b, contribution);
                }
            }
            prev_last = meta.last_doc;
        }
    }
    bounds
}

/// One term's running contribution to the bounds: document blocks come in rising order, and a
/// block met again (shared by two postings blocks, or holding several postings) is raised to the
/// larger contribution, never added twice.
#[derive(Default)]
struct Raise {
    block: Option<usize>,
    added: u32,
}

impl Raise {
    #[inline(always)]
    fn raise(&mut self, bounds: &mut [u32], b: usize, contribution: u32) {
        if self.block == Some(b) {
            if contribution > self.added {
                bounds[b] += contribution - self.added;
                self.added = contribution;
            }
        } else {
            bounds[b] += contribution;
            self.block = Some(b);
            self.added = contribution;
        }
    }
}

/// How much of the postings block under a [`Reader`] is decoded.
#[derive(Clone, Copy, PartialEq)]
enum Decoded {
    Nothing,
    Docs,
    DocsAndValues,
}

/// A forward-only walk over one term's postings, document block by document block, decoding a
/// postings block only when it holds documents of a block being scored.
struct Reader<'a> {
    term: QueryTerm<'a>,
    /// The postings block under the walk; `blocks` when past the end.
    block: usize,
    decoded: Decoded,
    /// The next posting of the decoded block, and how many it holds.
    at: (usize, usize),
    /// The decoded block's documents (row 0) and values (row 1).
    rows: [[u32; BLOCK_LEN]; 2],
}

impl<'a> Reader<'a> {
    fn new(term: QueryTerm<'a>) -> Self {
        let rows = [[0; BLOCK_LEN]; 2];
        let (block, decoded, at) = (0, Decoded::Nothing, (0, 0));
        Reader {
            term,
            block,
            decoded,
            at,
            rows,
        }
    }

    fn rewind(&mut self) {
        self.block = 0;
        self.decoded = Decoded::Nothing;
    }

    #[inline]
    fn meta(&self, b: usize) -> BlockMeta {
        BlockMeta::decode(self.term.postings.metas, b)
    }

    /// Add query impact × stored impact of every posting with `lo <= doc < hi` into `acc` (at
    /// `doc - lo`). Calls come with rising, disjoint ranges until [`Reader::rewind`].
    #[inline]
    fn accumulate(&mut self, lo: u32, hi: u32, acc: &mut [u32; DOC_BLOCK]) {
        let p = self.term.postings;
        while self.block < p.blocks {
            if self.decoded == Decoded::Nothing {
                let meta = self.meta(self.block);
                if meta.last_doc < lo {
                    self.block += 1;
                    continue;
                }
                let prev_last = match self.block {
                    0 => u32::MAX,
                    b => self.meta(b - 1).last_doc,
                };
                if self.block > 0 && prev_last + 1 >= hi {
                    return; // the block starts after the range
                }
                let [docs, _] = &mut self.rows;
                self.at = (0, meta.len as usize);
                if !decode_docs(p.data, &meta, prev_last, docs) {
                    // Go on with the one document the (checked) metadata vouches for; the
                    // searcher turns the mark into an error.
                    p.checks.mark_malformed();
                    docs[0] = meta.last_doc;
                    self.at.1 = 1;
                }
                self.decoded = Decoded::Docs;
            }
            let (mut pos, len) = self.at;
            while pos < len && self.rows[0][pos] < lo {
                pos += 1;
            }
            if pos < len && self.rows[0][pos] < hi {
                if self.decoded == Decoded::Docs {
                    let meta = self.meta(self.block);
                    decode_values(p.data, &meta, &mut self.rows[1]);
                    self.decoded = Decoded::DocsAndValues;
                }
                let q = self.term.impact;
                let [docs, values] = &self.rows;
                while pos < len && docs[pos] < hi {
                    acc[(docs[pos] - lo) as usize] += q * values[pos];
                    pos += 1;
                }
            }
            self.at.0 = pos;
            if pos < len {
                return; // the block goes on past the range
            }
            self.block += 1;
            self.decoded = Decoded::Nothing;
        }
    }
}

/// The best k hits: a buffer of up to 2k candidates cut back to the best k when full, each held
/// as one number that orders like the hits (score over the doc-id rank, the higher rank first
/// among equal scores).
struct BestK<'r> {
    k: usize,
    buf: Vec<(u64, u32)>,
    /// The order of the k-th best hit at the last cut: a hit not above it never enters.
    floor: Option<u64>,
    ranks: DocRanks<'r>,
}

impl<'r> BestK<'r> {
    fn new(k: usize, ranks: DocRanks<'r>) -> Self {
        BestK {
            k,
            buf: Vec::with_capacity(2 * k.min(1 << 20)),
            floor: None,
            ranks,
        }
    }

    /// Could a document whose score is at most `bound` enter? At the k-th score it may still
    /// win on its rank.
    #[inline(always)]
    fn admits(&self, bound: u32) -> bool {
        self.floor.is_none_or(|floor| bound as u64 >= floor >> 32)
    }

    #[inline]
    fn push(&mut self, score: u32, doc: u32) {
        let order = (score as u64) << 32 | self.ranks.rank(doc) as u64;
        if self.floor.is_some_and(|floor| order <= floor) {
            return;
        }
        self.buf.push((order, doc));
        if self.buf.len() >= 2 * self.k || (self.floor.is_none() && self.buf.len() == self.k) {
            self.cut();
        }
    }

    fn cut(&mut self) {
        if self.buf.len() > self.k {
            self.buf
                .select_nth_unstable_by(self.k - 1, |a, b| b.0.cmp(&a.0));
            self.buf.truncate(self.k);
        }
        self.floor = self.buf.iter().map(|h| h.0).min();
    }

    fn into_hits(mut self) -> Vec<Hit> {
        self.buf
            .sort_unstable_by_key(|&(order, _)| std::cmp::Reverse(order));
        self.buf.truncate(self.k);
        self.buf
            .into_iter()
            .map(|(order, doc)| Hit {
                doc,
                score: (order >> 32) as f32,
            })
            .collect()
    }
}
