//! `clirkit._native.ApproximateImpactIndex`: approximate impact search over an opened
//! `ImpactIndex` (`clirkit_core::impact::approximate`), with its audit and calibration. Builds,
//! searches and audits run with the GIL released; batch results are BM25's `SearchResults`.

use crate::bm25::{hits_to_py, PySearchResults};
use crate::common::define_register;
use crate::errors::{DetachCaught, IntoPy};
use crate::impact::{search_file_to_run, vectors_from_pairs, PyImpactIndex};
use crate::progress::{progress_of, PyProgressCounter};
use clirkit_core::impact::approximate::{
    self, params::DEFAULT_POSTINGS_PER_TERM, ApproximateIndex, BatchSettings, BuildParams,
    SearchParams,
};
use clirkit_core::impact::{self, ImpactIndex, WeightedVector};
use clirkit_core::progress::Progress;
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;

/// The search knobs as the Python side passes them: (query_terms, candidates).
type Settings = (usize, usize);

fn search_params((query_terms, candidates): Settings) -> SearchParams {
    SearchParams {
        query_terms,
        candidates,
    }
}

fn batch_settings(
    k: usize,
    settings: Settings,
    threads: usize,
    progress: &Progress,
) -> BatchSettings<'_> {
    BatchSettings {
        k,
        params: search_params(settings),
        threads,
        progress,
    }
}

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
            Queries::Pairs(pairs) => Ok(vectors_from_pairs(pairs)),
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
    fn search(
        &self,
        py: Python<'_>,
        query: Vec<(String, f64)>,
        k: usize,
        settings: Settings,
    ) -> PyResult<Vec<(String, f64)>> {
        let params = search_params(settings);
        let hits = py
            .detach_caught(|| self.inner.search(&self.index, &query, k, params))
            .py_err()?;
        Ok(hits_to_py(self.index.as_ref(), &hits))
    }

    /// Search queries (a file or pairs) on `threads` threads.
    #[pyo3(signature = (queries, k, settings, threads, progress=None))]
    fn batch_search(
        &self,
        py: Python<'_>,
        queries: Queries,
        k: usize,
        settings: Settings,
        threads: usize,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<PySearchResults> {
        let progress = progress_of(progress);
        let settings = batch_settings(k, settings, threads, &progress);
        let queries = py.detach_caught(|| queries.read()).py_err()?;
        let qids: Vec<String> = queries.iter().map(|q| q.id.clone()).collect();
        PySearchResults::gather(py, self.index.clone(), qids, || {
            let hits = self.inner.batch_search(&self.index, &queries, settings)?;
            Ok((hits, None))
        })
    }

    /// A queries file searched straight to the TREC run `output` (atomically, streamed in
    /// query order); returns the number of queries.
    #[pyo3(signature = (path, output, k, tag, settings, threads, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn search_file_to_trec(
        &self,
        py: Python<'_>,
        path: PathBuf,
        output: PathBuf,
        k: usize,
        tag: &str,
        settings: Settings,
        threads: usize,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<usize> {
        let progress = progress_of(progress);
        let settings = batch_settings(k, settings, threads, &progress);
        search_file_to_run(py, &path, |queries| {
            self.inner
                .batch_search_to_run_file(&self.index, queries, settings, &output, tag)
        })
    }

    /// Re-run `n` of the queries (drawn with `seed`) exactly and compare them with the
    /// approximate search at depth `k`: the report as JSON.
    #[allow(clippy::too_many_arguments)]
    fn audit(
        &self,
        py: Python<'_>,
        queries: Queries,
        n: usize,
        seed: u64,
        k: usize,
        settings: Settings,
        threads: usize,
    ) -> PyResult<String> {
        let params = search_params(settings);
        py.detach_caught(|| {
            let queries = queries.read()?;
            clirkit_core::parallel::install(threads, |_| {
                approximate::audit(&self.inner, &self.index, &queries, n, seed, k, params)
            })?
        })
        .py_err()
        .map(|report| report.to_json())
    }

    /// The calibration (JSON: the chosen settings, the sample's Accuracy@10 and its lower
    /// confidence bound) of the least work whose Accuracy@10 on `n` queries drawn with `seed`
    /// reaches `target` at depth `k` with 95% confidence (the highest bound when none does).
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
    ) -> PyResult<String> {
        py.detach_caught(|| {
            let queries = queries.read()?;
            clirkit_core::parallel::install(threads, |_| {
                approximate::calibrate(&self.inner, &self.index, &queries, target, n, seed, k)
            })?
        })
        .py_err()
        .map(|c| c.to_json())
    }
}

/// The positions of the `n` queries of `count` an audit seeded `seed` draws, in query order.
#[pyfunction]
fn audit_sample(count: usize, n: usize, seed: u64) -> Vec<usize> {
    approximate::audit::sample(count, n, seed)
}

/// The audit of a sharded approximate search, as JSON: `parts` holds the shards' exact top 10s
/// and their approximate top `k`s under `settings` (`SearchResults.shard_hits` of each shard)
/// of the sampled queries `qids` (in sample order), merged as a sharded search merges them and
/// compared query by query; `sample` is (`of` queries in all, drawn with `seed`, depth `k`).
#[pyfunction]
fn audit_shard_hits(
    py: Python<'_>,
    parts: (Vec<Vec<u8>>, Vec<Vec<u8>>),
    qids: Vec<String>,
    sample: (usize, u64, usize),
    settings: Settings,
) -> PyResult<String> {
    let ((exact_parts, approximate_parts), (of, seed, k)) = (parts, sample);
    let params = search_params(settings);
    py.detach_caught(|| {
        let merged = |parts: &[Vec<u8>], depth: usize| {
            let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            clirkit_core::sharded::merge_hits(&parts, &qids, depth)
        };
        let exact = merged(&exact_parts, approximate::audit::AUDIT_DEPTH)?;
        let approx = merged(&approximate_parts, k.max(approximate::audit::AUDIT_DEPTH))?;
        approximate::audit::audit_runs(&exact, &approx, of, seed, params)
    })
    .py_err()
    .map(|report| report.to_json())
}

define_register!(classes: [PyApproximateImpactIndex], functions: [audit_sample, audit_shard_hits]);
