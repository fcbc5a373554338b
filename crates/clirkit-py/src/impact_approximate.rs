//! `clirkit._native.ApproximateImpactIndex`: approximate impact search over an opened
//! `ImpactIndex` (`clirkit_core::impact::approximate`), with its audit and calibration. Builds,
//! searches and audits run with the GIL released; batch results are BM25's `SearchResults`.

use crate::bm25::{hits_to_py, PySearchResults};
use crate::common::define_register;
use crate::errors::{DetachCaught, IntoPy};
use crate::impact::PyImpactIndex;
use clirkit_core::impact::approximate::{
    self, params::DEFAULT_POSTINGS_PER_TERM, ApproximateIndex, BuildParams, SearchParams,
};
use clirkit_core::impact::{self, ImpactIndex, WeightedVector};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;

/// Queries given as a file (JSONL vectors or TSV) or as (qid, [(term, weight)]) pairs.
#[derive(FromPyObject)]
enum Queries {
    Path(PathBuf),
    Pairs(Vec<(String, Vec<(String, f64)>)>),
}

impl Queries {
    fn read(self) -> clirkit_core::error::Result<Vec<WeightedVector>> {
        match self {
            Queries::Path(path) => impact::read_queries(&path),
            Queries::Pairs(pairs) => Ok(pairs
                .into_iter()
                .enumerate()
                .map(|(i, (id, terms))| WeightedVector {
                    id,
                    line: i as u64 + 1,
                    terms,
                })
                .collect()),
        }
    }
}

/// An impact index with its approximate-search structure (pruned lists and a forward index, in
/// memory).
#[pyclass(name = "ApproximateImpactIndex", module = "clirkit._native", frozen)]
pub struct PyApproximateImpactIndex {
    index: Arc<ImpactIndex>,
    inner: Arc<ApproximateIndex>,
}

#[pymethods]
impl PyApproximateImpactIndex {
    /// Build the structure over `index` on `threads` threads.
    #[staticmethod]
    #[pyo3(signature = (index, *, postings_per_term=DEFAULT_POSTINGS_PER_TERM, threads=0))]
    fn build(
        py: Python<'_>,
        index: PyRef<'_, PyImpactIndex>,
        postings_per_term: usize,
        threads: usize,
    ) -> PyResult<Self> {
        let index = index.inner.clone();
        let params = BuildParams { postings_per_term };
        let inner = py
            .detach_caught(|| {
                clirkit_core::parallel::install(threads, |_| {
                    ApproximateIndex::build(&index, params)
                })?
            })
            .py_err()?;
        Ok(PyApproximateImpactIndex {
            index,
            inner: Arc::new(inner),
        })
    }

    #[getter]
    fn postings_per_term(&self) -> usize {
        self.inner.params().postings_per_term
    }

    /// Postings the pruned lists keep.
    #[getter]
    fn kept_postings(&self) -> usize {
        self.inner.kept_postings()
    }

    /// Bytes the structure holds in memory.
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// Approximate top-k (doc id, score) pairs for one query's (term, weight) pairs.
    #[pyo3(signature = (query, k, query_terms, candidates))]
    fn search(
        &self,
        py: Python<'_>,
        query: Vec<(String, f64)>,
        k: usize,
        query_terms: usize,
        candidates: usize,
    ) -> PyResult<Vec<(String, f64)>> {
        let params = SearchParams {
            query_terms,
            candidates,
        };
        let hits = py
            .detach_caught(|| self.inner.search(&self.index, &query, k, params))
            .py_err()?;
        Ok(hits_to_py(self.index.as_ref(), &hits))
    }

    /// Search queries (a file or pairs) on `threads` threads.
    #[pyo3(signature = (queries, k, query_terms, candidates, threads, quiet))]
    #[allow(clippy::too_many_arguments)]
    fn batch_search(
        &self,
        py: Python<'_>,
        queries: Queries,
        k: usize,
        query_terms: usize,
        candidates: usize,
        threads: usize,
        quiet: bool,
    ) -> PyResult<PySearchResults> {
        let params = SearchParams {
            query_terms,
            candidates,
        };
        let queries = py.detach_caught(|| queries.read()).py_err()?;
        let qids: Vec<String> = queries.iter().map(|q| q.id.clone()).collect();
        let position = PySearchResults::positions(&qids)?;
        let hits = py
            .detach_caught(|| {
                self.inner
                    .batch_search(&self.index, &queries, k, params, threads, quiet)
            })
            .py_err()?;
        Ok(PySearchResults {
            index: self.index.clone(),
            qids,
            hits,
            expansions: None,
            position,
        })
    }

    /// A queries file searched straight to the TREC run `output` (atomically, streamed in
    /// query order); returns the number of queries.
    #[pyo3(signature = (path, output, k, tag, query_terms, candidates, threads, quiet))]
    #[allow(clippy::too_many_arguments)]
    fn search_file_to_trec(
        &self,
        py: Python<'_>,
        path: PathBuf,
        output: PathBuf,
        k: usize,
        tag: &str,
        query_terms: usize,
        candidates: usize,
        threads: usize,
        quiet: bool,
    ) -> PyResult<usize> {
        let params = SearchParams {
            query_terms,
            candidates,
        };
        let queries = py.detach_caught(|| impact::read_queries(&path)).py_err()?;
        let qids: Vec<String> = queries.iter().map(|q| q.id.clone()).collect();
        PySearchResults::positions(&qids)?;
        py.detach_caught(|| {
            self.inner.batch_search_to_run_file(
                &self.index,
                &queries,
                k,
                params,
                threads,
                quiet,
                &output,
                tag,
            )
        })
        .py_err()?;
        Ok(queries.len())
    }

    /// Re-run `n` of the queries (drawn with `seed`) exactly and compare them with the
    /// approximate search at depth `k`: the report as JSON.
    #[pyo3(signature = (queries, n, seed, k, query_terms, candidates, threads))]
    #[allow(clippy::too_many_arguments)]
    fn audit(
        &self,
        py: Python<'_>,
        queries: Queries,
        n: usize,
        seed: u64,
        k: usize,
        query_terms: usize,
        candidates: usize,
        threads: usize,
    ) -> PyResult<String> {
        let params = SearchParams {
            query_terms,
            candidates,
        };
        py.detach_caught(|| {
            let queries = queries.read()?;
            clirkit_core::parallel::install(threads, |_| {
                approximate::audit(&self.inner, &self.index, &queries, n, seed, k, params)
            })?
        })
        .py_err()
        .map(|report| report.to_json())
    }

    /// The (query_terms, candidates) of least work whose mean Accuracy@10 on `n` queries drawn
    /// with `seed` reaches `target` at depth `k` (the most accurate when none does).
    #[pyo3(signature = (queries, target, n, seed, k, threads))]
    #[allow(clippy::too_many_arguments)]
    fn calibrate(
        &self,
        py: Python<'_>,
        queries: Queries,
        target: f64,
        n: usize,
        seed: u64,
        k: usize,
        threads: usize,
    ) -> PyResult<(usize, usize)> {
        py.detach_caught(|| {
            let queries = queries.read()?;
            clirkit_core::parallel::install(threads, |_| {
                approximate::calibrate(&self.inner, &self.index, &queries, target, n, seed, k)
            })?
        })
        .py_err()
        .map(|p| (p.query_terms, p.candidates))
    }
}

define_register!(classes: [PyApproximateImpactIndex], functions: []);
