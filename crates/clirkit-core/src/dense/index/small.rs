//! 4-bit PQ search of a small collection (no IVF, at most [`SMALL_COLLECTION`] vectors), where
//! the scan is short and the per-query fixed costs decide. Threads take groups of
//! [`QUERY_GROUP`] queries (never slices of the codes) with scratch buffers reused from group
//! to group; a group's quantized tables scan every block once, each query's shortlist kept in a
//! [`Reservoir`] instead of a heap, then re-scored with SIMD.
//!
//! The result is the one the general path ([`DenseIndex::pq_shortlists`], then
//! [`DenseIndex::rank_shortlists`]) returns, bit for bit: the same tables and table quantization, the same kernel scores, the same shortlist (the best
//! `shortlist_len_of` slots by quantized score, ties to the lower slot), the same float sums in
//! sub-quantizer order (or the same exact scores with refine), the same final order.

use super::{DenseIndex, Hits, PqPart, SearchOptions};
use crate::dense::fastscan::tables::FloatTables;
use crate::dense::fastscan::{layout, lut, rescore, Isa, BLOCK, QUERY_GROUP};
use crate::error::Result;
use crate::topk::{pack, score_bits_of, LowerIdFirst, Reservoir, Score, TieRule};
use rayon::prelude::*;

/// Collections up to this many vectors take the small-collection path, where a thread's group
/// of queries scanning all the codes beats splitting the codes across threads.
pub(super) const SMALL_COLLECTION: usize = 1 << 16;

/// A small path's shortlist is a large share of the collection, so cuts, not slots let through
/// by a trailing threshold, are the reservoir's cost: a buffer of 4 counts
/// ([`Reservoir::reset`]).
const RESERVOIR_BUFFER_COUNTS: usize = 4;

/// Buffers one worker reuses for every query group it searches.
struct Scratch {
    /// Float tables of the group's queries, `m * 16` each.
    luts: Vec<f32>,
    /// The group's quantized tables, as the kernel reads them.
    tables: Vec<u8>,
    /// Each query's shortlist while the scan runs.
    reservoirs: [Reservoir; QUERY_GROUP],
    shortlist: Vec<u32>,
    rescored: Vec<f32>,
    /// The query's hits as [`hit_key`]s, and the other half of their radix sort.
    keys: Vec<u64>,
    spare_keys: Vec<u64>,
    rescore_scratch: rescore::ShortlistScratch,
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
        let float_tables = FloatTables::new(&p.pq);
        let groups: Vec<Result<Hits>> = queries
            .par_chunks(QUERY_GROUP * self.dim)
            .map_init(
                || Scratch {
                    luts: vec![0f32; QUERY_GROUP * m * 16],
                    tables: vec![0u8; layout::chunks(m) * QUERY_GROUP * 64],
                    reservoirs: Default::default(),
                    shortlist: Vec::new(),
                    rescored: Vec::new(),
                    keys: Vec::new(),
                    spare_keys: Vec::new(),
                    rescore_scratch: Default::default(),
                },
                |scratch, group| {
                    let hits = self.search_group(p, &float_tables, group, opts, isa, scratch);
                    opts.progress.advance(group.len() / self.dim);
                    hits
                },
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
        float_tables: &FloatTables,
        group: &[f32],
        opts: &SearchOptions,
        isa: Isa,
        scratch: &mut Scratch,
    ) -> Result<Hits> {
        let (d, m) = (self.dim, p.pq.m);
        let nq = group.len() / d;
        let shortlist_len = Self::shortlist_len_of(p, opts);
        // Queries missing from a short group keep all-zero tables and report nothing.
        scratch.tables.fill(0);
        for (qi, q) in group.chunks_exact(d).enumerate() {
            let table = &mut scratch.luts[qi * m * 16..(qi + 1) * m * 16];
            float_tables.compute(isa, self.metric, q, table);
            lut::quantize_with(isa, table, m, qi, &mut scratch.tables);
            scratch.reservoirs[qi].reset(shortlist_len, RESERVOIR_BUFFER_COUNTS);
        }
        isa.arrange_luts(&mut scratch.tables);
        let nblocks = self.ntotal.div_ceil(BLOCK);
        let codes = &p.codes.as_slice()[..nblocks * layout::block_bytes(m)];
        // The last block's padding vectors are never reported.
        let last_block_mask = u32::MAX >> (nblocks * BLOCK - self.ntotal);
        let mut thresholds = [i32::MAX; QUERY_GROUP];
        thresholds[..nq].fill(-1);
        let reservoirs = &mut scratch.reservoirs;
        isa.scan(
            codes,
            m,
            &scratch.tables,
            &mut thresholds,
            &mut |qi, b, mask, scores| {
                let reservoir = &mut reservoirs[qi];
                let mask = if b + 1 == nblocks {
                    mask & last_block_mask
                } else {
                    mask
                };
                reservoir.push_block((b * BLOCK) as u32, mask, scores);
                reservoir.threshold()
            },
        );
        let mut out = Vec::with_capacity(nq);
        for (qi, q) in group.chunks_exact(d).enumerate() {
            let shortlist = &mut scratch.shortlist;
            shortlist.clear();
            scratch.reservoirs[qi].drain_into(shortlist);
            let keys = &mut scratch.keys;
            keys.clear();
            if opts.refine > 0 {
                for &slot in shortlist.iter() {
                    keys.push(hit_key(self.exact_score(q, slot)?, slot));
                }
            } else {
                let table = &scratch.luts[qi * m * 16..(qi + 1) * m * 16];
                scratch.rescored.resize(shortlist.len(), 0.0);
                rescore::rescore_shortlist(
                    isa,
                    codes,
                    m,
                    table,
                    shortlist,
                    &mut scratch.rescored,
                    &mut scratch.rescore_scratch,
                );
                keys.extend(
                    scratch
                        .rescored
                        .iter()
                        .zip(shortlist.iter())
                        .map(|(&score, &slot)| hit_key(score, slot)),
                );
            }
            out.push(best_first(keys, &mut scratch.spare_keys, opts.k));
        }
        Ok(out)
    }
}

/// A hit as one integer, smaller = better (higher score first, ties to the lower id): the
/// complement of the packed hit (`crate::topk::order`: the score's order bits above the id's
/// complement), so the selection and sort compare integers.
#[inline]
fn hit_key(score: f32, id: u32) -> u64 {
    !pack(score.order_bits(), LowerIdFirst::tie_bits(id, ()))
}

/// The best `k` of the hits `keys` stands for, sorted, in a vector of just their length (one
/// query's hits stay in memory until the whole search returns); `spare` is sorting room.
fn best_first(keys: &mut Vec<u64>, spare: &mut Vec<u64>, k: usize) -> Vec<(f32, u32)> {
    if keys.len() > k {
        keys.select_nth_unstable(k - 1);
        keys.truncate(k);
    }
    radix_sort(keys, spare);
    keys.iter()
        .map(|&key| {
            (
                f32::from_order_bits(score_bits_of(!key)),
                LowerIdFirst::id_of(!key),
            )
        })
        .collect()
}

/// Sort `keys` ascending: least significant byte first over the high 32 bits (the score part),
/// then the rare runs of equal scores by the whole key. A comparison sort of a thousand keys
/// mispredicts its branches at every level; this makes four counting passes at most.
fn radix_sort(keys: &mut Vec<u64>, spare: &mut Vec<u64>) {
    let mut counts = [[0u32; 256]; 4];
    for &key in keys.iter() {
        for (byte, count) in counts.iter_mut().enumerate() {
            count[(key >> (32 + 8 * byte)) as u8 as usize] += 1;
        }
    }
    spare.clear();
    spare.resize(keys.len(), 0);
    for (byte, count) in counts.iter().enumerate() {
        // Keys all sharing this byte keep their order: nothing to move.
        if count.iter().any(|&n| n as usize == keys.len()) {
            continue;
        }
        let mut next = [0u32; 256];
        let mut total = 0;
        for (next, &n) in next.iter_mut().zip(count) {
            *next = total;
            total += n;
        }
        for &key in keys.iter() {
            let bin = &mut next[(key >> (32 + 8 * byte)) as u8 as usize];
            spare[*bin as usize] = key;
            *bin += 1;
        }
        std::mem::swap(keys, spare);
    }
    if keys.windows(2).any(|pair| pair[0] >> 32 == pair[1] >> 32) {
        for run in keys.chunk_by_mut(|a, b| a >> 32 == b >> 32) {
            run.sort_unstable();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::radix_sort;
    use crate::rng::SplitMix64;

    #[test]
    fn radix_sort_equals_a_comparison_sort_ties_included() {
        let mut spare = Vec::new();
        let mut rng = SplitMix64::new(5);
        // Score parts all equal, within one byte, over every byte; ids in any order.
        for (spread, n) in [1u64, 3, 200, 1 << 32]
            .into_iter()
            .flat_map(|spread| [0, 1, 2, 999, 1000].map(|n| (spread, n)))
        {
            let mut keys: Vec<u64> = (0..n)
                .map(|_| (rng.below(spread as usize) as u64) << 32 | rng.below(1 << 32) as u64)
                .collect();
            let mut want = keys.clone();
            want.sort_unstable();
            radix_sort(&mut keys, &mut spare);
            assert_eq!(keys, want, "n={n} spread={spread}");
        }
    }
}
