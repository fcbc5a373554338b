//! MaxP: turn a run over passages into a run over documents.
//!
//! Long documents are encoded as overlapping token windows with ids `docid#k`. A search over the
//! passages ranks windows; the document's score is the best of its windows' scores (MaxP, Dai &
//! Callan 2019). The document id is the passage id up to the LAST separator, so document ids that
//! themselves contain the separator survive; an id without the separator is a whole document.
//!
//! Dense search does this at search time ([`crate::dense::passages::search_maxp`]), fetching
//! passages until `k` distinct documents are certain.

use crate::error::{Error, Result};
use crate::ranking::{Run, ScoredDoc};
use rayon::prelude::*;
use std::collections::HashMap;

/// The document a passage belongs to: `passage_id` up to its last `separator`, or the whole id
/// when it has none.
pub fn doc_id<'a>(passage_id: &'a str, separator: &str) -> &'a str {
    match passage_id.rfind(separator) {
        Some(pos) if !separator.is_empty() => &passage_id[..pos],
        _ => passage_id,
    }
}

/// Aggregate one query's passages: each document gets the maximum score of its passages.
/// Returns documents in canonical order, cut to `depth` when given.
pub fn maxp_query(
    qid: &str,
    passages: &[ScoredDoc],
    separator: &str,
    depth: Option<usize>,
) -> Result<Vec<ScoredDoc>> {
    let mut best: HashMap<&str, f64> = HashMap::with_capacity(passages.len());
    for p in passages {
        if p.score.is_nan() {
            return Err(Error::invalid(format!(
                "query '{qid}': passage '{}' has a NaN score",
                p.doc_id
            )));
        }
        best.entry(doc_id(&p.doc_id, separator))
            .and_modify(|s| *s = s.max(p.score))
            .or_insert(p.score);
    }
    let mut docs: Vec<ScoredDoc> = best
        .into_iter()
        .map(|(id, score)| ScoredDoc::new(id, score))
        .collect();
    crate::ranking::sort_canonical(&mut docs);
    if let Some(k) = depth {
        docs.truncate(k);
    }
    Ok(docs)
}

/// A passage id separator must not be empty.
pub fn check_separator(separator: &str) -> Result<()> {
    if separator.is_empty() {
        return Err(Error::invalid("the passage id separator must not be empty"));
    }
    Ok(())
}

/// MaxP over a whole run (queries in parallel; the result does not depend on the thread count).
/// Queries keep their order.
pub fn maxp(run: &Run, separator: &str, depth: Option<usize>) -> Result<Run> {
    check_separator(separator)?;
    let queries = run
        .queries
        .par_iter()
        .map(|(qid, passages)| Ok((qid.clone(), maxp_query(qid, passages, separator, depth)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Run { queries })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(entries: &[(&str, &[(&str, f64)])]) -> Run {
        let mut r = Run::new();
        for (q, docs) in entries {
            r.push(
                *q,
                docs.iter().map(|(d, s)| ScoredDoc::new(*d, *s)).collect(),
            );
        }
        r
    }

    fn ids_scores(docs: &[ScoredDoc]) -> Vec<(&str, f64)> {
        docs.iter().map(|d| (d.doc_id.as_str(), d.score)).collect()
    }

    #[test]
    fn doc_id_splits_at_last_separator() {
        assert_eq!(doc_id("d1#0", "#"), "d1");
        assert_eq!(doc_id("a#b#12", "#"), "a#b");
        assert_eq!(doc_id("plain", "#"), "plain");
        assert_eq!(doc_id("doc::3", "::"), "doc");
    }

    #[test]
    fn document_score_is_max_over_passages_in_canonical_order() {
        let r = run(&[(
            "q1",
            &[
                ("a#0", 0.2),
                ("a#1", 0.9),
                ("b#0", 0.5),
                ("c#0", 0.9),
                ("c#1", 0.1),
                ("d", 0.3),
            ],
        )]);
        let out = maxp(&r, "#", None).unwrap();
        assert_eq!(out.queries.len(), 1);
        // a and c tie at 0.9: doc id descending puts c first (trec_eval's order).
        assert_eq!(
            ids_scores(&out.queries[0].1),
            [("c", 0.9), ("a", 0.9), ("b", 0.5), ("d", 0.3)]
        );
    }

    #[test]
    fn depth_cuts_after_aggregation_and_queries_keep_order() {
        let r = run(&[
            ("q2", &[("x#0", 1.0), ("x#1", 2.0), ("y#0", 1.5)]),
            ("q1", &[("z#3", -1.0)]),
        ]);
        let out = maxp(&r, "#", Some(1)).unwrap();
        assert_eq!(out.queries[0].0, "q2");
        assert_eq!(ids_scores(&out.queries[0].1), [("x", 2.0)]);
        assert_eq!(ids_scores(&out.queries[1].1), [("z", -1.0)]);
    }

    #[test]
    fn rejects_nan_and_empty_separator() {
        let r = run(&[("q", &[("a#0", f64::NAN)])]);
        let err = maxp(&r, "#", None).unwrap_err().to_string();
        assert!(err.contains("'q'") && err.contains("a#0"), "{err}");
        assert!(maxp(&Run::new(), "", None).is_err());
    }

    #[test]
    fn result_is_independent_of_passage_order() {
        let forward = run(&[("q", &[("a#0", 0.5), ("a#1", 0.7), ("b#0", 0.6)])]);
        let mut reversed = forward.clone();
        reversed.queries[0].1.reverse();
        assert_eq!(
            maxp(&forward, "#", None).unwrap(),
            maxp(&reversed, "#", None).unwrap()
        );
    }
}
