//! The index directory: manifest (`DenseManifest`) and checked files, written atomically and
//! opened memory-mapped.

use super::{Coarse, DenseIndex, PqPart, StoredVectors, VectorDtype};
use crate::dense::codebook::ProductQuantizer;
use crate::dense::fastscan::{layout, BLOCK};
use crate::dense::ivf::{CoarseQuantizer, EMPTY_SLOT};
use crate::dense::Metric;
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::atomic::AtomicDir;
use crate::io::bytes::{Array, Plain};
use crate::io::format::{FileWriter, Kind, MappedFile};
use crate::io::index_dir::MANIFEST;
use crate::io::manifest::{self, manifest_of, Layout};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const FORMAT: &str = "clirkit-dense";
pub const VERSION: u64 = 2;
pub(super) const FILE_VERSION: u32 = 1;
pub(super) const VECTORS: (&str, Kind) = ("vectors.bin", *b"DENSEVEC");
pub(super) const VECTORS_F16: (&str, Kind) = ("vectors_f16.bin", *b"DENSEF16");
pub(super) const CODEBOOK: (&str, Kind) = ("pq.bin", *b"PQCODEBK");
pub(super) const CODES: (&str, Kind) = ("codes.bin", *b"PQCODES\0");
pub(super) const IVF_CENTROIDS: (&str, Kind) = ("ivf_centroids.bin", *b"IVFCENTR");
pub(super) const IVF_LISTS: (&str, Kind) = ("ivf_lists.bin", *b"IVFLISTS");
pub(super) const IVF_SLOTS: (&str, Kind) = ("ivf_slots.bin", *b"IVFSLOTS");

/// A dense index's `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseManifest {
    pub format: String,
    pub version: u64,
    /// "flat", "pq{m}x{nbits}" or "ivf{nlist},pq{m}x{nbits}" (recorded, not read back).
    pub kind: String,
    pub dim: usize,
    pub ntotal: usize,
    pub metric: Metric,
    /// Whether the full vectors are kept (`vectors.bin`, or `vectors_f16.bin` with `float16`).
    pub vectors: bool,
    /// The full vectors are stored as float16 (absent when float32, as before the option).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub float16: bool,
    pub pq: Option<PqParams>,
    pub ivf: Option<IvfParams>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PqParams {
    pub m: usize,
    pub nbits: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IvfParams {
    pub nlist: usize,
}

manifest_of!(DenseManifest, FORMAT, VERSION);

/// A dense index's files, for `verify`.
#[rustfmt::skip]
pub const LAYOUT: Layout = crate::ids::layout_with_ids!(FORMAT, VERSION, FILE_VERSION, [
    VECTORS, VECTORS_F16, CODEBOOK, CODES, IVF_CENTROIDS, IVF_LISTS, IVF_SLOTS,
]);

/// `a * b` values a manifest implies, or a format error naming it (crafted numbers that
/// overflow a size describe no file).
fn product(dir: &Path, a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| Error::format(dir.join(MANIFEST), "invalid manifest: sizes overflow"))
}

/// Map `dir/file` as exactly `count` values of `T`.
fn map_array<T: Plain>(
    dir: &Path,
    file: (&str, Kind),
    count: usize,
    verify: bool,
) -> Result<Array<T>> {
    let path = dir.join(file.0);
    let payload = MappedFile::open(&path, file.1, FILE_VERSION, verify)?.into_payload();
    Array::view(payload, count, &path)
}

pub(super) fn save_array<T: Plain>(
    values: &Array<T>,
    dir: &Path,
    file: (&str, Kind),
) -> Result<()> {
    let mut w = FileWriter::create(dir.join(file.0), file.1, FILE_VERSION)?;
    for chunk in values.as_bytes().chunks(1 << 24) {
        w.write(chunk)?;
    }
    w.finish()
}

/// The file holding full vectors stored as `dtype`.
pub(super) fn vectors_file(dtype: VectorDtype) -> (&'static str, Kind) {
    match dtype {
        VectorDtype::Float32 => VECTORS,
        VectorDtype::Float16 => VECTORS_F16,
    }
}

/// The manifest of an index of `ntotal` vectors, keeping them stored as `vectors` (if kept);
/// `params` are PQ's `(m, nbits)` and IVF's nlist.
pub(super) fn dense_manifest(
    dim: usize,
    ntotal: usize,
    metric: Metric,
    vectors: Option<VectorDtype>,
    params: Option<((usize, usize), Option<usize>)>,
) -> DenseManifest {
    DenseManifest {
        format: FORMAT.into(),
        version: VERSION,
        kind: super::kind_name(params),
        dim,
        ntotal,
        metric,
        vectors: vectors.is_some(),
        float16: vectors == Some(VectorDtype::Float16),
        pq: params.map(|((m, nbits), _)| PqParams { m, nbits }),
        ivf: params
            .and_then(|(_, nlist)| nlist)
            .map(|nlist| IvfParams { nlist }),
    }
}

impl DenseIndex {
    /// Save as an index directory, atomically.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let out = AtomicDir::create(dir)?;
        let tmp = out.path().to_path_buf();
        self.ids.save(tmp.join("ids.bin"))?;
        match &self.vectors {
            None => {}
            Some(StoredVectors::Float32(v)) => save_array(v, &tmp, VECTORS)?,
            Some(StoredVectors::Float16(v)) => save_array(v, &tmp, VECTORS_F16)?,
        }
        let mut params = None;
        if let Some(p) = &self.pq {
            save_array(&Array::from(p.pq.centroids.clone()), &tmp, CODEBOOK)?;
            save_array(&p.codes, &tmp, CODES)?;
            if let Some(c) = &p.coarse {
                save_array(
                    &Array::from(c.quantizer.centroids.clone()),
                    &tmp,
                    IVF_CENTROIDS,
                )?;
                save_array(&Array::from(c.block_starts.clone()), &tmp, IVF_LISTS)?;
                save_array(&c.slots, &tmp, IVF_SLOTS)?;
            }
            let nlist = p.coarse.as_ref().map(|c| c.quantizer.nlist);
            params = Some(((p.pq.m, p.pq.nbits), nlist));
        }
        let manifest = dense_manifest(
            self.dim,
            self.ntotal,
            self.metric,
            self.vector_dtype(),
            params,
        );
        manifest::commit(out, &manifest)
    }

    /// Open an index directory; vectors and codes are memory-mapped. Checksums are verified
    /// for every file except the full vectors (which can be tens of GB; their size is checked).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        crate::io::snapshot::open(dir.as_ref(), Self::open_files)
    }

    /// Open the files under `dir` (a snapshot's root).
    fn open_files(dir: &Path) -> Result<Self> {
        let meta: DenseManifest = manifest::read(dir)?;
        let (dim, ntotal, metric) = (meta.dim, meta.ntotal, meta.metric);
        let ids = IdTable::open(dir.join("ids.bin"))?;
        if ids.len() != ntotal || dim == 0 {
            return Err(Error::format(
                dir,
                format!("ids.bin has {} ids, the manifest says {ntotal}", ids.len()),
            ));
        }
        if meta.float16 && (!meta.vectors || meta.pq.is_none()) {
            return Err(Error::format(
                dir.join(MANIFEST),
                "'float16' is for the re-scoring vectors of a PQ index",
            ));
        }
        // The vectors can be tens of GB: not read at open, but checked chunk by chunk where
        // search reads them.
        let (vectors, vector_checks) = if meta.vectors {
            let dtype = if meta.float16 {
                VectorDtype::Float16
            } else {
                VectorDtype::Float32
            };
            let (name, kind) = vectors_file(dtype);
            let path = dir.join(name);
            let file = MappedFile::open(&path, kind, FILE_VERSION, false)?;
            let (payload, checks) = file.into_checked_payload();
            let count = ntotal.saturating_mul(dim);
            let vectors = match dtype {
                VectorDtype::Float32 => StoredVectors::Float32(Array::view(payload, count, &path)?),
                VectorDtype::Float16 => StoredVectors::Float16(Array::view(payload, count, &path)?),
            };
            (Some(vectors), Some(checks))
        } else {
            (None, None)
        };
        let pq = match meta.pq {
            None => None,
            Some(PqParams { m, nbits }) => {
                ProductQuantizer::check_params(dim, m, nbits)
                    .map_err(|_| Error::format(dir.join(MANIFEST), "missing or invalid 'pq'"))?;
                let centroids: Array<f32> = map_array(dir, CODEBOOK, dim << nbits, true)?;
                let pq = ProductQuantizer {
                    d: dim,
                    m,
                    nbits,
                    centroids: centroids.as_slice().to_vec(),
                };
                let (coarse, nslots) = match meta.ivf {
                    None => (None, ntotal.div_ceil(BLOCK) * BLOCK),
                    Some(IvfParams { nlist }) => {
                        let cents = product(dir, nlist, dim)?;
                        let cents: Array<f32> = map_array(dir, IVF_CENTROIDS, cents, true)?;
                        // A count past usize describes no file: the size check refuses it.
                        let lists = nlist.saturating_add(1);
                        let lists: Array<u64> = map_array(dir, IVF_LISTS, lists, true)?;
                        let block_starts = lists.as_slice().to_vec();
                        let nslots = product(dir, *block_starts.last().unwrap() as usize, BLOCK)?;
                        let slots: Array<u32> = map_array(dir, IVF_SLOTS, nslots, true)?;
                        if block_starts.windows(2).any(|w| w[0] > w[1])
                            || slots
                                .as_slice()
                                .iter()
                                .any(|&s| s != EMPTY_SLOT && s as usize >= ntotal)
                        {
                            return Err(Error::format(
                                dir.join(IVF_SLOTS.0),
                                "inconsistent IVF lists",
                            ));
                        }
                        let quantizer = CoarseQuantizer {
                            nlist,
                            d: dim,
                            centroids: cents.as_slice().to_vec(),
                        };
                        (
                            Some(Coarse {
                                quantizer,
                                slots,
                                block_starts,
                            }),
                            nslots,
                        )
                    }
                };
                let code_len = if nbits == 4 {
                    product(dir, nslots / BLOCK, layout::block_bytes(m))?
                } else {
                    product(dir, nslots, m)?
                };
                let codes = map_array(dir, CODES, code_len, true)?;
                Some(PqPart { pq, codes, coarse })
            }
        };
        Ok(DenseIndex {
            dim,
            ntotal,
            metric,
            ids,
            vectors,
            vector_checks,
            pq,
        })
    }
}
