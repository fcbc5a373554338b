//! Fusion bindings: `NativeRun` (a run held in Rust, read from a file without building Python
//! objects), `fuse` and `fuse_to_file`.

use crate::errors::{DetachCaught, IntoPy};
use crate::io::PyRun;
use clirkit_core::fusion::method_name::MethodName;
use clirkit_core::fusion::normalize::Norm;
use clirkit_core::fusion::run_file::{read_run_lists, write_run_lists};
use clirkit_core::fusion::{
    fuse as core_fuse, fuse_to_file as core_fuse_to_file, FusionOptions, Method, RunLists,
    RunListsBuilder,
};
use clirkit_core::parallel::drop_in_background;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::path::PathBuf;
use std::sync::Arc;

/// Run `f` on a pool of `threads` workers (all cores when `None` or 0).
pub fn with_threads<T: Send>(
    threads: Option<usize>,
    f: impl FnOnce() -> clirkit_core::Result<T> + Send,
) -> clirkit_core::Result<T> {
    clirkit_core::parallel::install(threads.unwrap_or(0), |_| f())?
}

/// A run held in Rust: queries in first-appearance order, documents in canonical order.
#[pyclass(name = "NativeRun", module = "clirkit._native", frozen)]
pub struct PyNativeRun {
    inner: Arc<RunLists>,
}

#[pymethods]
impl PyNativeRun {
    /// Read a TREC run file (parallel parser; same checks as `read_run`).
    #[staticmethod]
    #[pyo3(signature = (path, threads = None))]
    fn read(py: Python<'_>, path: PathBuf, threads: Option<usize>) -> PyResult<Self> {
        let lists = py
            .detach_caught(|| with_threads(threads, || read_run_lists(&path)))
            .py_err()?;
        Ok(PyNativeRun {
            inner: Arc::new(lists),
        })
    }

    /// Build from `dict[qid, dict[docid, score]]` (queries keep the dict's order).
    #[staticmethod]
    fn from_dict(run: &Bound<'_, PyDict>) -> PyResult<Self> {
        let mut builder = RunListsBuilder::default();
        for (qid, docs) in run.iter() {
            let qid: String = qid.extract()?;
            let docs = docs.cast::<PyDict>().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "run entry for query '{qid}' is not a dict of docid -> score"
                ))
            })?;
            let mut pairs: Vec<(String, f64)> = Vec::with_capacity(docs.len());
            for (doc, score) in docs.iter() {
                pairs.push((doc.extract()?, score.extract()?));
            }
            builder
                .push_query(
                    qid.as_bytes(),
                    pairs.iter().map(|(d, s)| (d.as_bytes(), *s)),
                )
                .py_err()?;
        }
        Ok(PyNativeRun {
            inner: Arc::new(builder.finish()),
        })
    }

    /// The run as [(qid, [(docid, score), ...]), ...] in canonical order.
    fn to_list(&self) -> PyRun {
        (0..self.inner.num_queries())
            .map(|q| {
                let docs = self
                    .inner
                    .query_docs(q)
                    .map(|(d, s)| (d.to_string(), s))
                    .collect();
                (self.inner.query_id(q).to_string(), docs)
            })
            .collect()
    }

    /// Write as a TREC run file, atomically.
    #[pyo3(signature = (path, tag = "clirkit", threads = None))]
    fn write(
        &self,
        py: Python<'_>,
        path: PathBuf,
        tag: &str,
        threads: Option<usize>,
    ) -> PyResult<()> {
        let inner = self.inner.clone();
        py.detach_caught(|| with_threads(threads, || write_run_lists(&path, &inner, tag)))
            .py_err()
    }

    #[getter]
    fn num_queries(&self) -> usize {
        self.inner.num_queries()
    }

    #[getter]
    fn num_entries(&self) -> usize {
        self.inner.num_entries()
    }

    fn __len__(&self) -> usize {
        self.inner.num_queries()
    }

    fn __repr__(&self) -> String {
        format!(
            "NativeRun({} queries, {} entries)",
            self.inner.num_queries(),
            self.inner.num_entries()
        )
    }
}

/// The fusion options as the Python side passes them: a dict keyed by `clirkit.fusion.fuse`'s
/// keyword names.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct FuseArgs {
    method: String,
    k: f64,
    weights: Option<Vec<f64>>,
    depth: Option<usize>,
    norm: String,
    alpha: Option<f64>,
    top: Option<usize>,
    threads: Option<usize>,
}

impl FuseArgs {
    /// The core's options (a method or norm name it does not know is an error naming it).
    fn options(&self) -> PyResult<FusionOptions> {
        let norm: Norm = self.norm.parse().py_err()?;
        let method = Method::from_name(&self.method, self.k, norm, self.alpha).py_err()?;
        let mut options = FusionOptions::new(method);
        options.weights = self.weights.clone();
        options.depth = self.depth;
        options.top = self.top;
        Ok(options)
    }
}

/// A run to fuse: one held in Rust, or a run file read in Rust.
enum Source {
    Loaded(Arc<RunLists>),
    File(PathBuf),
}

fn sources(runs: &[Bound<'_, PyAny>]) -> PyResult<Vec<Source>> {
    runs.iter()
        .map(|run| {
            if let Ok(native) = run.cast::<PyNativeRun>() {
                return Ok(Source::Loaded(native.get().inner.clone()));
            }
            run.extract::<PathBuf>().map(Source::File).map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(
                    "each run must be a NativeRun or a path to a run file",
                )
            })
        })
        .collect()
}

/// Load `sources` (files in Rust) and hand them to `f`, without the GIL, on `threads` workers.
fn with_loaded_runs<T: Send>(
    py: Python<'_>,
    sources: Vec<Source>,
    threads: Option<usize>,
    f: impl FnOnce(&[&RunLists]) -> clirkit_core::Result<T> + Send,
) -> PyResult<T> {
    py.detach_caught(|| {
        with_threads(threads, || {
            let loaded = sources
                .into_iter()
                .map(|s| match s {
                    Source::Loaded(r) => Ok(r),
                    Source::File(p) => read_run_lists(&p).map(Arc::new),
                })
                .collect::<clirkit_core::Result<Vec<_>>>()?;
            let refs: Vec<&RunLists> = loaded.iter().map(|r| r.as_ref()).collect();
            let result = f(&refs);
            drop(refs);
            drop_in_background(loaded);
            result
        })
    })
    .py_err()
}

/// Fuse runs given as `NativeRun`s or run-file paths (read in Rust).
#[pyfunction]
fn fuse(py: Python<'_>, runs: Vec<Bound<'_, PyAny>>, options: FuseArgs) -> PyResult<PyNativeRun> {
    let fusion = options.options()?;
    let fused = with_loaded_runs(py, sources(&runs)?, options.threads, |runs| {
        core_fuse(runs, &fusion)
    })?;
    Ok(PyNativeRun {
        inner: Arc::new(fused),
    })
}

/// Fuse runs (as `fuse`) and write the fused run to `output` as a TREC run, atomically, fusing
/// while earlier queries are written.
#[pyfunction]
fn fuse_to_file(
    py: Python<'_>,
    runs: Vec<Bound<'_, PyAny>>,
    output: PathBuf,
    tag: &str,
    options: FuseArgs,
) -> PyResult<()> {
    let fusion = options.options()?;
    with_loaded_runs(py, sources(&runs)?, options.threads, |runs| {
        core_fuse_to_file(runs, &fusion, &output, tag)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNativeRun>()?;
    m.add_function(wrap_pyfunction!(fuse, m)?)?;
    m.add_function(wrap_pyfunction!(fuse_to_file, m)?)?;
    // The option names, listed once in the core: Python validates and documents with these.
    m.add("FUSION_METHODS", PyTuple::new(m.py(), MethodName::NAMES)?)?;
    m.add("NORMALIZATIONS", PyTuple::new(m.py(), Norm::NAMES)?)?;
    Ok(())
}
