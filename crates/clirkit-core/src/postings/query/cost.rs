//! Which exact algorithm to run for a query: the [`Strategy`] asked for, and the cost model that
//! picks one for [`Strategy::Auto`] from the sizes at hand.

use crate::postings::{Cursor, PostingScorer};

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

/// Whether scoring every posting should beat block-max MaxScore for this query. Pruning cannot
/// pay for document-at-a-time traversal when k is a sizeable share of the candidates (measured:
/// exhaustive wins at k=1000 on SciFact and on 50k generated docs, MaxScore at k=10 and on 1M
/// docs), and the dense accumulator costs no more than the postings when the collection is
/// small next to them.
fn exhaustive_is_cheaper<S: PostingScorer>(
    cursors: &[Cursor<'_, S>],
    k: usize,
    num_docs: usize,
) -> bool {
    let postings: usize = cursors.iter().map(|c| c.doc_freq()).sum();
    k.saturating_mul(16) >= postings && num_docs <= postings.saturating_mul(8)
}

/// Whether MaxScore should walk windows ([`super::windowed`]) rather than documents one by one
/// ([`super::maxscore`]). Measured per query, interleaved, on the 1M-document Zipfian set (BM25
/// with stored block maxima; benches/results/bm25.md): at k=10 windows are 5x faster for one
/// term and 1.1-1.3x for two to eight, where a high k-th score passes over whole windows; at
/// k=1000 the k-th score is too low for that and the per-window bounds cost 2-26% more from
/// four terms up, and past eight terms they no longer pay at k=10 either.
pub(super) fn windows_pay(terms: usize, k: usize) -> bool {
    k <= super::selection::EXACT_THRESHOLD_MAX_K && terms <= 8
}

/// The exact algorithm expected to be fastest for this query (never [`Strategy::Auto`]).
pub(super) fn cheapest<S: PostingScorer>(
    cursors: &[Cursor<'_, S>],
    k: usize,
    num_docs: usize,
) -> Strategy {
    if exhaustive_is_cheaper(cursors, k, num_docs) {
        Strategy::Exhaustive
    } else {
        Strategy::MaxScore
    }
}
