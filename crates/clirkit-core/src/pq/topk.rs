//! Bounded top-k selection under clirkit's deterministic order for vector search: higher score
//! first, then lower internal id. Because the order is total, the top-k of a collection equals
//! the merge of the top-k of any partition of it, so results do not depend on thread count.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A score type usable in [`TopK`]: a total order (floats via `total_cmp`).
pub trait Score: Copy + Send {
    fn order(&self, other: &Self) -> Ordering;
}

impl Score for f32 {
    fn order(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

impl Score for u32 {
    fn order(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
}

/// A candidate; in the heap, "greater" means "worse", so the heap's top is the one to evict.
#[derive(Clone, Copy, Debug)]
pub struct Hit<S> {
    pub score: S,
    pub id: u32,
}

impl<S: Score> Hit<S> {
    /// `Less` when `self` ranks before `other`.
    pub fn rank_cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .order(&self.score)
            .then_with(|| self.id.cmp(&other.id))
    }
}

impl<S: Score> PartialEq for Hit<S> {
    fn eq(&self, other: &Self) -> bool {
        self.rank_cmp(other) == Ordering::Equal
    }
}
impl<S: Score> Eq for Hit<S> {}
impl<S: Score> PartialOrd for Hit<S> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<S: Score> Ord for Hit<S> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank_cmp(other)
    }
}

/// The best `k` hits seen so far.
pub struct TopK<S: Score> {
    k: usize,
    heap: BinaryHeap<Hit<S>>,
}

impl<S: Score> TopK<S> {
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
    pub fn worst(&self) -> Option<&Hit<S>> {
        if self.is_full() {
            self.heap.peek()
        } else {
            None
        }
    }

    #[inline]
    pub fn push(&mut self, score: S, id: u32) {
        let hit = Hit { score, id };
        if self.heap.len() < self.k {
            self.heap.push(hit);
        } else if let Some(mut top) = self.heap.peek_mut() {
            if hit < *top {
                *top = hit;
            }
        }
    }

    pub fn merge(&mut self, other: TopK<S>) {
        for h in other.heap {
            self.push(h.score, h.id);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Hit<S>> + '_ {
        self.heap.iter()
    }

    /// Hits best first.
    pub fn into_sorted(self) -> Vec<Hit<S>> {
        self.heap.into_sorted_vec()
    }
}

/// Work items hold one heap per query of their query chunk, `slices` items per chunk (one per
/// database slice) in order: merge each chunk's slices into one heap per query.
pub fn merge_slices<S: Score>(partial: Vec<Vec<TopK<S>>>, slices: usize, k: usize) -> Vec<TopK<S>> {
    let mut out = Vec::new();
    for group in partial.chunks(slices) {
        let mut merged: Vec<TopK<S>> = group[0].iter().map(|_| TopK::new(k)).collect();
        for heaps in group {
            for (m, h) in merged.iter_mut().zip(heaps) {
                for hit in h.iter() {
                    m.push(hit.score, hit.id);
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
