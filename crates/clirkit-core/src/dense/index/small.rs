//! 4-bit PQ search of a small collection (no IVF, at most [`SMALL_COLLECTION`] vectors), where
//! the scan is short and the per-query fixed costs decide. Threads take groups of
//! [`QUERY_GROUP`] queries (never slices of the codes) with scratch buffers reused from group
//! to group; a group's quantized tables scan every block once, keeping every 16-bit score; the
//! shortlist is chosen from those by two histograms instead of a heap, and re-scored with SIMD.
//!
//! The result is the one the general path ([`DenseIndex::search_pq`]) returns, bit for bit: the
//! same tables and table quantization, the same kernel scores, the same shortlist (the best
//! `shortlist_len_of` slots by quantized score, ties to the lower slot), the same float sums in
//! sub-quantizer order (or the same exact scores with refine), the same final order.

use super::{DenseIndex, Hits, PqPart, SearchOptions};
use crate::dense::fastscan::{layout, lut, rescore, select, Isa, BLOCK, QUERY_GROUP};
use crate::error::Result;
use rayon::prelude::*;

/// Collections up to this many vectors take the small-collection path: a query group's scores
/// of every vector (16 bits each, 1 MiB at most) then stay in the core's cache.
pub(super) const SMALL_COLLECTION: usize = 1 << 16;

/// Buffers one worker reuses for every query group it searches.
struct Scratch {
    /// Float tables of the group's queries, `m * 16` each.
    luts: Vec<f32>,
    /// The group's quantized tables, as the kernel reads them.
    tables: Vec<u8>,
    /// Quantized score of every slot, `slots_per_query` per query of the group.
    scores: Vec<u16>,
    shortlist: Vec<u32>,
    rescored: Vec<f32>,
}

impl DenseIndex {
    /// Whether a search of this PQ part takes the small-collection path.
    pub(super) fn takes_small_path(&self, p: &PqPart) -> bool {
        p.coarse.is_none() && p.pq.nbits == 4 && self.ntotal <= SMALL_COLLECTION
    }

    /// Top-k of each query by the small-collection path; call inside the search's pool.
    pub(super) fn search_pq_small(
        &self,
        p: &PqPart,
        queries: &[f32],
        opts: &SearchOptions,
        isa: Isa,
    ) -> Result<Hits> {
        let m = p.pq.m;
        let slots_per_query = self.ntotal.div_ceil(BLOCK) * BLOCK;
        let groups: Vec<Result<Hits>> = queries
            .par_chunks(QUERY_GROUP * self.dim)
            .map_init(
                || Scratch {
                    luts: vec![0f32; QUERY_GROUP * m * 16],
                    tables: vec![0u8; layout::chunks(m) * QUERY_GROUP * 64],
                    scores: vec![0u16; QUERY_GROUP * slots_per_query],
                    shortlist: Vec::new(),
                    rescored: Vec::new(),
                },
                |scratch, group| self.search_group(p, group, opts, isa, scratch),
            )
            .collect();
        let mut hits = Vec::with_capacity(queries.len() / self.dim);
        for group in groups {
            hits.extend(group?);
        }
        Ok(hits)
    }

    /// One query group: tables, one scan of every block, then per query the shortlist, its
    /// scores and the top k.
    fn search_group(
        &self,
        p: &PqPart,
        group: &[f32],
        opts: &SearchOptions,
        isa: Isa,
        scratch: &mut Scratch,
    ) -> Result<Hits> {
        let (d, m) = (self.dim, p.pq.m);
        let nq = group.len() / d;
        let slots_per_query = scratch.scores.len() / QUERY_GROUP;
        // Queries missing from a short group keep all-zero tables and report nothing.
        scratch.tables.fill(0);
        for (qi, q) in group.chunks_exact(d).enumerate() {
            let table = &mut scratch.luts[qi * m * 16..(qi + 1) * m * 16];
            p.pq.lut(self.metric, q, table);
            lut::quantize_into(table, m, qi, &mut scratch.tables);
        }
        isa.arrange_luts(&mut scratch.tables);
        let codes = &p.codes.as_slice()[..slots_per_query / BLOCK * layout::block_bytes(m)];
        let mut thresholds = [i32::MAX; QUERY_GROUP];
        thresholds[..nq].fill(-1);
        let scores = &mut scratch.scores;
        isa.scan(
            codes,
            m,
            &scratch.tables,
            &mut thresholds,
            &mut |qi, b, _, block| {
                let start = qi * slots_per_query + b * BLOCK;
                for (dst, &s) in scores[start..start + BLOCK].iter_mut().zip(block) {
                    // Quantized sums never exceed 16 bits (see `lut`).
                    *dst = s as u16;
                }
                -1
            },
        );
        let shortlist_len = Self::shortlist_len_of(p, opts);
        let mut out = Vec::with_capacity(nq);
        for (qi, q) in group.chunks_exact(d).enumerate() {
            let shortlist = &mut scratch.shortlist;
            shortlist.clear();
            let scores = &scratch.scores[qi * slots_per_query..][..self.ntotal];
            select::best_slots(scores, shortlist_len, shortlist);
            let mut hits: Vec<(f32, u32)> = if opts.refine > 0 {
                shortlist
                    .iter()
                    .map(|&slot| Ok((self.exact_score(q, slot)?, slot)))
                    .collect::<Result<_>>()?
            } else {
                let table = &scratch.luts[qi * m * 16..(qi + 1) * m * 16];
                scratch.rescored.resize(shortlist.len(), 0.0);
                rescore::rescore(isa, codes, m, table, shortlist, &mut scratch.rescored);
                scratch
                    .rescored
                    .iter()
                    .copied()
                    .zip(shortlist.iter().copied())
                    .collect()
            };
            best_first(&mut hits, opts.k);
            out.push(hits);
        }
        Ok(out)
    }
}

/// Keep the best `k` hits (higher score first, ties to the lower id), sorted.
fn best_first(hits: &mut Vec<(f32, u32)>, k: usize) {
    let order = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if hits.len() > k {
        hits.select_nth_unstable_by(k - 1, order);
        hits.truncate(k);
    }
    hits.sort_unstable_by(order);
}
