//! The fusion driver: validates the options, lines up each output query with its lists in every
//! run, and fuses queries in parallel tasks that write straight into the final entry array.

use super::accumulator::Accumulator;
use super::normalize::Norm;
use super::run_file::write_run_segments;
use super::run_lists::{zeroed_entries, DocEntry, QueryEntry, RunLists, Span};
use super::{combmnz, combsum, interpolate, rrf};
use crate::error::{Error, Result};
use crate::ranking::Run;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::ops::Range;
use std::path::Path;

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
    pub(super) fn run_weights(&self, num_runs: usize) -> Result<Vec<f64>> {
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
            rrf::check_k(k)?;
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
    let plan = FusionPlan::new(runs, options)?;
    plan.fuse_queries(0..plan.num_queries())
}

/// Fuse `runs` and write the fused run to `path` as a TREC run tagged `tag`, atomically: the
/// same bytes and the same errors as [`fuse`] then
/// [`write_run_lists`](super::run_file::write_run_lists), but queries are fused segment by
/// segment on a thread of their own, ahead of the segments being formatted and written, so that
/// fusing overlaps the disk writing. That thread fuses alone, in a pool of its own: in the
/// writers' pool, a formatting thread waiting on a join would steal fusion work and leave the
/// disk idle.
pub fn fuse_to_file(
    runs: &[&RunLists],
    options: &FusionOptions,
    path: impl AsRef<Path>,
    tag: &str,
) -> Result<()> {
    let plan = FusionPlan::new(runs, options)?;
    let segment = (plan.num_queries() / SEGMENTS).max(MIN_QUERIES_PER_SEGMENT);
    let fusing_pool = crate::parallel::pool(1)?;
    std::thread::scope(|scope| {
        // Segments in order, then `None`: a fusing thread that ends without it (a panic) must
        // not pass for the end of the run, or a cut run would be committed.
        let (send, fused) = std::sync::mpsc::sync_channel::<Result<Option<RunLists>>>(1);
        let plan = &plan;
        scope.spawn(move || {
            fusing_pool.install(|| {
                let mut arena_total = 0usize;
                for start in (0..plan.num_queries()).step_by(segment) {
                    let lists = plan
                        .fuse_queries(start..(start + segment).min(plan.num_queries()))
                        .and_then(|lists| {
                            arena_total += lists.arena().len();
                            if arena_total > u32::MAX as usize {
                                return Err(arena_too_large());
                            }
                            Ok(lists)
                        });
                    let failed = lists.is_err();
                    // The writer may be gone after an error of its own: nothing to fuse for.
                    if send.send(lists.map(Some)).is_err() || failed {
                        return;
                    }
                }
                let _ = send.send(Ok(None));
            })
        });
        // A fusion error wins over a writing error, as when the whole run is fused first.
        let mut fusion_error = None;
        let written = write_run_segments(path, tag, || match fused.recv() {
            Ok(Ok(lists)) => Ok(lists),
            Ok(Err(e)) => {
                fusion_error = Some(e);
                Err(std::io::Error::other("fusion failed"))
            }
            Err(_) => Err(std::io::Error::other("the fusing thread stopped")),
        });
        match fusion_error {
            Some(e) => Err(e),
            None => written,
        }
    })
}

/// Segments per run in [`fuse_to_file`]: the first one is fused before any writing starts.
const SEGMENTS: usize = 32;
/// Fewest queries per segment, so that per-segment costs stay small against the work.
const MIN_QUERIES_PER_SEGMENT: usize = 64;

fn arena_too_large() -> Error {
    Error::invalid("fused run too large: more than 4 GiB of query and long document ids")
}

/// What fusing any range of output queries needs: the validated options, and for every output
/// query its query index in each run that has it.
struct FusionPlan<'a> {
    runs: &'a [&'a RunLists],
    method: Method,
    weights: Vec<f64>,
    depth: usize,
    top: usize,
    rows: Vec<(&'a [u8], Vec<Option<usize>>)>,
    arenas: Vec<&'a [u8]>,
    rrf_contributions: Vec<Vec<f64>>,
}

impl<'a> FusionPlan<'a> {
    fn new(runs: &'a [&'a RunLists], options: &FusionOptions) -> Result<Self> {
        let weights = options.run_weights(runs.len())?;
        let depth = options.depth.unwrap_or(usize::MAX);
        let top = options.top.unwrap_or(usize::MAX);

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
        let rrf_contributions: Vec<Vec<f64>> = match options.method {
            Method::Rrf { k } => rrf::run_contributions(runs, &weights, k, depth),
            _ => Vec::new(),
        };
        Ok(FusionPlan {
            runs,
            method: options.method,
            weights,
            depth,
            top,
            rows,
            arenas: runs.iter().map(|r| r.arena()).collect(),
            rrf_contributions,
        })
    }

    fn num_queries(&self) -> usize {
        self.rows.len()
    }

    /// Fuse output queries `range` into a run of their own.
    fn fuse_queries(&self, range: Range<usize>) -> Result<RunLists> {
        let FusionPlan {
            runs,
            method,
            ref weights,
            depth,
            top,
            ..
        } = *self;
        let rows = &self.rows[range];
        // Each task gets room for the longest possible fused lists of its queries, so tasks
        // write in parallel straight into the final entry array; what a task leaves unused is
        // one piece of slack at the end of its region, never touched (so it costs no memory
        // pages).
        let inputs = |per_run: &[Option<usize>]| -> usize {
            per_run
                .iter()
                .enumerate()
                .filter_map(|(r, q)| q.map(|q| runs[r].query_entries()[q].docs.len().min(depth)))
                .sum()
        };
        let per_task = (rows.len() / (rayon::current_num_threads() * TASKS_PER_THREAD))
            .max(MIN_QUERIES_PER_TASK);
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

        let tasks: Vec<std::result::Result<TaskOutput, String>> = rows
            .par_chunks(per_task)
            .zip(regions.into_par_iter())
            .map_init(
                || Accumulator::new(&self.arenas),
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
                            match method {
                                Method::Rrf { .. } => {
                                    rrf::accumulate(r, list, &self.rrf_contributions[r], acc)
                                }
                                Method::CombSum { norm } => {
                                    combsum::accumulate(r, list, weights[r], norm, acc)
                                }
                                Method::CombMnz { norm } => {
                                    combmnz::accumulate(r, list, weights[r], norm, acc)
                                }
                                Method::Interpolate { norm, .. } => {
                                    interpolate::accumulate(r, list, weights[r], norm, acc)
                                }
                            }
                        }
                        let qid_span = Span {
                            start: task.arena.len() as u32,
                            len: qid.len() as u32,
                        };
                        task.arena.extend_from_slice(qid);
                        let before = task.arena.len();
                        if let Method::CombMnz { .. } = method {
                            acc.scale_scores(combmnz::scale);
                        }
                        let n = acc.finish_into(top, &mut region[filled..], &mut task.arena)?;
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
                return Err(arena_too_large());
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
