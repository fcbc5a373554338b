//! Scan drivers of one work item: the lists each query probes, the 4-bit fast-scan kernel over
//! super-blocks of codes for groups of queries, and the 8-bit table scan.

use super::{DenseIndex, PqPart};
use crate::dense::fastscan::{layout, lut, Isa, BLOCK, QUERY_GROUP};
use crate::dense::ivf::EMPTY_SLOT;
use crate::topk::Reservoir;
use crate::topk::TopK;

/// One work item: a chunk of queries against a slice of the code blocks.
pub(super) struct ScanTask<'a> {
    /// Float look-up tables of the chunk's queries, `m * ksub` values each.
    pub luts: &'a [f32],
    pub queries: &'a [f32],
    /// Blocks `start..end` to scan without IVF (with IVF, the lists each query probes).
    pub blocks: (usize, usize),
    pub shortlist: usize,
    pub nprobe: usize,
}

/// A large collection's scan is much longer than a shortlist, so most slots come after the
/// threshold has risen: cutting at 2 counts keeps it close behind ([`Reservoir::reset`]).
const RESERVOIR_BUFFER_COUNTS: usize = 2;

/// Bytes of codes scanned by all query groups of a task before moving on, so they stay in L2.
const SUPER_BLOCK_BYTES: usize = 256 << 10;

impl DenseIndex {
    /// Whether `slot` holds a vector, not the padding of the last block or of an IVF list.
    #[inline]
    fn holds_vector(&self, p: &PqPart, slot: usize) -> bool {
        match &p.coarse {
            None => slot < self.ntotal,
            Some(c) => c.slots.as_slice()[slot] != EMPTY_SLOT,
        }
    }

    /// Lists (as block ranges) each query of a task scans: all of its blocks without IVF.
    fn lists_for(&self, p: &PqPart, task: &ScanTask) -> Vec<((usize, usize), Vec<usize>)> {
        let queries = task.queries;
        let nq = queries.len() / self.dim;
        match &p.coarse {
            None => vec![(task.blocks, (0..nq).collect())],
            Some(c) => {
                let mut members: Vec<Vec<usize>> = vec![Vec::new(); c.quantizer.nlist];
                for (i, q) in queries.chunks_exact(self.dim).enumerate() {
                    for l in c.quantizer.probe(self.metric, q, task.nprobe) {
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

    /// The bits of `mask` (vectors `0..32` of `block`) that are vectors, not padding.
    #[inline]
    fn vectors_of(&self, p: &PqPart, block: usize, mask: u32) -> u32 {
        match &p.coarse {
            None if (block + 1) * BLOCK > self.ntotal => {
                mask & u32::MAX >> ((block + 1) * BLOCK - self.ntotal)
            }
            None => mask,
            Some(_) => {
                let mut kept = mask;
                let mut bits = mask;
                while bits != 0 {
                    let v = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if !self.holds_vector(p, block * BLOCK + v) {
                        kept &= !(1 << v);
                    }
                }
                kept
            }
        }
    }

    /// The 4-bit fast-scan of `task` with the `isa` kernel: per query, the `shortlist` best
    /// slots by quantized score as reservoir keys
    /// ([`key`](crate::topk::reservoir::key)), in no order. A query's slots
    /// reach its reservoir in increasing order (lists, then blocks, in order), as it requires.
    pub(super) fn scan4(&self, p: &PqPart, task: &ScanTask, isa: Isa) -> Vec<Vec<u64>> {
        let luts = task.luts;
        let m = p.pq.m;
        let bb = layout::block_bytes(m);
        let group_bytes = layout::chunks(m) * QUERY_GROUP * 64;
        let codes = p.codes.as_slice();
        let nq = task.queries.len() / self.dim;
        let mut reservoirs: Vec<Reservoir> = (0..nq)
            .map(|_| {
                let mut r = Reservoir::default();
                r.reset(task.shortlist, RESERVOIR_BUFFER_COUNTS);
                r
            })
            .collect();
        for ((l0, l1), members) in self.lists_for(p, task) {
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
                        thresholds[qi] = reservoirs[q].threshold();
                    }
                    isa.scan(
                        &codes[s0 * bb..s1 * bb],
                        m,
                        tables,
                        &mut thresholds,
                        &mut |qi, b, mask, scores| {
                            let block = s0 + b;
                            let reservoir = &mut reservoirs[members[qi]];
                            let mask = self.vectors_of(p, block, mask);
                            reservoir.push_block((block * BLOCK) as u32, mask, scores);
                            reservoir.threshold()
                        },
                    );
                }
            }
        }
        reservoirs.into_iter().map(Reservoir::into_keys).collect()
    }

    /// The 8-bit scan of `task`: per query, the `shortlist` best slots by float table score.
    pub(super) fn scan8(&self, p: &PqPart, task: &ScanTask) -> Vec<TopK<f32>> {
        let luts = task.luts;
        let m = p.pq.m;
        let codes = p.codes.as_slice();
        let nq = task.queries.len() / self.dim;
        let mut heaps: Vec<TopK<f32>> = (0..nq).map(|_| TopK::new(task.shortlist)).collect();
        for ((l0, l1), members) in self.lists_for(p, task) {
            for slot in l0 * BLOCK..l1 * BLOCK {
                if !self.holds_vector(p, slot) {
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
