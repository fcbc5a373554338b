//! The common ranking type and the one tie-break rule used everywhere.
//!
//! Canonical order is score descending, then doc id descending as a byte string: the order
//! trec_eval sorts a run by before evaluating it. Search, fusion, reranking and evaluation all
//! use it, so the rank written in a run file is the rank the evaluator sees.

use std::cmp::Ordering;

/// One retrieved document with its score.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredDoc {
    pub doc_id: String,
    pub score: f64,
}

impl ScoredDoc {
    pub fn new(doc_id: impl Into<String>, score: f64) -> Self {
        ScoredDoc {
            doc_id: doc_id.into(),
            score,
        }
    }
}

/// The canonical comparison: higher score first; among equal scores, larger doc id first.
#[inline]
pub fn canonical_cmp(a_score: f64, a_id: &str, b_score: f64, b_id: &str) -> Ordering {
    b_score
        .total_cmp(&a_score)
        .then_with(|| b_id.as_bytes().cmp(a_id.as_bytes()))
}

/// Sort documents into canonical order (stable, independent of thread count).
pub fn sort_canonical(docs: &mut [ScoredDoc]) {
    docs.sort_by(|a, b| canonical_cmp(a.score, &a.doc_id, b.score, &b.doc_id));
}

/// A ranking per query. Queries keep the order they were added in; each query's documents are
/// kept in canonical order by the producers (`sort_canonical`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    pub queries: Vec<(String, Vec<ScoredDoc>)>,
}

impl Run {
    pub fn new() -> Self {
        Run::default()
    }

    pub fn push(&mut self, qid: impl Into<String>, mut docs: Vec<ScoredDoc>) {
        sort_canonical(&mut docs);
        self.queries.push((qid.into(), docs));
    }

    pub fn len(&self) -> usize {
        self.queries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }

    /// Keep the top `k` documents of every query.
    pub fn truncate(&mut self, k: usize) {
        for (_, docs) in &mut self.queries {
            docs.truncate(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_break_on_doc_id_descending() {
        let mut docs = vec![
            ScoredDoc::new("a", 1.0),
            ScoredDoc::new("c", 1.0),
            ScoredDoc::new("b", 2.0),
            ScoredDoc::new("d", 0.5),
        ];
        sort_canonical(&mut docs);
        let ids: Vec<&str> = docs.iter().map(|d| d.doc_id.as_str()).collect();
        assert_eq!(ids, ["b", "c", "a", "d"]);
    }

    #[test]
    fn byte_order_not_numeric_order() {
        let mut docs = vec![ScoredDoc::new("10", 1.0), ScoredDoc::new("9", 1.0)];
        sort_canonical(&mut docs);
        assert_eq!(docs[0].doc_id, "9");
    }
}
