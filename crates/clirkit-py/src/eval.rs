//! Evaluation bindings: trec_eval-compatible measures on files or pytrec_eval-shaped dicts,
//! position-bias tables and paired significance tests. Conversion only; the work is in
//! `clirkit_core::eval`.

use crate::errors::{DetachCaught, IntoPy};
use clirkit_core::eval::position::{self, PositionTable};
use clirkit_core::eval::qrels_file::read_qrels_index;
use clirkit_core::eval::{
    self as core_eval, correlation, parse_measures_for, significance, DocLanguages, EvalOptions,
    Evaluation, QrelsIndex, RunFile, RunQuery, ScoredRef,
};
use clirkit_core::Error;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::collections::HashMap;
use std::path::PathBuf;

type PyRunDict = HashMap<String, HashMap<String, f64>>;
/// (keys, per-query rows sorted by qid, aggregate, run queries, matched queries)
type PyEvaluation = (Vec<String>, Vec<(String, Vec<f64>)>, Vec<f64>, usize, usize);

fn options(relevance_level: i32, judged_docs_only: bool, complete: bool) -> EvalOptions {
    EvalOptions {
        relevance_level,
        judged_docs_only,
        complete,
    }
}

fn to_py(e: Evaluation) -> PyEvaluation {
    (
        e.keys(),
        e.per_query,
        e.aggregate,
        e.run_queries,
        e.matched_queries,
    )
}

/// Borrow a run dict as the evaluator's input.
fn run_queries(run: &PyRunDict) -> Vec<RunQuery<'_>> {
    run.iter()
        .map(|(q, docs)| RunQuery {
            qid: q.as_str(),
            docs: docs
                .iter()
                .map(|(d, &s)| ScoredRef::new(s, d.as_bytes()))
                .collect(),
        })
        .collect()
}

fn check_scores(run: &PyRunDict) -> PyResult<()> {
    for (q, docs) in run {
        if let Some((d, s)) = docs.iter().find(|(_, s)| !s.is_finite()) {
            return Err(Error::invalid(format!(
                "run: score {s} of document '{d}' for query '{q}' is not finite"
            )))
            .py_err();
        }
    }
    Ok(())
}

/// Labels from a Python qrels dict: ints, or floats with no fractional part.
fn qrels_from_dict(qrels: &Bound<'_, PyDict>) -> PyResult<QrelsIndex> {
    let mut owned: Vec<(String, Vec<(String, i32)>)> = Vec::with_capacity(qrels.len());
    for (q, docs) in qrels.iter() {
        let q: String = q.extract()?;
        let docs: HashMap<String, Bound<'_, PyAny>> = docs.extract()?;
        let mut judged = Vec::with_capacity(docs.len());
        for (d, label) in docs {
            let label = match label.extract::<i32>() {
                Ok(l) => l,
                Err(_) => match label.extract::<f64>() {
                    Ok(f) if f.fract() == 0.0 && f.abs() < i32::MAX as f64 => f as i32,
                    _ => {
                        return Err(Error::invalid(format!(
                            "qrels: label of document '{d}' for query '{q}' is not an integer"
                        )))
                        .py_err()
                    }
                },
            };
            judged.push((d, label));
        }
        owned.push((q, judged));
    }
    Ok(QrelsIndex::from_pairs(owned.iter().map(|(q, docs)| {
        (
            q.clone(),
            docs.iter().map(|(d, l)| (d.as_bytes(), *l)).collect(),
        )
    })))
}

/// Documents' languages from a TSV path (`docid<TAB>lang`) or a dict[docid, lang]; `None` when
/// not given.
fn doc_languages(
    py: Python<'_>,
    given: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<DocLanguages>> {
    let Some(given) = given else { return Ok(None) };
    if let Ok(d) = given.cast::<PyDict>() {
        let pairs: HashMap<String, String> = d.extract()?;
        return DocLanguages::from_pairs(pairs).map(Some).py_err();
    }
    let path: PathBuf = given.extract()?;
    py.detach_caught(|| DocLanguages::read(&path))
        .map(Some)
        .py_err()
}

/// Prepared qrels and measures (pytrec_eval's RelevanceEvaluator, in Rust).
#[pyclass(name = "Evaluator", module = "clirkit._native")]
pub struct PyEvaluator {
    inner: core_eval::Evaluator,
}

#[pymethods]
impl PyEvaluator {
    /// qrels: a path (TREC, ndeval's subtopic qrels or BEIR TSV) or dict[qid, dict[docid,
    /// label]]; doc_languages: a TSV path or dict[docid, lang], making the task multilingual
    /// (α-nDCG's aspects are the languages; the `neuclir` preset adds alpha_nDCG@20).
    #[new]
    #[pyo3(signature = (qrels, measures, relevance_level = 1, judged_docs_only = false, complete = false, doc_languages = None))]
    fn new(
        py: Python<'_>,
        qrels: &Bound<'_, PyAny>,
        measures: Vec<String>,
        relevance_level: i32,
        judged_docs_only: bool,
        complete: bool,
        doc_languages: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let langs = self::doc_languages(py, doc_languages)?;
        let measures = parse_measures_for(&measures, langs.is_some()).py_err()?;
        let mut qrels = if let Ok(d) = qrels.cast::<PyDict>() {
            qrels_from_dict(d)?
        } else {
            let path: PathBuf = qrels.extract()?;
            py.detach_caught(|| read_qrels_index(&path)).py_err()?
        };
        if let Some(langs) = &langs {
            langs.apply(&mut qrels).py_err()?;
        }
        Ok(PyEvaluator {
            inner: core_eval::Evaluator::new(
                qrels,
                measures,
                options(relevance_level, judged_docs_only, complete),
            ),
        })
    }

    /// Output keys in measure order.
    fn keys(&self) -> Vec<String> {
        self.inner.measures().iter().map(|m| m.key()).collect()
    }

    /// Evaluate a run dict[qid, dict[docid, score]].
    fn evaluate_dict(&self, py: Python<'_>, run: PyRunDict) -> PyResult<PyEvaluation> {
        check_scores(&run)?;
        py.detach_caught(|| Ok(to_py(self.inner.evaluate(run_queries(&run)))))
            .py_err()
    }

    /// Evaluate a TREC run file.
    fn evaluate_file(&self, py: Python<'_>, run: PathBuf) -> PyResult<PyEvaluation> {
        py.detach_caught(|| self.inner.evaluate_file(&run).map(to_py))
            .py_err()
    }
}

/// Parse measure specs into output keys (raises InvalidInputError listing known measures); `mlir`:
/// for a multilingual task (the `neuclir` preset adds alpha_nDCG@20).
#[pyfunction]
#[pyo3(signature = (measures, mlir = false))]
fn measure_keys(measures: Vec<String>, mlir: bool) -> PyResult<Vec<String>> {
    Ok(parse_measures_for(&measures, mlir)
        .py_err()?
        .iter()
        .map(|m| m.key())
        .collect())
}

/// Evaluate a run file against a qrels file end to end.
#[pyfunction]
#[pyo3(signature = (qrels, run, measures, relevance_level = 1, judged_docs_only = false, complete = false))]
fn evaluate_files(
    py: Python<'_>,
    qrels: PathBuf,
    run: PathBuf,
    measures: Vec<String>,
    relevance_level: i32,
    judged_docs_only: bool,
    complete: bool,
) -> PyResult<PyEvaluation> {
    let opts = options(relevance_level, judged_docs_only, complete);
    py.detach_caught(|| core_eval::evaluate_files(&qrels, &run, &measures, opts).map(to_py))
        .py_err()
}

/// (label, counts per bin, mean per bin or None, PSI or None, mean or None)
type PyBucket = (
    String,
    Vec<usize>,
    Vec<Option<f64>>,
    Option<f64>,
    Option<f64>,
);

fn bucket_to_py(b: position::BucketTable) -> PyBucket {
    (b.label, b.counts, b.means, b.psi, b.mean)
}

/// Position-bias table of one run: (length unit, overall bucket, per-length buckets, evaluation).
#[pyfunction]
#[pyo3(signature = (positions, run, measure = "ndcg_cut.10".to_string(), bins = 20,
    edges = vec![0, 512, 1024, 1536, 2048], complete = false, doc_tokens = None, min_queries = 1))]
#[allow(clippy::too_many_arguments)]
fn position_bias(
    py: Python<'_>,
    positions: PathBuf,
    run: &Bound<'_, PyAny>,
    measure: String,
    bins: usize,
    edges: Vec<usize>,
    complete: bool,
    doc_tokens: Option<HashMap<String, usize>>,
    min_queries: usize,
) -> PyResult<(String, PyBucket, Vec<PyBucket>, PyEvaluation)> {
    let binning = position::Binning {
        bins,
        edges,
        min_queries,
    };
    let run_dict: Option<PyRunDict> = if run.is_instance_of::<PyDict>() {
        Some(run.extract()?)
    } else {
        None
    };
    let run_path: Option<PathBuf> = if run_dict.is_none() {
        Some(run.extract()?)
    } else {
        None
    };
    if let Some(r) = &run_dict {
        check_scores(r)?;
    }
    let opts = options(1, false, complete);
    let (table, evaluation) = py
        .detach_caught(|| -> clirkit_core::Result<(PositionTable, Evaluation)> {
            let mut judgements = position::read_positions(&positions)?;
            let file;
            let queries = match (&run_dict, &run_path) {
                (Some(r), _) => run_queries(r),
                (None, Some(p)) => {
                    file = RunFile::open(p)?;
                    file.queries()?
                }
                (None, None) => unreachable!("run is a dict or a path"),
            };
            position::position_bias(
                &mut judgements,
                queries,
                &measure,
                opts,
                &binning,
                doc_tokens.as_ref(),
            )
        })
        .py_err()?;
    Ok((
        table.length_unit.to_string(),
        bucket_to_py(table.overall),
        table.buckets.into_iter().map(bucket_to_py).collect(),
        to_py(evaluation),
    ))
}

/// Two-sided paired t-test of b against a: (mean difference, t, p, queries).
#[pyfunction]
fn paired_t_test(a: Vec<f64>, b: Vec<f64>) -> PyResult<(f64, f64, f64, usize)> {
    let r = significance::paired_t_test(&a, &b).py_err()?;
    Ok((r.mean_difference, r.statistic, r.p_value, r.queries))
}

/// Paired randomization test of b against a: (mean difference, statistic, p, queries).
#[pyfunction]
#[pyo3(signature = (a, b, permutations = 10000, seed = 0))]
fn randomization_test(
    py: Python<'_>,
    a: Vec<f64>,
    b: Vec<f64>,
    permutations: usize,
    seed: u64,
) -> PyResult<(f64, f64, f64, usize)> {
    let r = py
        .detach_caught(|| significance::randomization_test(&a, &b, permutations, seed))
        .py_err()?;
    Ok((r.mean_difference, r.statistic, r.p_value, r.queries))
}

/// Adjust p-values for multiple comparisons: method "holm", "bonferroni" or "none".
#[pyfunction]
fn adjust_p_values(p: Vec<f64>, method: &str) -> PyResult<Vec<f64>> {
    let correction: significance::Correction = method.parse().py_err()?;
    Ok(correction.adjust(&p))
}

/// Spearman's rho of two orderings of the same items: (rho, two-sided p, items).
#[pyfunction]
fn spearman(x: Vec<f64>, y: Vec<f64>) -> PyResult<(f64, f64, usize)> {
    let r = correlation::spearman(&x, &y).py_err()?;
    Ok((r.coefficient, r.p_value, r.items))
}

/// Kendall's tau-b of two orderings of the same items: (tau, two-sided p, items).
#[pyfunction]
fn kendall_tau(x: Vec<f64>, y: Vec<f64>) -> PyResult<(f64, f64, usize)> {
    let r = correlation::kendall_tau(&x, &y).py_err()?;
    Ok((r.coefficient, r.p_value, r.items))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "CORRECTIONS",
        PyTuple::new(m.py(), significance::Correction::NAMES)?,
    )?;
    m.add_class::<PyEvaluator>()?;
    m.add_function(wrap_pyfunction!(measure_keys, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate_files, m)?)?;
    m.add_function(wrap_pyfunction!(position_bias, m)?)?;
    m.add_function(wrap_pyfunction!(paired_t_test, m)?)?;
    m.add_function(wrap_pyfunction!(randomization_test, m)?)?;
    m.add_function(wrap_pyfunction!(adjust_p_values, m)?)?;
    m.add_function(wrap_pyfunction!(spearman, m)?)?;
    m.add_function(wrap_pyfunction!(kendall_tau, m)?)?;
    Ok(())
}
