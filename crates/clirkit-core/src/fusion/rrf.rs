//! Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): a document's fused score is
//! Σᵢ wᵢ / (k + rankᵢ) over the runs that retrieved it, with rankᵢ its 1-based position in run
//! i's canonical order. Scores of the input runs are used only through that order.

use super::{Accumulator, DocEntry};

/// wᵢ / (k + rank) for ranks 1..=`depth`, computed once per run instead of once per document.
pub(crate) fn contributions(weight: f64, k: f64, depth: usize) -> Vec<f64> {
    (1..=depth).map(|rank| weight / (k + rank as f64)).collect()
}

/// Add run `run`'s contributions for one query; `list` is already cut to the fusion depth and
/// `contributions` (from [`contributions`]) is at least as long.
pub(crate) fn accumulate(
    run: usize,
    list: &[DocEntry],
    contributions: &[f64],
    acc: &mut Accumulator<'_>,
) {
    acc.add_list(run, list, |i, _| contributions[i]);
}
