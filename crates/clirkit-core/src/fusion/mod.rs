//! Fusion of several runs into one: reciprocal rank fusion ([`rrf`]), CombSUM ([`combsum`]),
//! CombMNZ ([`combmnz`]) and weighted interpolation ([`interpolate`]) of per-query normalized
//! scores ([`normalize`]).
//!
//! All methods work on [`RunLists`], the common input type: a run held compactly (one flat array
//! of (16-byte id key, score) entries; ids longer than 15 bytes and query ids in one byte arena)
//! with every query's documents in canonical order, so "rank" always means the 1-based position
//! in canonical order. It is read
//! straight from a TREC file by a specialized parallel parser ([`run_file`]), or built from a
//! [`Run`]. Fusion is parallel over queries and its result does not depend on the thread count:
//! every query is fused independently, contributions are added in run order, and the output is
//! sorted canonically.

mod accumulator;
pub mod combmnz;
pub mod combsum;
mod id_key;
pub mod interpolate;
pub mod method_name;
pub mod normalize;
mod order;
pub mod rrf;
pub mod run_file;

use crate::error::{Error, Result};
use crate::ranking::{Run, ScoredDoc};
use accumulator::Accumulator;
use id_key::IdKey;
use normalize::Norm;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

/// A byte range in a [`RunLists`] arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u32,
    pub len: u32,
}

/// One ranked document: its id key and its score.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct DocEntry {
    pub id: IdKey,
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
///
/// Document ids are 16-byte keys ([`IdKey`]): ids of up to 15 bytes are held in the key itself,
/// longer ones (and query ids) in one byte arena. Entries outside every query's range are unused
/// slack (a fused run reserves room for the longest possible fused lists of its queries).
#[derive(Debug, Clone, Default)]
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
        self.queries.iter().map(|q| q.docs.len()).sum()
    }

    /// The id of query `q` (0-based, in run order).
    pub fn query_id(&self, q: usize) -> &str {
        text(self.bytes(self.queries[q].qid))
    }

    /// The documents of query `q` in canonical order, as (doc id, score).
    pub fn query_docs(&self, q: usize) -> impl ExactSizeIterator<Item = (&str, f64)> + '_ {
        self.doc_entries(q)
            .iter()
            .map(move |d| (text(self.doc_bytes(d)), d.score))
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

    /// The bytes of a document id of this run.
    pub(crate) fn doc_bytes<'a>(&'a self, doc: &'a DocEntry) -> &'a [u8] {
        doc.id.bytes(&self.arena)
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

fn text(bytes: &[u8]) -> &str {
    // Arenas and keys hold only ids copied from `&str`s or from UTF-8-validated files.
    std::str::from_utf8(bytes).expect("ids are UTF-8")
}

/// `n` entries, allocated zeroed so that pages never written (fusion slack) cost nothing.
pub(crate) fn zeroed_entries(n: usize) -> Vec<DocEntry> {
    if n == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<DocEntry>(n).expect("entry array size overflows");
    // SAFETY: the allocation has `Vec<DocEntry>`'s layout for capacity `n` and comes from the
    // global allocator; all-zero bytes are a valid `DocEntry` (bytes and an f64 0.0).
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut DocEntry;
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(ptr, n, n)
    }
}

/// Map the pages of `entries`, fresh memory about to be written, in one system call instead
/// of one page fault per page: writing a fused run is mostly faulting in its pages, and on the
/// VM measured this took about a quarter off that (see benches/RESULTS.md, "Fusion vs ranx").
/// Linux 5.14 or later; where the call is missing or fails, the pages are faulted in as they are
/// written.
pub(crate) fn prefault(entries: &mut [DocEntry]) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        let begin = entries.as_mut_ptr() as usize;
        let end = begin + std::mem::size_of_val(entries);
        // Whole pages only: the first, partly written one is already mapped.
        let first = begin.next_multiple_of(page);
        if end >= first + 2 * page {
            // SAFETY: the range lies inside `entries`' allocation (its last page may extend
            // past it, into memory of the same mapping); MADV_POPULATE_WRITE maps pages
            // without changing their contents.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    (end - first) & !(page - 1),
                    libc::MADV_POPULATE_WRITE,
                );
            }
        }
    }
}

/// Appends queries to a [`RunLists`], sorting each query's documents canonically and rejecting
/// duplicate documents, repeated queries, non-finite scores and arenas past 4 GiB.
#[derive(Default)]
pub struct RunListsBuilder {
    lists: RunLists,
    seen_queries: FxHashSet<Vec<u8>>,
}

impl RunListsBuilder {
    fn intern_query(&mut self, bytes: &[u8]) -> Result<Span> {
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
        if !self.seen_queries.insert(qid.to_vec()) {
            return Err(Error::invalid(format!("query '{qid_text}' given twice")));
        }
        let qid_span = self.intern_query(qid)?;
        let first = self.lists.docs.len();
        for (id, score) in docs {
            let doc = || String::from_utf8_lossy(id);
            if !score.is_finite() {
                return Err(Error::invalid(format!(
                    "query '{qid_text}', document '{}': score {score} is not finite",
                    doc()
                )));
            }
            let id = IdKey::encode(id, &mut self.lists.arena).map_err(|e| {
                Error::invalid(format!("query '{qid_text}', document '{}': {e}", doc()))
            })?;
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

/// Canonical order of two entries of one run.
#[inline]
fn entry_cmp(arena: &[u8], a: &DocEntry, b: &DocEntry) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| b.id.cmp_ids(arena, &a.id, arena))
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
pub(crate) fn first_duplicate<'a>(arena: &'a [u8], list: &'a [DocEntry]) -> Option<&'a [u8]> {
    let mut seen: FxHashSet<&[u8]> = FxHashSet::default();
    seen.reserve(list.len());
    list.iter()
        .map(|d| d.id.bytes(arena))
        .find(|id| !seen.insert(id))
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

/// Parallel tasks per worker thread: enough to balance uneven queries across workers.
const TASKS_PER_THREAD: usize = 8;
/// Fewest queries per task, so that per-task costs stay small against the work.
const MIN_QUERIES_PER_TASK: usize = 16;

/// What one parallel task produced besides its documents, which it wrote one query after the
/// other into its own region of the entry array: its arena (query ids and long doc ids), and
/// per query the query id and the number of fused documents.
struct TaskOutput {
    arena: Vec<u8>,
    queries: Vec<(Span, usize)>,
    /// Whether any fused document has a long id (whose key points into `arena`).
    long_ids: bool,
}

/// Fuse `runs` into one run. Queries present in any run are output, in order of first
/// appearance (first run first); each query's fused documents are in canonical order.
pub fn fuse(runs: &[&RunLists], options: &FusionOptions) -> Result<RunLists> {
    let weights = options.run_weights(runs.len())?;
    let depth = options.depth.unwrap_or(usize::MAX);
    let top = options.top.unwrap_or(usize::MAX);

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

    // Each task gets room for the longest possible fused lists of its queries, so tasks write
    // in parallel straight into the final entry array; what a task leaves unused is one piece
    // of slack at the end of its region, never touched (so it costs no memory pages).
    let inputs = |per_run: &[Option<usize>]| -> usize {
        per_run
            .iter()
            .enumerate()
            .filter_map(|(r, q)| q.map(|q| runs[r].query_entries()[q].docs.len().min(depth)))
            .sum()
    };
    let per_task =
        (rows.len() / (rayon::current_num_threads() * TASKS_PER_THREAD)).max(MIN_QUERIES_PER_TASK);
    let mut task_starts = vec![0usize];
    for chunk in rows.chunks(per_task) {
        let room: usize = chunk
            .iter()
            .map(|(_, per_run)| inputs(per_run).min(top))
            .sum();
        task_starts.push(task_starts[task_starts.len() - 1] + room);
    }
    let mut docs = zeroed_entries(task_starts[task_starts.len() - 1]);
    let mut regions: Vec<&mut [DocEntry]> = Vec::with_capacity(task_starts.len() - 1);
    let mut rest: &mut [DocEntry] = &mut docs;
    for w in task_starts.windows(2) {
        let (head, tail) = rest.split_at_mut(w[1] - w[0]);
        regions.push(head);
        rest = tail;
    }

    let arenas: Vec<&[u8]> = runs.iter().map(|r| &r.arena[..]).collect();
    let rrf_contributions: Vec<Vec<f64>> = match options.method {
        Method::Rrf { k } => runs
            .iter()
            .zip(&weights)
            .map(|(run, &w)| {
                let longest = run.queries.iter().map(|q| q.docs.len()).max();
                rrf::contributions(w, k, longest.unwrap_or(0).min(depth))
            })
            .collect(),
        _ => Vec::new(),
    };
    let tasks: Vec<std::result::Result<TaskOutput, String>> = rows
        .par_chunks(per_task)
        .zip(regions.into_par_iter())
        .map_init(
            || Accumulator::new(&arenas),
            |acc, (rows, region)| {
                let mut task = TaskOutput {
                    arena: Vec::new(),
                    queries: Vec::with_capacity(rows.len()),
                    long_ids: false,
                };
                let mut filled = 0;
                for (qid, per_run) in rows {
                    acc.start(inputs(per_run));
                    for (r, q) in per_run.iter().enumerate() {
                        let Some(q) = *q else { continue };
                        let list = runs[r].doc_entries(q);
                        let list = &list[..list.len().min(depth)];
                        match options.method {
                            Method::Rrf { .. } => {
                                rrf::accumulate(r, list, &rrf_contributions[r], acc)
                            }
                            Method::CombSum { norm }
                            | Method::CombMnz { norm }
                            | Method::Interpolate { norm, .. } => {
                                combsum::accumulate(r, list, weights[r], norm, acc)
                            }
                        }
                    }
                    let qid_span = Span {
                        start: task.arena.len() as u32,
                        len: qid.len() as u32,
                    };
                    task.arena.extend_from_slice(qid);
                    let before = task.arena.len();
                    let n = acc.finish_into(
                        options.method,
                        top,
                        &mut region[filled..],
                        &mut task.arena,
                    )?;
                    filled += n;
                    task.long_ids |= task.arena.len() > before;
                    task.queries.push((qid_span, n));
                }
                Ok(task)
            },
        )
        .collect();

    // Join the tasks' arenas, moving their spans and long-id keys.
    let mut arena = Vec::new();
    let mut queries = Vec::with_capacity(rows.len());
    for (task, &task_start) in tasks.into_iter().zip(&task_starts) {
        let task = task.map_err(Error::invalid)?;
        if arena.len() + task.arena.len() > u32::MAX as usize {
            return Err(Error::invalid(
                "fused run too large: more than 4 GiB of query and long document ids",
            ));
        }
        let base = arena.len() as u32;
        arena.extend_from_slice(&task.arena);
        let mut start = task_start;
        for (qid, n) in task.queries {
            if task.long_ids && base > 0 {
                for d in &mut docs[start..start + n] {
                    d.id = d.id.shifted(base);
                }
            }
            queries.push(QueryEntry {
                qid: Span {
                    start: qid.start + base,
                    len: qid.len,
                },
                docs: start..start + n,
            });
            start += n;
        }
    }
    Ok(RunLists::from_parts(arena, queries, docs))
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
        let e = fuse_runs(std::slice::from_ref(&a), &opts)
            .unwrap_err()
            .to_string();
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

    /// Per query: its id and its documents as (doc id, fused score).
    type Fused = Vec<(String, Vec<(String, f64)>)>;

    /// Naive fusion over strings: (doc, score) per query in canonical order.
    fn reference(runs: &[Run], options: &FusionOptions) -> Fused {
        let weights = options.run_weights(runs.len()).unwrap();
        // Per query: (doc id, sum, hits) in order of first appearance.
        type Sums = Vec<(String, f64, u32)>;
        let mut out: Vec<(String, Sums)> = Vec::new();
        for (run, w) in runs.iter().zip(&weights) {
            for (qid, docs) in &run.queries {
                let mut docs = docs.clone();
                crate::ranking::sort_canonical(&mut docs);
                docs.truncate(options.depth.unwrap_or(usize::MAX));
                let normalizer = match options.method {
                    Method::Rrf { .. } => None,
                    Method::CombSum { norm }
                    | Method::CombMnz { norm }
                    | Method::Interpolate { norm, .. } => {
                        Some(norm.fit(docs.iter().map(|d| d.score)))
                    }
                };
                let at = match out.iter().position(|(q, _)| q == qid) {
                    Some(at) => at,
                    None => {
                        out.push((qid.clone(), Vec::new()));
                        out.len() - 1
                    }
                };
                for (i, d) in docs.iter().enumerate() {
                    let value = match (options.method, &normalizer) {
                        (Method::Rrf { k }, _) => w / (k + (i + 1) as f64),
                        (_, Some(n)) => w * n.apply(d.score),
                        _ => unreachable!(),
                    };
                    let acc = &mut out[at].1;
                    match acc.iter_mut().find(|(id, _, _)| *id == d.doc_id) {
                        Some(e) => {
                            e.1 += value;
                            e.2 += 1;
                        }
                        None => acc.push((d.doc_id.clone(), value, 1)),
                    }
                }
            }
        }
        out.into_iter()
            .map(|(q, acc)| {
                let mut docs: Vec<ScoredDoc> = acc
                    .into_iter()
                    .map(|(id, s, hits)| match options.method {
                        Method::CombMnz { .. } => ScoredDoc::new(id, s * hits as f64),
                        _ => ScoredDoc::new(id, s),
                    })
                    .collect();
                crate::ranking::sort_canonical(&mut docs);
                docs.truncate(options.top.unwrap_or(usize::MAX));
                (q, docs.into_iter().map(|d| (d.doc_id, d.score)).collect())
            })
            .collect()
    }

    /// `fuse_runs` as (doc id, score) pairs per query.
    fn fused(runs: &[Run], options: &FusionOptions) -> Fused {
        fuse_runs(runs, options)
            .unwrap()
            .queries
            .into_iter()
            .map(|(q, docs)| (q, docs.into_iter().map(|d| (d.doc_id, d.score)).collect()))
            .collect()
    }

    /// A seeded generator of numbers below its argument (a linear congruential generator).
    fn seeded_below(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        }
    }

    #[test]
    fn long_and_short_ids_with_ties_match_the_reference() {
        // Ids around the 15-byte inline limit, sharing 8-byte prefixes, with many score ties.
        let ids: Vec<String> = (0..60)
            .map(|i| match i % 5 {
                0 => format!("d{i}"),
                1 => format!("doc-00000000-{i:03}"), // 16 bytes: the shortest long id
                2 => format!("doc-0000000-{i:03}"),  // 15 bytes: the longest inline id
                3 => format!("doc-0000{i:04}"),
                _ => format!("doc-00000000-{i:03}-{}", "x".repeat(i % 7)),
            })
            .collect();
        let mut next = seeded_below(7);
        let runs: Vec<Run> = (0..3)
            .map(|_| {
                let mut r = Run::new();
                for q in 0..20 {
                    let mut docs: Vec<ScoredDoc> = Vec::new();
                    for id in &ids {
                        if next(3) == 0 {
                            docs.push(ScoredDoc::new(id, next(4) as f64 * 0.5));
                        }
                    }
                    if !docs.is_empty() {
                        r.push(format!("q{q}"), docs);
                    }
                }
                r
            })
            .collect();
        let methods = [
            Method::Rrf { k: 60.0 },
            Method::CombSum { norm: Norm::MinMax },
            Method::CombMnz { norm: Norm::ZScore },
        ];
        for method in methods {
            for (depth, top) in [(None, None), (Some(5), Some(7))] {
                let mut options = FusionOptions::new(method);
                options.depth = depth;
                options.top = top;
                let got = fused(&runs, &options);
                assert_eq!(
                    got,
                    reference(&runs, &options),
                    "{method:?} {depth:?} {top:?}"
                );
            }
        }
    }

    #[test]
    fn long_lists_match_the_reference() {
        // Lists long enough that each query's output spans many pages (the prefaulted path),
        // several queries per task, overlapping candidates and RRF ties.
        let mut next = seeded_below(11);
        let runs: Vec<Run> = (0..3)
            .map(|_| {
                let mut r = Run::new();
                for q in 0..40 {
                    let mut docs = Vec::new();
                    for d in 0..1500 {
                        if next(2) == 0 {
                            docs.push(ScoredDoc::new(format!("q{q}-d{d}"), next(1000) as f64));
                        }
                    }
                    docs.truncate(700);
                    r.push(format!("q{q}"), docs);
                }
                r
            })
            .collect();
        for method in [
            Method::Rrf { k: 60.0 },
            Method::CombMnz { norm: Norm::MinMax },
        ] {
            let options = FusionOptions::new(method);
            let got = fused(&runs, &options);
            assert_eq!(got, reference(&runs, &options), "{method:?}");
        }
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
