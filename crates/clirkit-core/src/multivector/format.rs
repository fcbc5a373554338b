//! The index directory (manifest `clirkit-multivector` v1). Every file has the checked header and is
//! memory-mapped on open:
//!
//! | file | holds |
//! |---|---|
//! | `ids.bin` | the documents' (passages') string ids |
//! | `centroids.bin` | `ncentroids x dim` f32 |
//! | `buckets.bin` | the residual codec: per dimension `2^nbits - 1` cutoffs, then per dimension `2^nbits` weights, f32 |
//! | `doc_offsets.bin` | `ndocs + 1` u64: document `i` owns tokens `offsets[i]..offsets[i + 1]` |
//! | `codes.bin` | one u16 centroid number per token |
//! | `residuals.bin` | `dim x nbits / 8` bytes per token |
//! | `ivf_offsets.bin` | `ncentroids + 1` u64 into `ivf_docs.bin` |
//! | `ivf_docs.bin` | per centroid, the increasing numbers of the documents holding a token of it, u32 |
//! | `vectors.bin` | optional: the full token vectors, f32, for exact search |
//!
//! Opening checks checksums (except the optional full vectors, whose size is checked; their chunk
//! CRCs are checked where search reads them, [`StoredVectors`]) and the consistency of offsets,
//! codes and lists, so a corrupt index is an error naming its file.

use super::codec::ResidualCodec;
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::bytes::{as_byte_slice, Array, Plain};
use crate::io::format::{ChunkChecks, FileWriter, Kind, MappedFile};
use crate::io::index_dir::MANIFEST;
use crate::io::manifest::{self, Layout};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "clirkit-multivector";
pub const VERSION: u64 = 2;
const FILE_VERSION: u32 = 1;
/// Centroid numbers are stored in 16 bits.
pub const MAX_CENTROIDS: usize = 1 << 16;

pub(crate) type File = (&'static str, Kind);
pub(crate) const IDS: &str = "ids.bin";
pub(crate) const CENTROIDS: File = ("centroids.bin", *b"MVCENTRS");
pub(crate) const BUCKETS: File = ("buckets.bin", *b"MVBUCKET");
pub(crate) const DOC_OFFSETS: File = ("doc_offsets.bin", *b"MVDOCOFF");
pub(crate) const CODES: File = ("codes.bin", *b"MVCODES\0");
pub(crate) const RESIDUALS: File = ("residuals.bin", *b"MVRESIDU");
pub(crate) const IVF_OFFSETS: File = ("ivf_offsets.bin", *b"MVIVFOFF");
pub(crate) const IVF_DOCS: File = ("ivf_docs.bin", *b"MVIVFDOC");
pub(crate) const VECTORS: File = ("vectors.bin", *b"MVVECTRS");

/// What `meta.json` records.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MultiVectorManifest {
    pub format: String,
    pub version: u64,
    pub dim: usize,
    pub ndocs: usize,
    pub ntokens: usize,
    pub ncentroids: usize,
    pub nbits: usize,
    /// Every input token had unit length: decoded tokens are normalized again (as PLAID does).
    pub normalized: bool,
    /// `vectors.bin` is present.
    pub vectors: bool,
    pub ivf_entries: usize,
    pub seed: u64,
    pub kmeans_sample: usize,
    pub kmeans_iterations: usize,
}

/// A multi-vector index's files, for `verify`.
#[rustfmt::skip]
pub const LAYOUT: Layout = crate::ids::layout_with_ids!(FORMAT, VERSION, FILE_VERSION, [
    CENTROIDS, BUCKETS, DOC_OFFSETS, CODES, RESIDUALS, IVF_OFFSETS, IVF_DOCS, VECTORS,
]);

/// A writer of the checked file `file` in `dir`, its payload written as it comes.
pub(crate) fn array_writer(dir: &Path, file: File) -> Result<FileWriter> {
    FileWriter::create(dir.join(file.0), file.1, FILE_VERSION)
}

/// Write `values` as one checked file in `dir`.
pub(crate) fn write_array<T: Plain>(dir: &Path, file: File, values: &[T]) -> Result<()> {
    let mut w = array_writer(dir, file)?;
    w.write(as_byte_slice(values))?;
    w.finish()
}

/// Map the checked file `file` of `dir` as exactly `count` values of `T`.
fn map_array<T: Plain>(dir: &Path, file: File, count: usize, verify: bool) -> Result<Array<T>> {
    let path = dir.join(file.0);
    let payload = MappedFile::open(&path, file.1, FILE_VERSION, verify)?.into_payload();
    Array::view(payload, count, &path)
}

/// [`map_array`] (verified) whose contents must pass `valid`, else a format error naming the file.
fn map_checked<T: Plain>(
    dir: &Path,
    file: File,
    count: usize,
    valid: impl Fn(&[T]) -> bool,
    problem: &str,
) -> Result<Array<T>> {
    let array = map_array(dir, file, count, true)?;
    if !valid(array.as_slice()) {
        return Err(Error::format(dir.join(file.0), problem));
    }
    Ok(array)
}

/// [`map_checked`] for numbers that index something of `limit` entries (`what`, e.g. a centroid).
fn map_below<T: Plain + Copy + Into<u64>>(
    dir: &Path,
    file: File,
    count: usize,
    limit: usize,
    what: &str,
) -> Result<Array<T>> {
    let in_range = |numbers: &[T]| numbers.iter().all(|&n| n.into() < limit as u64);
    map_checked(
        dir,
        file,
        count,
        in_range,
        &format!("{what} is out of range"),
    )
}

/// The optional full token vectors, too large to checksum at every open: search checks the
/// chunk CRCs of the tokens it reads (each chunk once per open index).
pub(crate) struct StoredVectors {
    values: Array<f32>,
    checks: ChunkChecks,
}

impl StoredVectors {
    fn open(dir: &Path, count: usize) -> Result<Self> {
        let path = dir.join(VECTORS.0);
        let file = MappedFile::open(&path, VECTORS.1, FILE_VERSION, false)?;
        let (payload, checks) = file.into_checked_payload();
        Ok(StoredVectors {
            values: Array::view(payload, count, &path)?,
            checks,
        })
    }

    /// Values `range` (of all the tokens' values), once their chunk CRCs check out.
    pub(crate) fn read(&self, range: std::ops::Range<usize>) -> Result<&[f32]> {
        let size = std::mem::size_of::<f32>();
        self.checks
            .check(self.values.as_bytes(), range.start * size..range.end * size)?;
        Ok(&self.values.as_slice()[range])
    }

    /// Every value, checked.
    pub(crate) fn all(&self) -> Result<&[f32]> {
        self.read(0..self.values.as_slice().len())
    }
}

/// A multi-vector index opened from its directory; search is in [`super::search`].
pub struct MultiVectorIndex {
    pub(crate) dir: PathBuf,
    pub(crate) manifest: MultiVectorManifest,
    pub(crate) ids: IdTable,
    pub(crate) centroids: Array<f32>,
    pub(crate) codec: ResidualCodec,
    pub(crate) doc_offsets: Array<u64>,
    pub(crate) codes: Array<u16>,
    pub(crate) residuals: Array<u8>,
    pub(crate) ivf_offsets: Array<u64>,
    pub(crate) ivf_docs: Array<u32>,
    pub(crate) vectors: Option<StoredVectors>,
}

manifest::manifest_of!(MultiVectorManifest, FORMAT, VERSION);

/// Offsets that start at 0, never decrease and end at `end`.
fn offsets_ok(offsets: &[u64], end: usize) -> bool {
    offsets.first() == Some(&0)
        && offsets.last() == Some(&(end as u64))
        && offsets.windows(2).all(|w| w[0] <= w[1])
}

impl MultiVectorIndex {
    /// Open the index at `dir` as one build, even while another process rebuilds it.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        crate::io::snapshot::open_named(dir.as_ref(), Self::open_files)
    }

    /// Open the files under `dir` (a snapshot's root) of the index named `named`.
    fn open_files(dir: &Path, named: &Path) -> Result<Self> {
        let meta_path = dir.join(MANIFEST);
        let m: MultiVectorManifest = manifest::read(dir)?;
        let bad = |what: &str| Error::format(&meta_path, format!("invalid manifest: {what}"));
        ResidualCodec::check_params(m.dim, m.nbits).map_err(|e| bad(&e.to_string()))?;
        if m.ncentroids == 0 || m.ncentroids > MAX_CENTROIDS || m.ndocs == 0 {
            return Err(bad("ncentroids must be in 1..=65536 and ndocs at least 1"));
        }
        let ids = IdTable::open(dir.join(IDS))?;
        if ids.len() != m.ndocs {
            return Err(Error::format(
                dir.join(IDS),
                format!(
                    "has {} ids, the manifest says {} documents",
                    ids.len(),
                    m.ndocs
                ),
            ));
        }
        let centroids = map_array(dir, CENTROIDS, m.ncentroids * m.dim, true)?;
        let buckets: Array<f32> = map_array(dir, BUCKETS, m.dim * ((2 << m.nbits) - 1), true)?;
        let split = m.dim * ((1 << m.nbits) - 1);
        let codec = ResidualCodec::from_parts(
            m.dim,
            m.nbits,
            buckets.as_slice()[..split].to_vec(),
            buckets.as_slice()[split..].to_vec(),
        )
        .map_err(|e| Error::format(dir.join(BUCKETS.0), e.to_string()))?;
        let doc_offsets: Array<u64> = map_checked(
            dir,
            DOC_OFFSETS,
            m.ndocs + 1,
            |o| offsets_ok(o, m.ntokens) && o.windows(2).all(|w| w[0] != w[1]),
            "document offsets are inconsistent with the token count",
        )?;
        let codes: Array<u16> =
            map_below(dir, CODES, m.ntokens, m.ncentroids, "a centroid number")?;
        let residuals = map_array(dir, RESIDUALS, m.ntokens * codec.bytes_per_token(), true)?;
        let ivf_offsets: Array<u64> = map_checked(
            dir,
            IVF_OFFSETS,
            m.ncentroids + 1,
            |o| offsets_ok(o, m.ivf_entries),
            "inverted list offsets are inconsistent",
        )?;
        let ivf_docs: Array<u32> =
            map_below(dir, IVF_DOCS, m.ivf_entries, m.ndocs, "a document number")?;
        let vectors = if m.vectors {
            Some(StoredVectors::open(dir, m.ntokens * m.dim)?)
        } else {
            None
        };
        Ok(MultiVectorIndex {
            dir: named.to_path_buf(),
            manifest: m,
            ids,
            centroids,
            codec,
            doc_offsets,
            codes,
            residuals,
            ivf_offsets,
            ivf_docs,
            vectors,
        })
    }

    pub fn manifest(&self) -> &MultiVectorManifest {
        &self.manifest
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn dim(&self) -> usize {
        self.manifest.dim
    }

    /// Number of documents (or passages).
    pub fn ndocs(&self) -> usize {
        self.manifest.ndocs
    }

    pub fn ntokens(&self) -> usize {
        self.manifest.ntokens
    }

    pub fn ncentroids(&self) -> usize {
        self.manifest.ncentroids
    }

    pub fn nbits(&self) -> usize {
        self.manifest.nbits
    }

    pub fn has_vectors(&self) -> bool {
        self.vectors.is_some()
    }

    pub fn ids(&self) -> &IdTable {
        &self.ids
    }

    /// Tokens `start..end` of document `doc`.
    pub(crate) fn token_range(&self, doc: u32) -> (usize, usize) {
        let o = self.doc_offsets.as_slice();
        (o[doc as usize] as usize, o[doc as usize + 1] as usize)
    }

    /// Bytes on disk of everything search reads (all files but the optional full vectors).
    pub fn compressed_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for name in [
            IDS,
            CENTROIDS.0,
            BUCKETS.0,
            DOC_OFFSETS.0,
            CODES.0,
            RESIDUALS.0,
            IVF_OFFSETS.0,
            IVF_DOCS.0,
            MANIFEST,
        ] {
            let path = self.dir.join(name);
            total += std::fs::metadata(&path)
                .map_err(|e| Error::io(&path, e))?
                .len();
        }
        Ok(total)
    }
}
