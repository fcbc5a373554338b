//! Top-k query algorithms over a BM25 index's postings, one per file (PISA's layout):
//! [`maxscore`] (block-max MaxScore, document at a time) and [`exhaustive`] (every posting
//! scored, the reference the other must equal), with the cost model that picks between them
//! beside them (`cost.rs`). The algorithms walk [`Cursor`]s over [`crate::postings`] and read
//! scores through the cursors' scorer; selection is [`crate::topk`]'s, ties to the higher
//! doc-id rank.
//!
//! Exactness. Each term's contribution is an f32 score; a document's contributions are summed
//! in f64 (exact for the handful of positive terms of a query, so the order of addition cannot
//! change the result) and rounded once to f32.

pub mod bmw;
mod cost;
pub mod exhaustive;
pub mod maxscore;

use crate::postings::{Cursor, PostingScorer};
use crate::topk::{HigherKeyFirst, Hit as RankedHit};

/// Could a document whose score is at most `bound` still enter the top k?
#[inline]
fn may_enter(bound: f64, threshold: Option<f32>) -> bool {
    match threshold {
        None => true,
        // The nudge covers any rounding in the bound's own summation.
        Some(t) => ((bound * (1.0 + 1e-9)) as f32) >= t,
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

crate::options::option_enum! {
/// How to find the top k; every strategy returns exactly the same hits.
pub enum Strategy("strategy") {
    /// Block-max MaxScore or exhaustive, whichever a simple cost model expects to be faster.
    Auto = "auto",
    /// Block-max MaxScore (dynamic pruning).
    MaxScore = "maxscore",
    /// Block-max WAND (dynamic pruning with block skipping on every term).
    BlockMaxWand = "bmw",
    /// Score every posting.
    Exhaustive = "exhaustive",
}
}

/// Each document's position in byte order of its string id (`rank [u32; n]` of `docs.bin`):
/// the top-k's tie key, so that ties come out in canonical order (doc id descending).
#[derive(Clone, Copy)]
pub struct DocRanks<'a> {
    bytes: &'a [u8],
}

impl<'a> DocRanks<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        DocRanks { bytes }
    }

    pub fn num_docs(&self) -> usize {
        self.bytes.len() / 4
    }

    #[inline]
    pub fn rank(&self, doc: u32) -> u32 {
        let at = doc as usize * 4;
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap())
    }
}

/// The top `k` documents of the query whose terms `cursors` walk, by `strategy`.
pub fn top_k<S: PostingScorer>(
    strategy: Strategy,
    cursors: Vec<Cursor<'_, S>>,
    k: usize,
    ranks: DocRanks<'_>,
) -> Vec<Hit> {
    let strategy = match strategy {
        Strategy::Auto => cost::cheapest(&cursors, k, ranks.num_docs()),
        chosen => chosen,
    };
    match strategy {
        Strategy::Exhaustive => exhaustive::exhaustive(cursors, k, ranks),
        Strategy::BlockMaxWand => bmw::block_max_wand(cursors, k, ranks),
        Strategy::MaxScore | Strategy::Auto => maxscore::maxscore(cursors, k, ranks),
    }
}
