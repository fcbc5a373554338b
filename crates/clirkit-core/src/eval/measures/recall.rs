//! `recall.k`: relevant documents in the top k over all relevant documents (0 without any).

use super::QueryRanking;

pub fn recall_at(q: &QueryRanking, k: usize) -> f64 {
    if q.num_rel == 0 {
        return 0.0;
    }
    q.relevant_in_top(k) as f64 / q.num_rel as f64
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;

    #[test]
    fn recall_over_all_relevant() {
        let (labels, j) = ranking(&[1, -1, 0, 2], &[1, 2, 1, 0]);
        let q = QueryRanking::new(&labels, &j, 1);
        assert_eq!(recall_at(&q, 1), 1.0 / 3.0);
        assert_eq!(recall_at(&q, 1000), 2.0 / 3.0);
        let (labels, j) = ranking(&[0], &[0]);
        assert_eq!(recall_at(&QueryRanking::new(&labels, &j, 1), 5), 0.0);
    }
}
