//! Where document-at-a-time search keeps its best k hits ([`Selection`]): a heap with the k-th
//! score exact after every insertion for small k, a lagging buffer of packed hits above it; and
//! the [`Threshold`] a pruning algorithm compares its bounds with.

use super::super::doc_ranks::DocRanks;
use crate::topk::{HigherKeyFirst, Hit as RankedHit, TopK};

/// The k-th best score so far, as the least bound a document needs to still enter the top k.
#[derive(Clone, Copy)]
pub(super) struct Threshold {
    /// Half-way between the k-th score and the f32 just below it, widened to f64: a bound
    /// below it rounds to an f32 strictly below the k-th score.
    cutoff: f64,
}

impl Threshold {
    /// Fewer than k hits so far: any document may enter.
    pub(super) const OPEN: Threshold = Threshold {
        cutoff: f64::NEG_INFINITY,
    };

    pub(super) fn new(kth: Option<f32>) -> Self {
        match kth {
            Some(t) if t > 0.0 => {
                let below = f32::from_bits(t.to_bits() - 1);
                Threshold {
                    cutoff: (below as f64 + t as f64) / 2.0,
                }
            }
            _ => Threshold::OPEN,
        }
    }

    /// Could a document whose score is at most `bound` still enter the top k? Only when its
    /// bound, rounded to f32 like a real score, is at least the k-th score: at equality it may
    /// still win the doc-id tie-break.
    #[inline(always)]
    pub(super) fn admits(self, bound: f64) -> bool {
        // The nudge covers any rounding in the bound's own summation.
        bound * (1.0 + 1e-9) >= self.cutoff
    }
}

/// Where document-at-a-time search keeps its best k hits: the threshold it prunes with, and
/// the offers of fully scored documents.
pub(super) trait Selection {
    /// Offer a fully scored document; the new threshold when it changed.
    fn push(&mut self, score: f32, doc: u32) -> Option<Threshold>;
    fn into_hits(self) -> Vec<Hit>;
}

/// Up to this k, the k-th score is kept exact after every insertion (a heap): with few hits
/// pruning is only as good as its threshold. Above it, a buffer whose threshold lags costs
/// less per insertion than the heap's sifts.
pub(super) const EXACT_THRESHOLD_MAX_K: usize = 64;

/// The best k hits in a heap: the k-th score exact after every insertion.
pub(super) struct HeapTopK<'r> {
    top: TopK<f32, HigherKeyFirst>,
    ranks: DocRanks<'r>,
    /// The k-th score once k hits are in, else minus infinity: a lower score never enters.
    floor: f32,
}

impl<'r> HeapTopK<'r> {
    pub(super) fn new(k: usize, ranks: DocRanks<'r>) -> Self {
        HeapTopK {
            top: TopK::new(k),
            ranks,
            floor: f32::NEG_INFINITY,
        }
    }
}

impl Selection for HeapTopK<'_> {
    #[inline]
    fn push(&mut self, score: f32, doc: u32) -> Option<Threshold> {
        if score < self.floor {
            return None;
        }
        self.top.push_hit(RankedHit {
            score,
            id: doc,
            key: self.ranks.rank(doc),
        });
        let worst = self.top.worst()?.score;
        if worst == self.floor {
            return None;
        }
        self.floor = worst;
        Some(Threshold::new(Some(worst)))
    }

    fn into_hits(self) -> Vec<Hit> {
        self.top.into_sorted().into_iter().map(Hit::from).collect()
    }
}

/// The best k hits in a buffer of 2k cut back to its best k when full: amortized O(1) per
/// candidate where a heap pays a sift per replacement, with a threshold that lags, for larger k. Each hit is held as one
/// number that orders like the hits do (its score's bits over its tie key), so the cut
/// compares integers. The tie key, the doc-id rank (a load from a table as long as the
/// collection, which misses the cache), is looked up at once only for a hit that ties the
/// k-th score; the others' are looked up together at the cut, where the loads do not wait on
/// each other.
pub(super) struct BufferTopK<'r> {
    k: usize,
    /// (order, doc): see [`order_of`].
    buf: Vec<(u64, u32)>,
    /// The order of the k-th best hit at the last cut; a hit whose order is not above it can
    /// never be in the top k.
    floor: Option<u64>,
    ranks: DocRanks<'r>,
}

/// The low half of a buffered hit's order before its rank is looked up (ranks are below the
/// document count, itself below `u32::MAX`).
const KEY_UNKNOWN: u32 = u32::MAX;

/// f32 bits as a u32 that orders like `f32::total_cmp`.
#[inline(always)]
fn score_order(score: f32) -> u32 {
    let bits = score.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

/// The score whose [`score_order`] is `order`.
#[inline(always)]
fn score_of_order(order: u32) -> f32 {
    f32::from_bits(if order >> 31 == 1 {
        order & !(1 << 31)
    } else {
        !order
    })
}

/// A hit's place as one number, larger first: the score, then the higher doc-id rank (the
/// tie rule of [`HigherKeyFirst`]).
#[inline(always)]
fn order_of(score: f32, key: u32) -> u64 {
    (score_order(score) as u64) << 32 | key as u64
}

impl<'r> BufferTopK<'r> {
    pub(super) fn new(k: usize, ranks: DocRanks<'r>) -> Self {
        BufferTopK {
            k,
            buf: Vec::with_capacity(2 * k.min(1 << 20)),
            floor: None,
            ranks,
        }
    }

    fn look_up_keys(&mut self) {
        for (order, doc) in &mut self.buf {
            if *order as u32 == KEY_UNKNOWN {
                *order = (*order & !(u32::MAX as u64)) | self.ranks.rank(*doc) as u64;
            }
        }
    }

    /// Keep the best k, and the k-th of them as the floor.
    fn cut(&mut self) -> Option<Threshold> {
        self.look_up_keys();
        let kth = if self.buf.len() > self.k {
            self.buf
                .select_nth_unstable_by(self.k - 1, |a, b| b.0.cmp(&a.0));
            self.buf.truncate(self.k);
            self.buf[self.k - 1].0
        } else {
            self.buf.iter().map(|h| h.0).min()?
        };
        self.floor = Some(kth);
        Some(Threshold::new(Some(score_of_order((kth >> 32) as u32))))
    }
}

impl Selection for BufferTopK<'_> {
    #[inline]
    fn push(&mut self, score: f32, doc: u32) -> Option<Threshold> {
        let mut order = order_of(score, KEY_UNKNOWN);
        if let Some(floor) = self.floor {
            if order >> 32 < floor >> 32 {
                return None;
            }
            if order >> 32 == floor >> 32 {
                order = order_of(score, self.ranks.rank(doc));
                if order <= floor {
                    return None;
                }
            }
        }
        self.buf.push((order, doc));
        let first_k = self.floor.is_none() && self.buf.len() == self.k;
        if first_k || self.buf.len() >= 2 * self.k {
            return self.cut();
        }
        None
    }

    fn into_hits(mut self) -> Vec<Hit> {
        self.look_up_keys();
        self.buf
            .sort_unstable_by_key(|&(order, _)| std::cmp::Reverse(order));
        self.buf.truncate(self.k);
        self.buf
            .into_iter()
            .map(|(order, doc)| Hit {
                doc,
                score: score_of_order((order >> 32) as u32),
            })
            .collect()
    }
}

/// One retrieved document: internal number and BM25 score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: u32,
    pub score: f32,
}

impl From<RankedHit<f32, HigherKeyFirst>> for Hit {
    #[inline]
    fn from(hit: RankedHit<f32, HigherKeyFirst>) -> Self {
        Hit {
            doc: hit.id,
            score: hit.score,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_orders_sort_like_total_cmp_and_give_the_score_back() {
        let mut scores = vec![
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            3.5,
            1e30,
            -2e-30,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        scores.extend((1..200u32).map(|i| (i * 7919 % 97) as f32 / 7.0));
        for &a in &scores {
            assert_eq!(score_of_order(score_order(a)).to_bits(), a.to_bits());
            for &b in &scores {
                assert_eq!(score_order(a).cmp(&score_order(b)), a.total_cmp(&b));
            }
        }
    }
}
