//! The best slots of a whole array of quantized fast-scan scores, without a heap: the scores are
//! 16-bit (see [`super::lut`]), so two 256-bin histograms (high byte, then the low byte within
//! the boundary bucket) find the score of the `count`-th best; one pass then keeps every slot
//! above it and the first slots at it. The order is the heap's: higher score first, ties to
//! the lower slot, so the set chosen is the one a [`TopK`](crate::topk::TopK) would keep.

/// Appends to `out`, in slot order, the `count` best slots of `scores` (higher score first, ties
/// to the lower slot); all of them when there are no more than `count`.
pub fn best_slots(scores: &[u16], count: usize, out: &mut Vec<u32>) {
    if count >= scores.len() {
        out.extend(0..scores.len() as u32);
        return;
    }
    if count == 0 {
        return;
    }
    let mut high = [0u32; 256];
    for &s in scores {
        high[(s >> 8) as usize] += 1;
    }
    let (bucket, above_bucket) = boundary(&high, count);
    let mut low = [0u32; 256];
    for &s in scores {
        if (s >> 8) as usize == bucket {
            low[(s & 0xff) as usize] += 1;
        }
    }
    let (entry, above_entry) = boundary(&low, count - above_bucket);
    let cut = (bucket << 8 | entry) as u16;
    let mut ties = count - above_bucket - above_entry;
    out.reserve(count);
    for (slot, &s) in scores.iter().enumerate() {
        if s > cut {
            out.push(slot as u32);
        } else if s == cut && ties > 0 {
            out.push(slot as u32);
            ties -= 1;
        }
    }
}

/// The bin holding the `count`-th largest value of a histogram, and how many values lie in the
/// bins above it (fewer than `count`).
fn boundary(hist: &[u32; 256], count: usize) -> (usize, usize) {
    let mut above = 0usize;
    for bin in (0..256).rev() {
        let here = hist[bin] as usize;
        if above + here >= count {
            return (bin, above);
        }
        above += here;
    }
    unreachable!("the histogram holds at least `count` values")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use crate::topk::TopK;

    #[test]
    fn chooses_the_heaps_set_ties_included() {
        let mut rng = SplitMix64::new(3);
        for (n, spread) in [
            (1, 5),
            (50, 3),
            (1000, 2),
            (1000, 70_000),
            (5000, 300),
            (777, 1),
        ] {
            let scores: Vec<u16> = (0..n)
                .map(|_| (rng.below(spread) as u32).min(65535) as u16)
                .collect();
            for count in [0, 1, 2, 10, 99, n / 2, n - 1, n, n + 5] {
                let mut got = Vec::new();
                best_slots(&scores, count, &mut got);
                let mut heap = TopK::new(count);
                for (slot, &s) in scores.iter().enumerate() {
                    heap.push(s as u32, slot as u32);
                }
                let mut want: Vec<u32> = heap.into_sorted().iter().map(|h| h.id).collect();
                want.sort_unstable();
                assert_eq!(got, want, "n={n} spread={spread} count={count}");
            }
        }
    }
}
