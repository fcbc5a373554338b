//! The buffer ([`BufferTopK`]): the best k hits in a buffer of 2k cut back to its best k when
//! full, amortized O(1) per candidate where a heap pays a sift per replacement, with a threshold
//! that lags (BM25's and the impact index's document-at-a-time search above a small k). The
//! order is [`HigherKeyFirst`]'s, the tie key looked up lazily through [`TieKeys`].

use super::order::{pack, score_bits_of, HigherKeyFirst, Score, TieRule};

/// Where a hit's tie key comes from when the buffer needs it (BM25: the doc-id rank, a load
/// from a table as long as the collection).
pub trait TieKeys {
    fn key(&self, id: u32) -> u32;
}

/// The best k hits in a buffer of 2k cut back to its best k when full. Each hit is held as one
/// number that orders like the hits do (its score's order bits over its tie key, a
/// [`HigherKeyFirst`] packed hit), so the cut compares integers. The tie key (a load that misses
/// the cache) is looked up at once only for a hit that ties the k-th score; the others' are
/// looked up together at the cut, where the loads do not wait on each other.
pub struct BufferTopK<T: TieKeys> {
    k: usize,
    /// (packed hit, id).
    buf: Vec<(u64, u32)>,
    /// The packed k-th best hit at the last cut; a hit whose packing is not above it can never
    /// be in the top k.
    floor: Option<u64>,
    keys: T,
}

/// The low half of a buffered hit before its tie key is looked up (keys are below the document
/// count, itself below `u32::MAX`).
const KEY_UNKNOWN: u32 = u32::MAX;

#[inline(always)]
fn order_of(score: f32, key: u32) -> u64 {
    pack(score.order_bits(), HigherKeyFirst::tie_bits(0, key))
}

impl<T: TieKeys> BufferTopK<T> {
    pub fn new(k: usize, keys: T) -> Self {
        BufferTopK {
            k,
            buf: Vec::with_capacity(2 * k.min(1 << 20)),
            floor: None,
            keys,
        }
    }

    fn look_up_keys(&mut self) {
        for (order, id) in &mut self.buf {
            if *order as u32 == KEY_UNKNOWN {
                *order = (*order & !(u32::MAX as u64)) | self.keys.key(*id) as u64;
            }
        }
    }

    /// Keep the best k; the k-th of them is the new floor, its score returned.
    fn cut(&mut self) -> Option<f32> {
        self.look_up_keys();
        let kth = if self.buf.len() > self.k {
            self.buf
                .select_nth_unstable_by(self.k - 1, |a, b| b.0.cmp(&a.0));
            self.buf.truncate(self.k);
            self.buf[self.k - 1].0
        } else {
            self.buf.iter().map(|h| h.0).min()?
        };
        self.floor = Some(kth);
        Some(f32::from_order_bits(score_bits_of(kth)))
    }

    /// Offer a scored hit; the k-th best score when it changed (at a cut).
    #[inline]
    pub fn push(&mut self, score: f32, id: u32) -> Option<f32> {
        let mut order = order_of(score, KEY_UNKNOWN);
        if let Some(floor) = self.floor {
            if order >> 32 < floor >> 32 {
                return None;
            }
            if order >> 32 == floor >> 32 {
                order = order_of(score, self.keys.key(id));
                if order <= floor {
                    return None;
                }
            }
        }
        self.buf.push((order, id));
        let first_k = self.floor.is_none() && self.buf.len() == self.k;
        if first_k || self.buf.len() >= 2 * self.k {
            return self.cut();
        }
        None
    }

    /// The best k hits offered, best first, as (score, id).
    pub fn into_sorted(mut self) -> impl Iterator<Item = (f32, u32)> {
        self.look_up_keys();
        self.buf
            .sort_unstable_by_key(|&(order, _)| std::cmp::Reverse(order));
        self.buf.truncate(self.k);
        self.buf
            .into_iter()
            .map(|(order, id)| (f32::from_order_bits(score_bits_of(order)), id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use crate::topk::{Hit, TopK};

    impl<F: Fn(u32) -> u32> TieKeys for F {
        fn key(&self, id: u32) -> u32 {
            self(id)
        }
    }

    #[test]
    fn keeps_the_heaps_hits_in_the_heaps_order_ties_included() {
        let mut rng = SplitMix64::new(11);
        for (n, spread) in [(1, 3), (100, 2), (1000, 7), (5000, 1000), (3000, 1)] {
            let scores: Vec<f32> = (0..n).map(|_| rng.below(spread) as f32 * 0.25).collect();
            // A tie key that is a permutation of the ids, as doc-id ranks are.
            let key = move |id: u32| (id * 7919) % n as u32;
            for k in [1, 2, 10, 64, 65, n / 2 + 1, n, n + 3] {
                let mut buffer = BufferTopK::new(k, key);
                let mut heap: TopK<f32, HigherKeyFirst> = TopK::new(k);
                for (id, &score) in scores.iter().enumerate() {
                    let id = id as u32;
                    buffer.push(score, id);
                    heap.push_hit(Hit {
                        score,
                        id,
                        key: key(id),
                    });
                }
                let want: Vec<(f32, u32)> =
                    heap.into_sorted().iter().map(|h| (h.score, h.id)).collect();
                let got: Vec<(f32, u32)> = buffer.into_sorted().collect();
                assert_eq!(got, want, "n={n} spread={spread} k={k}");
            }
        }
    }
}
