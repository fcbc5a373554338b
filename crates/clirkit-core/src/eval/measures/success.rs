//! `success.k`: 1 when a relevant document is in the top k, else 0.

use super::QueryRanking;

pub fn success_at(q: &QueryRanking, k: usize) -> f64 {
    if q.labels.iter().take(k).any(|&l| q.is_relevant(l)) {
        1.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;

    #[test]
    fn any_relevant_in_top_k() {
        let (labels, j) = ranking(&[0, 1], &[1]);
        let q = QueryRanking::new(&labels, &j, 1);
        assert_eq!((success_at(&q, 1), success_at(&q, 2)), (0.0, 1.0));
    }
}
