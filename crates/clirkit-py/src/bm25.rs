//! `clirkit._native.Bm25Index` and `SearchResults`: thin wrappers over `clirkit_core::bm25`.
//! Builds and searches run with the GIL released; results stay native until asked for.

use crate::common::define_register;
use crate::errors::{DetachCaught, IntoPy};
use crate::progress::{progress_of, PyProgressCounter};
use clirkit_core::bm25::{
    self, BatchQuery, Bm25Index, Bm25Params, BuildOptions, Expansion, Hit, Rm3Params, Strategy,
};
use clirkit_core::io::jsonl::LineRange;
use clirkit_core::io::manifest::Manifest;
use clirkit_core::io::trec;
use clirkit_core::progress::Progress;
use clirkit_core::ranking::{Run, ScoredDoc};
use clirkit_core::sharded;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A memory-mapped BM25 index (Lucene's BM25 scoring, block-max MaxScore top-k).
#[pyclass(name = "Bm25Index", module = "clirkit._native", frozen)]
pub struct PyBm25Index {
    inner: Arc<Bm25Index>,
}

/// A build's corpus as Python passes it: one file, or several read in sequence, each
/// `(path, lang, default_lang)` (see [`bm25::CorpusPart`]).
#[derive(FromPyObject)]
enum CorpusArg {
    One(PathBuf),
    Parts(Vec<(PathBuf, Option<String>, Option<String>)>),
}

impl CorpusArg {
    fn parts(self) -> Vec<bm25::CorpusPart> {
        match self {
            CorpusArg::One(path) => vec![bm25::CorpusPart::whole(&path)],
            CorpusArg::Parts(parts) => parts
                .into_iter()
                .map(|(path, lang, default_lang)| bm25::CorpusPart {
                    path,
                    lang,
                    default_lang,
                })
                .collect(),
        }
    }
}

/// RM3's parameters as the Python side passes them: (fb_docs, fb_terms, original_weight,
/// filter_terms).
type Rm3Tuple = (usize, usize, f32, bool);

fn rm3_params((fb_docs, fb_terms, original_weight, filter_terms): Rm3Tuple) -> Rm3Params {
    Rm3Params {
        fb_docs,
        fb_terms,
        original_weight,
        filter_terms,
    }
}

/// What batch results need of an index: the string ids of its document numbers.
pub trait DocIds: Send + Sync {
    fn doc_id(&self, doc: u32) -> &str;
}

impl DocIds for Bm25Index {
    fn doc_id(&self, doc: u32) -> &str {
        Bm25Index::doc_id(self, doc)
    }
}

pub fn hits_to_py(index: &dyn DocIds, hits: &[Hit]) -> Vec<(String, f64)> {
    hits.iter()
        .map(|h| (index.doc_id(h.doc).to_string(), h.score as f64))
        .collect()
}

#[pymethods]
impl PyBm25Index {
    /// Merge the indexes `inputs` (in order) into a new index `index` (atomically) and open it.
    #[staticmethod]
    fn merge(py: Python<'_>, inputs: Vec<PathBuf>, index: PathBuf) -> PyResult<Self> {
        let paths: Vec<&std::path::Path> = inputs.iter().map(PathBuf::as_path).collect();
        py.detach_caught(|| bm25::merge::merge(&paths, &index))
            .py_err()?;
        Self::open(py, index)
    }

    /// Build an index from a JSONL corpus (atomically) and open it; with `range` (start byte,
    /// end byte, first line number, from `split_corpus`), from those lines only: one shard. The
    /// corpus is a path, or a list of `(path, lang, default_lang)` files read in sequence.
    #[staticmethod]
    #[pyo3(signature = (corpus, index, *, lang=None, lang_field=None, fields=None, threads=0,
                        keep_first_duplicate=false, progress=None, memory_budget_mb=1024,
                        store_docvectors=false, range=None))]
    #[allow(clippy::too_many_arguments)]
    fn build(
        py: Python<'_>,
        corpus: CorpusArg,
        index: PathBuf,
        lang: Option<String>,
        lang_field: Option<String>,
        fields: Option<Vec<String>>,
        threads: usize,
        keep_first_duplicate: bool,
        progress: Option<&Bound<'_, PyProgressCounter>>,
        memory_budget_mb: usize,
        store_docvectors: bool,
        range: Option<(u64, u64, u64)>,
    ) -> PyResult<Self> {
        let opts = BuildOptions {
            lang,
            lang_field,
            fields: fields.unwrap_or_else(|| vec!["title".into(), "text".into()]),
            threads,
            keep_first_duplicate,
            progress: progress_of(progress),
            memory_budget_bytes: memory_budget_mb.max(1) << 20,
            store_docvectors,
            range: range.map(|(start, end, first_line)| LineRange {
                start,
                end,
                first_line,
            }),
            ..BuildOptions::default()
        };
        // The build runs on its own thread while this one watches for Ctrl-C (Python handles
        // signals only on the main thread) and cancels it cleanly.
        let parts = corpus.parts();
        let cancel = AtomicBool::new(false);
        let mut interrupt = None;
        let result = py.detach_caught(|| {
            std::thread::scope(|scope| {
                let worker =
                    scope.spawn(|| bm25::build_parts_cancellable(&parts, &index, &opts, &cancel));
                while !worker.is_finished() {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    if interrupt.is_none() {
                        if let Err(e) = Python::attach(|py| py.check_signals()) {
                            interrupt = Some(e);
                            cancel.store(true, Ordering::Relaxed);
                        }
                    }
                }
                worker.join().expect("the build thread does not panic")
            })
        });
        if let Some(e) = interrupt {
            return Err(e);
        }
        result.py_err()?;
        Self::open(py, index)
    }

    /// Open an existing index (memory-mapped).
    #[staticmethod]
    fn open(py: Python<'_>, index: PathBuf) -> PyResult<Self> {
        let inner = py.detach_caught(|| Bm25Index::open(&index)).py_err()?;
        Ok(PyBm25Index {
            inner: Arc::new(inner),
        })
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
    fn languages(&self) -> Vec<String> {
        self.inner.languages()
    }

    #[getter]
    fn avgdl(&self) -> f32 {
        self.inner.avgdl()
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

    /// Top-k (doc id, score) pairs for one query.
    /// `strategy`: "auto", "maxscore", "bmw" (block-max WAND) or "exhaustive" (all return the
    /// same hits).
    #[pyo3(signature = (query, k=10, lang=None, k1=bm25::DEFAULT_K1, b=bm25::DEFAULT_B, strategy="auto"))]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        py: Python<'_>,
        query: &str,
        k: usize,
        lang: Option<&str>,
        k1: f32,
        b: f32,
        strategy: &str,
    ) -> PyResult<Vec<(String, f64)>> {
        let params = Bm25Params { k1, b };
        let strategy: Strategy = strategy.parse().py_err()?;
        let hits = py
            .detach_caught(|| self.inner.search_by(strategy, query, lang, k, params))
            .py_err()?;
        Ok(hits_to_py(self.inner.as_ref(), &hits))
    }

    /// Whether the index stores document vectors (what RM3 needs).
    #[getter]
    fn has_docvectors(&self) -> bool {
        self.inner.has_docvectors()
    }

    /// RM3: top-k (doc id, score) pairs of the expanded query, and the expansion's
    /// (term, weight) pairs.
    #[pyo3(signature = (query, rm3, k=10, lang=None, k1=bm25::DEFAULT_K1, b=bm25::DEFAULT_B))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn search_rm3(
        &self,
        py: Python<'_>,
        query: &str,
        rm3: Rm3Tuple,
        k: usize,
        lang: Option<&str>,
        k1: f32,
        b: f32,
    ) -> PyResult<(Vec<(String, f64)>, Expansion)> {
        let params = Bm25Params { k1, b };
        let (hits, expansion) = py
            .detach_caught(|| {
                self.inner
                    .search_rm3(query, lang, k, params, &rm3_params(rm3))
            })
            .py_err()?;
        Ok((hits_to_py(self.inner.as_ref(), &hits), expansion))
    }

    /// Open shard `shard` of the sharded index at `index`, scoring with the whole collection's
    /// statistics; a missing shard or one of another build is refused.
    #[staticmethod]
    fn open_shard(py: Python<'_>, index: PathBuf, shard: usize) -> PyResult<Self> {
        let inner = py
            .detach_caught(|| Bm25Index::open_shard(&index, shard))
            .py_err()?;
        Ok(PyBm25Index {
            inner: Arc::new(inner),
        })
    }

    /// Search (qid, text, lang-or-None) triples on `threads` threads.
    #[pyo3(signature = (queries, k=1000, threads=0, lang=None, k1=bm25::DEFAULT_K1, b=bm25::DEFAULT_B, progress=None, rm3=None))]
    #[allow(clippy::too_many_arguments)]
    fn batch_search(
        &self,
        py: Python<'_>,
        queries: Vec<(String, String, Option<String>)>,
        k: usize,
        threads: usize,
        lang: Option<String>,
        k1: f32,
        b: f32,
        progress: Option<&Bound<'_, PyProgressCounter>>,
        rm3: Option<Rm3Tuple>,
    ) -> PyResult<PySearchResults> {
        let queries: Vec<BatchQuery> = queries
            .into_iter()
            .map(|(id, text, lang)| BatchQuery { id, text, lang })
            .collect();
        let params = Bm25Params { k1, b };
        let progress = progress_of(progress);
        self.run_batch(py, queries, k, threads, lang, params, &progress, rm3)
    }

    /// Search a queries file: JSONL (uses each query's `lang` field) or TSV `id<TAB>text`. With
    /// `output`, the run is streamed there instead (atomically, in query order, the same bytes as
    /// `to_trec` would write, without holding every query's results) and `None` returned.
    #[pyo3(signature = (path, k=1000, threads=0, lang=None, k1=bm25::DEFAULT_K1, b=bm25::DEFAULT_B, progress=None, rm3=None, output=None, tag="clirkit"))]
    #[allow(clippy::too_many_arguments)]
    fn search_file(
        &self,
        py: Python<'_>,
        path: PathBuf,
        k: usize,
        threads: usize,
        lang: Option<String>,
        k1: f32,
        b: f32,
        progress: Option<&Bound<'_, PyProgressCounter>>,
        rm3: Option<Rm3Tuple>,
        output: Option<PathBuf>,
        tag: &str,
    ) -> PyResult<Option<PySearchResults>> {
        let queries = py.detach_caught(|| bm25::read_queries(&path)).py_err()?;
        let params = Bm25Params { k1, b };
        let progress = progress_of(progress);
        let Some(output) = output else {
            return self
                .run_batch(py, queries, k, threads, lang, params, &progress, rm3)
                .map(Some);
        };
        let rm3 = rm3.map(rm3_params);
        let settings = bm25::BatchSettings {
            k,
            lang: lang.as_deref(),
            params,
            rm3: rm3.as_ref(),
            threads,
            progress: &progress,
        };
        py.detach_caught(|| {
            self.inner
                .batch_search_to_run_file(&queries, &settings, &output, tag)
        })
        .py_err()?;
        Ok(None)
    }
}

impl PyBm25Index {
    #[allow(clippy::too_many_arguments)]
    fn run_batch(
        &self,
        py: Python<'_>,
        queries: Vec<BatchQuery>,
        k: usize,
        threads: usize,
        lang: Option<String>,
        params: Bm25Params,
        progress: &Progress,
        rm3: Option<Rm3Tuple>,
    ) -> PyResult<PySearchResults> {
        let rm3 = rm3.map(rm3_params);
        let qids: Vec<String> = queries.iter().map(|q| q.id.clone()).collect();
        let lang = lang.as_deref();
        PySearchResults::gather(py, self.inner.clone(), qids, || match &rm3 {
            None => self
                .inner
                .batch_search(&queries, k, lang, params, threads, progress)
                .map(|hits| (hits, None)),
            Some(rm3) => self
                .inner
                .batch_search_rm3(&queries, k, lang, params, rm3, threads, progress)
                .map(|(hits, expansions)| (hits, Some(expansions))),
        })
    }
}

/// Batch-search results, held natively: per query, doc numbers and scores in canonical order.
#[pyclass(name = "SearchResults", module = "clirkit._native", frozen)]
pub struct PySearchResults {
    pub index: Arc<dyn DocIds>,
    pub qids: Vec<String>,
    pub hits: Vec<Vec<Hit>>,
    /// Each query's RM3 expansion, when searched with RM3.
    pub expansions: Option<Vec<Expansion>>,
    pub position: HashMap<String, usize>,
}

impl PySearchResults {
    /// Each query id's position; a repeated id is an error.
    pub fn positions(qids: &[String]) -> PyResult<HashMap<String, usize>> {
        let mut position = HashMap::with_capacity(qids.len());
        for (i, q) in qids.iter().enumerate() {
            if let Some(first) = position.insert(q.clone(), i) {
                return Err(crate::errors::to_py(clirkit_core::Error::invalid(format!(
                    "query id '{q}' appears twice (queries {first} and {i}, counting from 0)"
                ))));
            }
        }
        Ok(position)
    }

    /// The results of `search` (hits, and expansions with RM3), run with the GIL released once
    /// `qids` are known to be unique.
    pub fn gather(
        py: Python<'_>,
        index: Arc<dyn DocIds>,
        qids: Vec<String>,
        search: impl FnOnce() -> clirkit_core::Result<(Vec<Vec<Hit>>, Option<Vec<Expansion>>)> + Send,
    ) -> PyResult<Self> {
        let position = Self::positions(&qids)?;
        let (hits, expansions) = py.detach_caught(search).py_err()?;
        Ok(PySearchResults {
            index,
            qids,
            hits,
            expansions,
            position,
        })
    }

    fn to_run(&self) -> Run {
        Run {
            queries: self
                .qids
                .iter()
                .zip(&self.hits)
                .map(|(q, hits)| {
                    let docs = hits
                        .iter()
                        .map(|h| ScoredDoc::new(self.index.doc_id(h.doc), h.score as f64))
                        .collect();
                    (q.clone(), docs)
                })
                .collect(),
        }
    }
}

#[pymethods]
impl PySearchResults {
    fn __len__(&self) -> usize {
        self.qids.len()
    }

    fn __contains__(&self, qid: &str) -> bool {
        self.position.contains_key(qid)
    }

    /// (doc id, score) pairs of query `qid`, best first.
    fn __getitem__(&self, qid: &str) -> PyResult<Vec<(String, f64)>> {
        match self.position.get(qid) {
            Some(&i) => Ok(hits_to_py(self.index.as_ref(), &self.hits[i])),
            None => Err(pyo3::exceptions::PyKeyError::new_err(qid.to_string())),
        }
    }

    /// The RM3 expansion (term, weight) pairs of query `qid`; None without RM3.
    fn expansion(&self, qid: &str) -> PyResult<Option<Expansion>> {
        match self.position.get(qid) {
            Some(&i) => Ok(self.expansions.as_ref().map(|e| e[i].clone())),
            None => Err(pyo3::exceptions::PyKeyError::new_err(qid.to_string())),
        }
    }

    /// Query ids in input order.
    fn qids(&self) -> Vec<String> {
        self.qids.clone()
    }

    /// Write a TREC run (`qid Q0 docid rank score tag`) in canonical order, atomically.
    /// The hits encoded for `merge_shard_hits`: a shard's part of a sharded search.
    fn shard_hits<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let encoded = sharded::encode_hits(|doc| self.index.doc_id(doc), &self.hits);
        PyBytes::new(py, &encoded)
    }

    #[pyo3(signature = (path, tag="clirkit-bm25"))]
    fn to_trec(&self, py: Python<'_>, path: PathBuf, tag: &str) -> PyResult<()> {
        py.detach_caught(|| trec::write_run(&path, &self.to_run(), tag))
            .py_err()
    }

    /// `dict[qid, dict[docid, score]]` (pytrec_eval's shape).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (q, hits) in self.qids.iter().zip(&self.hits) {
            let docs = PyDict::new(py);
            for h in hits {
                docs.set_item(self.index.doc_id(h.doc), h.score as f64)?;
            }
            out.set_item(q, docs)?;
        }
        Ok(out)
    }
}

define_register!(classes: [PyBm25Index, PySearchResults], functions: []);
