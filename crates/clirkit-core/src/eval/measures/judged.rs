//! `judged.k` (ir_measures' Judged@k, `providers/judged_provider.py` of ir_measures 0.4): the
//! fraction of the top k that carry any label in the qrels, negative labels included, divided by
//! min(k, number retrieved), so a run shorter than k is not charged for the ranks it lacks. A
//! query with nothing retrieved scores 0 (ir_measures gives a judged query absent from the run
//! its default, 0; measure such queries with `complete`, trec_eval's -c, to average as it does).

use super::QueryRanking;
use crate::eval::ranked::NOT_IN_QRELS;

pub fn judged_at(q: &QueryRanking, k: usize) -> f64 {
    let depth = k.min(q.labels.len());
    if depth == 0 {
        return 0.0;
    }
    q.labels[..depth]
        .iter()
        .filter(|&&l| l != NOT_IN_QRELS)
        .count() as f64
        / depth as f64
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;
    use crate::eval::ranked::UNJUDGED;

    #[test]
    fn any_label_counts_over_what_was_retrieved() {
        let (labels, j) = ranking(&[0, NOT_IN_QRELS, UNJUDGED, 3], &[0, 3]);
        let q = QueryRanking::new(&labels, &j, 1);
        assert_eq!(judged_at(&q, 2), 0.5);
        assert_eq!(judged_at(&q, 4), 0.75);
        // four retrieved: the denominator is 4, not 10
        assert_eq!(judged_at(&q, 10), 0.75);
        let q = QueryRanking::new(&[], &j, 1);
        assert_eq!(judged_at(&q, 10), 0.0);
    }
}
