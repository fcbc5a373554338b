//! Optional coarse quantizer (IVF): `nlist` k-means centroids partition the collection; a query
//! scans only the lists of its `nprobe` best centroids. Residual-free: the PQ codes encode the
//! vectors themselves, so one look-up table per query serves every list.
//!
//! Lists are stored in "slot" space: list `l` owns whole blocks of 32 slots, in list order, and
//! each slot maps to an internal id (or [`EMPTY_SLOT`] for block padding). Without IVF the slots
//! are the internal ids themselves.

use super::flat::score;
use super::kmeans::KMeans;
use super::Metric;
use crate::error::Result;
use crate::topk::TopK;
use rayon::prelude::*;

/// Slot value of block padding.
pub const EMPTY_SLOT: u32 = u32::MAX;

#[derive(Clone)]
pub struct CoarseQuantizer {
    pub nlist: usize,
    pub d: usize,
    pub centroids: Vec<f32>,
}

impl CoarseQuantizer {
    /// Train `nlist` centroids (L2 k-means) on `sample`.
    pub fn train(sample: &[f32], d: usize, nlist: usize, seed: u64) -> Result<Self> {
        let centroids = KMeans::new(nlist, seed).train(sample, d)?;
        Ok(CoarseQuantizer {
            nlist,
            d,
            centroids,
        })
    }

    /// The `nprobe` best lists for `q` under `metric` (ties to the lower list number).
    pub fn probe(&self, metric: Metric, q: &[f32], nprobe: usize) -> Vec<u32> {
        let mut top = TopK::new(nprobe.min(self.nlist));
        for (l, c) in self.centroids.chunks_exact(self.d).enumerate() {
            top.push(score(metric, q, c), l as u32);
        }
        top.into_sorted().iter().map(|h| h.id).collect()
    }

    /// The list of each row of `data`.
    pub fn assign(&self, metric: Metric, data: &[f32]) -> Vec<u32> {
        data.par_chunks(self.d)
            .map(|x| self.probe(metric, x, 1)[0])
            .collect()
    }
}

/// Lay lists out in slot space: returns (slot -> internal id with padding, first block of each
/// list with a final end marker).
pub fn slot_layout(assign: &[u32], nlist: usize) -> (Vec<u32>, Vec<u64>) {
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); nlist];
    for (i, &l) in assign.iter().enumerate() {
        members[l as usize].push(i as u32);
    }
    let mut slots = Vec::new();
    let mut block_starts = Vec::with_capacity(nlist + 1);
    for list in &members {
        block_starts.push((slots.len() / 32) as u64);
        slots.extend_from_slice(list);
        slots.resize(slots.len().div_ceil(32) * 32, EMPTY_SLOT);
    }
    block_starts.push((slots.len() / 32) as u64);
    (slots, block_starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_layout_pads_lists_to_blocks() {
        let assign = vec![1, 0, 1, 1];
        let (slots, starts) = slot_layout(&assign, 3);
        assert_eq!(starts, vec![0, 1, 2, 2]);
        assert_eq!(slots[0], 1);
        assert_eq!(&slots[32..35], &[0, 2, 3]);
        assert!(slots[35..].iter().all(|&s| s == EMPTY_SLOT));
    }
}
