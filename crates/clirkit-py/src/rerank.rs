//! Reranking bindings: the batched sliding-window state, permutation parsing, and loading the
//! texts of just the candidate documents from a corpus.

use crate::common::define_register;
use crate::errors::{DetachCaught, IntoPy};
use crate::io::PyRun;
use clirkit_core::io::jsonl::{parse_record, read_records, FieldSpec, LineReader};
use clirkit_core::rerank::{self, Outcome, RerankState as CoreState, WindowPlan, WindowStatus};
use pyo3::prelude::*;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

/// (query index, window number, start position, doc ids in current order).
type PendingWindow = (usize, usize, usize, Vec<String>);

/// A window's answer from Python: text, 1-based ids, or None for a failed window.
#[derive(FromPyObject)]
enum Answer {
    Text(String),
    Ids(Vec<i64>),
}

/// Sliding-window reranking state over many queries (see `clirkit.rerank`).
#[pyclass(name = "RerankState", module = "clirkit._native")]
pub struct PyRerankState {
    qids: Vec<String>,
    docs: Vec<Vec<String>>,
    state: CoreState,
}

#[pymethods]
impl PyRerankState {
    /// `candidates`: (qid, [docid, ...] in first-stage order) per query.
    #[new]
    #[pyo3(signature = (candidates, depth = 100, window = 20, stride = 10))]
    fn new(
        candidates: Vec<(String, Vec<String>)>,
        depth: usize,
        window: usize,
        stride: usize,
    ) -> PyResult<Self> {
        let plan = WindowPlan::new(depth, window, stride).py_err()?;
        let (qids, docs): (Vec<String>, Vec<Vec<String>>) = candidates.into_iter().unzip();
        let state = CoreState::new(docs.iter().map(Vec::len), plan);
        Ok(PyRerankState { qids, docs, state })
    }

    /// The current step: (query index, window number, start, [docid, ...]) for every query with
    /// a pending window.
    fn pending(&self) -> PyResult<Vec<PendingWindow>> {
        self.state
            .pending()
            .into_iter()
            .map(|w| {
                let positions = self.state.window_docs(w.query).py_err()?;
                let ids = positions
                    .iter()
                    .map(|&p| self.docs[w.query][p as usize].clone())
                    .collect();
                Ok((w.query, w.step, w.range.start, ids))
            })
            .collect()
    }

    /// Apply the answer for a query's pending window. Returns (status, duplicates,
    /// out_of_range, missing) with status "applied", "repaired", "unparsable" or "failed".
    #[pyo3(signature = (query, answer))]
    fn apply(
        &mut self,
        query: usize,
        answer: Option<Answer>,
    ) -> PyResult<(&'static str, u32, u32, u32)> {
        let status = match &answer {
            None => self.state.apply(query, Outcome::Failed),
            Some(Answer::Text(t)) => self.state.apply(query, Outcome::Text(t)),
            Some(Answer::Ids(ids)) => {
                // Zero and negative ids are out of range, like any id past the window.
                let ids: Vec<u64> = ids.iter().map(|&i| i.max(0) as u64).collect();
                self.state.apply(query, Outcome::Ids(&ids))
            }
        }
        .py_err()?;
        Ok(match status {
            WindowStatus::Applied => ("applied", 0, 0, 0),
            WindowStatus::Repaired(r) => ("repaired", r.duplicates, r.out_of_range, r.missing),
            WindowStatus::Unparsable => ("unparsable", 0, 0, 0),
            WindowStatus::Failed => ("failed", 0, 0, 0),
        })
    }

    #[getter]
    fn qids(&self) -> Vec<String> {
        self.qids.clone()
    }

    #[getter]
    fn total_windows(&self) -> usize {
        self.state.total_windows()
    }

    #[getter]
    fn applied_windows(&self) -> usize {
        self.state.applied_windows()
    }

    fn is_finished(&self) -> bool {
        self.state.is_finished()
    }

    /// The reranked run: per query every candidate, the reranked top first, then the rest in
    /// first-stage order, scored n, n-1, ..., 1 (n candidates) so canonical order is this order.
    fn result(&self) -> PyResult<PyRun> {
        (0..self.qids.len())
            .map(|q| {
                let order = self.state.order(q).py_err()?;
                let n = order.len();
                let docs = order
                    .iter()
                    .enumerate()
                    .map(|(i, &p)| (self.docs[q][p as usize].clone(), (n - i) as f64))
                    .collect();
                Ok((self.qids[q].clone(), docs))
            })
            .collect()
    }
}

/// The 0-based permutation of `n` positions a model's answer stands for, after RankGPT-style
/// repair, with (duplicates, out_of_range, missing); None if no identifier is usable.
#[pyfunction]
fn parse_permutation(text: &str, n: usize) -> Option<(Vec<usize>, (u32, u32, u32))> {
    let ids = rerank::parse_permutation(text);
    rerank::repair(&ids, n).map(|(p, r)| (p, (r.duplicates, r.out_of_range, r.missing)))
}

/// The windows [(start, end), ...] for a list of `length` documents, in processing order.
#[pyfunction]
#[pyo3(signature = (length, depth = 100, window = 20, stride = 10))]
fn window_plan(
    length: usize,
    depth: usize,
    window: usize,
    stride: usize,
) -> PyResult<Vec<(usize, usize)>> {
    let plan = WindowPlan::new(depth, window, stride).py_err()?;
    Ok(plan
        .windows(length)
        .into_iter()
        .map(|r| (r.start, r.end))
        .collect())
}

/// Texts of the records whose ids are in `ids`, from a JSONL (or id<TAB>text) file; corpus
/// fields (`title` + `text`) unless `queries` is true. JSONL is streamed: only wanted records
/// are kept.
#[pyfunction]
#[pyo3(signature = (path, ids = None, queries = false))]
fn load_texts(
    py: Python<'_>,
    path: PathBuf,
    ids: Option<HashSet<String>>,
    queries: bool,
) -> PyResult<HashMap<String, String>> {
    let spec = if queries {
        FieldSpec::queries()
    } else {
        FieldSpec::corpus()
    };
    py.detach_caught(|| -> clirkit_core::Result<HashMap<String, String>> {
        let wanted = |id: &str| ids.as_ref().is_none_or(|s| s.contains(id));
        let tsv = clirkit_core::io::jsonl::is_tsv(&path);
        if tsv {
            return Ok(read_records(&path, &spec)?
                .into_iter()
                .filter(|r| wanted(&r.id))
                .map(|r| (r.id, r.text))
                .collect());
        }
        let mut reader = LineReader::open(&path)?;
        let mut out = HashMap::new();
        loop {
            let chunk = reader.next_chunk(8192)?;
            if chunk.is_empty() {
                return Ok(out);
            }
            let records: Vec<(String, String)> = chunk
                .par_iter()
                .map(|(line, bytes)| parse_record(&path, *line, bytes, &spec))
                .filter_map(|r| match r {
                    Ok(r) if wanted(&r.id) => Some(Ok((r.id, r.text))),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<clirkit_core::Result<_>>()?;
            out.extend(records);
        }
    })
    .py_err()
}

define_register!(classes: [PyRerankState], functions: [parse_permutation, window_plan, load_texts]);
