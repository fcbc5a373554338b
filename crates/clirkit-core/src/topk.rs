//! Bounded top-k selection, shared by BM25 and dense search.
//!
//! Every search ranks by a total order: higher score first, then a tie rule, given as a type
//! parameter ([`TieRule`]):
//! - [`LowerIdFirst`] (dense search): the lower internal id first;
//! - [`HigherKeyFirst`] (BM25): the higher key first; BM25's key is the document's position in
//!   byte order of the string ids, so ties come out in canonical order (doc id descending).
//!
//! Because the order is total, the top-k of a collection equals the merge of the top-k of any
//! partition of it, so results do not depend on the thread count or the selection used. The
//! selections here:
//! - [`TopK`]: a binary heap whose k-th best is exact after every push, for scans that filter
//!   candidates against it (fast-scan thresholds) and merge per-thread results;
//! - [`select_positive`]: the best k of a dense accumulator, without a heap.
//!
//! Two searches keep selections of their own, tied to their data: BM25's document-at-a-time
//! buffer of packed (score, rank) orders (`postings::query`, tested equal to exhaustive scoring),
//! and fast-scan's reservoir of quantized scores (`dense::fastscan::select`, tested against
//! [`TopK`]).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A score type usable in a top-k: a total order (floats via `total_cmp`).
pub trait Score: Copy + Send {
    fn order(&self, other: &Self) -> Ordering;
}

impl Score for f32 {
    #[inline(always)]
    fn order(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

impl Score for u32 {
    #[inline(always)]
    fn order(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
}

/// How hits of equal score are ordered.
pub trait TieRule: Copy + Send + std::fmt::Debug {
    /// What a hit carries for the rule besides its id (nothing when the id decides).
    type Key: Copy + Send + std::fmt::Debug;
    /// `Less` when, at equal scores, the hit (`a_id`, `a_key`) ranks before (`b_id`, `b_key`).
    fn cmp(a_id: u32, a_key: Self::Key, b_id: u32, b_key: Self::Key) -> Ordering;
}

/// Ties go to the lower id (dense search).
#[derive(Clone, Copy, Debug)]
pub struct LowerIdFirst;

impl TieRule for LowerIdFirst {
    type Key = ();
    #[inline(always)]
    fn cmp(a_id: u32, _: (), b_id: u32, _: ()) -> Ordering {
        a_id.cmp(&b_id)
    }
}

/// Ties go to the higher key (BM25, whose key is the doc-id rank).
#[derive(Clone, Copy, Debug)]
pub struct HigherKeyFirst;

impl TieRule for HigherKeyFirst {
    type Key = u32;
    #[inline(always)]
    fn cmp(_: u32, a_key: u32, _: u32, b_key: u32) -> Ordering {
        b_key.cmp(&a_key)
    }
}

/// A candidate; in the heap, "greater" means "worse", so the heap's top is the one to evict.
#[derive(Clone, Copy, Debug)]
pub struct Hit<S, R: TieRule = LowerIdFirst> {
    pub score: S,
    pub id: u32,
    pub key: R::Key,
}

impl<S: Score, R: TieRule> Hit<S, R> {
    /// `Less` when `self` ranks before `other`.
    #[inline(always)]
    pub fn rank_cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .order(&self.score)
            .then_with(|| R::cmp(self.id, self.key, other.id, other.key))
    }
}

impl<S: Score, R: TieRule> PartialEq for Hit<S, R> {
    fn eq(&self, other: &Self) -> bool {
        self.rank_cmp(other) == Ordering::Equal
    }
}
impl<S: Score, R: TieRule> Eq for Hit<S, R> {}
impl<S: Score, R: TieRule> PartialOrd for Hit<S, R> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<S: Score, R: TieRule> Ord for Hit<S, R> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank_cmp(other)
    }
}

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

/// The best `k` of the ids with a positive sum (`sums[id]`), best first, ties to the higher
/// `key(id)`. A zero sum means "not matched" (every contribution is positive). Selection on the
/// f32 score finds the k-th best; the ids at or above it (ties included) are then ordered by
/// one sort of packed keys: positive f32 bits order like the floats, and the key below them
/// breaks ties.
pub fn select_positive(
    sums: &[f64],
    k: usize,
    key: impl Fn(u32) -> u32,
) -> Vec<Hit<f32, HigherKeyFirst>> {
    if k == 0 {
        return Vec::new();
    }
    let mut candidates: Vec<(f32, u32)> = sums
        .iter()
        .enumerate()
        .filter(|(_, &s)| s > 0.0)
        .map(|(d, &s)| (s as f32, d as u32))
        .collect();
    if candidates.len() > k {
        let (_, kth, _) = candidates.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
        let floor = kth.0;
        candidates.retain(|c| c.0 >= floor);
    }
    let mut keyed: Vec<(u64, u32)> = candidates
        .into_iter()
        .map(|(score, id)| (((score.to_bits() as u64) << 32) | key(id) as u64, id))
        .collect();
    keyed.sort_unstable_by_key(|&(packed, _)| std::cmp::Reverse(packed));
    keyed.truncate(k);
    keyed
        .into_iter()
        .map(|(packed, id)| Hit {
            score: f32::from_bits((packed >> 32) as u32),
            id,
            key: packed as u32,
        })
        .collect()
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

    #[test]
    fn heap_and_dense_selection_agree_under_the_key_rule() {
        // Scores with many ties; the key (here 1000 - id) decides them, higher first.
        let sums: Vec<f64> = (0..500u32)
            .map(|i| ((i * 7919) % 17) as f64 * 0.5)
            .collect();
        let key = |id: u32| 1000 - id;
        for k in [1, 7, 64, 600] {
            let mut heap: TopK<f32, HigherKeyFirst> = TopK::new(k);
            for (id, &s) in sums.iter().enumerate() {
                let id = id as u32;
                if s > 0.0 {
                    heap.push_hit(Hit {
                        score: s as f32,
                        id,
                        key: key(id),
                    });
                }
            }
            let pairs = |hits: Vec<Hit<f32, HigherKeyFirst>>| -> Vec<(f32, u32)> {
                hits.iter().map(|h| (h.score, h.id)).collect()
            };
            let expected = pairs(heap.into_sorted());
            assert_eq!(pairs(select_positive(&sums, k, key)), expected, "k={k}");
        }
    }
}
