//! From a query's retrieved documents to trec_eval's "ranked relevance list": sort the documents
//! the way trec_eval does, then replace each by its label.
//!
//! trec_eval stores scores as C `float`, so scores that differ only beyond single precision tie
//! and break on doc id. We compare at single precision too: that is what makes our numbers equal
//! trec_eval's and pytrec_eval's on runs with near-ties (e.g. BM25 scores printed with 8+ digits).

use crate::eval::qrels::{id_hash, JudgedRef, Judgements, NO_DOC};
use rustc_hash::FxHashSet;
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

/// One query of a run: its id and retrieved documents in any order (ids unique).
#[derive(Debug, Clone)]
pub struct RunQuery<'a> {
    pub qid: &'a str,
    pub docs: Vec<ScoredRef<'a>>,
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
/// an unstable sort is deterministic. Scores are sorted first (cheap comparisons), then each run
/// of equal scores by id: the same order as sorting by [`eval_cmp`], with fewer id comparisons.
pub fn sort_for_eval(docs: &mut [ScoredRef]) {
    docs.sort_unstable_by(|a, b| b.score.total_cmp(&a.score));
    let mut start = 0;
    while start < docs.len() {
        let score = docs[start].score;
        let end = start
            + docs[start..]
                .iter()
                .position(|d| d.score != score)
                .unwrap_or(docs.len() - start);
        if end - start > 1 {
            docs[start..end].sort_unstable_by(|a, b| b.id.cmp(a.id));
        }
        start = end;
    }
}

/// Labels of sorted documents, rank by rank. With `judged_only` (trec_eval -J) documents without a
/// non-negative label are dropped first, so ranks count judged documents only. With `out_docs`,
/// the judged document at each rank too (its index in `judgements`, [`NO_DOC`] when unjudged).
pub fn ranked_labels(
    docs: &[ScoredRef],
    judgements: &Judgements,
    judged_only: bool,
    out: &mut Vec<i32>,
    mut out_docs: Option<&mut Vec<u32>>,
) {
    out.clear();
    out.reserve(docs.len());
    if let Some(o) = out_docs.as_deref_mut() {
        o.clear();
    }
    for d in docs {
        let found = judgements.find_hashed(d.id, id_hash(d.id));
        push_label(found, judged_only, out, out_docs.as_deref_mut());
    }
}

/// A rank's label from the qrels' judged document (`None`: not in the qrels), dropped when
/// `judged_only` and the document has no non-negative label; its index to `out_docs` when given.
#[inline]
fn push_label(
    found: Option<JudgedRef>,
    judged_only: bool,
    out: &mut Vec<i32>,
    out_docs: Option<&mut Vec<u32>>,
) {
    let label = match found {
        None => NOT_IN_QRELS,
        Some(j) if j.label < 0 => UNJUDGED,
        Some(j) => j.label,
    };
    if !judged_only || label >= 0 {
        out.push(label);
        if let Some(o) = out_docs {
            o.push(found.map_or(NO_DOC, |j| j.doc));
        }
    }
}

/// [`ranked_labels`] for documents whose ids may repeat, which it checks at the same time, each
/// id hashed once for both (no labels without `judgements`): `false` when two documents share
/// an id. `seen` is scratch space, reused from query to query.
pub fn ranked_labels_checked(
    docs: &[ScoredRef],
    judgements: Option<&Judgements>,
    judged_only: bool,
    seen: &mut IdHashes,
    out: &mut Vec<i32>,
    mut out_docs: Option<&mut Vec<u32>>,
) -> bool {
    seen.reset(docs.len());
    out.clear();
    out.reserve(docs.len());
    if let Some(o) = out_docs.as_deref_mut() {
        o.clear();
    }
    // Set once the ids are known to be unique although two hashes met.
    let mut unique = false;
    for d in docs {
        let hash = id_hash(d.id);
        if !seen.insert(hash) && !unique {
            if has_repeated_id(docs) {
                return false;
            }
            unique = true;
        }
        if let Some(j) = judgements {
            push_label(
                j.find_hashed(d.id, hash),
                judged_only,
                out,
                out_docs.as_deref_mut(),
            );
        }
    }
    true
}

/// Whether two documents share an id, by comparing the ids themselves.
fn has_repeated_id(docs: &[ScoredRef]) -> bool {
    let mut ids: FxHashSet<&[u8]> = FxHashSet::default();
    !docs.iter().all(|d| ids.insert(d.id))
}

/// A set of [`id_hash`]es: an open-addressing table of a power of two of words, at most a quarter
/// used (so that the branch on an empty slot is mostly predicted right), cleared for each query (0 marks an empty slot, so hash 0 is stored as 1: a false
/// match only costs the exact check).
#[derive(Debug, Default)]
pub struct IdHashes {
    slots: Vec<u64>,
}

impl IdHashes {
    /// Empty, with room for `n` hashes.
    fn reset(&mut self, n: usize) {
        self.slots.clear();
        self.slots.resize((4 * n).next_power_of_two().max(16), 0);
    }

    /// Add `hash`; false when it is there already.
    #[inline]
    fn insert(&mut self, hash: u64) -> bool {
        let hash = hash.max(1);
        let mask = self.slots.len() - 1;
        // The high half picks the slot: `Judgements` probes from the low one.
        let mut at = (hash >> 32) as usize & mask;
        loop {
            match self.slots[at] {
                0 => {
                    self.slots[at] = hash;
                    return true;
                }
                s if s == hash => return false,
                _ => at = (at + 1) & mask,
            }
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
    fn two_phase_sort_equals_the_comparator() {
        let ids: Vec<String> = (0..500)
            .map(|i| format!("d{}", (i * 7919) % 1000))
            .collect();
        let mut docs: Vec<ScoredRef> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| ScoredRef::new(((i * 31) % 17) as f64 / 4.0, id.as_bytes()))
            .collect();
        let mut want = docs.clone();
        want.sort_by(eval_cmp);
        sort_for_eval(&mut docs);
        let ids = |v: &[ScoredRef]| v.iter().map(|d| d.id.to_vec()).collect::<Vec<_>>();
        assert_eq!(ids(&docs), ids(&want));
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
        let mut judged = Vec::new();
        ranked_labels(&docs, &j, false, &mut out, Some(&mut judged));
        assert_eq!(out, [NOT_IN_QRELS, UNJUDGED, 2, 0]);
        assert_eq!(judged, [NO_DOC, 2, 0, 1]);
        ranked_labels(&docs, &j, true, &mut out, Some(&mut judged));
        assert_eq!(out, [2, 0]);
        assert_eq!(judged, [0, 1]);
        let mut seen = IdHashes::default();
        assert!(ranked_labels_checked(
            &docs,
            Some(&j),
            true,
            &mut seen,
            &mut out,
            None
        ));
        assert_eq!(out, [2, 0]);
        assert!(ranked_labels_checked(
            &docs, None, false, &mut seen, &mut out, None
        ));
        assert!(out.is_empty());
    }

    #[test]
    fn repeated_ids_are_found_whatever_the_hashes() {
        let ids: Vec<String> = (0..3000).map(|i| format!("document-{i}")).collect();
        let mut docs: Vec<ScoredRef> = ids
            .iter()
            .map(|id| ScoredRef::new(1.0, id.as_bytes()))
            .collect();
        let j = Judgements::new([(&b"document-7"[..], 1)]);
        let (mut seen, mut out) = (IdHashes::default(), Vec::new());
        assert!(ranked_labels_checked(
            &docs,
            Some(&j),
            false,
            &mut seen,
            &mut out,
            None
        ));
        assert_eq!(out.iter().filter(|&&l| l == 1).count(), 1);
        docs.push(ScoredRef::new(0.5, b"document-2999"));
        assert!(!ranked_labels_checked(
            &docs,
            Some(&j),
            false,
            &mut seen,
            &mut out,
            None
        ));
        assert!(!ranked_labels_checked(
            &docs, None, false, &mut seen, &mut out, None
        ));
        // Two hashes that meet (0 is stored as 1) are told apart by the ids.
        seen.reset(2);
        assert!(seen.insert(0) && !seen.insert(1));
        assert!(!has_repeated_id(&docs[..10]));
    }
}
