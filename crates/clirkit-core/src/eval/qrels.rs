//! Qrels prepared for evaluation: per query, a hash from doc id to label plus the label
//! statistics every measure needs (how many documents at each level, the ideal gains).

use crate::io::trec::Qrels;
use rustc_hash::FxHashMap;

/// The judgements of one query.
#[derive(Debug, Clone, Default)]
pub struct Judgements {
    labels: FxHashMap<Box<[u8]>, i32>,
    /// Non-negative labels and how many documents carry each, ascending by label.
    level_counts: Vec<(i32, usize)>,
    /// Positive labels, descending: the ideal ranking's gains for nDCG.
    ideal_gains: Vec<f64>,
}

impl Judgements {
    pub fn new<'a>(judged: impl IntoIterator<Item = (&'a [u8], i32)>) -> Self {
        let labels: FxHashMap<Box<[u8]>, i32> =
            judged.into_iter().map(|(d, l)| (Box::from(d), l)).collect();
        let mut counts: std::collections::BTreeMap<i32, usize> = Default::default();
        for &l in labels.values().filter(|&&l| l >= 0) {
            *counts.entry(l).or_default() += 1;
        }
        let mut ideal_gains: Vec<f64> = labels
            .values()
            .filter(|&&l| l > 0)
            .map(|&l| l as f64)
            .collect();
        ideal_gains.sort_by(|a, b| b.total_cmp(a));
        Judgements {
            labels,
            level_counts: counts.into_iter().collect(),
            ideal_gains,
        }
    }

    /// The label of a document, or `None` when the qrels do not mention it.
    #[inline]
    pub fn label(&self, doc: &[u8]) -> Option<i32> {
        self.labels.get(doc).copied()
    }

    /// Documents judged relevant at `level` (label >= level; negative labels never count, as in
    /// trec_eval where they mark pooled but unjudged documents).
    pub fn num_relevant(&self, level: i32) -> usize {
        self.level_counts
            .iter()
            .filter(|(l, _)| *l >= level)
            .map(|(_, n)| n)
            .sum()
    }

    /// Documents judged non-relevant at `level` (0 <= label < level), bpref's denominator.
    pub fn num_nonrelevant(&self, level: i32) -> usize {
        self.level_counts
            .iter()
            .filter(|(l, _)| *l < level)
            .map(|(_, n)| n)
            .sum()
    }

    /// Positive labels in descending order (the ideal ranking's gains).
    pub fn ideal_gains(&self) -> &[f64] {
        &self.ideal_gains
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// All queries' judgements, by query id.
#[derive(Debug, Clone, Default)]
pub struct QrelsIndex {
    queries: Vec<(String, Judgements)>,
    by_id: FxHashMap<String, usize>,
}

impl QrelsIndex {
    pub fn from_qrels(qrels: &Qrels) -> Self {
        Self::from_pairs(qrels.queries.iter().map(|(q, docs)| {
            (
                q.clone(),
                docs.iter()
                    .map(|(d, l)| (d.as_bytes(), *l))
                    .collect::<Vec<_>>(),
            )
        }))
    }

    /// Build from (qid, [(docid, label)]) pairs; a query id given twice merges its documents, a
    /// query without any judgement is left out (pytrec_eval drops those too).
    pub fn from_pairs<'a>(
        queries: impl IntoIterator<Item = (String, Vec<(&'a [u8], i32)>)>,
    ) -> Self {
        let mut merged: Vec<(String, Vec<(&'a [u8], i32)>)> = Vec::new();
        let mut by_id: FxHashMap<String, usize> = FxHashMap::default();
        for (qid, docs) in queries {
            match by_id.get(&qid) {
                Some(&i) => merged[i].1.extend(docs),
                None => {
                    by_id.insert(qid.clone(), merged.len());
                    merged.push((qid, docs));
                }
            }
        }
        merged.retain(|(_, docs)| !docs.is_empty());
        let by_id = merged
            .iter()
            .enumerate()
            .map(|(i, (q, _))| (q.clone(), i))
            .collect();
        QrelsIndex {
            queries: merged
                .into_iter()
                .map(|(q, d)| (q, Judgements::new(d)))
                .collect(),
            by_id,
        }
    }

    pub fn get(&self, qid: &str) -> Option<&Judgements> {
        self.by_id.get(qid).map(|&i| &self.queries[i].1)
    }

    /// Queries in the order they were first given.
    pub fn queries(&self) -> impl Iterator<Item = (&str, &Judgements)> {
        self.queries.iter().map(|(q, j)| (q.as_str(), j))
    }

    pub fn len(&self) -> usize {
        self.queries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
}
