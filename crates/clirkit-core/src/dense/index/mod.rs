//! [`DenseIndex`]: exact flat search, or product quantization (4-bit fast-scan or 8-bit) with an
//! optional IVF coarse quantizer and optional exact re-scoring ("refine") of a shortlist from the
//! stored full vectors. Saved as an index directory (manifest `clirkit-dense` v1) of checked,
//! memory-mapped files: `ids.bin`, `vectors.bin` (f32, if kept; or `vectors_f16.bin`, float16,
//! for re-scoring a PQ index at half the disk), `pq.bin` (codebook), `codes.bin`, and with IVF
//! `ivf_centroids.bin`, `ivf_lists.bin`, `ivf_slots.bin`.
//!
//! Search with 4-bit PQ selects a shortlist by the quantized (integer) fast-scan scores, then
//! re-scores it: with the float look-up table (exact PQ score), or with `refine > 0` with the
//! full vectors (exact score). The shortlist is `max(k, refine)` with refine, else `2k`.
//!
//! The index is split by concern (like FAISS's `IndexFastScan` / `IndexPQFastScan`): the type
//! and its options in `types.rs`, [`build`](DenseIndex::build) in `build.rs`, search scheduling and
//! re-scoring in `search.rs`, the per-task scan drivers in `scan.rs`, the search of small
//! collections (query groups, no heaps) in `small.rs`, the index directory
//! (save/open) in `storage.rs`, streamed builds, append and merge in `stream.rs`, and the
//! pieces of a search through shards that equals the single index's in `shards.rs`, and the
//! sharded index directory in `sharded.rs`.

mod build;
mod scan;
mod search;
pub(crate) mod sharded;
mod shards;
mod small;
mod storage;
mod stream;
#[cfg(test)]
pub(crate) mod tests;
mod types;

pub use sharded::{
    check_sharded, ShardedDenseBuild, ShardedDenseManifest, LAYOUT as SHARDED_LAYOUT,
};
pub use shards::{merge_shortlists, top_hits, training_rows, Candidate, ShardCandidate};
pub use storage::{DenseManifest, IvfParams, PqParams, FORMAT, LAYOUT, VERSION};
pub use stream::Part;
use types::{kind_name, Coarse, PqPart, StoredVectors};
pub use types::{BuildOptions, DenseIndex, Hits, SearchOptions, VectorDtype};
