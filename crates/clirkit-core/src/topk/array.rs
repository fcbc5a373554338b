//! The best `k` of a dense score array (exhaustive scoring), without a heap: selection on the
//! score finds the k-th best, then one sort of packed hits ([`Hit::packed`]) orders the ids at or
//! above it.

use super::order::{score_bits_of, HigherKeyFirst, Hit, Score};

/// The best `k` of the ids with a positive sum (`sums[id]`: f64 sums of f32 scores, or exact
/// integer sums), best first, ties to the higher `key(id)`. A zero sum means "not matched"
/// (every contribution is positive). Selection on the f32 score finds the k-th best; the ids at
/// or above it (ties included) are then ordered by one sort of packed hits (the score's order
/// bits over the key, [`Hit::packed`]).
pub fn select_positive<T: Copy + Into<f64>>(
    sums: &[T],
    k: usize,
    key: impl Fn(u32) -> u32,
) -> Vec<Hit<f32, HigherKeyFirst>> {
    if k == 0 {
        return Vec::new();
    }
    let mut candidates: Vec<(f32, u32)> = sums
        .iter()
        .enumerate()
        .map(|(d, &s)| (s.into(), d as u32))
        .filter(|&(s, _)| s > 0.0)
        .map(|(s, d)| (s as f32, d))
        .collect();
    if candidates.len() > k {
        let (_, kth, _) = candidates.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
        let floor = kth.0;
        candidates.retain(|c| c.0 >= floor);
    }
    let mut keyed: Vec<(u64, u32)> = candidates
        .into_iter()
        .map(|(score, id)| {
            let hit: Hit<f32, HigherKeyFirst> = Hit {
                score,
                id,
                key: key(id),
            };
            (hit.packed(), id)
        })
        .collect();
    keyed.sort_unstable_by_key(|&(packed, _)| std::cmp::Reverse(packed));
    keyed.truncate(k);
    keyed
        .into_iter()
        .map(|(packed, id)| Hit {
            score: f32::from_order_bits(score_bits_of(packed)),
            id,
            key: packed as u32,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topk::TopK;

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
