//! Run and qrels files to and from Python's `dict[qid, dict[docid, value]]` (pytrec_eval's shape).

use crate::errors::{DetachCaught, IntoPy};
use clirkit_core::io::trec;
use clirkit_core::ranking::{Run, ScoredDoc};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::HashMap;

pub type PyRun = Vec<(String, Vec<(String, f64)>)>;
/// Qrels as ordered (qid, [(docid, label)]) pairs.
pub type PyQrels = Vec<(String, Vec<(String, i32)>)>;

/// Convert a core run into ordered (qid, [(docid, score)]) pairs.
pub fn run_to_py(run: Run) -> PyRun {
    run.queries
        .into_iter()
        .map(|(q, docs)| (q, docs.into_iter().map(|d| (d.doc_id, d.score)).collect()))
        .collect()
}

/// Build a core run from a `dict[qid, dict[docid, score]]`.
pub fn run_from_py(run: HashMap<String, HashMap<String, f64>>) -> Run {
    let mut qids: Vec<String> = run.keys().cloned().collect();
    qids.sort();
    let mut out = Run::new();
    let mut run = run;
    for q in qids {
        let docs = run.remove(&q).unwrap_or_default();
        out.push(
            q,
            docs.into_iter()
                .map(|(d, s)| ScoredDoc::new(d, s))
                .collect(),
        );
    }
    out
}

/// The longest record (line) every line reader accepts, in bytes.
#[pyfunction]
fn max_record_bytes() -> usize {
    clirkit_core::io::jsonl::max_record_bytes()
}

/// Set the longest record (line) every line reader accepts, in bytes, for this process.
#[pyfunction]
fn set_max_record_bytes(limit: usize) -> PyResult<()> {
    clirkit_core::io::jsonl::set_max_record_bytes(limit).py_err()
}

/// An input file's bytes, decompressed (gzip or zstd, by magic bytes), a byte-order mark dropped:
/// the Rust input layer, for the Python readers' zstd inputs.
#[pyfunction]
fn read_input_bytes<'py>(py: Python<'py>, path: std::path::PathBuf) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = py
        .detach_caught(|| clirkit_core::io::input::read_input(&path))
        .py_err()?;
    Ok(PyBytes::new(py, &bytes))
}

/// Read a TREC run: a list of (qid, [(docid, score), ...]) in canonical order.
#[pyfunction]
fn read_run(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyRun> {
    py.detach_caught(|| trec::read_run(&path))
        .py_err()
        .map(run_to_py)
}

/// Write a run given as dict[qid, dict[docid, score]] in canonical order, atomically.
#[pyfunction]
#[pyo3(signature = (path, run, tag = "clirkit"))]
fn write_run(
    py: Python<'_>,
    path: std::path::PathBuf,
    run: HashMap<String, HashMap<String, f64>>,
    tag: &str,
) -> PyResult<()> {
    let run = run_from_py(run);
    py.detach_caught(|| trec::write_run(&path, &run, tag))
        .py_err()
}

/// Read qrels (TREC or BEIR TSV) as a list of (qid, [(docid, label), ...]) in file order.
#[pyfunction]
fn read_qrels(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyQrels> {
    py.detach_caught(|| trec::read_qrels(&path))
        .py_err()
        .map(|q| q.queries)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(max_record_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(read_input_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(set_max_record_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(read_run, m)?)?;
    m.add_function(wrap_pyfunction!(write_run, m)?)?;
    m.add_function(wrap_pyfunction!(read_qrels, m)?)?;
    Ok(())
}
