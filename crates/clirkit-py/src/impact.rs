//! `clirkit._native.ImpactIndex`: a thin wrapper over `clirkit_core::impact`. Builds and
//! searches run with the GIL released; batch results are BM25's `SearchResults`.

use crate::bm25::{hits_to_py, DocIds, PySearchResults};
use crate::common::define_register;
use crate::errors::{DetachCaught, IntoPy};
use crate::progress::{progress_of, PyProgressCounter};
use clirkit_core::impact::{self, BuildOptions, ImpactIndex, Strategy, WeightedVector};
use clirkit_core::io::jsonl::LineRange;
use clirkit_core::io::manifest::Manifest;
use clirkit_core::progress::Progress;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl DocIds for ImpactIndex {
    fn doc_id(&self, doc: u32) -> &str {
        ImpactIndex::doc_id(self, doc)
    }
}

/// A memory-mapped impact index (quantized term weights, block-max MaxScore top-k).
#[pyclass(name = "ImpactIndex", module = "clirkit._native", frozen)]
pub struct PyImpactIndex {
    pub(crate) inner: Arc<ImpactIndex>,
}

#[pymethods]
impl PyImpactIndex {
    /// Build an index from JSONL term-weight vectors (atomically) and open it; several files are
    /// indexed one after another, as their concatenation. Postings beyond `memory_budget_mb` are
    /// spilled to disk (the files are the same). With `range` (start byte, end byte, first line
    /// number, from `split_corpus`), from those lines of the one file only: one shard.
    #[staticmethod]
    #[pyo3(signature = (vectors, index, *, quantize=impact::DEFAULT_QUANTIZE, threads=0, progress=None,
                        memory_budget_mb=1024, range=None))]
    #[allow(clippy::too_many_arguments)]
    fn build(
        py: Python<'_>,
        vectors: Vec<PathBuf>,
        index: PathBuf,
        quantize: u32,
        threads: usize,
        progress: Option<&Bound<'_, PyProgressCounter>>,
        memory_budget_mb: usize,
        range: Option<(u64, u64, u64)>,
    ) -> PyResult<Self> {
        let opts = BuildOptions {
            quantize,
            threads,
            progress: progress_of(progress),
            memory_budget_bytes: memory_budget_mb.saturating_mul(1 << 20),
            range: range.map(|(start, end, first_line)| LineRange {
                start,
                end,
                first_line,
            }),
        };
        let files: Vec<&std::path::Path> = vectors.iter().map(PathBuf::as_path).collect();
        py.detach_caught(|| impact::build_files(&files, &index, &opts))
            .py_err()?;
        Self::open(py, index)
    }

    /// Open an existing index (memory-mapped).
    #[staticmethod]
    fn open(py: Python<'_>, index: PathBuf) -> PyResult<Self> {
        Self::opened(py.detach_caught(|| ImpactIndex::open(&index)))
    }

    /// Open shard `shard` of the sharded impact index at `index`; a missing shard or one of
    /// another build is refused.
    #[staticmethod]
    fn open_shard(py: Python<'_>, index: PathBuf, shard: usize) -> PyResult<Self> {
        Self::opened(py.detach_caught(|| ImpactIndex::open_shard(&index, shard)))
    }

    #[getter]
    fn num_docs(&self) -> usize {
        self.inner.num_docs()
    }

    #[getter]
    fn num_terms(&self) -> usize {
        self.inner.num_terms()
    }

    #[getter]
    fn quantize(&self) -> u32 {
        self.inner.quantize()
    }

    /// The index's manifest (meta.json) as a JSON string.
    #[getter]
    fn manifest_json(&self) -> String {
        self.inner.manifest().to_json()
    }

    /// Check every file's checksum, postings included.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        py.detach_caught(|| self.inner.verify()).py_err()
    }

    /// Top-k (doc id, score) pairs for one query's (term, weight) pairs.
    /// `strategy`: "auto", "maxscore", "bmw" (block-max WAND) or "exhaustive" (all return the
    /// same hits).
    #[pyo3(signature = (query, k=10, strategy="auto"))]
    fn search(
        &self,
        py: Python<'_>,
        query: Vec<(String, f64)>,
        k: usize,
        strategy: &str,
    ) -> PyResult<Vec<(String, f64)>> {
        let strategy: Strategy = strategy.parse().py_err()?;
        let hits = py
            .detach_caught(|| self.inner.search_by(strategy, &query, k))
            .py_err()?;
        Ok(hits_to_py(self.inner.as_ref(), &hits))
    }

    /// Search (qid, [(term, weight)]) queries on `threads` threads.
    #[pyo3(signature = (queries, k=1000, threads=0, progress=None))]
    fn batch_search(
        &self,
        py: Python<'_>,
        queries: Vec<(String, Vec<(String, f64)>)>,
        k: usize,
        threads: usize,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<PySearchResults> {
        let queries = vectors_from_pairs(queries);
        self.run_batch(py, queries, k, threads, &progress_of(progress))
    }

    /// Search a queries file: JSONL vectors, or TSV (`qid<TAB>term term ...` or
    /// `qid<TAB>term<TAB>weight`).
    #[pyo3(signature = (path, k=1000, threads=0, progress=None))]
    fn search_file(
        &self,
        py: Python<'_>,
        path: PathBuf,
        k: usize,
        threads: usize,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<PySearchResults> {
        let queries = py.detach_caught(|| impact::read_queries(&path)).py_err()?;
        self.run_batch(py, queries, k, threads, &progress_of(progress))
    }

    /// `search_file` written straight to the TREC run `output` (atomically, the same bytes as
    /// its results' `to_trec`), streamed in query order; returns the number of queries.
    #[pyo3(signature = (path, output, k=1000, tag="clirkit-impact", threads=0, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn search_file_to_trec(
        &self,
        py: Python<'_>,
        path: PathBuf,
        output: PathBuf,
        k: usize,
        tag: &str,
        threads: usize,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<usize> {
        let progress = progress_of(progress);
        search_file_to_run(py, &path, |queries| {
            self.inner
                .batch_search_to_run_file(queries, k, threads, &progress, &output, tag)
        })
    }
}

impl PyImpactIndex {
    /// The index an open returned, or its error.
    fn opened(index: clirkit_core::Result<ImpactIndex>) -> PyResult<Self> {
        Ok(PyImpactIndex {
            inner: Arc::new(index.py_err()?),
        })
    }

    fn run_batch(
        &self,
        py: Python<'_>,
        queries: Vec<WeightedVector>,
        k: usize,
        threads: usize,
        progress: &Progress,
    ) -> PyResult<PySearchResults> {
        let qids: Vec<String> = queries.iter().map(|q| q.id.clone()).collect();
        PySearchResults::gather(py, self.inner.clone(), qids, || {
            let hits = self.inner.batch_search(&queries, k, threads, progress)?;
            Ok((hits, None))
        })
    }
}

/// Queries as Python gives and takes them: (qid, [(term, weight)]) pairs.
pub(crate) type QueryPairs = Vec<(String, Vec<(String, f64)>)>;

/// Queries given as (qid, [(term, weight)]) pairs, numbered from line 1.
pub(crate) fn vectors_from_pairs(pairs: QueryPairs) -> Vec<WeightedVector> {
    pairs
        .into_iter()
        .enumerate()
        .map(|(i, (id, terms))| WeightedVector {
            id,
            line: i as u64 + 1,
            terms,
        })
        .collect()
}

/// Read the queries file `path`, check its query ids are unique, and `write` its run with the
/// GIL released; the number of queries.
pub(crate) fn search_file_to_run(
    py: Python<'_>,
    path: &Path,
    write: impl FnOnce(&[WeightedVector]) -> clirkit_core::Result<()> + Send,
) -> PyResult<usize> {
    let queries = py.detach_caught(|| impact::read_queries(path)).py_err()?;
    let qids: Vec<String> = queries.iter().map(|q| q.id.clone()).collect();
    PySearchResults::positions(&qids)?;
    py.detach_caught(|| write(&queries)).py_err()?;
    Ok(queries.len())
}

/// A queries file read as `ImpactIndex.search_file` reads it: (qid, [(term, weight)]) pairs.
#[pyfunction]
fn read_impact_queries(py: Python<'_>, path: PathBuf) -> PyResult<QueryPairs> {
    let queries = py.detach_caught(|| impact::read_queries(&path)).py_err()?;
    Ok(queries.into_iter().map(|q| (q.id, q.terms)).collect())
}

define_register!(classes: [PyImpactIndex], functions: [read_impact_queries]);
