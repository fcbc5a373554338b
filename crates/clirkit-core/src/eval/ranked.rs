//! From a query's retrieved documents to trec_eval's "ranked relevance list": sort the documents
//! the way trec_eval does, then replace each by its label.
//!
//! trec_eval stores scores as C `float`, so scores that differ only beyond single precision tie
//! and break on doc id. We compare at single precision too: that is what makes our numbers equal
//! trec_eval's and pytrec_eval's on runs with near-ties (e.g. BM25 scores printed with 8+ digits).

use crate::eval::qrels::Judgements;
use std::cmp::Ordering;

/// Rank label of a retrieved document the qrels do not mention (trec_eval's RELVALUE_NONPOOL).
pub const NOT_IN_QRELS: i32 = -1;
/// Rank label of a document judged with a negative label (trec_eval's RELVALUE_UNJUDGED: in the
/// pool but not judged).
pub const UNJUDGED: i32 = -2;

/// A retrieved document: its score at trec_eval's precision and its id.
#[derive(Debug, Clone, Copy)]
pub struct ScoredRef<'a> {
    pub score: f32,
    pub id: &'a [u8],
}

impl<'a> ScoredRef<'a> {
    #[inline]
    pub fn new(score: f64, id: &'a [u8]) -> Self {
        // `+ 0.0` folds -0.0 into +0.0: C compares them equal.
        ScoredRef {
            score: score as f32 + 0.0,
            id,
        }
    }
}

/// trec_eval's order: score descending (single precision), then doc id descending as bytes.
#[inline]
pub fn eval_cmp(a: &ScoredRef, b: &ScoredRef) -> Ordering {
    b.score.total_cmp(&a.score).then_with(|| b.id.cmp(a.id))
}

/// Sort documents into trec_eval's order. Ids are unique per query, so the order is total and
/// an unstable sort is deterministic.
pub fn sort_for_eval(docs: &mut [ScoredRef]) {
    docs.sort_unstable_by(eval_cmp);
}

/// Labels of sorted documents, rank by rank. With `judged_only` (trec_eval -J) documents without a
/// non-negative label are dropped first, so ranks count judged documents only.
pub fn ranked_labels(
    docs: &[ScoredRef],
    judgements: &Judgements,
    judged_only: bool,
    out: &mut Vec<i32>,
) {
    out.clear();
    out.reserve(docs.len());
    for d in docs {
        let label = match judgements.label(d.id) {
            None => NOT_IN_QRELS,
            Some(l) if l < 0 => UNJUDGED,
            Some(l) => l,
        };
        if !judged_only || label >= 0 {
            out.push(label);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_precision_ties_break_on_id_descending() {
        let mut docs = vec![
            ScoredRef::new(1.0, b"z"),
            ScoredRef::new(1.0 + 1e-9, b"b"),
            ScoredRef::new(2.0, b"a"),
            ScoredRef::new(-0.0, b"m"),
            ScoredRef::new(0.0, b"n"),
        ];
        sort_for_eval(&mut docs);
        let ids: Vec<&[u8]> = docs.iter().map(|d| d.id).collect();
        assert_eq!(ids, [&b"a"[..], b"z", b"b", b"n", b"m"]);
    }

    #[test]
    fn labels_and_judged_only() {
        let j = Judgements::new([(&b"a"[..], 2), (b"b", 0), (b"c", -1)]);
        let docs = [
            ScoredRef::new(3.0, b"x"),
            ScoredRef::new(2.0, b"c"),
            ScoredRef::new(1.0, b"a"),
            ScoredRef::new(0.0, b"b"),
        ];
        let mut out = Vec::new();
        ranked_labels(&docs, &j, false, &mut out);
        assert_eq!(out, [NOT_IN_QRELS, UNJUDGED, 2, 0]);
        ranked_labels(&docs, &j, true, &mut out);
        assert_eq!(out, [2, 0]);
    }
}
