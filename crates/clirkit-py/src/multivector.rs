//! `MultiVectorIndex` for Python: token matrices in as a float32 (rows, d) array plus uint64 offsets
//! (item i owns rows offsets[i]..offsets[i+1]), read in place; the GIL is released while building and
//! searching.

use crate::common::{define_register, id_at};
use crate::errors::{to_py, DetachCaught, IntoPy};
use crate::io::{run_to_py, PyRun};
use crate::progress::{progress_of, PyProgressCounter};
use clirkit_core::io::trec;
use clirkit_core::multivector::{
    exact, BuildOptions, Hits, MultiVectorIndex, SearchOptions, TokenMatrix, TokenPart, TokenParts,
};
use clirkit_core::Error;
use numpy::{
    IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use std::path::PathBuf;

/// The slices behind a (tokens, offsets) pair of numpy arrays.
fn slices<'a>(
    tokens: &'a PyReadonlyArray2<'_, f32>,
    offsets: &'a PyReadonlyArray1<'_, u64>,
    what: &str,
) -> PyResult<(&'a [f32], usize, &'a [u64])> {
    let (data, dim) = matrix(tokens, what)?;
    let offsets = offsets.as_slice().map_err(|_| contiguous(what))?;
    Ok((data, dim, offsets))
}

/// The error for arrays the bindings cannot read in place.
fn contiguous(what: &str) -> PyErr {
    to_py(Error::invalid(format!(
        "{what}: tokens must be a C-contiguous float32 array and offsets a contiguous uint64 array"
    )))
}

/// The slice behind a float32 (rows, d) array, and d.
fn matrix<'a>(tokens: &'a PyReadonlyArray2<'_, f32>, what: &str) -> PyResult<(&'a [f32], usize)> {
    Ok((
        tokens.as_slice().map_err(|_| contiguous(what))?,
        tokens.shape()[1],
    ))
}

/// Where a build part's token vectors are: a `.npy` file, or an array in memory.
#[derive(FromPyObject)]
enum Tokens<'py> {
    Array(PyReadonlyArray2<'py, f32>),
    File(PathBuf),
}

/// A build part as the Python side passes it: (tokens, offsets, ids, items kept or None).
type BuildPart<'py> = (
    Tokens<'py>,
    PyReadonlyArray1<'py, u64>,
    Vec<String>,
    Option<Vec<usize>>,
);

/// Scores (q, k) float32 and internal ids (q, k) int64, padded with -inf / -1.
fn hits_to_arrays(py: Python<'_>, hits: Hits, k: usize) -> PyResult<PyHits<'_>> {
    let nq = hits.len();
    let (mut scores, mut ids) = (Vec::with_capacity(nq * k), Vec::with_capacity(nq * k));
    for hs in hits {
        let pad = k - hs.len();
        scores.extend(
            hs.iter()
                .map(|h| h.0)
                .chain(std::iter::repeat_n(f32::NEG_INFINITY, pad)),
        );
        ids.extend(
            hs.iter()
                .map(|h| h.1 as i64)
                .chain(std::iter::repeat_n(-1, pad)),
        );
    }
    Ok((
        scores.into_pyarray(py).reshape([nq, k])?,
        ids.into_pyarray(py).reshape([nq, k])?,
    ))
}

type PyHits<'py> = (Bound<'py, PyArray2<f32>>, Bound<'py, PyArray2<i64>>);

/// The build options as the Python side passes them: a dict keyed by `MultiVectorIndex.build`'s
/// keyword names (`clirkit.multivector` builds it, every key present).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct BuildArgs {
    nbits: usize,
    centroids: Option<usize>,
    kmeans_sample: Option<usize>,
    kmeans_iterations: usize,
    seed: u64,
    threads: usize,
    keep_vectors: bool,
}

impl BuildArgs {
    fn options(self) -> BuildOptions {
        BuildOptions {
            nbits: self.nbits,
            centroids: self.centroids,
            kmeans_sample: self.kmeans_sample,
            kmeans_iterations: self.kmeans_iterations,
            seed: self.seed,
            threads: self.threads,
            keep_vectors: self.keep_vectors,
            ..Default::default()
        }
    }
}

/// How `MultiVectorIndex.search` and `search_run` search: `None` budgets take PLAID's defaults for `k`.
#[pyclass(name = "MultiVectorSearchOptions", module = "clirkit._native", frozen)]
pub struct PyMultiVectorSearchOptions {
    inner: SearchOptions,
}

impl PyMultiVectorSearchOptions {
    /// These options, counting the queries searched in `progress`.
    fn counted(&self, progress: Option<&Bound<'_, PyProgressCounter>>) -> SearchOptions {
        SearchOptions {
            progress: progress_of(progress),
            ..self.inner.clone()
        }
    }
}

#[pymethods]
impl PyMultiVectorSearchOptions {
    #[new]
    #[pyo3(signature = (k=1000, ncells=None, centroid_score_threshold=None, ndocs=None, rerank=None,
                        refine=false, exact=false, threads=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        k: usize,
        ncells: Option<usize>,
        centroid_score_threshold: Option<f32>,
        ndocs: Option<usize>,
        rerank: Option<usize>,
        refine: bool,
        exact: bool,
        threads: usize,
    ) -> Self {
        let inner = SearchOptions {
            k,
            ncells,
            centroid_score_threshold,
            ndocs,
            rerank,
            refine,
            exact,
            threads,
            ..Default::default()
        };
        PyMultiVectorSearchOptions { inner }
    }
}

/// A PLAID-style multi-vector index (centroids + 1/2/4-bit residuals), optionally with full vectors.
#[pyclass(name = "MultiVectorIndex", module = "clirkit._native", frozen)]
pub struct PyMultiVectorIndex {
    inner: MultiVectorIndex,
}

#[pymethods]
impl PyMultiVectorIndex {
    /// Build from `parts`, indexed one after another: each (tokens, offsets, ids, items), where
    /// tokens is a `.npy` token file (float32 or float16, read a chunk at a time) or a float32
    /// (rows, d) array (read in place), offsets (uint64) and ids are its items', and items lists
    /// the items kept, in order (None: all). `progress` counts token assignments to centroids and
    /// gets their total.
    #[staticmethod]
    #[pyo3(signature = (parts, dir, options, progress=None))]
    fn build(
        py: Python<'_>,
        parts: Vec<BuildPart<'_>>,
        dir: PathBuf,
        options: BuildArgs,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<Self> {
        let opts = BuildOptions {
            progress: progress_of(progress),
            ..options.options()
        };
        let mut arrays = Vec::with_capacity(parts.len());
        let mut owned = Vec::with_capacity(parts.len());
        for (tokens, offsets, ids, items) in parts {
            arrays.push((tokens, offsets));
            owned.push((ids, items));
        }
        let mut views = Vec::with_capacity(arrays.len());
        for (tokens, offsets) in &arrays {
            let offsets = offsets.as_slice().map_err(|_| contiguous("documents"))?;
            let tokens = match tokens {
                Tokens::File(path) => Ok(path),
                Tokens::Array(a) => Err(matrix(a, "documents")?),
            };
            views.push((tokens, offsets));
        }
        let inner = py
            .detach_caught(|| {
                let mut built = Vec::with_capacity(views.len());
                for ((tokens, offsets), (ids, items)) in views.into_iter().zip(owned) {
                    let offsets = offsets.to_vec();
                    built.push(match tokens {
                        Ok(path) => TokenPart::npy(path, offsets, ids, items)?,
                        Err((data, dim)) => {
                            TokenPart::slice(data, dim, offsets, ids, items, "documents")?
                        }
                    });
                }
                MultiVectorIndex::build_parts(&TokenParts::new(built)?, &dir, &opts)
            })
            .py_err()?;
        Ok(PyMultiVectorIndex { inner })
    }

    #[staticmethod]
    fn open(py: Python<'_>, dir: PathBuf) -> PyResult<Self> {
        let inner = py.detach_caught(|| MultiVectorIndex::open(&dir)).py_err()?;
        Ok(PyMultiVectorIndex { inner })
    }

    /// Top-k per query: (scores float32 (q, k), internal ids int64 (q, k)), -inf / -1 padded;
    /// `progress` counts the queries searched.
    #[pyo3(signature = (tokens, offsets, options, progress=None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        tokens: PyReadonlyArray2<'py, f32>,
        offsets: PyReadonlyArray1<'py, u64>,
        options: &PyMultiVectorSearchOptions,
        progress: Option<&Bound<'py, PyProgressCounter>>,
    ) -> PyResult<PyHits<'py>> {
        let (data, dim, offsets) = slices(&tokens, &offsets, "queries")?;
        let opts = &options.counted(progress);
        let hits = py
            .detach_caught(|| {
                let queries = TokenMatrix::new(data, dim, offsets, None, "queries")?;
                self.inner.search(&queries, opts)
            })
            .py_err()?;
        hits_to_arrays(py, hits, opts.k)
    }

    /// Search and return ordered (qid, [(docid, score), ...]) pairs, or with `maxp` (the passage id
    /// separator) `k` documents per query scored by their best passage; with `path`, write a TREC
    /// run file atomically instead and return nothing.
    #[pyo3(signature = (tokens, offsets, qids, options, maxp=None, path=None, tag="clirkit-multivector", progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn search_run(
        &self,
        py: Python<'_>,
        tokens: PyReadonlyArray2<'_, f32>,
        offsets: PyReadonlyArray1<'_, u64>,
        qids: Vec<String>,
        options: &PyMultiVectorSearchOptions,
        maxp: Option<&str>,
        path: Option<PathBuf>,
        tag: &str,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<Option<PyRun>> {
        let (data, dim, offsets) = slices(&tokens, &offsets, "queries")?;
        let opts = &options.counted(progress);
        py.detach_caught(|| {
            let queries = TokenMatrix::new(data, dim, offsets, Some(&qids), "queries")?;
            match &path {
                Some(path) => self
                    .inner
                    .write_run(&queries, &qids, opts, maxp, (path, tag), trec::RUN_WINDOW)
                    .map(|_| None),
                None => Ok(Some(run_to_py(
                    self.inner.search_run(&queries, &qids, opts, maxp)?,
                ))),
            }
        })
        .py_err()
    }

    /// String id of internal id `i`.
    fn id(&self, i: i64) -> PyResult<String> {
        id_at(self.inner.ids(), i, self.inner.ndocs())
    }

    /// Internal id of string id `id`, or None.
    fn find(&self, id: &str) -> Option<u32> {
        self.inner.ids().find(id)
    }

    /// Bytes on disk of the files search reads (everything but the optional full vectors).
    fn compressed_bytes(&self) -> PyResult<u64> {
        self.inner.compressed_bytes().py_err()
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn ndocs(&self) -> usize {
        self.inner.ndocs()
    }
    /// Same as `ndocs` (the name the id sequence view reads).
    #[getter]
    fn ntotal(&self) -> usize {
        self.inner.ndocs()
    }
    #[getter]
    fn ntokens(&self) -> usize {
        self.inner.ntokens()
    }
    #[getter]
    fn ncentroids(&self) -> usize {
        self.inner.ncentroids()
    }
    #[getter]
    fn nbits(&self) -> usize {
        self.inner.nbits()
    }
    #[getter]
    fn has_vectors(&self) -> bool {
        self.inner.has_vectors()
    }
}

/// Exact MaxSim of every query against every document, no index: the top `k` per query as
/// (scores float32 (q, k), document numbers int64 (q, k)).
#[pyfunction]
#[pyo3(signature = (doc_tokens, doc_offsets, query_tokens, query_offsets, k=1000, threads=0, progress=None))]
#[allow(clippy::too_many_arguments)]
fn maxsim_search<'py>(
    py: Python<'py>,
    doc_tokens: PyReadonlyArray2<'py, f32>,
    doc_offsets: PyReadonlyArray1<'py, u64>,
    query_tokens: PyReadonlyArray2<'py, f32>,
    query_offsets: PyReadonlyArray1<'py, u64>,
    k: usize,
    threads: usize,
    progress: Option<&Bound<'py, PyProgressCounter>>,
) -> PyResult<PyHits<'py>> {
    let (ddata, ddim, doffsets) = slices(&doc_tokens, &doc_offsets, "documents")?;
    let (qdata, qdim, qoffsets) = slices(&query_tokens, &query_offsets, "queries")?;
    let progress = progress_of(progress);
    let hits = py
        .detach_caught(|| {
            let docs = TokenMatrix::new(ddata, ddim, doffsets, None, "documents")?;
            let queries = TokenMatrix::new(qdata, qdim, qoffsets, None, "queries")?;
            let hits = exact::search(&docs, &queries, k, threads, &progress)?;
            exact::finite_scores(hits, |q| format!("query {q}"))
        })
        .py_err()?;
    hits_to_arrays(py, hits, k)
}

define_register!(classes: [PyMultiVectorIndex, PyMultiVectorSearchOptions], functions: [maxsim_search]);
