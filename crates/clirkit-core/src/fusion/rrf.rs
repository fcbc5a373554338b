//! Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): a document's fused score is
//! Σᵢ wᵢ / (k + rankᵢ) over the runs that retrieved it, with rankᵢ its 1-based position in run
//! i's canonical order. Scores of the input runs are used only through that order.

use super::{Accumulator, DocEntry};

/// Add run `run`'s contributions for one query; `list` is already cut to the fusion depth.
pub(crate) fn accumulate(
    run: usize,
    list: &[DocEntry],
    weight: f64,
    k: f64,
    acc: &mut Accumulator<'_>,
) {
    for (i, doc) in list.iter().enumerate() {
        let rank = (i + 1) as f64;
        acc.add(run, doc.id, weight / (k + rank));
    }
}
