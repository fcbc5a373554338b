//! Where document-at-a-time search keeps its best k hits ([`Selection`]): `crate::topk`'s heap
//! with the k-th score exact after every insertion for small k, its lagging buffer of packed
//! hits above it; and the [`Threshold`] a pruning algorithm compares its bounds with.

use super::super::doc_ranks::DocRanks;
use crate::topk::{BufferTopK, HigherKeyFirst, Hit as RankedHit, TopK};

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
pub(super) struct HeapSelection<'r> {
    top: TopK<f32, HigherKeyFirst>,
    ranks: DocRanks<'r>,
    /// The k-th score once k hits are in, else minus infinity: a lower score never enters.
    floor: f32,
}

impl<'r> HeapSelection<'r> {
    pub(super) fn new(k: usize, ranks: DocRanks<'r>) -> Self {
        HeapSelection {
            top: TopK::new(k),
            ranks,
            floor: f32::NEG_INFINITY,
        }
    }
}

impl Selection for HeapSelection<'_> {
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

/// The best k hits in [`BufferTopK`] (a buffer of 2k cut back to k, its threshold lagging),
/// the doc-id rank looked up only when needed.
pub(super) struct BufferSelection<'r>(BufferTopK<DocRanks<'r>>);

impl<'r> BufferSelection<'r> {
    pub(super) fn new(k: usize, ranks: DocRanks<'r>) -> Self {
        BufferSelection(BufferTopK::new(k, ranks))
    }
}

impl Selection for BufferSelection<'_> {
    #[inline]
    fn push(&mut self, score: f32, doc: u32) -> Option<Threshold> {
        self.0.push(score, doc).map(|kth| Threshold::new(Some(kth)))
    }

    fn into_hits(self) -> Vec<Hit> {
        self.0
            .into_sorted()
            .map(|(score, doc)| Hit { doc, score })
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
