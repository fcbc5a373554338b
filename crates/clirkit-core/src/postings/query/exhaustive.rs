//! Exhaustive scoring: every posting of every term, term at a time, into a dense f64
//! accumulator, then the top k selected without a heap. The reference block-max MaxScore must
//! equal, and the faster algorithm when k is a large share of the candidates.

use super::selection::Hit;
use crate::postings::doc_ranks::DocRanks;
use crate::postings::{Cursor, PostingScorer};
use crate::topk::select_positive;

/// Score every posting of every term and keep the top k.
pub fn exhaustive<S: PostingScorer>(
    cursors: Vec<Cursor<'_, S>>,
    k: usize,
    ranks: DocRanks<'_>,
) -> Vec<Hit> {
    let mut sums = vec![0f64; ranks.num_docs()];
    for mut c in cursors {
        let scorer = *c.scorer();
        // Moved in, the slice and the scorer are the closure's own: the compiler can keep them
        // in registers across the stores into `sums`.
        let sums = &mut sums[..];
        c.drain(move |doc, value| sums[doc as usize] += scorer.score(doc, value) as f64);
    }
    select_positive(&sums, k, |doc| ranks.rank(doc))
        .into_iter()
        .map(Hit::from)
        .collect()
}
