//! Search scheduling: argument checks, flat search, the small-collection PQ path (`small.rs`)
//! or PQ work items (query chunks x block slices) run on the pool, and the re-scoring of the
//! fast-scan shortlist.

use super::scan::ScanTask;
use super::{DenseIndex, Hits, PqPart, SearchOptions, StoredVectors};
use crate::dense::fastscan::{rescore, Isa, BLOCK};
use crate::dense::{check_matrix, flat};
use crate::error::{Error, Result};
use crate::parallel;
use crate::topk::reservoir;
use crate::topk::Score;
use rayon::prelude::*;

/// Shortlist size over k for re-scoring 4-bit fast-scan candidates with the float table.
const RESCORE_FACTOR: usize = 2;
/// Queries a task holds at most (their tables stay in L1/L2 while codes stream).
const TASK_QUERIES: usize = 64;

impl DenseIndex {
    /// Top-k of each query (row-major, `qdim` columns): (score, internal id), best first.
    pub fn search(&self, queries: &[f32], qdim: usize, opts: &SearchOptions) -> Result<Hits> {
        let nq = self.check_search(queries, qdim, opts)?;
        if nq == 0 {
            return Ok(Vec::new());
        }
        match &self.pq {
            None => {
                let data = self.float32_vectors_checked()?;
                let isa = Isa::select_float()?;
                parallel::install(opts.threads, |threads| {
                    let (k, metric, progress) = (opts.k, self.metric, &opts.progress);
                    flat::search(isa, metric, data, self.dim, queries, (k, threads), progress)
                        .into_iter()
                        .map(|t| t.into_sorted().iter().map(|h| (h.score, h.id)).collect())
                        .collect()
                })
            }
            Some(p) => {
                let isa = Isa::select()?;
                parallel::install(opts.threads, |threads| {
                    if self.takes_small_path(p) {
                        self.search_pq_small(p, queries, opts, isa)
                    } else {
                        // The general path: query chunks x block slices, each query's
                        // shortlist kept in a reservoir (4 bits) or a heap (8 bits).
                        let shortlists = self.pq_shortlists(p, queries, nq, opts, threads, isa);
                        self.rank_shortlists(p, queries, opts, shortlists)
                    }
                })?
            }
        }
    }

    /// The argument checks of a search; returns the number of queries.
    pub(super) fn check_search(
        &self,
        queries: &[f32],
        qdim: usize,
        opts: &SearchOptions,
    ) -> Result<usize> {
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
        if opts.refine > 0 && !self.has_vectors() {
            return Err(Error::invalid(
                "refine needs the full vectors, but this index was built with keep_vectors=False",
            ));
        }
        Ok(nq)
    }

    pub(super) fn slot_to_id(&self, p: &PqPart, slot: u32) -> u32 {
        match &p.coarse {
            None => slot,
            Some(c) => c.slots.as_slice()[slot as usize],
        }
    }

    /// The general PQ search's last step: each query's shortlist (from [`Self::pq_shortlists`])
    /// re-scored when refining, ordered, and cut to `k` ids.
    pub(super) fn rank_shortlists(
        &self,
        p: &PqPart,
        queries: &[f32],
        opts: &SearchOptions,
        shortlists: Vec<Vec<ShortlistHit>>,
    ) -> Result<Hits> {
        let d = self.dim;
        shortlists
            .into_par_iter()
            .enumerate()
            .map(|(qi, cands)| {
                let q = &queries[qi * d..(qi + 1) * d];
                let mut hits: Vec<(f32, u32)> = cands
                    .iter()
                    .map(|c| {
                        let id = self.slot_to_id(p, c.slot);
                        if opts.refine > 0 {
                            Ok((self.exact_score(q, id)?, id))
                        } else {
                            Ok((c.score, id))
                        }
                    })
                    .collect::<Result<_>>()?;
                hits.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                hits.truncate(opts.k);
                Ok(hits)
            })
            .collect()
    }

    /// The exact score of stored row `id` for query `q` (what refine re-scores with), in float32:
    /// float16 rows are widened as they are read.
    pub(super) fn exact_score(&self, q: &[f32], id: u32) -> Result<f32> {
        let (d, id) = (self.dim, id as usize);
        // Re-scoring touches a few scattered rows of a file that may be far larger than memory:
        // each row's pages are released after use, so the resident set does not grow with every
        // row ever re-scored (and the kernel's fault-around) but stays at the rows being read.
        Ok(match self.vectors_checked(id..id + 1)? {
            StoredVectors::Float32(v) => {
                let score = flat::score(self.metric, q, &v.as_slice()[id * d..(id + 1) * d]);
                v.release_values_around(id * d..(id + 1) * d);
                score
            }
            StoredVectors::Float16(v) => {
                let row: Vec<f32> = v.as_slice()[id * d..(id + 1) * d]
                    .iter()
                    .map(|&bits| half::f16::from_bits(bits).to_f32())
                    .collect();
                v.release_values_around(id * d..(id + 1) * d);
                flat::score(self.metric, q, &row)
            }
        })
    }

    /// Candidates a PQ search re-scores: how many of them per query.
    pub(super) fn shortlist_len_of(p: &PqPart, opts: &SearchOptions) -> usize {
        if opts.refine > 0 {
            opts.refine.max(opts.k)
        } else if p.pq.nbits == 4 {
            opts.k * RESCORE_FACTOR
        } else {
            opts.k
        }
    }

    /// Per query, the PQ shortlist: the best slots by selection key (the quantized fast-scan
    /// score with 4 bits, the float table score with 8), ties to the lower slot, each with its
    /// float PQ score. Work items scanning slices of the blocks are merged by key before the
    /// float scores are computed, so the shortlist does not depend on how the scan was split.
    pub(super) fn pq_shortlists(
        &self,
        p: &PqPart,
        queries: &[f32],
        nq: usize,
        opts: &SearchOptions,
        threads: usize,
        isa: Isa,
    ) -> Vec<Vec<ShortlistHit>> {
        let (d, m, ksub) = (self.dim, p.pq.m, p.pq.ksub());
        let shortlist = Self::shortlist_len_of(p, opts);
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
        let tasks = flat::work_items(nq, query_chunk, nblocks, block_chunk);
        let counted = opts.progress.sliced(nq.div_ceil(query_chunk), slices);
        let luts: Vec<f32> = queries
            .par_chunks(d)
            .flat_map_iter(|q| {
                let mut t = vec![0f32; m * ksub];
                p.pq.lut(self.metric, q, &mut t);
                t
            })
            .collect();
        // Per task and query, the task's best slots as reservoir keys (larger = better).
        let partial: Vec<Vec<Vec<u64>>> = tasks
            .into_par_iter()
            .map(|(qs, bs)| {
                let task = ScanTask {
                    luts: &luts[qs.start * m * ksub..qs.end * m * ksub],
                    queries: &queries[qs.start * d..qs.end * d],
                    blocks: (bs.start, bs.end),
                    shortlist,
                    nprobe: opts.nprobe,
                };
                let keys = if p.pq.nbits == 4 {
                    self.scan4(p, &task, isa)
                } else {
                    self.scan8(p, &task)
                        .iter()
                        .map(|heap| {
                            heap.iter()
                                .map(|hit| reservoir::key(hit.score.order_bits(), hit.id))
                                .collect()
                        })
                        .collect()
                };
                counted.finished(qs.start / query_chunk, qs.len());
                keys
            })
            .collect();
        gather_slices(partial, slices)
            .into_par_iter()
            .enumerate()
            .map(|(qi, mut keys)| {
                best_keys(&mut keys, shortlist);
                let slots: Vec<u32> = keys.iter().map(|&key| reservoir::slot_of(key)).collect();
                let scores: Vec<f32> = if p.pq.nbits == 4 {
                    // The float PQ scores, in SIMD (the same bits as `adc_score`).
                    let lut = &luts[qi * m * ksub..(qi + 1) * m * ksub];
                    let mut scores = vec![0f32; slots.len()];
                    rescore::rescore(isa, p.codes.as_slice(), m, lut, &slots, &mut scores);
                    scores
                } else {
                    keys.iter()
                        .map(|&key| f32::from_order_bits(reservoir::score_of(key)))
                        .collect()
                };
                keys.iter()
                    .zip(slots)
                    .zip(scores)
                    .map(|((&key, slot), score)| ShortlistHit {
                        key: reservoir::score_of(key),
                        slot,
                        score,
                    })
                    .collect()
            })
            .collect()
    }
}

/// Per query, the keys its `slices` work items found, together. `partial` holds the items of
/// each query chunk one after another, `slices` per chunk.
fn gather_slices(partial: Vec<Vec<Vec<u64>>>, slices: usize) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    let mut items = partial.into_iter();
    while let Some(mut merged) = items.next() {
        for item in items.by_ref().take(slices - 1) {
            for (keys, found) in merged.iter_mut().zip(item) {
                keys.extend(found);
            }
        }
        out.extend(merged);
    }
    out
}

/// The best `count` of `keys` (larger = better), best first. Each work item kept its best
/// `count`, so these are the best of all slots: the shortlist does not depend on how the scan
/// was split.
fn best_keys(keys: &mut Vec<u64>, count: usize) {
    if keys.len() > count {
        keys.select_nth_unstable_by(count - 1, |a, b| b.cmp(a));
        keys.truncate(count);
    }
    keys.sort_unstable_by(|a, b| b.cmp(a));
}

/// A PQ shortlist candidate: its selection key, slot and float PQ score.
#[derive(Clone, Copy, Debug)]
pub(super) struct ShortlistHit {
    pub key: u32,
    pub slot: u32,
    pub score: f32,
}
