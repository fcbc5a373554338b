//! `num_ret`, `num_rel`, `num_rel_ret`: counts, summed (not averaged) in the `all` row.

use super::QueryRanking;

pub fn num_ret(q: &QueryRanking) -> f64 {
    q.labels.len() as f64
}

pub fn num_rel(q: &QueryRanking) -> f64 {
    q.num_rel as f64
}

pub fn num_rel_ret(q: &QueryRanking) -> f64 {
    q.relevant_in_top(usize::MAX) as f64
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;

    #[test]
    fn counts() {
        let (labels, j) = ranking(&[1, -1, 0, 2], &[1, 0, 2, 3]);
        let q = QueryRanking::new(&labels, &j, 1);
        assert_eq!((num_ret(&q), num_rel(&q), num_rel_ret(&q)), (4.0, 3.0, 2.0));
        let q = QueryRanking::new(&labels, &j, 2);
        assert_eq!((num_rel(&q), num_rel_ret(&q)), (2.0, 1.0));
    }
}
