//! `DenseIndex` for Python: numpy float32 arrays in (read in place, no copy, when C-contiguous),
//! float32 scores and int64 internal ids out; the GIL is released while building and searching.

use crate::common::id_at;
use crate::dense_sharded::Shortlist;
use crate::errors::{DetachCaught, IntoPy};
use crate::io::{run_to_py, PyRun};
use crate::progress::{progress_of, PyProgressCounter};
use clirkit_core::dense::passages::DenseSearch;
use clirkit_core::dense::source::{Concat, ConcatPart, NpyFile, SliceSource, VectorSource};
use clirkit_core::dense::{BuildOptions, DenseIndex, Metric, Part, SearchOptions, VectorDtype};
use clirkit_core::io::trec::RUN_WINDOW;
use clirkit_core::Error;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::path::PathBuf;

/// `.npy` files (each whole, or the rows listed, in that order) read one after another as one source.
fn npy_parts(npy: Vec<(PathBuf, Option<Vec<usize>>)>) -> Result<Concat, Error> {
    let mut parts = Vec::with_capacity(npy.len());
    for (path, rows) in npy {
        let source: Box<dyn VectorSource + Send> = Box::new(NpyFile::open(&path)?);
        parts.push(ConcatPart { source, rows });
    }
    Concat::new(parts, "embeddings")
}

/// Search results as numpy arrays: scores (q, k) and internal ids (q, k).
type Hits<'py> = (Bound<'py, PyArray2<f32>>, Bound<'py, PyArray2<i64>>);

fn matrix<'a>(a: &'a PyReadonlyArray2<'_, f32>, what: &str) -> PyResult<(&'a [f32], usize)> {
    let dim = a.shape()[1];
    let data = a.as_slice().map_err(|_| {
        crate::errors::to_py(Error::invalid(format!(
            "{what} must be a C-contiguous float32 array"
        )))
    })?;
    Ok((data, dim))
}

/// The query matrix of a search and its options; `progress` counts the queries searched.
fn search_input<'a>(
    queries: &'a PyReadonlyArray2<'_, f32>,
    (k, nprobe, refine, threads): (usize, usize, usize, usize),
    progress: Option<&Bound<'_, PyProgressCounter>>,
) -> PyResult<((&'a [f32], usize), SearchOptions)> {
    let opts = SearchOptions {
        k,
        nprobe,
        refine,
        threads,
        progress: progress_of(progress),
    };
    Ok((matrix(queries, "queries")?, opts))
}

/// The build options as the Python side passes them: a dict keyed by `DenseIndex.build`'s keyword
/// names (`clirkit.dense.index` builds it, every key present).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct BuildArgs {
    pq: Option<usize>,
    nbits: usize,
    ivf: Option<usize>,
    metric: String,
    train_size: Option<usize>,
    seed: u64,
    threads: usize,
    keep_vectors: bool,
    vector_dtype: String,
    /// The counter the build counts its rows in (`clirkit._progress.polled`), or None.
    progress: Option<Py<PyProgressCounter>>,
}

impl BuildArgs {
    /// The core's options (an unknown metric or vector dtype is an error naming it).
    fn options(self, py: Python<'_>) -> PyResult<BuildOptions> {
        Ok(BuildOptions {
            metric: self.metric.parse::<Metric>().py_err()?,
            vector_dtype: self.vector_dtype.parse::<VectorDtype>().py_err()?,
            pq: self.pq,
            nbits: self.nbits,
            ivf: self.ivf,
            train_size: self.train_size,
            seed: self.seed,
            threads: self.threads,
            keep_vectors: self.keep_vectors,
            progress: progress_of(self.progress.as_ref().map(|p| p.bind(py))),
        })
    }
}

/// A dense vector index (flat exact, or PQ fast-scan with optional IVF and refine).
#[pyclass(name = "DenseIndex", module = "clirkit._native", frozen)]
pub struct PyDenseIndex {
    inner: DenseIndex,
}

#[pymethods]
impl PyDenseIndex {
    #[staticmethod]
    fn build(
        py: Python<'_>,
        embeddings: PyReadonlyArray2<'_, f32>,
        ids: Vec<String>,
        options: BuildArgs,
    ) -> PyResult<Self> {
        let (data, dim) = matrix(&embeddings, "embeddings")?;
        let opts = options.options(py)?;
        let inner = py
            .detach_caught(|| DenseIndex::build(data, dim, &ids, &opts))
            .py_err()?;
        Ok(PyDenseIndex { inner })
    }

    /// Build into `dir` from float32 or float16 `.npy` files read a chunk at a time, with
    /// about `memory_mb` MB for the chunks: `npy` lists (file, rows kept or None for all), whose rows
    /// are indexed one file after another; returns the index opened from `dir`.
    #[staticmethod]
    #[pyo3(signature = (npy, ids, dir, options, memory_mb=256))]
    fn build_npy(
        py: Python<'_>,
        npy: Vec<(PathBuf, Option<Vec<usize>>)>,
        ids: Vec<String>,
        dir: PathBuf,
        options: BuildArgs,
        memory_mb: usize,
    ) -> PyResult<Self> {
        let opts = options.options(py)?;
        let inner = py
            .detach_caught(|| {
                let source = npy_parts(npy)?;
                DenseIndex::build_streaming(&source, &ids, &opts, memory_mb << 20, &dir)?;
                DenseIndex::open(&dir)
            })
            .py_err()?;
        Ok(PyDenseIndex { inner })
    }

    /// Write into `dir` the rows of `indexes`, then new vectors (`embeddings`, or the `.npy` files
    /// `npy` as `build_npy` takes them, read a chunk at a time; with `ids`), all encoded with this
    /// index's codebook; returns the index opened from `dir` (which may be the directory of one of
    /// `indexes`).
    #[pyo3(signature = (dir, indexes, ids=None, embeddings=None, npy=None, memory_mb=256, threads=0,
                        progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn write_combined(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        indexes: Vec<PyRef<'_, PyDenseIndex>>,
        ids: Option<Vec<String>>,
        embeddings: Option<PyReadonlyArray2<'_, f32>>,
        npy: Option<Vec<(PathBuf, Option<Vec<usize>>)>>,
        memory_mb: usize,
        threads: usize,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<Self> {
        let progress = progress_of(progress);
        let array = embeddings
            .as_ref()
            .map(|a| matrix(a, "embeddings"))
            .transpose()?;
        let indexes: Vec<&DenseIndex> = indexes.iter().map(|i| &i.inner).collect();
        let inner = py
            .detach_caught(|| {
                let source: Option<Box<dyn VectorSource>> = match (array, npy) {
                    (Some(_), Some(_)) => {
                        return Err(Error::invalid("give embeddings or .npy files, not both"))
                    }
                    (Some((data, dim)), None) => Some(Box::new(SliceSource::new(data, dim)?)),
                    (None, Some(parts)) => Some(Box::new(npy_parts(parts)?)),
                    (None, None) => None,
                };
                let mut parts: Vec<Part<'_>> = indexes.iter().map(|i| Part::Index(i)).collect();
                let ids = ids.unwrap_or_default();
                if let Some(source) = &source {
                    parts.push(Part::Vectors {
                        source: source.as_ref(),
                        ids: &ids,
                    });
                }
                self.inner
                    .write_combined(&parts, &dir, memory_mb << 20, threads, &progress)?;
                DenseIndex::open(&dir)
            })
            .py_err()?;
        Ok(PyDenseIndex { inner })
    }

    #[staticmethod]
    fn open(py: Python<'_>, dir: PathBuf) -> PyResult<Self> {
        let inner = py.detach_caught(|| DenseIndex::open(&dir)).py_err()?;
        Ok(PyDenseIndex { inner })
    }

    /// Open shard `shard` of the sharded dense index at `dir` (refused if missing or of
    /// another build than the index records).
    #[staticmethod]
    fn open_shard(py: Python<'_>, dir: PathBuf, shard: usize) -> PyResult<Self> {
        let inner = py
            .detach_caught(|| DenseIndex::open_shard(&dir, shard))
            .py_err()?;
        Ok(PyDenseIndex { inner })
    }

    fn save(&self, py: Python<'_>, dir: PathBuf) -> PyResult<()> {
        py.detach_caught(|| self.inner.save(&dir)).py_err()
    }

    /// (scores float32 (q, k), internal ids int64 (q, k)); missing hits are -inf / -1. `progress`
    /// counts the queries searched.
    #[pyo3(signature = (queries, k=1000, nprobe=1, refine=0, threads=0, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: PyReadonlyArray2<'py, f32>,
        k: usize,
        nprobe: usize,
        refine: usize,
        threads: usize,
        progress: Option<&Bound<'py, PyProgressCounter>>,
    ) -> PyResult<Hits<'py>> {
        let ((data, dim), opts) = search_input(&queries, (k, nprobe, refine, threads), progress)?;
        let hits = py
            .detach_caught(|| self.inner.search(data, dim, &opts))
            .py_err()?;
        let nq = hits.len();
        let mut scores = vec![f32::NEG_INFINITY; nq * k];
        let mut ids = vec![-1i64; nq * k];
        for (q, hs) in hits.iter().enumerate() {
            for (r, &(s, id)) in hs.iter().enumerate() {
                scores[q * k + r] = s;
                ids[q * k + r] = id as i64;
            }
        }
        Ok((
            scores.into_pyarray(py).reshape([nq, k])?,
            ids.into_pyarray(py).reshape([nq, k])?,
        ))
    }

    /// Search and return the run as ordered (qid, [(docid, score), ...]) pairs; with `maxp` (the
    /// passage id separator) the run is of documents, `k` per query, aggregated by MaxP.
    #[pyo3(signature = (queries, qids, k=1000, nprobe=1, refine=0, threads=0, maxp=None, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn search_run(
        &self,
        py: Python<'_>,
        queries: PyReadonlyArray2<'_, f32>,
        qids: Vec<String>,
        k: usize,
        nprobe: usize,
        refine: usize,
        threads: usize,
        maxp: Option<&str>,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<PyRun> {
        let ((data, dim), opts) = search_input(&queries, (k, nprobe, refine, threads), progress)?;
        let search = DenseSearch::new(&self.inner, (data, dim), &qids, &opts, maxp);
        py.detach_caught(|| search.run()).py_err().map(run_to_py)
    }

    /// Search and write a TREC run file atomically (of documents with `maxp`, as `search_run`).
    #[pyo3(signature = (queries, qids, path, k=1000, tag="clirkit-dense", nprobe=1, refine=0, threads=0, maxp=None, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn search_trec(
        &self,
        py: Python<'_>,
        queries: PyReadonlyArray2<'_, f32>,
        qids: Vec<String>,
        path: PathBuf,
        k: usize,
        tag: &str,
        nprobe: usize,
        refine: usize,
        threads: usize,
        maxp: Option<&str>,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<()> {
        let ((data, dim), opts) = search_input(&queries, (k, nprobe, refine, threads), progress)?;
        let search = DenseSearch::new(&self.inner, (data, dim), &qids, &opts, maxp);
        py.detach_caught(|| search.write_run(&path, tag, RUN_WINDOW))
            .py_err()
    }

    /// Round 1 of a search through shards: (shortlist length, whether round 2 re-scores,
    /// this shard's candidates by query as arrays: offsets int64 (q + 1), keys uint32, lists
    /// uint32, rows uint32, scores float32).
    #[pyo3(signature = (queries, k=1000, nprobe=1, refine=0, threads=0, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn shortlist<'py>(
        &self,
        py: Python<'py>,
        queries: PyReadonlyArray2<'py, f32>,
        k: usize,
        nprobe: usize,
        refine: usize,
        threads: usize,
        progress: Option<&Bound<'_, PyProgressCounter>>,
    ) -> PyResult<(usize, bool, Shortlist<'py>)> {
        let ((data, dim), opts) = search_input(&queries, (k, nprobe, refine, threads), progress)?;
        let lists = py
            .detach_caught(|| self.inner.shortlist(data, dim, &opts))
            .py_err()?;
        Ok((
            self.inner.shortlist_len(&opts),
            self.inner.rescores(&opts),
            crate::dense_sharded::shortlist_to_py(py, &lists),
        ))
    }

    /// Round 2 of a search through shards: the exact scores (float32) of `rows` (uint32, this
    /// shard's rows, those of query `i` at `offsets[i]..offsets[i + 1]`).
    #[pyo3(signature = (queries, offsets, rows, threads=0))]
    fn rescore<'py>(
        &self,
        py: Python<'py>,
        queries: PyReadonlyArray2<'py, f32>,
        offsets: PyReadonlyArray1<'py, i64>,
        rows: PyReadonlyArray1<'py, u32>,
        threads: usize,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let (data, dim) = matrix(&queries, "queries")?;
        let rows = crate::dense_sharded::split_rows(offsets.as_slice()?, rows.as_slice()?)?;
        let scores = py
            .detach_caught(|| self.inner.rescore(data, dim, &rows, threads))
            .py_err()?;
        Ok(scores.concat().into_pyarray(py))
    }

    /// String ids of internal ids `rows`.
    fn ids_of(&self, rows: PyReadonlyArray1<'_, u32>) -> PyResult<Vec<String>> {
        let ntotal = self.inner.ntotal();
        rows.as_slice()?
            .iter()
            .map(|&r| id_at(self.inner.ids(), r.into(), ntotal))
            .collect()
    }

    /// String id of internal id `i`.
    fn id(&self, i: i64) -> PyResult<String> {
        id_at(self.inner.ids(), i, self.inner.ntotal())
    }

    /// Internal id of string id `id`, or None.
    fn find(&self, id: &str) -> Option<u32> {
        self.inner.ids().find(id)
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn ntotal(&self) -> usize {
        self.inner.ntotal()
    }
    #[getter]
    fn metric(&self) -> &'static str {
        self.inner.metric().name()
    }
    #[getter]
    fn kind(&self) -> String {
        self.inner.kind()
    }
    #[getter]
    fn has_vectors(&self) -> bool {
        self.inner.has_vectors()
    }

    /// How the full vectors are stored ("float32" or "float16"), None when not kept.
    #[getter]
    fn vector_dtype(&self) -> Option<&'static str> {
        self.inner.vector_dtype().map(|dtype| match dtype {
            VectorDtype::Float32 => "float32",
            VectorDtype::Float16 => "float16",
        })
    }
}

/// Names of the fast-scan kernels this CPU supports, slowest first.
#[pyfunction]
fn fastscan_kernels() -> Vec<&'static str> {
    clirkit_core::dense::fastscan::Isa::available()
        .into_iter()
        .map(|i| i.name())
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDenseIndex>()?;
    m.add_function(wrap_pyfunction!(fastscan_kernels, m)?)?;
    // The metric names, listed once in the core (`dense::Metric`): the CLI's and the experiment
    // file's choices.
    m.add("METRICS", PyTuple::new(m.py(), Metric::NAMES)?)?;
    Ok(())
}
