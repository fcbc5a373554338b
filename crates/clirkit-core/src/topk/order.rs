//! The order every top-k keeps: higher score first, then a tie rule ([`TieRule`]); and the
//! same order packed into one `u64` (larger = better) for the selections that compare integers
//! (the buffer, the reservoir, the dense-array selection, dense search's shortlist merges).
//!
//! A packed hit is the score's order bits ([`Score::order_bits`]) above the tie rule's bits
//! ([`TieRule::tie_bits`]), so comparing packed hits is comparing [`Hit::rank_cmp`] reversed
//! (tested below): the heap and the packed selections keep the same set, ties included.

use std::cmp::Ordering;

/// A score type usable in a top-k: a total order (floats via `total_cmp`).
pub trait Score: Copy + Send {
    /// The order of scores (greater = better); by default that of their order bits.
    #[inline(always)]
    fn order(&self, other: &Self) -> Ordering {
        self.order_bits().cmp(&other.order_bits())
    }
    /// The score as a `u32` of the same order (larger = better), the high half of a packed hit.
    fn order_bits(self) -> u32;
    /// The score whose [`order_bits`](Score::order_bits) are `bits`.
    fn from_order_bits(bits: u32) -> Self;
}

impl Score for f32 {
    #[inline(always)]
    fn order(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }

    /// The f32 bits as a u32 that orders like `f32::total_cmp`: a negative float's bits
    /// inverted, a positive float's with the sign bit set.
    #[inline(always)]
    fn order_bits(self) -> u32 {
        let bits = self.to_bits();
        if bits >> 31 == 1 {
            !bits
        } else {
            bits | 1 << 31
        }
    }

    #[inline(always)]
    fn from_order_bits(bits: u32) -> Self {
        f32::from_bits(if bits >> 31 == 1 {
            bits & !(1 << 31)
        } else {
            !bits
        })
    }
}

impl Score for u32 {
    #[inline(always)]
    fn order_bits(self) -> u32 {
        self
    }

    #[inline(always)]
    fn from_order_bits(bits: u32) -> Self {
        bits
    }
}

/// How hits of equal score are ordered.
pub trait TieRule: Copy + Send + std::fmt::Debug {
    /// What a hit carries for the rule besides its id (nothing when the id decides).
    type Key: Copy + Send + std::fmt::Debug;
    /// `Less` when, at equal scores, the hit (`a_id`, `a_key`) ranks before (`b_id`, `b_key`).
    fn cmp(a_id: u32, a_key: Self::Key, b_id: u32, b_key: Self::Key) -> Ordering;
    /// The low half of a packed hit: larger ranks first at equal score, as [`TieRule::cmp`].
    fn tie_bits(id: u32, key: Self::Key) -> u32;
}

/// Ties go to the lower id (dense search, multi-vector search, fast-scan slots).
#[derive(Clone, Copy, Debug)]
pub struct LowerIdFirst;

impl TieRule for LowerIdFirst {
    type Key = ();
    #[inline(always)]
    fn cmp(a_id: u32, _: (), b_id: u32, _: ()) -> Ordering {
        a_id.cmp(&b_id)
    }
    #[inline(always)]
    fn tie_bits(id: u32, _: ()) -> u32 {
        u32::MAX - id
    }
}

impl LowerIdFirst {
    /// The id of a packed hit (its tie bits are the id's complement).
    #[inline(always)]
    pub fn id_of(packed: u64) -> u32 {
        u32::MAX - packed as u32
    }
}

/// Ties go to the higher key (BM25 and impact search, whose key is the doc-id rank: ties come
/// out in canonical order, doc id descending).
#[derive(Clone, Copy, Debug)]
pub struct HigherKeyFirst;

impl TieRule for HigherKeyFirst {
    type Key = u32;
    #[inline(always)]
    fn cmp(_: u32, a_key: u32, _: u32, b_key: u32) -> Ordering {
        b_key.cmp(&a_key)
    }
    #[inline(always)]
    fn tie_bits(_: u32, key: u32) -> u32 {
        key
    }
}

/// A hit as one integer, larger = better: `score_bits` (a [`Score::order_bits`]) above
/// `tie_bits` (a [`TieRule::tie_bits`]).
#[inline(always)]
pub fn pack(score_bits: u32, tie_bits: u32) -> u64 {
    (score_bits as u64) << 32 | tie_bits as u64
}

/// The score bits of a [`pack`]ed hit.
#[inline(always)]
pub fn score_bits_of(packed: u64) -> u32 {
    (packed >> 32) as u32
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

    /// The hit as one integer, larger = better ([`pack`]): the order of [`Hit::rank_cmp`],
    /// reversed. The id is not in it unless the tie rule's bits hold it ([`LowerIdFirst`]).
    #[inline(always)]
    pub fn packed(&self) -> u64 {
        pack(self.score.order_bits(), R::tie_bits(self.id, self.key))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scores() -> Vec<f32> {
        let mut scores = vec![
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            3.5,
            1e30,
            -2e-30,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        scores.extend((1..200u32).map(|i| (i * 7919 % 97) as f32 / 7.0));
        scores
    }

    #[test]
    fn score_order_bits_sort_like_total_cmp_and_give_the_score_back() {
        let scores = scores();
        for &a in &scores {
            assert_eq!(f32::from_order_bits(a.order_bits()).to_bits(), a.to_bits());
            for &b in &scores {
                assert_eq!(a.order_bits().cmp(&b.order_bits()), a.total_cmp(&b));
            }
        }
    }

    #[test]
    fn packed_hits_order_as_rank_cmp_for_both_tie_rules() {
        let scores = scores();
        let ids = [0u32, 1, 7, 1000, u32::MAX - 1];
        for &a in scores.iter().step_by(7) {
            for &b in scores.iter().step_by(5) {
                for &ia in &ids {
                    for &ib in &ids {
                        let (x, y) = (
                            Hit::<f32, LowerIdFirst> {
                                score: a,
                                id: ia,
                                key: (),
                            },
                            Hit::<f32, LowerIdFirst> {
                                score: b,
                                id: ib,
                                key: (),
                            },
                        );
                        assert_eq!(y.packed().cmp(&x.packed()), x.rank_cmp(&y));
                        assert_eq!(LowerIdFirst::id_of(x.packed()), ia);
                        let (x, y) = (
                            Hit::<f32, HigherKeyFirst> {
                                score: a,
                                id: 3,
                                key: ia,
                            },
                            Hit::<f32, HigherKeyFirst> {
                                score: b,
                                id: 9,
                                key: ib,
                            },
                        );
                        assert_eq!(y.packed().cmp(&x.packed()), x.rank_cmp(&y));
                        assert_eq!(
                            f32::from_order_bits(score_bits_of(x.packed())).to_bits(),
                            a.to_bits()
                        );
                    }
                }
            }
        }
    }
}
