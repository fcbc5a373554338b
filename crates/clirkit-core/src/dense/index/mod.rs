//! [`DenseIndex`]: exact flat search, or product quantization (4-bit fast-scan or 8-bit) with an
//! optional IVF coarse quantizer and optional exact re-scoring ("refine") of a shortlist from the
//! stored full vectors. Saved as an index directory (manifest `clirkit-dense` v1) of checked,
//! memory-mapped files: `ids.bin`, `vectors.bin` (f32, if kept), `pq.bin` (codebook),
//! `codes.bin`, and with IVF `ivf_centroids.bin`, `ivf_lists.bin`, `ivf_slots.bin`.
//!
//! Search with 4-bit PQ selects a shortlist by the quantized (integer) fast-scan scores, then
//! re-scores it: with the float look-up table (exact PQ score), or with `refine > 0` with the
//! full vectors (exact score). The shortlist is `max(k, refine)` with refine, else `2k`.
//!
//! The index is split by concern (like FAISS's `IndexFastScan` / `IndexPQFastScan`): the type
//! and its options here, [`build`](DenseIndex::build) in `build.rs`, search scheduling and
//! re-scoring in `search.rs`, the per-task scan drivers in `scan.rs`, the index directory
//! (save/open) in `storage.rs`, streamed builds, append and merge in `stream.rs`, and the
//! pieces of a search through shards that equals the single index's in `shards.rs`, and the
//! sharded index directory in `sharded.rs`.

mod build;
mod scan;
mod search;
mod sharded;
mod shards;
mod storage;
mod stream;
#[cfg(test)]
mod tests;

pub use sharded::{check_sharded, ShardedDenseBuild, ShardedDenseManifest};
pub use shards::{merge_shortlists, top_hits, training_rows, Candidate, ShardCandidate};
pub use storage::{FORMAT, VERSION};
pub use stream::Part;

use super::codebook::ProductQuantizer;
use super::ivf::CoarseQuantizer;
use super::Metric;
use crate::error::Result;
use crate::ids::IdTable;
use crate::io::bytes::Array;
use crate::io::format::ChunkChecks;
use crate::ranking::Run;

/// How to build a [`DenseIndex`].
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Sub-quantizers; `None` = exact flat index.
    pub pq: Option<usize>,
    /// Bits per PQ code: 4 (fast-scan) or 8.
    pub nbits: usize,
    /// IVF lists; `None` = scan everything.
    pub ivf: Option<usize>,
    pub metric: Metric,
    /// Training sample size (default: all vectors up to 65,536 per codebook need).
    pub train_size: Option<usize>,
    pub seed: u64,
    pub threads: usize,
    /// Keep full vectors (needed for flat search and refine).
    pub keep_vectors: bool,
    pub quiet: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            pq: None,
            nbits: 4,
            ivf: None,
            metric: Metric::InnerProduct,
            train_size: None,
            seed: 0,
            threads: 0,
            keep_vectors: true,
            quiet: true,
        }
    }
}

/// How to search.
#[derive(Clone, Debug)]
pub struct SearchOptions {
    pub k: usize,
    pub nprobe: usize,
    /// Re-score this many PQ candidates exactly with the stored vectors (0 = off).
    pub refine: usize,
    pub threads: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            k: 1000,
            nprobe: 1,
            refine: 0,
            threads: 0,
        }
    }
}

struct Coarse {
    quantizer: CoarseQuantizer,
    /// Slot -> internal id ([`EMPTY_SLOT`] for padding).
    slots: Array<u32>,
    /// First block of each list, plus the end.
    block_starts: Vec<u64>,
}

struct PqPart {
    pq: ProductQuantizer,
    /// 4 bits: packed blocks in slot order; 8 bits: `m` bytes per slot.
    codes: Array<u8>,
    coarse: Option<Coarse>,
}

/// A dense vector index; see the module documentation.
pub struct DenseIndex {
    dim: usize,
    ntotal: usize,
    metric: Metric,
    ids: IdTable,
    vectors: Option<Array<f32>>,
    /// The chunk CRCs of mapped vectors, checked where search reads them (none when built here).
    vector_checks: Option<ChunkChecks>,
    pq: Option<PqPart>,
}

/// "flat", "pq4", "pq8", "ivf{n},pq4", ... from PQ's `(m, nbits)` and IVF's nlist.
fn kind_name(params: Option<((usize, usize), Option<usize>)>) -> String {
    match params {
        None => "flat".into(),
        Some(((m, nbits), None)) => format!("pq{m}x{nbits}"),
        Some(((m, nbits), Some(nlist))) => format!("ivf{nlist},pq{m}x{nbits}"),
    }
}

/// Per query, the best hits: (score, internal id), best first.
pub type Hits = Vec<Vec<(f32, u32)>>;

impl DenseIndex {
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn ntotal(&self) -> usize {
        self.ntotal
    }
    pub fn metric(&self) -> Metric {
        self.metric
    }
    pub fn ids(&self) -> &IdTable {
        &self.ids
    }
    /// "flat", "pq4", "pq8", "ivf{n},pq4", ...
    pub fn kind(&self) -> String {
        kind_name(self.pq.as_ref().map(|p| {
            let nlist = p.coarse.as_ref().map(|c| c.quantizer.nlist);
            ((p.pq.m, p.pq.nbits), nlist)
        }))
    }
    pub fn has_vectors(&self) -> bool {
        self.vectors.is_some()
    }

    /// The stored vectors, once the chunks holding rows `rows` check out (a mapped index's
    /// corruption is an error where search reads it).
    fn vectors_checked(&self, rows: std::ops::Range<usize>) -> Result<&[f32]> {
        let vectors = self.vectors.as_ref().ok_or_else(|| {
            crate::Error::invalid(
                "this search needs the full vectors, but the index was built with keep_vectors=False",
            )
        })?;
        if let Some(checks) = &self.vector_checks {
            let row_bytes = self.dim * std::mem::size_of::<f32>();
            checks.check(
                vectors.as_bytes(),
                rows.start * row_bytes..rows.end * row_bytes,
            )?;
        }
        Ok(vectors.as_slice())
    }

    /// Turn search hits into a run with string doc ids; `qids` name the queries in order.
    pub fn to_run(&self, hits: Hits, qids: &[String]) -> Result<Run> {
        self.ids.run_from_hits(hits, qids)
    }
}
