//! Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): a document's fused score is
//! Σᵢ wᵢ / (k + rankᵢ) over the runs that retrieved it, with rankᵢ its 1-based position in run
//! i's canonical order. Scores of the input runs are used only through that order.

use super::accumulator::Accumulator;
use super::run_lists::{DocEntry, RunLists};
use crate::error::{Error, Result};

/// RRF's k must be a finite number >= 0.
pub(crate) fn check_k(k: f64) -> Result<()> {
    if !(k.is_finite() && k >= 0.0) {
        return Err(Error::invalid(format!(
            "RRF k must be a finite number >= 0, got {k}"
        )));
    }
    Ok(())
}

/// wᵢ / (k + rank) for ranks 1..=`depth`, computed once per run instead of once per document.
pub(crate) fn contributions(weight: f64, k: f64, depth: usize) -> Vec<f64> {
    (1..=depth).map(|rank| weight / (k + rank as f64)).collect()
}

/// Each run's [`contributions`], as deep as its longest list cut to `depth`.
pub(crate) fn run_contributions(
    runs: &[&RunLists],
    weights: &[f64],
    k: f64,
    depth: usize,
) -> Vec<Vec<f64>> {
    runs.iter()
        .zip(weights)
        .map(|(run, &w)| {
            let longest = run.query_entries().iter().map(|q| q.docs.len()).max();
            contributions(w, k, longest.unwrap_or(0).min(depth))
        })
        .collect()
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
