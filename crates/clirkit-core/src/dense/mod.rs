//! Dense vector search: exact flat search and product quantization with 4-bit fast-scan.
//!
//! - [`kmeans`]: seeded k-means++ + Lloyd, multi-threaded and deterministic for a seed.
//! - [`codebook`]: product quantizer training/encoding (4 or 8 bits per sub-quantizer) and
//!   per-query float look-up tables.
//! - [`fastscan`]: 4-bit codes packed in blocks of 32 vectors, LUTs quantized to 8 bits,
//!   integer accumulation in SIMD (AVX-512 VBMI/VNNI, AVX2, scalar; chosen at run time).
//! - [`flat`]: exact blocked inner product / L2, the reference and the refine step.
//! - [`ivf`]: optional coarse quantizer (nlist lists, nprobe scanned).
//! - [`index`]: [`DenseIndex`] (flat | PQ [+ IVF] [+ stored vectors for refine]), save/open,
//!   streamed builds, append and merge.
//! - [`passages`]: search over passages aggregated by MaxP, `k` documents per query, and
//!   [`passages::DenseSearch`], a whole search as a run or written window by window.
//! - [`source`]: vectors read a chunk at a time (in memory or a float32/float16 `.npy` file).
//! - top-k selection lives in [`crate::topk`] (shared with BM25; ties go to the lower id here).
//!
//! Scores are always "higher is better": inner product for `ip`, the negated squared L2
//! distance for `l2`.

pub mod codebook;
pub mod fastscan;
pub mod flat;
pub mod index;
pub mod ivf;
pub mod kmeans;
pub mod passages;
pub mod source;

pub use index::{BuildOptions, DenseIndex, Part, SearchOptions, VectorDtype};

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
