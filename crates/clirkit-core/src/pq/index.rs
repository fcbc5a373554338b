//! [`DenseIndex`]: exact flat search, or product quantization (4-bit fast-scan or 8-bit) with an
//! optional IVF coarse quantizer and optional exact re-scoring ("refine") of a shortlist from the
//! stored full vectors. Saved as an index directory (manifest `clirkit-dense` v1) of checked,
//! memory-mapped files: `ids.bin`, `vectors.bin` (f32, if kept), `pq.bin` (codebook),
//! `codes.bin`, and with IVF `ivf_centroids.bin`, `ivf_lists.bin`, `ivf_slots.bin`.
//!
//! Search with 4-bit PQ selects a shortlist by the quantized (integer) fast-scan scores, then
//! re-scores it: with the float look-up table (exact PQ score), or with `refine > 0` with the
//! full vectors (exact score). The shortlist is `max(k, refine)` with refine, else `2k`.

use super::codebook::ProductQuantizer;
use super::fastscan::{layout, lut, Isa, BLOCK, QUERY_GROUP};
use super::flat;
use super::ivf::{slot_layout, CoarseQuantizer, EMPTY_SLOT};
use super::{check_matrix, Metric};
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::atomic::{AtomicDir, MANIFEST};
use crate::io::bytes::{Array, Plain};
use crate::io::format::{FileWriter, Kind, MappedFile};
use crate::io::manifest::{self, DenseManifest, IvfParams, PqParams};
use crate::parallel;
use crate::ranking::Run;
use crate::rng::SplitMix64;
use crate::topk::{merge_slices, TopK};
use rayon::prelude::*;
use std::path::Path;

pub const FORMAT: &str = "clirkit-dense";
pub const VERSION: u64 = 1;
const FILE_VERSION: u32 = 1;
const VECTORS: (&str, Kind) = ("vectors.bin", *b"DENSEVEC");
const CODEBOOK: (&str, Kind) = ("pq.bin", *b"PQCODEBK");
const CODES: (&str, Kind) = ("codes.bin", *b"PQCODES\0");
const IVF_CENTROIDS: (&str, Kind) = ("ivf_centroids.bin", *b"IVFCENTR");
const IVF_LISTS: (&str, Kind) = ("ivf_lists.bin", *b"IVFLISTS");
const IVF_SLOTS: (&str, Kind) = ("ivf_slots.bin", *b"IVFSLOTS");

/// Shortlist size over k for re-scoring 4-bit fast-scan candidates with the float table.
const RESCORE_FACTOR: usize = 2;
/// Bytes of codes scanned by all query groups of a task before moving on, so they stay in L2.
const SUPER_BLOCK_BYTES: usize = 256 << 10;
/// Queries a task holds at most (their tables stay in L1/L2 while codes stream).
const TASK_QUERIES: usize = 64;

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

fn save_array<T: Plain>(values: &Array<T>, dir: &Path, file: (&str, Kind)) -> Result<()> {
    let mut w = FileWriter::create(dir.join(file.0), file.1, FILE_VERSION)?;
    for chunk in values.as_bytes().chunks(1 << 24) {
        w.write(chunk)?;
    }
    w.finish()
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
    pq: Option<PqPart>,
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
        match &self.pq {
            None => "flat".into(),
            Some(p) => match &p.coarse {
                None => format!("pq{}x{}", p.pq.m, p.pq.nbits),
                Some(c) => format!("ivf{},pq{}x{}", c.quantizer.nlist, p.pq.m, p.pq.nbits),
            },
        }
    }
    pub fn has_vectors(&self) -> bool {
        self.vectors.is_some()
    }

    /// Build from `data` (row-major, `dim` columns) and one unique id per row.
    pub fn build(data: &[f32], dim: usize, ids: &[String], opts: &BuildOptions) -> Result<Self> {
        let n = check_matrix(data, dim, "embeddings")?;
        if n == 0 {
            return Err(Error::invalid("embeddings: no vectors to index"));
        }
        if ids.len() != n {
            return Err(Error::invalid(format!(
                "{} ids for {n} vectors: give exactly one id per vector",
                ids.len()
            )));
        }
        let table = IdTable::from_ids(ids)?;
        if opts.ivf.is_some() && opts.pq.is_none() {
            return Err(Error::invalid(
                "an IVF coarse quantizer needs PQ codes (give pq=M as well)",
            ));
        }
        if opts.pq.is_none() && !opts.keep_vectors {
            return Err(Error::invalid(
                "a flat index is its vectors: keep_vectors=False needs pq=M",
            ));
        }
        let pq = match opts.pq {
            None => None,
            Some(m) => Some(parallel::install(opts.threads, |_| {
                build_pq(data, dim, m, opts)
            })??),
        };
        Ok(DenseIndex {
            dim,
            ntotal: n,
            metric: opts.metric,
            ids: table,
            vectors: opts.keep_vectors.then(|| Array::from(data.to_vec())),
            pq,
        })
    }

    /// Save as an index directory, atomically.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let out = AtomicDir::create(dir)?;
        let tmp = out.path().to_path_buf();
        self.ids.save(tmp.join("ids.bin"))?;
        if let Some(v) = &self.vectors {
            save_array(v, &tmp, VECTORS)?;
        }
        let mut manifest = DenseManifest {
            format: FORMAT.into(),
            version: VERSION,
            kind: self.kind(),
            dim: self.dim,
            ntotal: self.ntotal,
            metric: self.metric,
            vectors: self.vectors.is_some(),
            pq: None,
            ivf: None,
        };
        if let Some(p) = &self.pq {
            save_array(&Array::from(p.pq.centroids.clone()), &tmp, CODEBOOK)?;
            save_array(&p.codes, &tmp, CODES)?;
            manifest.pq = Some(PqParams {
                m: p.pq.m,
                nbits: p.pq.nbits,
            });
            if let Some(c) = &p.coarse {
                save_array(
                    &Array::from(c.quantizer.centroids.clone()),
                    &tmp,
                    IVF_CENTROIDS,
                )?;
                save_array(&Array::from(c.block_starts.clone()), &tmp, IVF_LISTS)?;
                save_array(&c.slots, &tmp, IVF_SLOTS)?;
                manifest.ivf = Some(IvfParams {
                    nlist: c.quantizer.nlist,
                });
            }
        }
        manifest::commit(out, &manifest)
    }

    /// Open an index directory; vectors and codes are memory-mapped. Checksums are verified
    /// for every file except the full vectors (which can be tens of GB; their size is checked).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let meta: DenseManifest = manifest::read(dir)?;
        let (dim, ntotal, metric) = (meta.dim, meta.ntotal, meta.metric);
        let ids = IdTable::open(dir.join("ids.bin"))?;
        if ids.len() != ntotal || dim == 0 {
            return Err(Error::format(
                dir,
                format!("ids.bin has {} ids, the manifest says {ntotal}", ids.len()),
            ));
        }
        let vectors = if meta.vectors {
            Some(map_array(dir, VECTORS, ntotal * dim, false)?)
        } else {
            None
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
                        let cents: Array<f32> = map_array(dir, IVF_CENTROIDS, nlist * dim, true)?;
                        let lists: Array<u64> = map_array(dir, IVF_LISTS, nlist + 1, true)?;
                        let block_starts = lists.as_slice().to_vec();
                        let nslots = *block_starts.last().unwrap() as usize * BLOCK;
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
                    nslots / BLOCK * layout::block_bytes(m)
                } else {
                    nslots * m
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
            pq,
        })
    }

    /// Top-k of each query (row-major, `qdim` columns): (score, internal id), best first.
    pub fn search(&self, queries: &[f32], qdim: usize, opts: &SearchOptions) -> Result<Hits> {
        if qdim != self.dim {
            return Err(Error::invalid(format!(
                "queries have dimension {qdim}, the index has dimension {}",
                self.dim
            )));
        }
        let nq = check_matrix(queries, qdim, "queries")?;
        if opts.k == 0 {
            return Err(Error::invalid("k must be at least 1"));
        }
        if opts.nprobe == 0 {
            return Err(Error::invalid("nprobe must be at least 1"));
        }
        if opts.refine > 0 && self.vectors.is_none() {
            return Err(Error::invalid(
                "refine needs the full vectors, but this index was built with keep_vectors=False",
            ));
        }
        if nq == 0 {
            return Ok(Vec::new());
        }
        match &self.pq {
            None => {
                let data = self
                    .vectors
                    .as_ref()
                    .expect("flat indexes keep vectors")
                    .as_slice();
                parallel::install(opts.threads, |threads| {
                    flat::search(self.metric, data, self.dim, queries, opts.k, threads)
                        .into_iter()
                        .map(|t| t.into_sorted().iter().map(|h| (h.score, h.id)).collect())
                        .collect()
                })
            }
            Some(p) => {
                let isa = Isa::select()?;
                parallel::install(opts.threads, |threads| {
                    self.search_pq(p, queries, nq, opts, threads, isa)
                })
            }
        }
    }

    /// Turn search hits into a run with string doc ids; `qids` name the queries in order.
    pub fn to_run(&self, hits: Hits, qids: &[String]) -> Result<Run> {
        self.ids.run_from_hits(hits, qids)
    }

    fn slot_to_id(&self, p: &PqPart, slot: u32) -> u32 {
        match &p.coarse {
            None => slot,
            Some(c) => c.slots.as_slice()[slot as usize],
        }
    }

    fn search_pq(
        &self,
        p: &PqPart,
        queries: &[f32],
        nq: usize,
        opts: &SearchOptions,
        threads: usize,
        isa: Isa,
    ) -> Hits {
        let (d, m, ksub) = (self.dim, p.pq.m, p.pq.ksub());
        let shortlist = if opts.refine > 0 {
            opts.refine.max(opts.k)
        } else if p.pq.nbits == 4 {
            opts.k * RESCORE_FACTOR
        } else {
            opts.k
        };
        let nblocks = match &p.coarse {
            None => self.ntotal.div_ceil(BLOCK),
            Some(c) => *c.block_starts.last().unwrap() as usize,
        };
        // Work items: query chunks; without IVF and with few queries, block slices too.
        let (query_chunk, block_chunk) = match p.coarse {
            None => flat::plan(nq, nblocks, threads),
            Some(_) => (nq.div_ceil(threads).clamp(1, TASK_QUERIES), nblocks.max(1)),
        };
        let query_chunk = query_chunk.min(TASK_QUERIES);
        let slices = nblocks.div_ceil(block_chunk).max(1);
        let tasks: Vec<(usize, usize)> = (0..nq.div_ceil(query_chunk))
            .flat_map(|qc| (0..slices).map(move |bc| (qc, bc)))
            .collect();
        let luts: Vec<f32> = queries
            .par_chunks(d)
            .flat_map_iter(|q| {
                let mut t = vec![0f32; m * ksub];
                p.pq.lut(self.metric, q, &mut t);
                t
            })
            .collect();
        let partial: Vec<Vec<TopK<f32>>> = tasks
            .par_iter()
            .map(|&(qc, bc)| {
                let q0 = qc * query_chunk;
                let q1 = (q0 + query_chunk).min(nq);
                let b0 = (bc * block_chunk).min(nblocks);
                let b1 = (b0 + block_chunk).min(nblocks);
                let qs: Vec<usize> = (q0..q1).collect();
                if p.pq.nbits == 4 {
                    let heaps = self.scan4(
                        p,
                        &luts[q0 * m * ksub..q1 * m * ksub],
                        &queries[q0 * d..q1 * d],
                        &qs,
                        b0,
                        b1,
                        shortlist,
                        opts.nprobe,
                        isa,
                    );
                    // Promote quantized candidates to float scores by exact PQ scoring.
                    heaps
                        .into_iter()
                        .enumerate()
                        .map(|(i, h)| {
                            let lut = &luts[(q0 + i) * m * ksub..(q0 + i + 1) * m * ksub];
                            let codes = p.codes.as_slice();
                            let bb = layout::block_bytes(m);
                            let mut out = TopK::new(shortlist);
                            for hit in h.iter() {
                                let block = &codes[(hit.id as usize / BLOCK) * bb..];
                                let v = hit.id as usize % BLOCK;
                                out.push(
                                    p.pq.adc_score(
                                        lut,
                                        (0..m).map(|s| layout::code_at(block, v, s)),
                                    ),
                                    hit.id,
                                );
                            }
                            out
                        })
                        .collect()
                } else {
                    self.scan8(
                        p,
                        &luts[q0 * m * ksub..q1 * m * ksub],
                        &queries[q0 * d..q1 * d],
                        b0,
                        b1,
                        shortlist,
                        opts.nprobe,
                    )
                }
            })
            .collect();
        let per_query = merge_slices(partial, slices, shortlist);
        per_query
            .into_par_iter()
            .enumerate()
            .map(|(qi, cands)| {
                let q = &queries[qi * d..(qi + 1) * d];
                let mut hits: Vec<(f32, u32)> = cands
                    .iter()
                    .map(|h| {
                        let id = self.slot_to_id(p, h.id);
                        if opts.refine > 0 {
                            let v = self.vectors.as_ref().expect("checked above").as_slice();
                            (
                                flat::score(
                                    self.metric,
                                    q,
                                    &v[id as usize * d..(id as usize + 1) * d],
                                ),
                                id,
                            )
                        } else {
                            (h.score, id)
                        }
                    })
                    .collect();
                hits.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                hits.truncate(opts.k);
                hits
            })
            .collect()
    }

    /// Lists (as block ranges) each query of a task scans: all of `b0..b1` without IVF.
    fn lists_for(
        &self,
        p: &PqPart,
        queries: &[f32],
        b0: usize,
        b1: usize,
        nprobe: usize,
    ) -> Vec<((usize, usize), Vec<usize>)> {
        let nq = queries.len() / self.dim;
        match &p.coarse {
            None => vec![((b0, b1), (0..nq).collect())],
            Some(c) => {
                let mut members: Vec<Vec<usize>> = vec![Vec::new(); c.quantizer.nlist];
                for (i, q) in queries.chunks_exact(self.dim).enumerate() {
                    for l in c.quantizer.probe(self.metric, q, nprobe) {
                        members[l as usize].push(i);
                    }
                }
                members
                    .into_iter()
                    .enumerate()
                    .filter(|(l, qs)| !qs.is_empty() && c.block_starts[*l] < c.block_starts[l + 1])
                    .map(|(l, qs)| {
                        (
                            (c.block_starts[l] as usize, c.block_starts[l + 1] as usize),
                            qs,
                        )
                    })
                    .collect()
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn scan4(
        &self,
        p: &PqPart,
        luts: &[f32],
        queries: &[f32],
        qs: &[usize],
        b0: usize,
        b1: usize,
        shortlist: usize,
        nprobe: usize,
        isa: Isa,
    ) -> Vec<TopK<u32>> {
        let m = p.pq.m;
        let bb = layout::block_bytes(m);
        let group_bytes = layout::chunks(m) * QUERY_GROUP * 64;
        let codes = p.codes.as_slice();
        let mut heaps: Vec<TopK<u32>> = qs.iter().map(|_| TopK::new(shortlist)).collect();
        let valid = |slot: usize| match &p.coarse {
            None => slot < self.ntotal,
            Some(c) => c.slots.as_slice()[slot] != EMPTY_SLOT,
        };
        for ((l0, l1), members) in self.lists_for(p, queries, b0, b1, nprobe) {
            // Quantized tables of this list's queries, in groups of QUERY_GROUP (padding
            // queries have all-zero tables and a threshold no score reaches).
            let groups: Vec<(Vec<u8>, Vec<usize>)> = members
                .chunks(QUERY_GROUP)
                .map(|g| {
                    let mut t = vec![0u8; group_bytes];
                    for (qi, &q) in g.iter().enumerate() {
                        lut::quantize_into(&luts[q * m * 16..(q + 1) * m * 16], m, qi, &mut t);
                    }
                    isa.arrange_luts(&mut t);
                    (t, g.to_vec())
                })
                .collect();
            let super_blocks = (SUPER_BLOCK_BYTES / bb).max(1);
            for s0 in (l0..l1).step_by(super_blocks) {
                let s1 = (s0 + super_blocks).min(l1);
                for (tables, members) in &groups {
                    let mut thresholds = [i32::MAX; QUERY_GROUP];
                    for (qi, &q) in members.iter().enumerate() {
                        thresholds[qi] = threshold(&heaps[q]);
                    }
                    isa.scan(
                        &codes[s0 * bb..s1 * bb],
                        m,
                        tables,
                        &mut thresholds,
                        &mut |qi, b, mask, scores| {
                            let heap = &mut heaps[members[qi]];
                            let mut bits = mask;
                            while bits != 0 {
                                let v = bits.trailing_zeros() as usize;
                                bits &= bits - 1;
                                let slot = (s0 + b) * BLOCK + v;
                                if valid(slot) {
                                    heap.push(scores[v], slot as u32);
                                }
                            }
                            threshold(heap)
                        },
                    );
                }
            }
        }
        heaps
    }

    #[allow(clippy::too_many_arguments)]
    fn scan8(
        &self,
        p: &PqPart,
        luts: &[f32],
        queries: &[f32],
        b0: usize,
        b1: usize,
        shortlist: usize,
        nprobe: usize,
    ) -> Vec<TopK<f32>> {
        let m = p.pq.m;
        let codes = p.codes.as_slice();
        let nq = queries.len() / self.dim;
        let mut heaps: Vec<TopK<f32>> = (0..nq).map(|_| TopK::new(shortlist)).collect();
        for ((l0, l1), members) in self.lists_for(p, queries, b0, b1, nprobe) {
            for slot in l0 * BLOCK..l1 * BLOCK {
                let ok = match &p.coarse {
                    None => slot < self.ntotal,
                    Some(c) => c.slots.as_slice()[slot] != EMPTY_SLOT,
                };
                if !ok {
                    continue;
                }
                let code = &codes[slot * m..(slot + 1) * m];
                for &q in &members {
                    let lut = &luts[q * m * 256..(q + 1) * m * 256];
                    heaps[q].push(p.pq.adc_score(lut, code.iter().copied()), slot as u32);
                }
            }
        }
        heaps
    }
}

/// Kernel threshold for a heap: report scores >= its worst (ties may still enter by id).
fn threshold(heap: &TopK<u32>) -> i32 {
    heap.worst().map_or(-1, |w| w.score as i32 - 1)
}

fn build_pq(data: &[f32], dim: usize, m: usize, opts: &BuildOptions) -> Result<PqPart> {
    ProductQuantizer::check_params(dim, m, opts.nbits)?;
    let n = data.len() / dim;
    let mut rng = SplitMix64::new(opts.seed);
    let want = opts.train_size.unwrap_or(65_536).min(n);
    let rows = rng.sample(n, want);
    let sample: Vec<f32> = rows
        .iter()
        .flat_map(|&r| data[r * dim..(r + 1) * dim].iter().copied())
        .collect();
    let pq = ProductQuantizer::train(&sample, dim, m, opts.nbits, opts.seed)?;
    let (assign, coarse) = match opts.ivf {
        None => (None, None),
        Some(nlist) => {
            if nlist == 0 {
                return Err(Error::invalid("ivf: nlist must be at least 1"));
            }
            let q = CoarseQuantizer::train(&sample, dim, nlist, opts.seed ^ 0x1f)?;
            (Some(q.assign(opts.metric, data)), Some(q))
        }
    };
    let bar = crate::progress::bar(Some(n as u64), "encoding", opts.quiet);
    let mut raw = Vec::with_capacity(n * m);
    for chunk in data.chunks(dim * 65_536) {
        raw.extend(pq.encode(chunk));
        bar.inc((chunk.len() / dim) as u64);
    }
    bar.finish_and_clear();
    let (slots, block_starts) = match &assign {
        None => (
            (0..n as u32).collect::<Vec<_>>(),
            vec![0, n.div_ceil(BLOCK) as u64],
        ),
        Some(a) => slot_layout(a, opts.ivf.unwrap_or(1)),
    };
    // Codes in slot order (padding slots are code 0).
    let mut ordered = vec![0u8; slots.len().div_ceil(BLOCK) * BLOCK * m];
    for (s, &id) in slots.iter().enumerate() {
        if id != EMPTY_SLOT {
            ordered[s * m..(s + 1) * m]
                .copy_from_slice(&raw[id as usize * m..(id as usize + 1) * m]);
        }
    }
    let codes = if opts.nbits == 4 {
        let mut packed = Vec::with_capacity(ordered.len() / 2);
        layout::pack(&ordered, m, &mut packed);
        packed
    } else {
        ordered
    };
    let coarse = coarse.map(|quantizer| Coarse {
        quantizer,
        slots: Array::from(slots),
        block_starts,
    });
    Ok(PqPart {
        pq,
        codes: Array::from(codes),
        coarse,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clustered(n: usize, d: usize, seed: u64) -> Vec<f32> {
        let mut rng = SplitMix64::new(seed);
        let centers: Vec<f32> = (0..8 * d).map(|_| rng.unit() as f32 * 2.0 - 1.0).collect();
        (0..n)
            .flat_map(|i| {
                let c = (i * 5) % 8;
                (0..d)
                    .map(|j| centers[c * d + j] + 0.3 * (rng.unit() as f32 - 0.5))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("doc{i}")).collect()
    }

    fn opts(pq: Option<usize>, nbits: usize, ivf: Option<usize>, metric: Metric) -> BuildOptions {
        BuildOptions {
            pq,
            nbits,
            ivf,
            metric,
            ..Default::default()
        }
    }

    #[test]
    fn refine_over_whole_collection_equals_flat() {
        let (n, d) = (300, 16);
        let data = clustered(n, d, 1);
        let queries = clustered(9, d, 2);
        for metric in [Metric::InnerProduct, Metric::L2] {
            let flat = DenseIndex::build(&data, d, &ids(n), &opts(None, 4, None, metric)).unwrap();
            let want = flat
                .search(
                    &queries,
                    d,
                    &SearchOptions {
                        k: 20,
                        ..Default::default()
                    },
                )
                .unwrap();
            for (nbits, ivf) in [(4, None), (8, None), (4, Some(4))] {
                let idx = DenseIndex::build(&data, d, &ids(n), &opts(Some(8), nbits, ivf, metric))
                    .unwrap();
                for threads in [1, 3] {
                    let so = SearchOptions {
                        k: 20,
                        refine: n,
                        nprobe: 4,
                        threads,
                    };
                    let got = idx.search(&queries, d, &so).unwrap();
                    assert_eq!(
                        got, want,
                        "{metric:?} nbits={nbits} ivf={ivf:?} threads={threads}"
                    );
                }
            }
        }
    }

    #[test]
    fn pq_results_do_not_depend_on_threads_and_match_exhaustive_pq_scoring() {
        let (n, d) = (2000, 32);
        let data = clustered(n, d, 3);
        let queries = clustered(70, d, 4);
        let idx = DenseIndex::build(
            &data,
            d,
            &ids(n),
            &opts(Some(16), 4, None, Metric::InnerProduct),
        )
        .unwrap();
        let pq = &idx.pq.as_ref().unwrap().pq;
        let codes = pq.encode(&data);
        let so = |threads| SearchOptions {
            k: 10,
            threads,
            ..Default::default()
        };
        let one = idx.search(&queries, d, &so(1)).unwrap();
        assert_eq!(one, idx.search(&queries, d, &so(4)).unwrap());
        let mut found = 0;
        for (q, got) in queries.chunks(d).zip(&one) {
            let mut lut = vec![0f32; 16 * 16];
            pq.lut(Metric::InnerProduct, q, &mut lut);
            let mut all: Vec<(f32, u32)> = codes
                .chunks(16)
                .enumerate()
                .map(|(i, c)| (pq.adc_score(&lut, c.iter().copied()), i as u32))
                .collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            found += got.iter().filter(|h| all[..10].contains(h)).count();
        }
        // The integer scan only preselects 2k candidates; their exact PQ scores decide.
        assert!(found >= 690, "{found}/700 of the exhaustive PQ top-10");
        let ivf = DenseIndex::build(
            &data,
            d,
            &ids(n),
            &opts(Some(16), 4, Some(8), Metric::InnerProduct),
        )
        .unwrap();
        let so = |threads| SearchOptions {
            k: 10,
            nprobe: 3,
            threads,
            ..Default::default()
        };
        assert_eq!(
            ivf.search(&queries, d, &so(1)).unwrap(),
            ivf.search(&queries, d, &so(3)).unwrap()
        );
        let all = SearchOptions {
            k: 10,
            nprobe: 8,
            ..Default::default()
        };
        let ivf_all = ivf.search(&queries, d, &all).unwrap();
        let same: usize = ivf_all
            .iter()
            .zip(&one)
            .map(|(a, b)| a.iter().filter(|h| b.iter().any(|e| e.1 == h.1)).count())
            .sum();
        assert!(
            same >= 600,
            "IVF probing every list finds {same}/700 of flat PQ's hits"
        );
    }

    #[test]
    fn save_open_round_trip() {
        let (n, d) = (300, 8);
        let data = clustered(n, d, 5);
        let queries = clustered(3, d, 6);
        let dir = tempfile::tempdir().unwrap();
        for (i, o) in [
            opts(None, 4, None, Metric::L2),
            opts(Some(4), 4, None, Metric::InnerProduct),
            opts(Some(2), 8, Some(3), Metric::L2),
        ]
        .into_iter()
        .enumerate()
        {
            let idx = DenseIndex::build(&data, d, &ids(n), &o).unwrap();
            let path = dir.path().join(format!("idx{i}"));
            idx.save(&path).unwrap();
            let back = DenseIndex::open(&path).unwrap();
            assert_eq!(
                (back.dim(), back.ntotal(), back.metric(), back.kind()),
                (d, n, o.metric, idx.kind())
            );
            assert_eq!(back.ids().get(7), "doc7");
            let so = SearchOptions {
                k: 5,
                nprobe: 2,
                ..Default::default()
            };
            assert_eq!(
                back.search(&queries, d, &so).unwrap(),
                idx.search(&queries, d, &so).unwrap()
            );
        }
        let bytes = std::fs::read(dir.path().join("idx1/codes.bin")).unwrap();
        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() ^= 0xff;
        std::fs::write(dir.path().join("idx1/codes.bin"), &bad).unwrap();
        let e = DenseIndex::open(dir.path().join("idx1"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("checksum"), "{e}");
    }

    #[test]
    fn bad_inputs_have_clear_errors() {
        let d = 8;
        let data = clustered(40, d, 7);
        let err = |data: &[f32], dim: usize, ids: &[String], o: &BuildOptions| {
            DenseIndex::build(data, dim, ids, o)
                .err()
                .unwrap()
                .to_string()
        };
        let mut nan = data.clone();
        nan[3 * d + 2] = f32::NAN;
        assert!(err(&nan, d, &ids(40), &BuildOptions::default())
            .contains("vector 3 has a non-finite value (NaN) at dimension 2"));
        let mut inf = data.clone();
        inf[5] = f32::INFINITY;
        assert!(err(&inf, d, &ids(40), &BuildOptions::default()).contains("non-finite value (inf)"));
        assert!(err(&data, d, &ids(39), &BuildOptions::default()).contains("39 ids for 40 vectors"));
        let mut dup = ids(40);
        dup[9] = "doc2".into();
        assert!(err(&data, d, &dup, &BuildOptions::default()).contains("duplicate id 'doc2'"));
        assert!(err(
            &data,
            d,
            &ids(40),
            &opts(Some(3), 4, None, Metric::InnerProduct)
        )
        .contains("M=3 does not divide the dimension 8"));
        assert!(err(
            &data[..10 * d],
            d,
            &ids(10),
            &opts(Some(4), 4, None, Metric::InnerProduct)
        )
        .contains("too few training vectors: 10"));
        assert!(err(
            &data,
            d,
            &ids(40),
            &opts(Some(4), 8, None, Metric::InnerProduct)
        )
        .contains("too few training vectors: 40"));
        let idx = DenseIndex::build(&data, d, &ids(40), &BuildOptions::default()).unwrap();
        let e = idx
            .search(&data[..12], 12, &SearchOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("queries have dimension 12, the index has dimension 8"),
            "{e}"
        );
        let mut q = data[..d].to_vec();
        q[0] = f32::NAN;
        assert!(idx
            .search(&q, d, &SearchOptions::default())
            .err()
            .unwrap()
            .to_string()
            .contains("queries: vector 0"));
        let nov = DenseIndex::build(
            &data,
            d,
            &ids(40),
            &BuildOptions {
                pq: Some(4),
                keep_vectors: false,
                ..Default::default()
            },
        )
        .unwrap();
        let so = SearchOptions {
            refine: 10,
            ..Default::default()
        };
        assert!(nov
            .search(&data[..d], d, &so)
            .err()
            .unwrap()
            .to_string()
            .contains("refine needs the full vectors"));
    }
}
