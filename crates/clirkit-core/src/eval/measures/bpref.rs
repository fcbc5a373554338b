//! `bpref` (Buckley & Voorhees, SIGIR 2004) as trec_eval computes it: for each relevant retrieved
//! document, 1 - min(non-relevant above it, R) / min(N, R), summed and divided by R; documents
//! without a judgement are skipped, R and N count relevant and judged non-relevant documents.

use super::QueryRanking;

pub fn bpref(q: &QueryRanking) -> f64 {
    let num_rel = q.num_rel;
    if num_rel == 0 {
        return 0.0;
    }
    let num_nonrel = q.judgements.num_nonrelevant(q.level);
    let mut nonrel_above = 0usize;
    let mut sum = 0.0;
    for &l in q.labels {
        if l < 0 {
            continue;
        }
        if l < q.level {
            nonrel_above += 1;
        } else if nonrel_above > 0 {
            sum += 1.0 - nonrel_above.min(num_rel) as f64 / num_nonrel.min(num_rel) as f64;
        } else {
            sum += 1.0;
        }
    }
    sum / num_rel as f64
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;
    use crate::eval::ranked::NOT_IN_QRELS;

    #[test]
    fn bpref_by_hand() {
        // R = 2, N = 2; ranking: rel, unjudged (skipped), nonrel, rel
        let (labels, j) = ranking(&[1, NOT_IN_QRELS, 0, 1], &[1, 1, 0, 0]);
        let q = QueryRanking::new(&labels, &j, 1);
        assert!((bpref(&q) - (1.0 + (1.0 - 1.0 / 2.0)) / 2.0).abs() < 1e-12);
    }
}
