//! The canonical order of a query's fused documents: score descending, then id descending.
//!
//! Documents are sorted on integer keys: the score's order key, with the document's position in
//! the low bits. Long lists are sorted by a two-pass LSD radix sort on the top 22 bits in which
//! their keys differ (both digit histograms counted in one pass; about a third of the instructions
//! of `sort_unstable` on the same keys), short ones by `sort_unstable`. Only documents sharing the
//! sorted bits (in practice exact score ties, with RRF mostly pairs) are then put in exact order by
//! the full score and the id.

use std::cmp::Ordering;

/// Bits of one radix-sort digit; two digits are sorted.
const DIGIT_BITS: u32 = 11;
const DIGITS: usize = 1 << DIGIT_BITS;
/// Shortest list for the radix sort: below it, clearing and summing the digit counts costs more
/// than `sort_unstable`.
const RADIX_MIN_LEN: usize = 1024;

/// A worker's reusable buffers for ordering fused lists.
pub(crate) struct CanonicalOrder {
    keys: Vec<u64>,
    scratch: Vec<u64>,
    counts: Box<[[u32; DIGITS]; 2]>,
    index_bits: u32,
}

impl Default for CanonicalOrder {
    fn default() -> Self {
        CanonicalOrder {
            keys: Vec::new(),
            scratch: Vec::new(),
            counts: Box::new([[0; DIGITS]; 2]),
            index_bits: 0,
        }
    }
}

impl CanonicalOrder {
    /// Order positions `0..n` canonically; `score(i)` is the score of position `i` and
    /// `cmp_ids(a, b)` the byte order of the ids of positions `a` and `b`. Read the result with
    /// [`positions`](Self::positions).
    pub(crate) fn sort(
        &mut self,
        n: usize,
        score: impl Fn(usize) -> f64,
        cmp_ids: impl Fn(usize, usize) -> Ordering,
    ) {
        let index_bits = usize::BITS - (n.max(2) - 1).leading_zeros();
        self.index_bits = index_bits;
        let index_mask = (1u64 << index_bits) - 1;
        let (mut all_and, mut all_or) = (u64::MAX, 0u64);
        self.keys.clear();
        self.keys.extend((0..n).map(|i| {
            let key = (descending_key(score(i)) & !index_mask) | i as u64;
            all_and &= key;
            all_or |= key;
            key
        }));
        // Keys equal from bit `sorted_from` up still need the exact comparison.
        let varying = (all_and ^ all_or) & !index_mask;
        let sorted_from = if n >= RADIX_MIN_LEN && varying != 0 {
            let top = u64::BITS - varying.leading_zeros();
            let low = top.saturating_sub(2 * DIGIT_BITS).max(index_bits);
            self.radix_sort(low);
            low
        } else {
            self.keys.sort_unstable();
            index_bits
        };
        self.order_ties(sorted_from, score, cmp_ids);
    }

    /// Stable LSD radix sort of the keys on bits `low..low + 22`: both digits' counts in one
    /// pass, then one scatter per digit (keys to scratch, scratch back to keys).
    fn radix_sort(&mut self, low: u32) {
        let n = self.keys.len();
        self.scratch.resize(n, 0);
        let digit = |key: u64, d: u32| ((key >> (low + d * DIGIT_BITS)) as usize) & (DIGITS - 1);
        let [first, second] = &mut *self.counts;
        first.fill(0);
        second.fill(0);
        for &key in &self.keys {
            first[digit(key, 0)] += 1;
            second[digit(key, 1)] += 1;
        }
        for counts in [&mut *first, &mut *second] {
            let mut sum = 0;
            for count in counts.iter_mut() {
                (*count, sum) = (sum, sum + *count);
            }
        }
        scatter(&self.keys, &mut self.scratch, first, |key| digit(key, 0));
        scatter(&self.scratch, &mut self.keys, second, |key| digit(key, 1));
    }

    /// The sorted positions.
    pub(crate) fn positions(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        let index_mask = (1u64 << self.index_bits) - 1;
        self.keys.iter().map(move |&k| (k & index_mask) as usize)
    }

    /// Put each run of keys equal from bit `sorted_from` up in exact order: score, then id,
    /// descending.
    fn order_ties(
        &mut self,
        sorted_from: u32,
        score: impl Fn(usize) -> f64,
        cmp_ids: impl Fn(usize, usize) -> Ordering,
    ) {
        let index_mask = (1u64 << self.index_bits) - 1;
        let exact = |a: &u64, b: &u64| {
            let (a, b) = ((a & index_mask) as usize, (b & index_mask) as usize);
            descending_key(score(a))
                .cmp(&descending_key(score(b)))
                .then_with(|| cmp_ids(b, a))
        };
        let keys = &mut self.keys[..];
        let n = keys.len();
        let tied = |a: u64, b: u64| (a ^ b) >> sorted_from == 0;
        let mut next = 1;
        while next < n {
            // Most neighbours differ: this test is the whole cost for them.
            if !tied(keys[next - 1], keys[next]) {
                next += 1;
                continue;
            }
            let begin = next - 1;
            let mut end = next + 1;
            while end < n && tied(keys[begin], keys[end]) {
                end += 1;
            }
            if end - begin == 2 {
                if exact(&keys[begin], &keys[begin + 1]).is_gt() {
                    keys.swap(begin, begin + 1);
                }
            } else {
                keys[begin..end].sort_unstable_by(exact);
            }
            next = end + 1;
        }
    }
}

/// Move each key of `from` to its digit's next slot in `to`; `starts` holds each digit's first slot
/// (the prefix sums of the digit counts over `from`).
#[inline]
fn scatter(from: &[u64], to: &mut [u64], starts: &mut [u32; DIGITS], digit: impl Fn(u64) -> usize) {
    assert_eq!(from.len(), to.len());
    for &key in from {
        let slot = &mut starts[digit(key)];
        // SAFETY: the starts are prefix sums of this digit's counts over `from`, so every slot
        // taken is below `from.len() == to.len()` and taken once.
        unsafe { *to.get_unchecked_mut(*slot as usize) = key };
        *slot += 1;
    }
}

/// An integer whose ascending order is `f64::total_cmp`'s descending order.
#[inline]
fn descending_key(score: f64) -> u64 {
    let bits = score.to_bits() as i64;
    let ordered = (bits ^ (((bits >> 63) as u64) >> 1) as i64) as u64 ^ (1 << 63);
    !ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descending_key_orders_as_total_cmp_reversed() {
        let xs = [
            -f64::MAX,
            -1.5,
            -0.0,
            0.0,
            1e-300,
            0.5,
            0.5000000000000001,
            3.0,
        ];
        for a in xs {
            for b in xs {
                assert_eq!(
                    descending_key(a).cmp(&descending_key(b)),
                    b.total_cmp(&a),
                    "{a} {b}"
                );
            }
        }
    }

    /// Positions stand for ids: on equal scores the larger position comes first.
    fn check(scores: &[f64]) {
        let mut order = CanonicalOrder::default();
        order.sort(scores.len(), |i| scores[i], |a, b| a.cmp(&b));
        let got: Vec<usize> = order.positions().collect();
        let mut expected: Vec<usize> = (0..scores.len()).collect();
        expected.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(b.cmp(&a)));
        assert_eq!(got, expected, "{} scores", scores.len());
    }

    #[test]
    fn equals_a_comparison_sort() {
        let mut seed = 0x2545F4914F6CDD1Du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in [0usize, 1, 2, 3, 100, 1023, 1024, 3000] {
            // Near ties (one ulp apart), exact ties (pairs and larger groups), wide ranges,
            // negative scores, and zeros of both signs.
            let ulps: Vec<f64> = (0..n)
                .map(|_| 1.0 + (next() % 4) as f64 * f64::EPSILON)
                .collect();
            let ranks: Vec<f64> = (0..n)
                .map(|_| 1.0 / (60.0 + (next() % 50) as f64))
                .collect();
            let wide: Vec<f64> = (0..n)
                .map(|_| f64::from_bits(next() >> 2) * if next() % 2 == 0 { -1.0 } else { 1.0 })
                .collect();
            let zeros: Vec<f64> = (0..n)
                .map(|_| [0.0, -0.0, 1e-300][next() as usize % 3])
                .collect();
            for scores in [&ulps, &ranks, &wide, &zeros] {
                check(scores);
            }
        }
        check(&[f64::MAX, -f64::MAX, 0.0, f64::MAX, 1.0]);
    }
}
