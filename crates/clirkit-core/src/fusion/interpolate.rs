//! Linear interpolation of two runs: alpha · norm(a) + (1 − alpha) · norm(b), a weighted
//! CombSUM whose weights are (alpha, 1 − alpha). A document missing from one run gets 0 from it.
//! For more than two runs or free weights, use CombSUM with weights.

use super::accumulator::Accumulator;
use super::combsum;
use super::normalize::Norm;
use super::run_lists::DocEntry;
use crate::error::{Error, Result};

/// The run weights for interpolation with `alpha` over `num_runs` runs (which must be two).
pub(crate) fn weights(alpha: f64, num_runs: usize) -> Result<Vec<f64>> {
    if num_runs != 2 {
        return Err(Error::invalid(format!(
            "interpolation needs exactly two runs, got {num_runs}"
        )));
    }
    if !(0.0..=1.0).contains(&alpha) {
        return Err(Error::invalid(format!(
            "interpolation alpha must be in [0, 1], got {alpha}"
        )));
    }
    Ok(vec![alpha, 1.0 - alpha])
}

/// Add run `run`'s normalized score for one query, weighted by alpha or 1 − alpha (from
/// [`weights`]): the weighted CombSUM that interpolation is.
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
