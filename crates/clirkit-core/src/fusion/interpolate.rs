//! Linear interpolation of two runs: alpha · norm(a) + (1 − alpha) · norm(b), a weighted
//! CombSUM whose weights are (alpha, 1 − alpha). A document missing from one run gets 0 from it.
//! For more than two runs or free weights, use CombSUM with weights.

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

/// Run `run`'s contribution for one query is CombSUM's with the weight alpha or 1 − alpha (from
/// [`weights`]): interpolation is a weighted CombSUM.
pub(crate) use super::combsum::accumulate;
