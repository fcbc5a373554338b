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
//! - [`metric`]: [`Metric`] and the check every vector matrix passes on the way in.
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
pub mod metric;
pub mod passages;
pub mod source;

pub use index::{BuildOptions, DenseIndex, Part, SearchOptions, VectorDtype};
pub use metric::{check_matrix, Metric};
