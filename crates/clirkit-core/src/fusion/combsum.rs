//! CombSUM (Fox & Shaw, TREC-2 1994): a document's fused score is Σᵢ wᵢ · norm(scoreᵢ) over the
//! runs that retrieved it; a run that did not retrieve it adds nothing. Normalization is fitted
//! per query on the documents that take part (the top `depth`).

use super::accumulator::Accumulator;
use super::normalize::Norm;
use super::run_lists::DocEntry;

/// Add run `run`'s normalized, weighted scores for one query.
pub(crate) fn accumulate(
    run: usize,
    list: &[DocEntry],
    weight: f64,
    norm: Norm,
    acc: &mut Accumulator<'_>,
) {
    let normalizer = norm.fit(list.iter().map(|d| d.score));
    acc.add_list(run, list, |_, score| weight * normalizer.apply(score));
}
