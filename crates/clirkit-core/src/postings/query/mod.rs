//! Top-k query algorithms over an inverted index's postings, whatever the scorer, one per file
//! (PISA's layout):
//! [`maxscore`] (block-max MaxScore, document at a time), [`windowed`] (the same over windows
//! of documents, each with its own essential terms, passing over whole windows), [`bmw`]
//! (block-max WAND) and [`exhaustive`] (every posting scored, the reference the others must
//! equal), with the cost model that picks between them beside them (`cost.rs`). The
//! algorithms walk [`Cursor`]s over [`crate::postings`] and read scores through the cursors'
//! scorer; selection is [`crate::topk`]'s, ties to the higher doc-id rank.
//!
//! Exactness. Each term's contribution is an f32 score; a document's contributions are summed
//! in f64 (exact for the handful of positive terms of a query, so the order of addition cannot
//! change the result) and rounded once to f32.

mod bmw;
mod cost;
pub(crate) mod estimate;
pub mod exhaustive;
mod maxscore;
mod selection;
mod windowed;

pub use super::doc_ranks::DocRanks;
pub use cost::Strategy;
pub use selection::Hit;

use crate::postings::{Cursor, PostingScorer};
use selection::{BufferSelection, HeapSelection, Selection, Threshold, EXACT_THRESHOLD_MAX_K};

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
        _ if k == 0 || cursors.is_empty() => Vec::new(),
        _ if k <= EXACT_THRESHOLD_MAX_K => {
            // A few documents scored first give the walk a k-th score to prune from (the
            // heap's threshold is exact, so a good start is most of what small k needs).
            let first = Threshold::new(estimate::first_kth_score(&cursors, k));
            document_at_a_time(strategy, cursors, HeapSelection::new(k, ranks), k, first)
        }
        _ => document_at_a_time(
            strategy,
            cursors,
            BufferSelection::new(k, ranks),
            k,
            Threshold::OPEN,
        ),
    }
}

/// A pruning strategy's search, keeping the best hits in `top`, pruning from `first` (at most
/// the final k-th score).
fn document_at_a_time<S: PostingScorer>(
    strategy: Strategy,
    cursors: Vec<Cursor<'_, S>>,
    top: impl Selection,
    k: usize,
    first: Threshold,
) -> Vec<Hit> {
    match strategy {
        Strategy::BlockMaxWand => bmw::block_max_wand(cursors, top, first),
        _ if cost::windows_pay(cursors.len(), k) => {
            windowed::windowed_maxscore(cursors, top, first)
        }
        _ => maxscore::maxscore(cursors, top, first),
    }
}
