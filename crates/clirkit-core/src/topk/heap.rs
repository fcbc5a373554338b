//! The heap ([`TopK`]): the best `k` hits seen so far, the k-th exact after every push, for
//! scans that filter candidates against it (flat and IVF search, multi-vector search, BM25's
//! document-at-a-time search up to a small k) and for merging per-thread results.

use super::order::{Hit, LowerIdFirst, Score, TieRule};
use std::collections::BinaryHeap;

/// The best `k` hits seen so far, in a heap.
pub struct TopK<S: Score, R: TieRule = LowerIdFirst> {
    k: usize,
    heap: BinaryHeap<Hit<S, R>>,
}

impl<S: Score, R: TieRule> TopK<S, R> {
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.min(1 << 16) + 1),
        }
    }

    pub fn is_full(&self) -> bool {
        self.heap.len() >= self.k
    }

    /// The worst kept hit once full: a new hit must rank before it to enter.
    pub fn worst(&self) -> Option<&Hit<S, R>> {
        if self.is_full() {
            self.heap.peek()
        } else {
            None
        }
    }

    #[inline]
    pub fn push_hit(&mut self, hit: Hit<S, R>) {
        if self.heap.len() < self.k {
            self.heap.push(hit);
        } else if let Some(mut top) = self.heap.peek_mut() {
            if hit < *top {
                *top = hit;
            }
        }
    }

    pub fn merge(&mut self, other: TopK<S, R>) {
        for h in other.heap {
            self.push_hit(h);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Hit<S, R>> + '_ {
        self.heap.iter()
    }

    /// Hits best first.
    pub fn into_sorted(self) -> Vec<Hit<S, R>> {
        self.heap.into_sorted_vec()
    }
}

impl<S: Score> TopK<S, LowerIdFirst> {
    #[inline]
    pub fn push(&mut self, score: S, id: u32) {
        self.push_hit(Hit { score, id, key: () });
    }
}

/// Work items hold one heap per query of their query chunk, `slices` items per chunk (one per
/// database slice) in order: merge each chunk's slices into one heap per query.
pub fn merge_slices<S: Score, R: TieRule>(
    partial: Vec<Vec<TopK<S, R>>>,
    slices: usize,
    k: usize,
) -> Vec<TopK<S, R>> {
    let mut out = Vec::new();
    for group in partial.chunks(slices) {
        let mut merged: Vec<TopK<S, R>> = group[0].iter().map(|_| TopK::new(k)).collect();
        for heaps in group {
            for (m, h) in merged.iter_mut().zip(heaps) {
                for hit in h.iter() {
                    m.push_hit(*hit);
                }
            }
        }
        out.extend(merged);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_best_with_id_tie_break() {
        let mut t = TopK::new(3);
        for (s, id) in [
            (1.0f32, 5),
            (3.0, 1),
            (2.0, 9),
            (3.0, 0),
            (2.0, 2),
            (0.5, 3),
        ] {
            t.push(s, id);
        }
        let got: Vec<(f32, u32)> = t.into_sorted().iter().map(|h| (h.score, h.id)).collect();
        assert_eq!(got, vec![(3.0, 0), (3.0, 1), (2.0, 2)]);
    }

    #[test]
    fn merge_of_partitions_equals_whole() {
        let scores: Vec<u32> = (0..200u32).map(|i| (i * 7919) % 13).collect();
        let mut whole = TopK::new(10);
        for (i, &s) in scores.iter().enumerate() {
            whole.push(s, i as u32);
        }
        let mut a = TopK::new(10);
        let mut b = TopK::new(10);
        for (i, &s) in scores.iter().enumerate() {
            if i % 3 == 0 {
                a.push(s, i as u32)
            } else {
                b.push(s, i as u32)
            }
        }
        a.merge(b);
        let ids = |t: TopK<u32>| t.into_sorted().iter().map(|h| h.id).collect::<Vec<_>>();
        assert_eq!(ids(whole), ids(a));
    }
}
