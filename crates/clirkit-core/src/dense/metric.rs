//! How a query is compared with a vector, and the check every vector matrix passes on the way in.

use crate::error::{Error, Result};

crate::options::option_enum! {
    /// Similarity of a query to a vector.
    pub enum Metric("metric") {
        /// Inner product (cosine for normalized vectors).
        InnerProduct = "ip",
        /// Squared Euclidean distance, reported negated so that higher is better.
        L2 = "l2",
    }
}

/// Check that a row-major matrix has `n * dim` finite values; `what` names it in errors.
pub fn check_matrix(data: &[f32], dim: usize, what: &str) -> Result<usize> {
    if dim == 0 {
        return Err(Error::invalid(format!("{what}: dimension must be > 0")));
    }
    if !data.len().is_multiple_of(dim) {
        return Err(Error::invalid(format!(
            "{what}: {} values is not a whole number of {dim}-dimensional vectors",
            data.len()
        )));
    }
    if let Some(pos) = data.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(format!(
            "{what}: vector {} has a non-finite value ({}) at dimension {}",
            pos / dim,
            data[pos],
            pos % dim
        )));
    }
    Ok(data.len() / dim)
}
