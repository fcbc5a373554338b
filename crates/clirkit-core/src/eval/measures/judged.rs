//! `judged.k` (ir_measures' Judged@k): the fraction of the top k that carry any label in the
//! qrels, negative labels included. The denominator is k even when fewer were retrieved.

use super::QueryRanking;
use crate::eval::ranked::NOT_IN_QRELS;

pub fn judged_at(q: &QueryRanking, k: usize) -> f64 {
    q.labels
        .iter()
        .take(k)
        .filter(|&&l| l != NOT_IN_QRELS)
        .count() as f64
        / k as f64
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;
    use crate::eval::ranked::UNJUDGED;

    #[test]
    fn any_label_counts() {
        let (labels, j) = ranking(&[0, NOT_IN_QRELS, UNJUDGED, 3], &[0, 3]);
        let q = QueryRanking::new(&labels, &j, 1);
        assert_eq!(judged_at(&q, 2), 0.5);
        assert_eq!(judged_at(&q, 4), 0.75);
        assert_eq!(judged_at(&q, 10), 0.3);
    }
}
