//! The reservoir ([`Reservoir`]): the best `count` slots of a scan, kept without a heap (FAISS's
//! `ReservoirTopN`): hits above the threshold are appended to a buffer of a few counts; a full
//! buffer is cut back to its best `count` in linear time, and the `count`-th best score becomes
//! the kernel's threshold. Slots arrive in increasing order, so a later slot scoring no more
//! than that threshold ranks after the kept ones and can never enter. The order is the heap's:
//! higher score first, ties to the lower slot ([`LowerIdFirst`]), so the set chosen is the one
//! a [`TopK`](super::TopK) keeps (tested). Used by dense search's 4-bit fast-scan paths.

use super::order::{pack, score_bits_of, LowerIdFirst, TieRule};

/// The most slots one block offers at once ([`Reservoir::push_block`]): one bit of a `u32` mask
/// each (a fast-scan block).
pub const BLOCK: usize = 32;

/// A hit as one integer, larger = better: the score above, the slot's complement below (so the
/// lower slot wins a tie): a [`Hit`](super::Hit)`<u32, LowerIdFirst>` packed.
#[inline(always)]
pub fn key(score: u32, slot: u32) -> u64 {
    pack(score, LowerIdFirst::tie_bits(slot, ()))
}

/// The score of a [`key`].
#[inline]
pub fn score_of(key: u64) -> u32 {
    score_bits_of(key)
}

/// The slot of a [`key`].
#[inline]
pub fn slot_of(key: u64) -> u32 {
    LowerIdFirst::id_of(key)
}

/// The best slots of a stream of quantized scores arriving in slot order.
#[derive(Default)]
pub struct Reservoir {
    count: usize,
    /// Keys the buffer holds before a cut.
    buffer_len: usize,
    keys: Vec<u64>,
    threshold: i32,
}

impl Reservoir {
    /// Start over, keeping the best `count` slots (at least 1) in a buffer of `buffer_counts`
    /// counts (at least 2). A cut costs in proportion to the buffer and frees `buffer_counts - 1`
    /// counts of room, so a larger buffer cuts less per slot offered, while the threshold, raised
    /// only by cuts, trails further behind and lets more slots through the kernel's filter: a
    /// scan much longer than the shortlist wants the smaller buffer.
    pub fn reset(&mut self, count: usize, buffer_counts: usize) {
        assert!(count > 0, "a reservoir keeps at least one slot");
        assert!(
            buffer_counts >= 2,
            "a reservoir's buffer holds at least two counts"
        );
        self.count = count;
        self.buffer_len = buffer_counts * count;
        self.keys.clear();
        self.keys.reserve(self.buffer_len + BLOCK);
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
        if self.keys.len() >= self.buffer_len {
            self.cut();
        }
    }

    /// Offer the slots `first_slot + v` of one block for each bit `v` set in `mask` (all larger
    /// than every slot offered before), with their scores; the buffer is cut at most once, after
    /// the whole block, which keeps the same best slots as pushing them one by one.
    #[inline]
    pub fn push_block(&mut self, first_slot: u32, mask: u32, scores: &[u32; BLOCK]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was just detected.
            unsafe { append_block_avx512(&mut self.keys, first_slot, mask, scores) };
        } else {
            append_block(&mut self.keys, first_slot, mask, scores);
        }
        #[cfg(not(target_arch = "x86_64"))]
        append_block(&mut self.keys, first_slot, mask, scores);
        if self.keys.len() >= self.buffer_len {
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
        // The buffer's room for the next cut would otherwise live on with the keys.
        self.keys.shrink_to_fit();
        self.keys
    }
}

/// The keys of the slots `first_slot + v` for each bit `v` of `mask`, appended in slot order.
#[inline]
fn append_block(keys: &mut Vec<u64>, first_slot: u32, mask: u32, scores: &[u32; BLOCK]) {
    let start = keys.len();
    // Sized in one step and filled by index: per-slot pushes' capacity checks cost more.
    keys.resize(start + mask.count_ones() as usize, 0);
    let mut bits = mask;
    for key_out in &mut keys[start..] {
        let v = bits.trailing_zeros();
        bits &= bits - 1;
        *key_out = key(scores[v as usize], first_slot + v);
    }
}

/// [`append_block`] without a loop over the bits: each 8 lanes' keys are built whole, packed
/// by their bits of `mask` and stored (a full register, so room for a block is reserved).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn append_block_avx512(
    keys: &mut Vec<u64>,
    first_slot: u32,
    mask: u32,
    scores: &[u32; BLOCK],
) {
    use std::arch::x86_64::*;
    let start = keys.len();
    keys.reserve(BLOCK);
    let dst = keys.as_mut_ptr().add(start);
    let lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    let mut added = 0;
    for part in 0..BLOCK / 8 {
        let wide =
            _mm512_cvtepu32_epi64(_mm256_loadu_si256(scores.as_ptr().add(8 * part) as *const _));
        // The low half: u32::MAX - slot, as `key` has it.
        let complement = (u32::MAX - first_slot) as i64 - (8 * part) as i64;
        let low = _mm512_sub_epi64(_mm512_set1_epi64(complement), lane);
        let lanes_mask = (mask >> (8 * part)) as u8;
        let packed = _mm512_maskz_compress_epi64(
            lanes_mask,
            _mm512_or_si512(_mm512_slli_epi64::<32>(wide), low),
        );
        _mm512_storeu_si512(dst.add(added) as *mut _, packed);
        added += lanes_mask.count_ones() as usize;
    }
    keys.set_len(start + added);
}

#[cfg(test)]
mod tests {
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
            let counts = [1, 2, 10, 99, n / 2 + 1, n, n + 5];
            for (count, buffer_counts) in counts.into_iter().flat_map(|c| [(c, 2), (c, 3), (c, 4)])
            {
                // As a kernel feeds it: only scores above the current threshold.
                reservoir.reset(count, buffer_counts);
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
                reservoir.reset(count, buffer_counts);
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
                    "by block: n={n} spread={spread} count={count} buffer={buffer_counts}"
                );
                let mut heap = TopK::new(count);
                for (slot, &s) in scores.iter().enumerate() {
                    heap.push(s, slot as u32);
                }
                let mut want: Vec<u32> = heap.into_sorted().iter().map(|h| h.id).collect();
                want.sort_unstable();
                assert_eq!(
                    got, want,
                    "n={n} spread={spread} count={count} buffer={buffer_counts}"
                );
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx512_block_append_equals_the_bit_loop() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        let mut rng = SplitMix64::new(9);
        let scores: [u32; BLOCK] = std::array::from_fn(|_| rng.below(65_536) as u32);
        for first_slot in [0, 32, u32::MAX - 31] {
            for mask in [
                0,
                1,
                u32::MAX,
                1 << 31,
                0x8000_0001,
                rng.below(1 << 32) as u32,
            ] {
                let (mut want, mut got) = (vec![7u64], vec![7u64]);
                append_block(&mut want, first_slot, mask, &scores);
                // SAFETY: AVX-512F was detected above.
                unsafe { append_block_avx512(&mut got, first_slot, mask, &scores) };
                assert_eq!(got, want, "first_slot={first_slot} mask={mask:#x}");
            }
        }
    }
}
