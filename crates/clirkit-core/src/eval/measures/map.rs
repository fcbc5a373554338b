//! `map` and `map_cut.k`: average precision, the mean of the precision at each relevant
//! retrieved document (within the top k for `map_cut`), over all relevant documents.

use super::QueryRanking;

pub fn average_precision(q: &QueryRanking, k: usize) -> f64 {
    if q.num_rel == 0 {
        return 0.0;
    }
    let mut found = 0usize;
    let mut sum = 0.0;
    for (i, &l) in q.labels.iter().take(k).enumerate() {
        if q.is_relevant(l) {
            found += 1;
            sum += found as f64 / (i + 1) as f64;
        }
    }
    sum / q.num_rel as f64
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;

    #[test]
    fn average_precision_by_hand() {
        // relevant at ranks 1 and 3, three relevant in the qrels
        let (labels, j) = ranking(&[2, 0, 1, -1], &[2, 1, 1, 0]);
        let q = QueryRanking::new(&labels, &j, 1);
        assert!((average_precision(&q, usize::MAX) - (1.0 + 2.0 / 3.0) / 3.0).abs() < 1e-12);
        assert!((average_precision(&q, 2) - 1.0 / 3.0).abs() < 1e-12);
    }
}
