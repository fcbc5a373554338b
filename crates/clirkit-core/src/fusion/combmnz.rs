//! CombMNZ (Fox & Shaw, TREC-2 1994): CombSUM multiplied by the number of runs that retrieved
//! the document, which rewards agreement between runs.

use super::accumulator::Accumulator;
use super::combsum;
use super::normalize::Norm;
use super::run_lists::DocEntry;

/// Add run `run`'s normalized, weighted scores for one query: the CombSUM part, whose hits the
/// accumulator counts for [`scale`].
#[inline]
pub(crate) fn accumulate(
    run: usize,
    list: &[DocEntry],
    weight: f64,
    norm: Norm,
    acc: &mut Accumulator<'_>,
) {
    combsum::accumulate(run, list, weight, norm, acc);
}

/// A document's CombMNZ from its CombSUM and its number of retrieving runs.
#[inline]
pub(crate) fn scale(sum: f64, hits: u32) -> f64 {
    sum * hits as f64
}
