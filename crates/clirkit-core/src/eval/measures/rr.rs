//! `recip_rank`: 1 / rank of the first relevant document, 0 when none is retrieved.

use super::QueryRanking;

pub fn reciprocal_rank(q: &QueryRanking) -> f64 {
    q.labels
        .iter()
        .position(|&l| q.is_relevant(l))
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;

    #[test]
    fn first_relevant() {
        let (labels, j) = ranking(&[0, -1, 1], &[1]);
        assert_eq!(
            reciprocal_rank(&QueryRanking::new(&labels, &j, 1)),
            1.0 / 3.0
        );
        assert_eq!(reciprocal_rank(&QueryRanking::new(&labels, &j, 2)), 0.0);
    }
}
