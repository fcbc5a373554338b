//! `RBP(rel=r,p=x)`: rank-biased precision (Moffat & Zobel, TOIS 2008) with binary gain, as
//! ir_measures computes it (its default provider for RBP, cwl_eval's `RBPCWLMetric` on
//! `RankingMaker`s of 1,000 ranks): a document gains 1 when its label, negative labels taken as 0,
//! is at least r, nothing when the qrels do not mention it; rank i (from 0) weighs p^i over the
//! sum of p^j for j < 1,000, and ranks past 1,000 count for nothing. (Over 1,000 ranks the
//! normalisation differs from RBP's (1 - p) by p^1000: nothing for p = 0.8 or 0.9, 4e-5 relative
//! for p = 0.99.)

use super::QueryRanking;
use crate::eval::ranked::NOT_IN_QRELS;

/// The ranks cwl_eval (and so ir_measures) looks at.
const DEPTH: usize = 1000;

pub fn rbp(q: &QueryRanking, rel: i32, p: f64) -> f64 {
    let mut weight = 1.0;
    let mut total = 0.0;
    let mut gained = 0.0;
    for i in 0..DEPTH {
        if let Some(&l) = q.labels.get(i) {
            if l != NOT_IN_QRELS && l.max(0) >= rel {
                gained += weight;
            }
        }
        total += weight;
        weight *= p;
    }
    gained / total
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;
    use crate::eval::ranked::UNJUDGED;

    #[test]
    fn rbp_by_hand() {
        // relevant (label >= 1) at ranks 0 and 2; rank 1 judged 0, rank 3 not in the qrels
        let (labels, j) = ranking(&[2, 0, 1, NOT_IN_QRELS], &[2, 0, 1]);
        let q = QueryRanking::new(&labels, &j, 1);
        let norm: f64 = (0..1000).map(|i| 0.8f64.powi(i)).sum();
        assert!((rbp(&q, 1, 0.8) - (1.0 + 0.64) / norm).abs() < 1e-12);
        assert!((rbp(&q, 2, 0.8) - 1.0 / norm).abs() < 1e-12);
        // rel = 0: every judged document gains, a negative label counting as 0
        let (labels, j) = ranking(&[UNJUDGED, NOT_IN_QRELS], &[-1]);
        let q = QueryRanking::new(&labels, &j, 1);
        assert!((rbp(&q, 0, 0.5) - 1.0 / (2.0 - 0.5f64.powi(999))).abs() < 1e-12);
        assert_eq!(rbp(&QueryRanking::new(&[], &j, 1), 1, 0.8), 0.0);
    }
}
