//! Fusion of several runs into one: reciprocal rank fusion ([`rrf`]), CombSUM ([`combsum`]),
//! CombMNZ ([`combmnz`]) and weighted interpolation ([`interpolate`]) of per-query normalized
//! scores ([`normalize`]).
//!
//! All methods work on [`RunLists`], the common input type: a run held compactly (one byte arena
//! for all ids, one flat array of `(id, score)` entries) with every query's documents in
//! canonical order, so "rank" always means the 1-based position in canonical order. It is read
//! straight from a TREC file by a specialized parallel parser ([`run_file`]), or built from a
//! [`Run`]. Fusion is parallel over queries and its result does not depend on the thread count:
//! every query is fused independently, contributions are added in run order, and the output is
//! sorted canonically.

pub mod combmnz;
pub mod combsum;
pub mod interpolate;
pub mod normalize;
pub mod rrf;
pub mod run_file;

use crate::error::{Error, Result};
use crate::ranking::{Run, ScoredDoc};
use normalize::Norm;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

/// A byte range in a [`RunLists`] arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u32,
    pub len: u32,
}

/// One ranked document: its id in the arena and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DocEntry {
    pub id: Span,
    pub score: f64,
}

/// One query: its id and the range of its documents in the entry array.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QueryEntry {
    pub qid: Span,
    pub docs: std::ops::Range<usize>,
}

/// A run held compactly for fusion: queries in first-appearance order, each query's documents
/// in canonical order (score descending, then doc id descending).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunLists {
    arena: Vec<u8>,
    queries: Vec<QueryEntry>,
    docs: Vec<DocEntry>,
}

impl RunLists {
    /// Number of queries.
    pub fn num_queries(&self) -> usize {
        self.queries.len()
    }

    /// Number of (query, document) entries.
    pub fn num_entries(&self) -> usize {
        self.docs.len()
    }

    /// The id of query `q` (0-based, in run order).
    pub fn query_id(&self, q: usize) -> &str {
        self.text(self.queries[q].qid)
    }

    /// The documents of query `q` in canonical order, as (doc id, score).
    pub fn query_docs(&self, q: usize) -> impl ExactSizeIterator<Item = (&str, f64)> + '_ {
        self.docs[self.queries[q].docs.clone()]
            .iter()
            .map(move |d| (self.text(d.id), d.score))
    }

    /// Build from a [`Run`] (its documents are re-sorted canonically).
    pub fn from_run(run: &Run) -> Result<Self> {
        let mut builder = RunListsBuilder::default();
        for (qid, docs) in &run.queries {
            builder.push_query(
                qid.as_bytes(),
                docs.iter().map(|d| (d.doc_id.as_bytes(), d.score)),
            )?;
        }
        Ok(builder.finish())
    }

    /// Convert to a [`Run`].
    pub fn to_run(&self) -> Run {
        let queries = (0..self.num_queries())
            .map(|q| {
                let docs = self
                    .query_docs(q)
                    .map(|(id, s)| ScoredDoc::new(id, s))
                    .collect();
                (self.query_id(q).to_string(), docs)
            })
            .collect();
        Run { queries }
    }

    pub(crate) fn bytes(&self, span: Span) -> &[u8] {
        &self.arena[span.start as usize..(span.start + span.len) as usize]
    }

    fn text(&self, span: Span) -> &str {
        // The arena holds only ids copied from `&str`s or from UTF-8-validated files.
        std::str::from_utf8(self.bytes(span)).expect("arena ids are UTF-8")
    }

    pub(crate) fn query_entries(&self) -> &[QueryEntry] {
        &self.queries
    }

    pub(crate) fn doc_entries(&self, q: usize) -> &[DocEntry] {
        &self.docs[self.queries[q].docs.clone()]
    }

    pub(crate) fn from_parts(
        arena: Vec<u8>,
        queries: Vec<QueryEntry>,
        docs: Vec<DocEntry>,
    ) -> Self {
        RunLists {
            arena,
            queries,
            docs,
        }
    }
}

/// Appends queries to a [`RunLists`], sorting each query's documents canonically and rejecting
/// duplicate documents, repeated queries, non-finite scores and arenas past 4 GiB.
#[derive(Default)]
pub struct RunListsBuilder {
    lists: RunLists,
    seen_queries: FxHashMap<Vec<u8>, ()>,
}

impl RunListsBuilder {
    fn intern(&mut self, bytes: &[u8]) -> Result<Span> {
        let start = self.lists.arena.len();
        let end = start + bytes.len();
        if end > u32::MAX as usize {
            return Err(Error::invalid(
                "run too large: more than 4 GiB of query and document ids",
            ));
        }
        self.lists.arena.extend_from_slice(bytes);
        Ok(Span {
            start: start as u32,
            len: bytes.len() as u32,
        })
    }

    /// Add one query with its documents in any order.
    pub fn push_query<'a>(
        &mut self,
        qid: &[u8],
        docs: impl IntoIterator<Item = (&'a [u8], f64)>,
    ) -> Result<()> {
        let qid_text = String::from_utf8_lossy(qid).into_owned();
        if self.seen_queries.insert(qid.to_vec(), ()).is_some() {
            return Err(Error::invalid(format!("query '{qid_text}' given twice")));
        }
        let qid_span = self.intern(qid)?;
        let first = self.lists.docs.len();
        for (id, score) in docs {
            if !score.is_finite() {
                return Err(Error::invalid(format!(
                    "query '{qid_text}', document '{}': score {score} is not finite",
                    String::from_utf8_lossy(id)
                )));
            }
            let id = self.intern(id)?;
            self.lists.docs.push(DocEntry { id, score });
        }
        let end = self.lists.docs.len();
        let RunLists { arena, docs, .. } = &mut self.lists;
        let list = &mut docs[first..end];
        sort_entries(arena, list);
        if let Some(dup) = first_duplicate(arena, list) {
            return Err(Error::invalid(format!(
                "query '{qid_text}': document '{}' given twice",
                String::from_utf8_lossy(dup)
            )));
        }
        self.lists.queries.push(QueryEntry {
            qid: qid_span,
            docs: first..end,
        });
        Ok(())
    }

    pub fn finish(self) -> RunLists {
        self.lists
    }
}

fn entry_cmp(arena: &[u8], a: &DocEntry, b: &DocEntry) -> std::cmp::Ordering {
    let id = |s: Span| &arena[s.start as usize..(s.start + s.len) as usize];
    b.score
        .total_cmp(&a.score)
        .then_with(|| id(b.id).cmp(id(a.id)))
}

/// Sort one query's entries canonically; files written in canonical order skip the sort.
pub(crate) fn sort_entries(arena: &[u8], list: &mut [DocEntry]) {
    let sorted = list
        .windows(2)
        .all(|w| entry_cmp(arena, &w[0], &w[1]).is_le());
    if !sorted {
        list.sort_unstable_by(|a, b| entry_cmp(arena, a, b));
    }
}

/// The first doc id that occurs twice in `list`, if any.
pub(crate) fn first_duplicate<'a>(arena: &'a [u8], list: &[DocEntry]) -> Option<&'a [u8]> {
    let mut seen: FxHashMap<&[u8], ()> = FxHashMap::default();
    seen.reserve(list.len());
    list.iter()
        .map(|d| &arena[d.id.start as usize..(d.id.start + d.id.len) as usize])
        .find(|id| seen.insert(id, ()).is_some())
}

/// A fusion method and its parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// Reciprocal rank fusion: Σ wᵢ / (k + rankᵢ).
    Rrf { k: f64 },
    /// Σ wᵢ · norm(scoreᵢ) over the runs that retrieved the document.
    CombSum { norm: Norm },
    /// CombSUM times the number of runs that retrieved the document.
    CombMnz { norm: Norm },
    /// alpha · norm(score₁) + (1 − alpha) · norm(score₂), for exactly two runs.
    Interpolate { alpha: f64, norm: Norm },
}

/// Fusion parameters shared by every method.
#[derive(Debug, Clone, PartialEq)]
pub struct FusionOptions {
    pub method: Method,
    /// One weight per run (default 1 each); not allowed with `Interpolate`, whose alpha sets them.
    pub weights: Option<Vec<f64>>,
    /// Only the top `depth` documents of each input run count (default: all).
    pub depth: Option<usize>,
    /// Keep the top `top` fused documents per query (default: all).
    pub top: Option<usize>,
}

impl FusionOptions {
    pub fn new(method: Method) -> Self {
        FusionOptions {
            method,
            weights: None,
            depth: None,
            top: None,
        }
    }

    /// The per-run weights after validation against the number of runs.
    fn run_weights(&self, num_runs: usize) -> Result<Vec<f64>> {
        if num_runs == 0 {
            return Err(Error::invalid("fusion needs at least one run"));
        }
        if self.depth == Some(0) {
            return Err(Error::invalid("depth must be at least 1"));
        }
        if self.top == Some(0) {
            return Err(Error::invalid("top must be at least 1"));
        }
        if let Method::Rrf { k } = self.method {
            if !(k.is_finite() && k >= 0.0) {
                return Err(Error::invalid(format!(
                    "RRF k must be a finite number >= 0, got {k}"
                )));
            }
        }
        if let Method::Interpolate { alpha, .. } = self.method {
            if self.weights.is_some() {
                return Err(Error::invalid(
                    "interpolation takes alpha, not weights (use combsum for general weights)",
                ));
            }
            return interpolate::weights(alpha, num_runs);
        }
        match &self.weights {
            None => Ok(vec![1.0; num_runs]),
            Some(w) if w.len() != num_runs => Err(Error::invalid(format!(
                "{} weights given for {num_runs} runs",
                w.len()
            ))),
            Some(w) => match w.iter().find(|x| !x.is_finite()) {
                Some(bad) => Err(Error::invalid(format!("weight {bad} is not finite"))),
                None => Ok(w.clone()),
            },
        }
    }
}

/// Per-query accumulator of fused scores: one slot per distinct document.
#[derive(Default)]
pub(crate) struct Accumulator<'a> {
    slots: FxHashMap<&'a [u8], u32>,
    ids: Vec<&'a [u8]>,
    scores: Vec<f64>,
    hits: Vec<u32>,
}

impl<'a> Accumulator<'a> {
    fn clear(&mut self) {
        self.slots.clear();
        self.ids.clear();
        self.scores.clear();
        self.hits.clear();
    }

    /// Add `value` to the document's fused score and count one more run retrieving it.
    #[inline]
    pub(crate) fn add(&mut self, id: &'a [u8], value: f64) {
        let next = self.ids.len() as u32;
        let slot = *self.slots.entry(id).or_insert(next) as usize;
        if slot == self.ids.len() {
            self.ids.push(id);
            self.scores.push(value);
            self.hits.push(1);
        } else {
            self.scores[slot] += value;
            self.hits[slot] += 1;
        }
    }

    /// The fused list in canonical order, cut to `top`.
    fn finish(&self, method: Method, top: Option<usize>) -> Vec<(&'a [u8], f64)> {
        let mut out: Vec<(&'a [u8], f64)> = match method {
            Method::CombMnz { .. } => combmnz::finish(&self.ids, &self.scores, &self.hits),
            _ => self
                .ids
                .iter()
                .copied()
                .zip(self.scores.iter().copied())
                .collect(),
        };
        out.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(a.0)));
        if let Some(top) = top {
            out.truncate(top);
        }
        out
    }
}

/// Fuse `runs` into one run. Queries present in any run are output, in order of first
/// appearance (first run first); each query's fused documents are in canonical order.
pub fn fuse(runs: &[&RunLists], options: &FusionOptions) -> Result<RunLists> {
    let weights = options.run_weights(runs.len())?;
    let depth = options.depth.unwrap_or(usize::MAX);

    // For every output query, its query index in each run that has it.
    let mut slot_of: FxHashMap<&[u8], usize> = FxHashMap::default();
    let mut rows: Vec<(&[u8], Vec<Option<usize>>)> = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for (q, entry) in run.query_entries().iter().enumerate() {
            let qid = run.bytes(entry.qid);
            let slot = *slot_of.entry(qid).or_insert_with(|| {
                rows.push((qid, vec![None; runs.len()]));
                rows.len() - 1
            });
            rows[slot].1[r] = Some(q);
        }
    }

    let fused: Vec<Vec<(&[u8], f64)>> = rows
        .par_iter()
        .map_init(Accumulator::default, |acc, (_, per_run)| {
            acc.clear();
            for (r, q) in per_run.iter().enumerate() {
                let Some(q) = *q else { continue };
                let run = runs[r];
                let list = run.doc_entries(q);
                let list = &list[..list.len().min(depth)];
                match options.method {
                    Method::Rrf { k } => rrf::accumulate(run, list, weights[r], k, acc),
                    Method::CombSum { norm }
                    | Method::CombMnz { norm }
                    | Method::Interpolate { norm, .. } => {
                        combsum::accumulate(run, list, weights[r], norm, acc)
                    }
                }
            }
            acc.finish(options.method, options.top)
        })
        .collect();

    let mut builder = SortedBuilder::default();
    for ((qid, _), docs) in rows.iter().zip(&fused) {
        builder.push(qid, docs)?;
    }
    Ok(builder.finish())
}

/// Fuse core [`Run`]s (a convenience over [`fuse`]).
pub fn fuse_runs(runs: &[Run], options: &FusionOptions) -> Result<Run> {
    let lists = runs
        .iter()
        .map(RunLists::from_run)
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&RunLists> = lists.iter().collect();
    Ok(fuse(&refs, options)?.to_run())
}

/// Appends queries whose documents are already canonical, distinct and finite.
#[derive(Default)]
struct SortedBuilder {
    arena: Vec<u8>,
    queries: Vec<QueryEntry>,
    docs: Vec<DocEntry>,
}

impl SortedBuilder {
    fn intern(&mut self, bytes: &[u8]) -> Result<Span> {
        let start = self.arena.len();
        if start + bytes.len() > u32::MAX as usize {
            return Err(Error::invalid(
                "fused run too large: more than 4 GiB of query and document ids",
            ));
        }
        self.arena.extend_from_slice(bytes);
        Ok(Span {
            start: start as u32,
            len: bytes.len() as u32,
        })
    }

    fn push(&mut self, qid: &[u8], docs: &[(&[u8], f64)]) -> Result<()> {
        let qid = self.intern(qid)?;
        let first = self.docs.len();
        self.docs.reserve(docs.len());
        for &(id, score) in docs {
            let id = self.intern(id)?;
            self.docs.push(DocEntry { id, score });
        }
        self.queries.push(QueryEntry {
            qid,
            docs: first..self.docs.len(),
        });
        Ok(())
    }

    fn finish(self) -> RunLists {
        RunLists::from_parts(self.arena, self.queries, self.docs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(queries: &[(&str, &[(&str, f64)])]) -> Run {
        let mut r = Run::new();
        for (q, docs) in queries {
            r.push(
                *q,
                docs.iter().map(|(d, s)| ScoredDoc::new(*d, *s)).collect(),
            );
        }
        r
    }

    #[test]
    fn rrf_by_hand_with_ties_and_missing_queries() {
        // Run a: q1 ranks b(2) > c(1) > a(1) (tie broken by id desc); q2 only in run b.
        let a = run(&[("q1", &[("a", 1.0), ("b", 2.0), ("c", 1.0)])]);
        let b = run(&[("q1", &[("a", 5.0)]), ("q2", &[("x", 1.0)])]);
        let fused = fuse_runs(&[a, b], &FusionOptions::new(Method::Rrf { k: 60.0 })).unwrap();
        let q1: Vec<(String, f64)> = fused.queries[0]
            .1
            .iter()
            .map(|d| (d.doc_id.clone(), d.score))
            .collect();
        assert_eq!(fused.queries[0].0, "q1");
        assert_eq!(
            q1,
            vec![
                ("a".to_string(), 1.0 / 63.0 + 1.0 / 61.0),
                ("b".to_string(), 1.0 / 61.0),
                ("c".to_string(), 1.0 / 62.0),
            ]
        );
        assert_eq!(fused.queries[1].0, "q2");
        assert_eq!(fused.queries[1].1[0].score, 1.0 / 61.0);
    }

    #[test]
    fn depth_weights_and_top() {
        let a = run(&[("q", &[("a", 3.0), ("b", 2.0), ("c", 1.0)])]);
        let b = run(&[("q", &[("c", 3.0), ("d", 2.0)])]);
        let mut opts = FusionOptions::new(Method::Rrf { k: 0.0 });
        opts.depth = Some(1);
        opts.weights = Some(vec![1.0, 3.0]);
        let fused = fuse_runs(&[a.clone(), b.clone()], &opts).unwrap();
        let ids: Vec<(&str, f64)> = fused.queries[0]
            .1
            .iter()
            .map(|d| (d.doc_id.as_str(), d.score))
            .collect();
        assert_eq!(ids, vec![("c", 3.0), ("a", 1.0)]);
        opts.top = Some(1);
        assert_eq!(fuse_runs(&[a, b], &opts).unwrap().queries[0].1.len(), 1);
    }

    #[test]
    fn combsum_combmnz_interpolate() {
        let a = run(&[("q", &[("a", 10.0), ("b", 5.0), ("c", 0.0)])]);
        let b = run(&[("q", &[("b", 4.0), ("d", 2.0)])]);
        let scores = |m: Method| -> Vec<(String, f64)> {
            fuse_runs(&[a.clone(), b.clone()], &FusionOptions::new(m))
                .unwrap()
                .queries[0]
                .1
                .iter()
                .map(|d| (d.doc_id.clone(), d.score))
                .collect()
        };
        let s = |x: &str, v: f64| (x.to_string(), v);
        assert_eq!(
            scores(Method::CombSum { norm: Norm::MinMax }),
            vec![s("b", 1.5), s("a", 1.0), s("d", 0.0), s("c", 0.0)]
        );
        assert_eq!(
            scores(Method::CombMnz { norm: Norm::MinMax }),
            vec![s("b", 3.0), s("a", 1.0), s("d", 0.0), s("c", 0.0)]
        );
        assert_eq!(
            scores(Method::Interpolate {
                alpha: 0.25,
                norm: Norm::MinMax
            }),
            vec![s("b", 0.875), s("a", 0.25), s("d", 0.0), s("c", 0.0)]
        );
    }

    #[test]
    fn bad_options_are_rejected() {
        let a = run(&[("q", &[("a", 1.0)])]);
        let mut opts = FusionOptions::new(Method::Rrf { k: 60.0 });
        opts.weights = Some(vec![1.0, 2.0]);
        let e = fuse_runs(&[a.clone()], &opts).unwrap_err().to_string();
        assert!(e.contains("2 weights given for 1 runs"), "{e}");
        let e = fuse_runs(&[], &FusionOptions::new(Method::Rrf { k: 60.0 }))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least one run"), "{e}");
        let interp = FusionOptions::new(Method::Interpolate {
            alpha: 0.5,
            norm: Norm::MinMax,
        });
        let e = fuse_runs(&[a], &interp).unwrap_err().to_string();
        assert!(e.contains("exactly two runs"), "{e}");
    }

    #[test]
    fn builder_rejects_duplicates() {
        let mut b = RunListsBuilder::default();
        let e = b
            .push_query(b"q", [(&b"d"[..], 1.0), (&b"d"[..], 2.0)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("query 'q': document 'd' given twice"), "{e}");
    }
}
