//! Run and qrels files to and from Python's `dict[qid, dict[docid, value]]` (pytrec_eval's shape).

use crate::common::define_register;
use crate::errors::{to_py, DetachCaught, IntoPy};
use clirkit_core::error::IoContext;
use clirkit_core::io::trec;
use clirkit_core::ranking::{Run, ScoredDoc};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::sync::Mutex;

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

/// An input file read as a stream through the Rust input layer (gzip and zstd decompressed, by
/// magic bytes; a byte-order mark dropped), for the Python record readers: `read(n)` hands out the
/// next decompressed bytes, so a large compressed file is never held whole.
#[pyclass(name = "InputStream", module = "clirkit._native", frozen)]
struct PyInputStream {
    path: std::path::PathBuf,
    reader: Mutex<Option<Box<dyn BufRead + Send>>>,
}

#[pymethods]
impl PyInputStream {
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let reader = py
            .detach_caught(|| clirkit_core::io::input::open_input(&path))
            .py_err()?;
        Ok(PyInputStream {
            path,
            reader: Mutex::new(Some(reader)),
        })
    }

    /// Up to `size` decompressed bytes (fewer only at the end of the file; empty there).
    fn read<'py>(&self, py: Python<'py>, size: usize) -> PyResult<Bound<'py, PyBytes>> {
        let mut guard = self.reader.lock().expect("not poisoned");
        let Some(reader) = guard.as_mut() else {
            return Err(to_py(clirkit_core::Error::invalid(format!(
                "{}: the input stream is closed",
                self.path.display()
            ))));
        };
        let path = &self.path;
        let bytes = py
            .detach_caught(|| -> clirkit_core::Result<Vec<u8>> {
                let mut buf = Vec::with_capacity(size);
                reader.take(size as u64).read_to_end(&mut buf).at(path)?;
                Ok(buf)
            })
            .py_err()?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Close the file (reading afterwards is an error).
    fn close(&self) {
        self.reader.lock().expect("not poisoned").take();
    }
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

define_register!(classes: [PyInputStream], functions: [
    max_record_bytes, set_max_record_bytes, read_run, write_run, read_qrels
]);
