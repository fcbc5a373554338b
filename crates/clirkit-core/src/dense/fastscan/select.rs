//! The best `count` slots of a scan, kept without a heap (FAISS's reservoir idea): hits above
//! the threshold are appended to a buffer of `2 * count`; a full buffer is cut back to its best
//! `count` in linear time, and the `count`-th best score becomes the kernel's threshold. Slots
//! arrive in increasing order, so a later slot scoring no more than that threshold ranks after
//! the kept ones and can never enter. The order is the heap's: higher score first, ties to the
//! lower slot, so the set chosen is the one a [`TopK`](crate::topk::TopK) keeps.

/// A hit as one integer, larger = better: the score above, the slot's complement below (so the
/// lower slot wins a tie).
#[inline(always)]
pub fn key(score: u32, slot: u32) -> u64 {
    (score as u64) << 32 | (u32::MAX - slot) as u64
}

/// The score of a [`key`].
#[inline]
pub fn score_of(key: u64) -> u32 {
    (key >> 32) as u32
}

/// The slot of a [`key`].
#[inline]
pub fn slot_of(key: u64) -> u32 {
    u32::MAX - key as u32
}

/// The best slots of a stream of quantized scores arriving in slot order.
#[derive(Default)]
pub struct Reservoir {
    count: usize,
    keys: Vec<u64>,
    threshold: i32,
}

impl Reservoir {
    /// Start over, keeping the best `count` slots (at least 1).
    pub fn reset(&mut self, count: usize) {
        assert!(count > 0, "a reservoir keeps at least one slot");
        self.count = count;
        self.keys.clear();
        self.keys.reserve(2 * count + super::BLOCK);
        self.threshold = -1;
    }

    /// Scores that do not exceed this cannot enter any more (-1 until the first cut).
    #[inline]
    pub fn threshold(&self) -> i32 {
        self.threshold
    }

    /// Offer a slot (larger than every slot offered before) and its score.
    #[inline]
    pub fn push(&mut self, score: u32, slot: u32) {
        self.keys.push(key(score, slot));
        if self.keys.len() >= 2 * self.count {
            self.cut();
        }
    }

    /// Offer the slots `first_slot + v` of one block for each bit `v` set in `mask` (all larger
    /// than every slot offered before), with their scores; the buffer is cut at most once, after
    /// the whole block, which keeps the same best slots as pushing them one by one.
    #[inline]
    pub fn push_block(&mut self, first_slot: u32, mask: u32, scores: &[u32; super::BLOCK]) {
        let start = self.keys.len();
        // Sized in one step and filled by index: the per-slot pushes' capacity checks were a
        // tenth of the scan at k = 1000.
        self.keys.resize(start + mask.count_ones() as usize, 0);
        let mut bits = mask;
        for key_out in &mut self.keys[start..] {
            let v = bits.trailing_zeros();
            bits &= bits - 1;
            *key_out = key(scores[v as usize], first_slot + v);
        }
        if self.keys.len() >= 2 * self.count {
            self.cut();
        }
    }

    fn cut(&mut self) {
        let c = self.count;
        self.keys.select_nth_unstable_by(c - 1, |a, b| b.cmp(a));
        self.keys.truncate(c);
        self.threshold = score_of(self.keys[c - 1]) as i32;
    }

    /// Append the best `count` slots offered (all of them if fewer) to `out`, in no order.
    pub fn drain_into(&mut self, out: &mut Vec<u32>) {
        if self.keys.len() > self.count {
            self.cut();
        }
        out.extend(self.keys.drain(..).map(slot_of));
    }

    /// The best `count` hits offered (all of them if fewer) as [`key`]s, in no order.
    pub fn into_keys(mut self) -> Vec<u64> {
        if self.keys.len() > self.count {
            self.cut();
        }
        self.keys
    }
}

#[cfg(test)]
mod tests {
    use super::super::BLOCK;
    use super::*;
    use crate::rng::SplitMix64;
    use crate::topk::TopK;

    #[test]
    fn keeps_the_heaps_set_ties_included_whatever_the_threshold_filters() {
        let mut rng = SplitMix64::new(3);
        let mut reservoir = Reservoir::default();
        for (n, spread) in [
            (1, 5),
            (50, 3),
            (1000, 2),
            (1000, 65_536),
            (5000, 300),
            (777, 1),
        ] {
            let scores: Vec<u32> = (0..n).map(|_| rng.below(spread) as u32).collect();
            for count in [1, 2, 10, 99, n / 2 + 1, n, n + 5] {
                // As a kernel feeds it: only scores above the current threshold.
                reservoir.reset(count);
                for (slot, &s) in scores.iter().enumerate() {
                    if s as i64 > reservoir.threshold() as i64 {
                        reservoir.push(s, slot as u32);
                    }
                }
                let mut got = Vec::new();
                reservoir.drain_into(&mut got);
                got.sort_unstable();
                // As the small path feeds it: whole blocks, masked by the threshold.
                let mut by_block = Vec::new();
                reservoir.reset(count);
                for (b, block) in scores.chunks(BLOCK).enumerate() {
                    let mut block_scores = [0u32; BLOCK];
                    block_scores[..block.len()].copy_from_slice(block);
                    let mask = (0..block.len())
                        .filter(|&v| block[v] as i64 > reservoir.threshold() as i64)
                        .fold(0u32, |mask, v| mask | 1 << v);
                    reservoir.push_block((b * BLOCK) as u32, mask, &block_scores);
                }
                reservoir.drain_into(&mut by_block);
                by_block.sort_unstable();
                assert_eq!(
                    by_block, got,
                    "by block: n={n} spread={spread} count={count}"
                );
                let mut heap = TopK::new(count);
                for (slot, &s) in scores.iter().enumerate() {
                    heap.push(s, slot as u32);
                }
                let mut want: Vec<u32> = heap.into_sorted().iter().map(|h| h.id).collect();
                want.sort_unstable();
                assert_eq!(got, want, "n={n} spread={spread} count={count}");
            }
        }
    }
}
