//! Streamed builds, append and merge: an index directory written a chunk of rows at a time, so
//! memory is bounded by a budget whatever the collection size.
//!
//! A streamed build trains on the same seeded sample as [`DenseIndex::build`] (read row by row
//! from the source), then encodes the rows in chunks; vectors and, without IVF, packed codes go
//! to their files as they come, so its files equal those of `build` then `save` byte for byte.
//! With IVF the slot order is known only once every row is assigned, so the codes (`m` bytes
//! per row) and lists (4 bytes per row) are held until the end. Outside the chunk budget a
//! build also holds the training sample and the id table.
//!
//! Append and merge write the rows of indexes (and new vectors) encoded with one codebook into
//! a new directory: the result equals a build of all the rows with that codebook.

use super::storage::{dense_manifest, save_array, CODEBOOK, CODES, IVF_CENTROIDS, IVF_LISTS};
use super::storage::{vectors_file, FILE_VERSION, IVF_SLOTS};
use super::{BuildOptions, DenseIndex, StoredVectors, VectorDtype};
use crate::dense::codebook::ProductQuantizer;
use crate::dense::fastscan::{layout, BLOCK};
use crate::dense::ivf::{slot_layout, CoarseQuantizer, EMPTY_SLOT};
use crate::dense::source::VectorSource;
use crate::dense::Metric;
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::atomic::AtomicDir;
use crate::io::bytes::Array;
use crate::io::format::FileWriter;
use crate::io::manifest;
use crate::progress::Progress;
use std::path::Path;

/// Rows of one chunk for a budget of `memory_bytes`: a float32 buffer, the bytes read (at most
/// as many), and the codes and list of each row; at least one block of rows.
fn chunk_rows(memory_bytes: usize, dim: usize, m: usize) -> usize {
    let per_row = 8 * dim + m + 4;
    (memory_bytes / per_row).max(BLOCK) / BLOCK * BLOCK
}

/// What a PQ index is encoded with.
#[derive(Clone)]
struct Codebook {
    pq: ProductQuantizer,
    coarse: Option<CoarseQuantizer>,
}

/// Train the PQ codebook (and IVF centroids) on the seeded sample [`DenseIndex::build`] uses.
fn train(source: &dyn VectorSource, m: usize, opts: &BuildOptions) -> Result<Codebook> {
    let (n, dim) = (source.rows(), source.dim());
    ProductQuantizer::check_params(dim, m, opts.nbits)?;
    let rows = super::shards::training_rows(n, opts);
    let mut sample = vec![0f32; rows.len() * dim];
    for (&r, out) in rows.iter().zip(sample.chunks_exact_mut(dim)) {
        source.read_rows(r, out)?;
    }
    let pq = ProductQuantizer::train(&sample, dim, m, opts.nbits, opts.seed)?;
    let coarse = match opts.ivf {
        None => None,
        Some(0) => return Err(Error::invalid("ivf: nlist must be at least 1")),
        Some(nlist) => Some(CoarseQuantizer::train(
            &sample,
            dim,
            nlist,
            opts.seed ^ 0x1f,
        )?),
    };
    Ok(Codebook { pq, coarse })
}

/// Where codes go as rows come.
enum CodeSink {
    /// Without IVF slots are rows: 4-bit codes are packed a block at a time (`pending` holds
    /// the codes of a last partial block), 8-bit codes written as they are.
    InOrder { file: FileWriter, pending: Vec<u8> },
    /// With IVF the slot order is known at the end: codes and lists are held until then.
    ByList { codes: Vec<u8>, lists: Vec<u32> },
}

/// Full vectors of some rows, as their source holds them.
#[derive(Clone, Copy)]
enum RowVectors<'a> {
    Float32(&'a [f32]),
    /// IEEE half-precision bits.
    Float16(&'a [u16]),
}

impl<'a> RowVectors<'a> {
    /// Rows `rows` of stored vectors with `dim` columns.
    fn of(stored: &'a StoredVectors, rows: std::ops::Range<usize>, dim: usize) -> Self {
        let range = rows.start * dim..rows.end * dim;
        match stored {
            StoredVectors::Float32(v) => RowVectors::Float32(&v.as_slice()[range]),
            StoredVectors::Float16(v) => RowVectors::Float16(&v.as_slice()[range]),
        }
    }

    /// Append these rows to `file` stored as `dtype` (float16 rounds to nearest, ties to even;
    /// float16 to float32 is exact).
    fn write_as(self, dtype: VectorDtype, file: &mut FileWriter) -> Result<()> {
        use crate::io::bytes::as_byte_slice;
        match (self, dtype) {
            (RowVectors::Float32(v), VectorDtype::Float32) => file.write(as_byte_slice(v)),
            (RowVectors::Float16(v), VectorDtype::Float16) => file.write(as_byte_slice(v)),
            (RowVectors::Float32(v), VectorDtype::Float16) => {
                file.write(as_byte_slice(&super::build::to_float16_bits(v)))
            }
            (RowVectors::Float16(v), VectorDtype::Float32) => {
                let wide: Vec<f32> = v
                    .iter()
                    .map(|&b| half::f16::from_bits(b).to_f32())
                    .collect();
                file.write(as_byte_slice(&wide))
            }
        }
    }
}

/// An index directory being written a chunk of rows at a time.
struct StreamWriter {
    out: AtomicDir,
    dim: usize,
    metric: Metric,
    rows: usize,
    /// The full vectors' file and how they are stored, if kept.
    vectors: Option<(FileWriter, VectorDtype)>,
    codebook: Option<(Codebook, CodeSink)>,
}

impl StreamWriter {
    fn create(
        dir: &Path,
        dim: usize,
        metric: Metric,
        vectors: Option<VectorDtype>,
        codebook: Option<Codebook>,
    ) -> Result<Self> {
        let out = AtomicDir::create(dir)?;
        let vectors = match vectors {
            None => None,
            Some(dtype) => {
                let (name, kind) = vectors_file(dtype);
                let file = FileWriter::create(out.path().join(name), kind, FILE_VERSION)?;
                Some((file, dtype))
            }
        };
        let codebook = match codebook {
            None => None,
            Some(cb) => {
                let sink = if cb.coarse.is_some() {
                    CodeSink::ByList {
                        codes: Vec::new(),
                        lists: Vec::new(),
                    }
                } else {
                    CodeSink::InOrder {
                        file: FileWriter::create(out.path().join(CODES.0), CODES.1, FILE_VERSION)?,
                        pending: Vec::new(),
                    }
                };
                Some((cb, sink))
            }
        };
        Ok(StreamWriter {
            out,
            dim,
            metric,
            rows: 0,
            vectors,
            codebook,
        })
    }

    /// Add rows given as vectors: encoded (and assigned a list) with the codebook.
    fn push_vectors(&mut self, data: &[f32]) -> Result<()> {
        let coded = self.codebook.as_ref().map(|(cb, _)| {
            let codes = cb.pq.encode(data);
            let lists = cb.coarse.as_ref().map(|q| q.assign(self.metric, data));
            (codes, lists)
        });
        match coded {
            None => self.push_coded(
                Some(RowVectors::Float32(data)),
                &[],
                None,
                data.len() / self.dim,
            ),
            Some((codes, lists)) => self.push_coded(
                Some(RowVectors::Float32(data)),
                &codes,
                lists.as_deref(),
                data.len() / self.dim,
            ),
        }
    }

    /// Add `rows` rows given by their vectors (if any), codes and lists (as the index has them).
    fn push_coded(
        &mut self,
        vectors: Option<RowVectors<'_>>,
        codes: &[u8],
        lists: Option<&[u32]>,
        rows: usize,
    ) -> Result<()> {
        self.rows += rows;
        if let Some((file, dtype)) = &mut self.vectors {
            let v = vectors.ok_or_else(|| {
                Error::invalid("the result keeps full vectors, but a part has none")
            })?;
            v.write_as(*dtype, file)?;
        }
        let Some((cb, sink)) = &mut self.codebook else {
            return Ok(());
        };
        let m = cb.pq.m;
        match sink {
            CodeSink::InOrder { file, pending } if cb.pq.nbits == 4 => {
                pending.extend_from_slice(codes);
                let whole = pending.len() / (BLOCK * m) * (BLOCK * m);
                if whole > 0 {
                    let mut packed = Vec::with_capacity(whole / 2);
                    layout::pack(&pending[..whole], m, &mut packed);
                    file.write(&packed)?;
                    pending.drain(..whole);
                }
            }
            CodeSink::InOrder { file, .. } => file.write(codes)?,
            CodeSink::ByList {
                codes: held,
                lists: held_lists,
            } => {
                held.extend_from_slice(codes);
                held_lists.extend_from_slice(lists.expect("an IVF part has lists"));
            }
        }
        Ok(())
    }

    /// Add every row of `source`, a chunk at a time, counting them in `progress`.
    fn push_source(
        &mut self,
        source: &dyn VectorSource,
        memory_bytes: usize,
        progress: &Progress,
    ) -> Result<()> {
        let m = self.codebook.as_ref().map_or(0, |(cb, _)| cb.pq.m);
        let step = chunk_rows(memory_bytes, self.dim, m);
        let n = source.rows();
        let mut buffer = Vec::new();
        for first in (0..n).step_by(step) {
            let rows = step.min(n - first);
            buffer.resize(rows * self.dim, 0.0);
            source.read_rows(first, &mut buffer)?;
            self.push_vectors(&buffer)?;
            progress.advance(rows);
        }
        Ok(())
    }

    /// Add every row of `index` (encoded with the same codebook), a chunk at a time, counting
    /// them in `progress`.
    fn push_index(
        &mut self,
        index: &DenseIndex,
        memory_bytes: usize,
        progress: &Progress,
    ) -> Result<()> {
        let n = index.ntotal;
        let rows_of = index.rows_by_slot();
        let m = index.pq.as_ref().map_or(0, |p| p.pq.m);
        let step = chunk_rows(memory_bytes, self.dim, m);
        let (mut codes, mut lists) = (Vec::new(), Vec::new());
        for first in (0..n).step_by(step) {
            let rows = step.min(n - first);
            codes.clear();
            lists.clear();
            index.row_codes(&rows_of, first..first + rows, &mut codes, &mut lists);
            let vectors = index
                .vectors
                .as_ref()
                .map(|v| RowVectors::of(v, first..first + rows, self.dim));
            let has_lists = rows_of.is_some();
            self.push_coded(vectors, &codes, has_lists.then_some(&lists[..]), rows)?;
            progress.advance(rows);
        }
        Ok(())
    }

    fn finish(self, ids: &IdTable) -> Result<()> {
        if ids.len() != self.rows {
            return Err(Error::invalid(format!(
                "{} ids for {} vectors: give exactly one id per vector",
                ids.len(),
                self.rows
            )));
        }
        if self.rows == 0 {
            return Err(Error::invalid("embeddings: no vectors to index"));
        }
        let dir = self.out.path().to_path_buf();
        ids.save(dir.join("ids.bin"))?;
        let vector_dtype = self.vectors.as_ref().map(|(_, dtype)| *dtype);
        if let Some((file, _)) = self.vectors {
            file.finish()?;
        }
        let mut params = None;
        if let Some((cb, sink)) = self.codebook {
            let (m, nbits) = (cb.pq.m, cb.pq.nbits);
            save_array(&Array::from(cb.pq.centroids.clone()), &dir, CODEBOOK)?;
            match sink {
                CodeSink::InOrder { mut file, pending } => {
                    if nbits == 4 {
                        let mut packed = Vec::new();
                        layout::pack(&pending, m, &mut packed);
                        file.write(&packed)?;
                    } else {
                        let padding = self.rows.div_ceil(BLOCK) * BLOCK - self.rows;
                        file.write(&vec![0u8; padding * m])?;
                    }
                    file.finish()?;
                }
                CodeSink::ByList { codes, lists } => {
                    let q = cb.coarse.as_ref().expect("IVF codes have a quantizer");
                    let (slots, block_starts) = slot_layout(&lists, q.nlist);
                    let codes = super::build::codes_in_slot_order(&codes, &slots, m, nbits);
                    save_array(&Array::from(codes), &dir, CODES)?;
                    save_array(&Array::from(q.centroids.clone()), &dir, IVF_CENTROIDS)?;
                    save_array(&Array::from(block_starts), &dir, IVF_LISTS)?;
                    save_array(&Array::from(slots), &dir, IVF_SLOTS)?;
                }
            }
            params = Some(((m, nbits), cb.coarse.map(|q| q.nlist)));
        }
        let manifest = dense_manifest(self.dim, self.rows, self.metric, vector_dtype, params);
        manifest::commit(self.out, &manifest)
    }
}

/// What [`DenseIndex::write_combined`] puts together, in order.
pub enum Part<'a> {
    /// Every row of an index encoded with the same codebook.
    Index(&'a DenseIndex),
    /// New vectors and their ids, encoded with the codebook.
    Vectors {
        source: &'a dyn VectorSource,
        ids: &'a [String],
    },
}

impl DenseIndex {
    /// Build into the index directory `dir` from `source` a chunk of rows at a time, using about
    /// `memory_bytes` for the chunks (see the module documentation). The files equal those of
    /// [`DenseIndex::build`] then [`DenseIndex::save`] on the same vectors.
    pub fn build_streaming(
        source: &dyn VectorSource,
        ids: &[String],
        opts: &BuildOptions,
        memory_bytes: usize,
        dir: &Path,
    ) -> Result<()> {
        super::build::check_options(opts)?;
        let table = IdTable::from_ids(ids)?;
        if ids.len() != source.rows() {
            return Err(Error::invalid(format!(
                "{} ids for {} vectors: give exactly one id per vector",
                ids.len(),
                source.rows()
            )));
        }
        if source.rows() == 0 {
            return Err(Error::invalid("embeddings: no vectors to index"));
        }
        crate::parallel::install(opts.threads, |_| {
            let codebook = match opts.pq {
                None => None,
                Some(m) => Some(train(source, m, opts)?),
            };
            let vectors = opts.keep_vectors.then_some(opts.vector_dtype);
            let mut w = StreamWriter::create(dir, source.dim(), opts.metric, vectors, codebook)?;
            opts.progress.expect(source.rows());
            w.push_source(source, memory_bytes, &opts.progress)?;
            w.finish(&table)
        })?
    }

    /// Write `parts` in order into the index directory `dir`, encoded with this index's codebook
    /// (and IVF centroids), keeping full vectors if this index does: appending to an index is
    /// `[Index(base), Vectors]`, merging is `[Index(a), Index(b), ...]`, and `[Vectors]` builds
    /// new vectors with this codebook. Indexes must have been trained with the same codebook.
    pub fn write_combined(
        &self,
        parts: &[Part<'_>],
        dir: &Path,
        memory_bytes: usize,
        threads: usize,
        progress: &Progress,
    ) -> Result<()> {
        let mut ids: Vec<String> = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            match part {
                Part::Index(index) => {
                    self.check_same_codebook(index, i)?;
                    ids.extend(index.ids.iter().map(str::to_string));
                }
                Part::Vectors { source, ids: new } => {
                    if source.dim() != self.dim {
                        return Err(Error::invalid(format!(
                            "part {}: vectors of dimension {}, the index has {}",
                            i + 1,
                            source.dim(),
                            self.dim
                        )));
                    }
                    if new.len() != source.rows() {
                        return Err(Error::invalid(format!(
                            "part {}: {} ids for {} vectors: give exactly one id per vector",
                            i + 1,
                            new.len(),
                            source.rows()
                        )));
                    }
                    ids.extend(new.iter().cloned());
                }
            }
        }
        let table = IdTable::from_ids(&ids)?;
        drop(ids);
        let codebook = self.pq.as_ref().map(|p| Codebook {
            pq: p.pq.clone(),
            coarse: p.coarse.as_ref().map(|c| c.quantizer.clone()),
        });
        crate::parallel::install(threads, |_| {
            let mut w =
                StreamWriter::create(dir, self.dim, self.metric, self.vector_dtype(), codebook)?;
            progress.expect(table.len());
            for part in parts {
                match part {
                    Part::Index(index) => w.push_index(index, memory_bytes, progress)?,
                    Part::Vectors { source, .. } => {
                        w.push_source(*source, memory_bytes, progress)?
                    }
                }
            }
            w.finish(&table)
        })?
    }

    /// Refuse to combine `other` (part `i`) with this index unless both use one codebook.
    pub(super) fn check_same_codebook(&self, other: &DenseIndex, i: usize) -> Result<()> {
        let same = self.dim == other.dim
            && self.metric == other.metric
            && match (&self.pq, &other.pq) {
                (None, None) => true,
                (Some(a), Some(b)) => {
                    a.pq.m == b.pq.m
                        && a.pq.nbits == b.pq.nbits
                        && a.pq.centroids == b.pq.centroids
                        && match (&a.coarse, &b.coarse) {
                            (None, None) => true,
                            (Some(x), Some(y)) => x.quantizer.centroids == y.quantizer.centroids,
                            _ => false,
                        }
                }
                _ => false,
            };
        if !same {
            return Err(Error::invalid(format!(
                "part {}: a {} index (d={}, {}) with another codebook; indexes are combined only \
                 when trained with the same codebook (build the others with --codebook-from)",
                i + 1,
                other.kind(),
                other.dim,
                other.metric.name()
            )));
        }
        if self.has_vectors() && !other.has_vectors() {
            return Err(Error::invalid(format!(
                "part {}: the index keeps no full vectors, the result would need them",
                i + 1
            )));
        }
        Ok(())
    }

    /// With IVF, each row's slot and list (by internal id); `None` without IVF (slot = row).
    fn rows_by_slot(&self) -> Option<(Vec<u32>, Vec<u32>)> {
        let coarse = self.pq.as_ref()?.coarse.as_ref()?;
        let mut slot_of = vec![0u32; self.ntotal];
        let mut list_of = vec![0u32; self.ntotal];
        for (list, w) in coarse.block_starts.windows(2).enumerate() {
            for slot in w[0] as usize * BLOCK..w[1] as usize * BLOCK {
                let id = coarse.slots.as_slice()[slot];
                if id != EMPTY_SLOT {
                    slot_of[id as usize] = slot as u32;
                    list_of[id as usize] = list as u32;
                }
            }
        }
        Some((slot_of, list_of))
    }

    /// Append the codes (`m` per row) and, with IVF, the lists of `rows` to `codes` and `lists`.
    fn row_codes(
        &self,
        rows_of: &Option<(Vec<u32>, Vec<u32>)>,
        rows: std::ops::Range<usize>,
        codes: &mut Vec<u8>,
        lists: &mut Vec<u32>,
    ) {
        let Some(p) = &self.pq else {
            return;
        };
        let (m, all) = (p.pq.m, p.codes.as_slice());
        let block_bytes = layout::block_bytes(m);
        for row in rows {
            let slot = match rows_of {
                None => row,
                Some((slot_of, list_of)) => {
                    lists.push(list_of[row]);
                    slot_of[row] as usize
                }
            };
            if p.pq.nbits == 4 {
                let block = &all[slot / BLOCK * block_bytes..][..block_bytes];
                codes.extend((0..m).map(|s| layout::code_at(block, slot % BLOCK, s)));
            } else {
                codes.extend_from_slice(&all[slot * m..(slot + 1) * m]);
            }
        }
    }
}
