//! The dense index type and its options: [`DenseIndex`] with its parts, [`BuildOptions`],
//! [`SearchOptions`], [`VectorDtype`] and [`Hits`]; what builds, saves and searches it sits in
//! the sibling files, above this one.

use crate::dense::codebook::ProductQuantizer;
use crate::dense::ivf::CoarseQuantizer;
use crate::dense::metric::Metric;
use crate::error::Result;
use crate::ids::IdTable;
use crate::io::bytes::Array;
use crate::io::format::ChunkChecks;
use crate::progress::Progress;
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
    /// How kept vectors are stored; float16 only for re-scoring a PQ index.
    pub vector_dtype: VectorDtype,
    /// Counts the rows encoded (PQ codes) or written (a streamed build), stating their total.
    pub progress: Progress,
}

/// How an index stores its full vectors. Re-scoring always computes in float32: float16 rows are
/// widened as they are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VectorDtype {
    #[default]
    Float32,
    Float16,
}

impl std::str::FromStr for VectorDtype {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "float32" => Ok(VectorDtype::Float32),
            "float16" => Ok(VectorDtype::Float16),
            _ => Err(crate::Error::invalid(format!(
                "vector dtype {s:?}: use \"float32\" or \"float16\""
            ))),
        }
    }
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
            vector_dtype: VectorDtype::Float32,
            progress: Progress::default(),
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
    /// Counts each query as its scan finishes (the re-scoring of `refine` follows uncounted).
    pub progress: Progress,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            k: 1000,
            nprobe: 1,
            refine: 0,
            threads: 0,
            progress: Progress::default(),
        }
    }
}

pub(super) struct Coarse {
    pub(super) quantizer: CoarseQuantizer,
    /// Slot -> internal id ([`EMPTY_SLOT`] for padding).
    pub(super) slots: Array<u32>,
    /// First block of each list, plus the end.
    pub(super) block_starts: Vec<u64>,
}

pub(super) struct PqPart {
    pub(super) pq: ProductQuantizer,
    /// 4 bits: packed blocks in slot order; 8 bits: `m` bytes per slot.
    pub(super) codes: Array<u8>,
    pub(super) coarse: Option<Coarse>,
}

/// A dense vector index; see the module documentation.
pub struct DenseIndex {
    pub(super) dim: usize,
    pub(super) ntotal: usize,
    pub(super) metric: Metric,
    pub(super) ids: IdTable,
    pub(super) vectors: Option<StoredVectors>,
    /// The chunk CRCs of mapped vectors, checked where search reads them (none when built here).
    pub(super) vector_checks: Option<ChunkChecks>,
    pub(super) pq: Option<PqPart>,
}

/// Full vectors, row-major, as stored.
pub(super) enum StoredVectors {
    Float32(Array<f32>),
    /// IEEE half-precision bits.
    Float16(Array<u16>),
}

impl StoredVectors {
    pub(super) fn dtype(&self) -> VectorDtype {
        match self {
            StoredVectors::Float32(_) => VectorDtype::Float32,
            StoredVectors::Float16(_) => VectorDtype::Float16,
        }
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            StoredVectors::Float32(v) => v.as_bytes(),
            StoredVectors::Float16(v) => v.as_bytes(),
        }
    }

    /// Release the pages of bytes `range` of mapped vectors ([`crate::io::bytes::Bytes::release`]).
    pub(super) fn release(&self, range: std::ops::Range<usize>) {
        match self {
            StoredVectors::Float32(v) => v.release(range),
            StoredVectors::Float16(v) => v.release(range),
        }
    }

    pub(super) fn value_bytes(&self) -> usize {
        match self {
            StoredVectors::Float32(_) => 4,
            StoredVectors::Float16(_) => 2,
        }
    }
}

/// "flat", "pq4", "pq8", "ivf{n},pq4", ... from PQ's `(m, nbits)` and IVF's nlist.
pub(super) fn kind_name(params: Option<((usize, usize), Option<usize>)>) -> String {
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

    /// How the full vectors are stored, if kept.
    pub fn vector_dtype(&self) -> Option<VectorDtype> {
        self.vectors.as_ref().map(StoredVectors::dtype)
    }

    /// The stored vectors, once the chunks holding rows `rows` check out (a mapped index's
    /// corruption is an error where search reads it). Re-scoring reads a row or two per 64 KiB
    /// chunk it checks, so the chunks' pages are released once checked (`Bytes::release`): the
    /// resident set holds the rows read, not every chunk around them.
    pub(super) fn vectors_checked(&self, rows: std::ops::Range<usize>) -> Result<&StoredVectors> {
        self.vectors_checked_keeping(rows, false)
    }

    fn vectors_checked_keeping(
        &self,
        rows: std::ops::Range<usize>,
        keep: bool,
    ) -> Result<&StoredVectors> {
        let vectors = self.vectors.as_ref().ok_or_else(|| {
            crate::Error::invalid(
                "this search needs the full vectors, but the index was built with keep_vectors=False",
            )
        })?;
        if let Some(checks) = &self.vector_checks {
            let row_bytes = self.dim * vectors.value_bytes();
            let range = rows.start * row_bytes..rows.end * row_bytes;
            checks.check_each(vectors.as_bytes(), range, |chunk| {
                if !keep {
                    vectors.release(chunk);
                }
            })?;
        }
        Ok(vectors)
    }

    /// The float32 vectors (flat search, which reads them all), once every chunk checks out.
    pub(super) fn float32_vectors_checked(&self) -> Result<&[f32]> {
        match self.vectors_checked_keeping(0..self.ntotal, true)? {
            StoredVectors::Float32(v) => Ok(v.as_slice()),
            StoredVectors::Float16(_) => Err(crate::Error::invalid(
                "flat search needs float32 vectors; float16 vectors only re-score a PQ index",
            )),
        }
    }

    /// Turn search hits into a run with string doc ids; `qids` name the queries in order.
    pub fn to_run(&self, hits: Hits, qids: &[String]) -> Result<Run> {
        self.ids.run_from_hits(hits, qids)
    }
}
