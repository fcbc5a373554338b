//! `Rprec`: precision at rank R, R = the number of relevant documents (0 without any).

use super::QueryRanking;

pub fn r_precision(q: &QueryRanking) -> f64 {
    if q.num_rel == 0 {
        return 0.0;
    }
    q.relevant_in_top(q.num_rel) as f64 / q.num_rel as f64
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;

    #[test]
    fn precision_at_r() {
        let (labels, j) = ranking(&[1, 0, 1, 1], &[1, 1, 1]);
        assert_eq!(r_precision(&QueryRanking::new(&labels, &j, 1)), 2.0 / 3.0);
    }
}
