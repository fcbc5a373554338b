//! Dense vector search: exact flat search and product quantization with 4-bit fast-scan.
//!
//! - [`kmeans`]: seeded k-means++ + Lloyd, multi-threaded and deterministic for a seed.
//! - [`codebook`]: product quantizer training/encoding (4 or 8 bits per sub-quantizer) and
//!   per-query float look-up tables.
//! - [`fastscan`]: 4-bit codes packed in blocks of 32 vectors, LUTs quantized to 8 bits,
//!   integer accumulation in SIMD (AVX-512 VBMI/VNNI, AVX2, scalar; chosen at run time).
//! - [`flat`]: exact blocked inner product / L2, the reference and the refine step.
//! - [`ivf`]: optional coarse quantizer (nlist lists, nprobe scanned).
//! - [`index`]: [`DenseIndex`] (flat | PQ [+ IVF] [+ stored vectors for refine]), save/open.
//! - [`topk`]: bounded top-k with the one deterministic tie rule (higher score, then lower id).
//!
//! Scores are always "higher is better": inner product for `ip`, the negated squared L2
//! distance for `l2`.

pub mod codebook;
pub mod fastscan;
pub mod flat;
pub mod index;
pub mod ivf;
pub mod kmeans;
pub mod topk;

pub use index::{BuildOptions, DenseIndex, SearchOptions};

use crate::error::{Error, Result};

/// Similarity of a query to a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Inner product (cosine for normalized vectors).
    InnerProduct,
    /// Squared Euclidean distance, reported negated so that higher is better.
    L2,
}

impl Metric {
    pub fn parse(name: &str) -> Result<Metric> {
        match name {
            "ip" => Ok(Metric::InnerProduct),
            "l2" => Ok(Metric::L2),
            other => Err(Error::invalid(format!(
                "unknown metric '{other}' (expected 'ip' or 'l2')"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::InnerProduct => "ip",
            Metric::L2 => "l2",
        }
    }
}

/// Check that a row-major matrix has `n * dim` finite values; `what` names it in errors.
pub fn check_matrix(data: &[f32], dim: usize, what: &str) -> Result<usize> {
    if dim == 0 {
        return Err(Error::invalid(format!("{what}: dimension must be > 0")));
    }
    if data.len() % dim != 0 {
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

/// Number of worker threads for `threads` (0 = all cores).
pub(crate) fn thread_count(threads: usize) -> usize {
    if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
}

/// Run `f` on a rayon pool of `threads` workers (0 = all cores).
pub(crate) fn with_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    let n = thread_count(threads);
    match rayon::ThreadPoolBuilder::new().num_threads(n).build() {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}

/// A small deterministic PRNG (SplitMix64): seeded sampling without a dependency.
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() >> 11) as u128 * n as u128 >> 53) as usize
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `count` distinct indices from `0..n`, in increasing order (Floyd's algorithm).
    pub fn sample(&mut self, n: usize, count: usize) -> Vec<usize> {
        if count >= n {
            return (0..n).collect();
        }
        let mut chosen = std::collections::HashSet::with_capacity(count);
        for j in n - count..n {
            let t = self.below(j + 1);
            if !chosen.insert(t) {
                chosen.insert(j);
            }
        }
        let mut out: Vec<usize> = chosen.into_iter().collect();
        out.sort_unstable();
        out
    }
}
