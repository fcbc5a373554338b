//! CombMNZ (Fox & Shaw, TREC-2 1994): CombSUM multiplied by the number of runs that retrieved
//! the document, which rewards agreement between runs.

/// Run `run`'s contribution for one query is CombSUM's: its normalized, weighted scores (the
/// accumulator counts the hits that [`scale`] multiplies by).
pub(crate) use super::combsum::accumulate;

/// A document's CombMNZ from its CombSUM and its number of retrieving runs.
#[inline]
pub(crate) fn scale(sum: f64, hits: u32) -> f64 {
    sum * hits as f64
}
