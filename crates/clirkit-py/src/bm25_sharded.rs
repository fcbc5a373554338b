//! Sharded BM25's building blocks for `clirkit.distributed`: cutting a corpus into line ranges,
//! a sharded index of any kind built by line ranges under construction (`ShardedIndexBuild`) and merging the shards' hits into one
//! run (a sharded index's checked manifest, of any kind, is `index_kinds.rs`'s
//! `sharded_manifest`). Shards themselves are `Bm25Index.build(range=...)`,
//! `Bm25Index.open_shard` and `Bm25Index.search_shard`.

use crate::common::{define_register, BuildSlot};
use crate::errors::{DetachCaught, IntoPy};
use clirkit_core::error::Error;
use clirkit_core::index_kinds::{finish_sharded, LINE_SHARDED_KINDS};
use clirkit_core::io::atomic::AtomicFile;
use clirkit_core::io::id_text::write_error;
use clirkit_core::io::jsonl::split_lines;
use clirkit_core::io::trec::write_run_to;
use clirkit_core::ranking::Run;
use clirkit_core::sharded::{self, ShardedDir};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// Cut a plain JSONL corpus into `parts` ranges of whole lines of about equal size:
/// (start byte, end byte, first line number) each.
#[pyfunction]
fn split_corpus(py: Python<'_>, corpus: PathBuf, parts: usize) -> PyResult<Vec<(u64, u64, u64)>> {
    let ranges = py.detach_caught(|| split_lines(&corpus, parts)).py_err()?;
    Ok(ranges
        .into_iter()
        .map(|r| (r.start, r.end, r.first_line))
        .collect())
}

/// The kind of the sharded index at `index` (`"bm25"`, ...), or `None` if it holds none.
#[pyfunction]
fn sharded_index_kind(index: PathBuf) -> Option<String> {
    clirkit_core::sharded::kind(&index)
}

/// A queries file read as `Bm25Index.search_file` reads it: (qid, text, lang-or-None) triples.
#[pyfunction]
fn read_bm25_queries(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<Vec<(String, String, Option<String>)>> {
    let queries = py
        .detach_caught(|| clirkit_core::bm25::read_queries(&path))
        .py_err()?;
    Ok(queries
        .into_iter()
        .map(|q| (q.id, q.text, q.lang))
        .collect())
}

/// Merge shards' hits (`Bm25Index.search_shard` of the same queries `qids`) into each query's
/// top `k` in canonical order. With `output`, the run is written there (atomically, with `tag`:
/// the bytes the single index's run file has) and `None` returned; else a dict
/// `{qid: [(docid, score), ...]}` in query order.
#[pyfunction]
#[pyo3(signature = (parts, qids, k, output=None, tag="clirkit-bm25"))]
fn merge_shard_hits<'py>(
    py: Python<'py>,
    parts: Vec<Vec<u8>>,
    qids: Vec<String>,
    k: usize,
    output: Option<PathBuf>,
    tag: &str,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let run: Run = py
        .detach_caught(|| {
            let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            let run = sharded::merge_hits(&parts, &qids, k)?;
            if let Some(path) = &output {
                let mut out = AtomicFile::create(path)?;
                write_run_to(&mut out, &run, tag).map_err(|e| write_error(path, e))?;
                out.commit()?;
            }
            Ok(run)
        })
        .py_err()?;
    if output.is_some() {
        return Ok(None);
    }
    let dict = PyDict::new(py);
    for (qid, docs) in run.queries {
        let docs: Vec<(String, f64)> = docs.into_iter().map(|d| (d.doc_id, d.score)).collect();
        dict.set_item(qid, docs)?;
    }
    Ok(Some(dict))
}

/// A sharded index of kind `kind` (`"bm25"` or `"impact"`) under construction: build shard `i`
/// into `shard_dir(i)` (from any process), then `finish()` checks the shards against each other
/// (BM25 also merges their statistics) and moves the index into place. Released unfinished, it
/// is removed with its shards.
#[pyclass(name = "ShardedIndexBuild", module = "clirkit._native", frozen)]
pub struct PyShardedIndexBuild {
    kind: String,
    inner: BuildSlot<ShardedDir>,
}

#[pymethods]
impl PyShardedIndexBuild {
    #[new]
    fn new(kind: String, index: PathBuf, shards: usize) -> PyResult<Self> {
        if !LINE_SHARDED_KINDS.contains(&kind.as_str()) {
            return Err(Error::invalid(format!(
                "no sharded build of kind '{kind}' (kinds: {})",
                LINE_SHARDED_KINDS.join(", ")
            )))
            .py_err();
        }
        let build = ShardedDir::create(&index, shards).py_err()?;
        Ok(PyShardedIndexBuild {
            kind,
            inner: BuildSlot::new(build),
        })
    }

    #[getter]
    fn kind(&self) -> &str {
        &self.kind
    }

    #[getter]
    fn shards(&self) -> PyResult<usize> {
        self.inner.with(ShardedDir::shards)
    }

    /// Where shard `i` is to be built.
    fn shard_dir(&self, i: usize) -> PyResult<PathBuf> {
        self.inner.with(|build| build.shard_dir(i))
    }

    /// Check the shards and commit the sharded index; returns its manifest as JSON.
    fn finish(&self, py: Python<'_>) -> PyResult<String> {
        self.inner.finish(py, |dir| finish_sharded(&self.kind, dir))
    }

    /// Give the build up now (its directory and shards are removed).
    fn abort(&self) {
        self.inner.abort();
    }
}

define_register!(classes: [PyShardedIndexBuild], functions: [
    split_corpus, sharded_index_kind, read_bm25_queries, merge_shard_hits
]);
