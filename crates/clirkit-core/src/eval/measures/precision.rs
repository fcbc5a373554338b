//! `P.k`: relevant documents in the top k, divided by k (even when fewer than k were retrieved,
//! as trec_eval does).

use super::QueryRanking;

pub fn precision_at(q: &QueryRanking, k: usize) -> f64 {
    q.relevant_in_top(k) as f64 / k as f64
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;

    #[test]
    fn precision_divides_by_k() {
        let (labels, j) = ranking(&[1, -1, 0, 2], &[1, 2]);
        let q = QueryRanking::new(&labels, &j, 1);
        assert_eq!(precision_at(&q, 1), 1.0);
        assert_eq!(precision_at(&q, 2), 0.5);
        assert_eq!(precision_at(&q, 10), 0.2);
    }
}
