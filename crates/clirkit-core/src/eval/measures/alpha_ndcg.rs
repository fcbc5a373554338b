//! `alpha_nDCG(rel=r,alpha=a)@k`: α-nDCG (Clarke et al., SIGIR 2008) as TREC's `ndeval` computes
//! it (version 4.5, through pyndeval and ir_measures). Each judged document has aspects (ndeval's
//! subtopics, or on a multilingual task its language), relevant to those whose label is at least
//! r. The document at rank i (from 0) gains, for each aspect it is relevant to, (1 - a) to the
//! number of documents above it relevant to that aspect, discounted by log 2 / log(i + 2); the
//! ideal is ndeval's greedy ranking of the judged documents (at each rank the largest gain, ties
//! to the larger doc id as bytes), so a run can score above 1 where greedy is not optimal.
//! Retrieved documents the qrels do not mention gain nothing; a query without a relevant aspect
//! scores 0. ndeval stops at rank 20; here any k.

use super::QueryRanking;
use crate::eval::qrels::{Judgements, NO_DOC};

pub fn alpha_ndcg(q: &QueryRanking, k: usize, rel: i32, alpha: f64) -> f64 {
    let j = q.judgements;
    let mut gains = vec![1.0; j.aspect_count()];
    let run_docs = q
        .docs
        .iter()
        .take(k)
        .map(|&d| (d != NO_DOC).then_some(d as usize));
    let dcg = discounted(run_docs, j, rel, alpha, &mut gains);
    if dcg == 0.0 {
        return 0.0;
    }
    gains.fill(1.0);
    let ideal = discounted(
        greedy_ideal(j, k, rel, alpha).into_iter().map(Some),
        j,
        rel,
        alpha,
        &mut gains,
    );
    dcg / ideal
}

/// The gain of document `doc` with the aspects' current `gains` (ndeval sums over aspects in
/// their order).
fn gain(j: &Judgements, doc: usize, rel: i32, gains: &[f64]) -> f64 {
    j.aspects(doc)
        .filter(|&(_, l)| l >= rel)
        .map(|(a, _)| gains[a as usize])
        .sum()
}

/// α-DCG of documents rank by rank (`None`: not judged), `gains` starting at 1 per aspect.
fn discounted(
    docs: impl Iterator<Item = Option<usize>>,
    j: &Judgements,
    rel: i32,
    alpha: f64,
    gains: &mut [f64],
) -> f64 {
    let mut dcg = 0.0;
    for (i, doc) in docs.enumerate() {
        let Some(doc) = doc else { continue };
        let score = gain(j, doc, rel, gains);
        for (a, _) in j.aspects(doc).filter(|&(_, l)| l >= rel) {
            gains[a as usize] *= 1.0 - alpha;
        }
        dcg += score * (2f64.ln() / ((i + 2) as f64).ln());
    }
    dcg
}

/// ndeval's greedy ideal ranking, its first k documents among those relevant to an aspect (the
/// others gain nothing wherever they stand).
fn greedy_ideal(j: &Judgements, k: usize, rel: i32, alpha: f64) -> Vec<usize> {
    let mut left: Vec<usize> = (0..j.len())
        .filter(|&d| j.aspects(d).any(|(_, l)| l >= rel))
        .collect();
    let mut gains = vec![1.0; j.aspect_count()];
    let mut ranking = Vec::with_capacity(k.min(left.len()));
    while ranking.len() < k && !left.is_empty() {
        let mut best = 0;
        let mut best_gain = gain(j, left[0], rel, &gains);
        for (at, &doc) in left.iter().enumerate().skip(1) {
            let g = gain(j, doc, rel, &gains);
            if g > best_gain || (g == best_gain && j.doc(doc).0 > j.doc(left[best]).0) {
                best = at;
                best_gain = g;
            }
        }
        let doc = left.swap_remove(best);
        for (a, _) in j.aspects(doc).filter(|&(_, l)| l >= rel) {
            gains[a as usize] *= 1.0 - alpha;
        }
        ranking.push(doc);
    }
    ranking
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ndeval's example shape: two subtopics; d1 covers both, d2 and d3 one each.
    fn judgements() -> Judgements {
        Judgements::with_subtopics(&[
            (b"d1", "1", 1),
            (b"d1", "2", 1),
            (b"d2", "1", 1),
            (b"d3", "2", 1),
            (b"d4", "1", 0),
        ])
        .unwrap()
    }

    #[test]
    fn alpha_ndcg_by_hand() {
        let j = judgements();
        let find = |id: &[u8]| {
            j.find_hashed(id, crate::eval::qrels::id_hash(id))
                .unwrap()
                .doc
        };
        // run: d2, d1, unjudged, d3
        let docs = [find(b"d2"), find(b"d1"), NO_DOC, find(b"d3")];
        let labels = [1, 1, -1, 1];
        let q = QueryRanking::new(&labels, &j, 1).with_docs(&docs);
        let disc = |i: usize| 2f64.ln() / ((i + 2) as f64).ln();
        // run gains: d2: 1 (s1), d1: 0.5 (s1) + 1 (s2), d3: 0.5 (s2)
        let dcg = 1.0 + 1.5 * disc(1) + 0.5 * disc(3);
        // ideal: d1 (2), then d3 (0.5) before d2 (0.5) on the larger id, then d2 (0.5)
        let ideal = 2.0 + 0.5 * disc(1) + 0.5 * disc(2);
        assert!((alpha_ndcg(&q, 20, 1, 0.5) - dcg / ideal).abs() < 1e-12);
        assert!((alpha_ndcg(&q, 1, 1, 0.5) - 1.0 / 2.0).abs() < 1e-12);
        // rel = 2: nothing relevant, 0
        assert_eq!(alpha_ndcg(&q, 20, 2, 0.5), 0.0);
        // the label for other measures is the largest over subtopics
        assert_eq!(j.label(b"d1"), Some(1));
        assert_eq!(j.aspect_count(), 2);
    }

    #[test]
    fn repeated_subtopic_is_refused() {
        assert_eq!(
            Judgements::with_subtopics(&[(b"d1", "1", 1), (b"d2", "1", 1), (b"d1", "1", 0)])
                .unwrap_err(),
            2
        );
    }
}
