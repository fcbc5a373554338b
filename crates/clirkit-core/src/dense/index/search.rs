//! Search scheduling: argument checks, flat search or PQ work items (query chunks x block
//! slices) run on the pool, and the re-scoring of the fast-scan shortlist.

use super::scan::ScanTask;
use super::{DenseIndex, Hits, PqPart, SearchOptions};
use crate::dense::fastscan::{layout, Isa, BLOCK};
use crate::dense::{check_matrix, flat};
use crate::error::{Error, Result};
use crate::parallel;
use crate::topk::{merge_slices, TopK};
use rayon::prelude::*;

/// Shortlist size over k for re-scoring 4-bit fast-scan candidates with the float table.
const RESCORE_FACTOR: usize = 2;
/// Queries a task holds at most (their tables stay in L1/L2 while codes stream).
const TASK_QUERIES: usize = 64;

impl DenseIndex {
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
        if opts.refine > 0 && !self.has_vectors() {
            return Err(Error::invalid(
                "refine needs the full vectors, but this index was built with keep_vectors=False",
            ));
        }
        if nq == 0 {
            return Ok(Vec::new());
        }
        match &self.pq {
            None => {
                let data = self.float32_vectors_checked()?;
                let isa = Isa::select_float()?;
                parallel::install(opts.threads, |threads| {
                    flat::search(isa, self.metric, data, self.dim, queries, opts.k, threads)
                        .into_iter()
                        .map(|t| t.into_sorted().iter().map(|h| (h.score, h.id)).collect())
                        .collect()
                })
            }
            Some(p) => {
                let isa = Isa::select()?;
                parallel::install(opts.threads, |threads| {
                    self.search_pq(p, queries, nq, opts, threads, isa)
                })?
            }
        }
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
    ) -> Result<Hits> {
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
                let task = ScanTask {
                    luts: &luts[q0 * m * ksub..q1 * m * ksub],
                    queries: &queries[q0 * d..q1 * d],
                    blocks: (b0, (b0 + block_chunk).min(nblocks)),
                    shortlist,
                    nprobe: opts.nprobe,
                };
                if p.pq.nbits == 4 {
                    let heaps = self.scan4(p, &task, isa);
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
                    self.scan8(p, &task)
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
                        let id = self.slot_to_id(p, h.id) as usize;
                        if opts.refine > 0 {
                            Ok((self.rescore(q, id)?, id as u32))
                        } else {
                            Ok((h.score, id as u32))
                        }
                    })
                    .collect::<Result<_>>()?;
                hits.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                hits.truncate(opts.k);
                Ok(hits)
            })
            .collect()
    }
}
