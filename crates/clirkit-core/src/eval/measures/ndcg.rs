//! `ndcg` and `ndcg_cut.k` with trec_eval's conventions: the gain of a document is its label
//! (labels <= 0 and unjudged documents gain nothing; the relevance level does not change gains),
//! the discount of rank r is log2(r + 1), and the ideal ranking orders all positive labels of the
//! qrels descending. Cut at k, both sums stop at rank k. No positive label: 0.

use super::QueryRanking;

pub fn ndcg(q: &QueryRanking, k: usize) -> f64 {
    let ideal: f64 = q
        .judgements
        .ideal_gains()
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| g / ((i + 2) as f64).log2())
        .sum();
    if ideal <= 0.0 {
        return 0.0;
    }
    let dcg: f64 = q
        .labels
        .iter()
        .take(k)
        .enumerate()
        .filter(|(_, &l)| l > 0)
        .map(|(i, &l)| l as f64 / ((i + 2) as f64).log2())
        .sum();
    dcg / ideal
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;

    #[test]
    fn ndcg_by_hand() {
        // gains 0, 2, 1 at ranks 1..3; ideal 2, 1
        let (labels, j) = ranking(&[0, 2, 1], &[2, 1, 0]);
        let q = QueryRanking::new(&labels, &j, 1);
        let dcg = 2.0 / 3f64.log2() + 1.0 / 2.0;
        let idcg = 2.0 + 1.0 / 3f64.log2();
        assert!((ndcg(&q, usize::MAX) - dcg / idcg).abs() < 1e-12);
        assert!((ndcg(&q, 2) - (2.0 / 3f64.log2()) / idcg).abs() < 1e-12);
        assert_eq!(ndcg(&q, 1), 0.0);
        // the relevance level does not change gains
        let q2 = QueryRanking::new(&labels, &j, 2);
        assert_eq!(ndcg(&q2, usize::MAX), ndcg(&q, usize::MAX));
    }
}
