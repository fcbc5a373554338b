//! Evaluate a run against qrels with trec_eval's rules: queries of the run without judgements are
//! skipped; queries with judgements but absent from the run are skipped too, unless `complete`
//! (trec_eval -c), which evaluates them as empty rankings; the `all` row is the mean over the
//! evaluated queries (the sum for `num_*` counts). Run files are evaluated by
//! [`Evaluator::evaluate_file`], in [`crate::eval::run_stream`], above the run readers.

use crate::error::Result;
use crate::eval::measures::{compute, parse_measures, Measure, QueryRanking};
use crate::eval::qrels::{Judgements, QrelsIndex};
use crate::eval::ranked::{ranked_labels, sort_for_eval, RunQuery, ScoredRef};
use rayon::prelude::*;

/// trec_eval's switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvalOptions {
    /// Minimum label counted as relevant (trec_eval -l; default 1).
    pub relevance_level: i32,
    /// Drop retrieved documents without a non-negative label before ranking (trec_eval -J).
    pub judged_docs_only: bool,
    /// Evaluate judged queries absent from the run as empty rankings and average over all judged
    /// queries (trec_eval -c).
    pub complete: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            relevance_level: 1,
            judged_docs_only: false,
            complete: false,
        }
    }
}

/// Results: per-query values (queries sorted by id, as trec_eval prints them) and the `all` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub measures: Vec<Measure>,
    pub per_query: Vec<(String, Vec<f64>)>,
    pub aggregate: Vec<f64>,
    /// Queries in the run.
    pub run_queries: usize,
    /// Queries of the run that have judgements.
    pub matched_queries: usize,
    /// Queries that have judgements.
    pub qrels_queries: usize,
}

impl Evaluation {
    /// Output keys (`ndcg_cut_10`, `P_5`, ...) in measure order.
    pub fn keys(&self) -> Vec<String> {
        self.measures.iter().map(Measure::key).collect()
    }

    /// True when the run and qrels share no query: almost always a wrong file or id scheme.
    pub fn no_overlap(&self) -> bool {
        self.matched_queries == 0 && self.run_queries > 0
    }
}

/// Qrels plus measures and options, ready to evaluate any number of runs.
pub struct Evaluator {
    qrels: QrelsIndex,
    measures: Vec<Measure>,
    options: EvalOptions,
}

impl Evaluator {
    pub fn new(qrels: QrelsIndex, measures: Vec<Measure>, options: EvalOptions) -> Self {
        Evaluator {
            qrels,
            measures,
            options,
        }
    }

    /// Build from measure specs (see [`crate::eval::measures::spec`]).
    pub fn with_specs<S: AsRef<str>>(
        qrels: QrelsIndex,
        specs: &[S],
        options: EvalOptions,
    ) -> Result<Self> {
        Ok(Self::new(qrels, parse_measures(specs)?, options))
    }

    pub fn measures(&self) -> &[Measure] {
        &self.measures
    }

    pub fn qrels(&self) -> &QrelsIndex {
        &self.qrels
    }

    pub fn options(&self) -> EvalOptions {
        self.options
    }

    /// Whether a measure needs the judged document at each rank, not only its label (α-nDCG).
    pub fn needs_docs(&self) -> bool {
        self.measures.iter().any(|m| m.family.needs_aspects())
    }

    /// Measure one query's ranking (documents in any order).
    pub fn evaluate_query(&self, judgements: &Judgements, docs: &mut [ScoredRef]) -> Vec<f64> {
        sort_for_eval(docs);
        let (mut labels, mut judged) = (Vec::new(), Vec::new());
        let out_docs = self.needs_docs().then_some(&mut judged);
        ranked_labels(
            docs,
            judgements,
            self.options.judged_docs_only,
            &mut labels,
            out_docs,
        );
        self.measure_labels(judgements, &labels, &judged)
    }

    /// Measure one query from its labels rank by rank and, when [`Self::needs_docs`], the judged
    /// document at each rank ([`ranked_labels`]' output).
    pub fn measure_labels(
        &self,
        judgements: &Judgements,
        labels: &[i32],
        docs: &[u32],
    ) -> Vec<f64> {
        let q = QueryRanking::new(labels, judgements, self.options.relevance_level).with_docs(docs);
        self.measures.iter().map(|m| compute(m, &q)).collect()
    }

    /// Evaluate a run. Queries are measured in parallel; results do not depend on thread count.
    pub fn evaluate(&self, run: Vec<RunQuery>) -> Evaluation {
        let run_queries = run.len();
        let measured: Vec<(String, Vec<f64>)> = run
            .into_par_iter()
            .filter_map(|mut q| {
                let j = self.qrels.get(q.qid)?;
                Some((q.qid.to_string(), self.evaluate_query(j, &mut q.docs)))
            })
            .collect();
        self.assemble(measured, run_queries)
    }

    /// The evaluation from the measured queries of a run (those with judgements, each once) and
    /// the number of queries in the run: with `complete`, the judged queries the run lacks are
    /// measured as empty rankings; queries are put in byte order of their ids.
    pub(crate) fn assemble(
        &self,
        mut per_query: Vec<(String, Vec<f64>)>,
        run_queries: usize,
    ) -> Evaluation {
        let matched_queries = per_query.len();
        if self.options.complete {
            let seen: rustc_hash::FxHashSet<&str> =
                per_query.iter().map(|(q, _)| q.as_str()).collect();
            let missing: Vec<(&str, &Judgements)> = self
                .qrels
                .queries()
                .filter(|(qid, _)| !seen.contains(qid))
                .collect();
            let empty: Vec<(String, Vec<f64>)> = missing
                .into_par_iter()
                .map(|(qid, j)| (qid.to_string(), self.evaluate_query(j, &mut [])))
                .collect();
            per_query.extend(empty);
        }
        per_query.par_sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let aggregate = aggregate(&self.measures, &per_query);
        Evaluation {
            measures: self.measures.clone(),
            per_query,
            aggregate,
            run_queries,
            matched_queries,
            qrels_queries: self.qrels.len(),
        }
    }
}

/// The `all` row: means, or sums for counts; 0 over no queries.
pub fn aggregate(measures: &[Measure], per_query: &[(String, Vec<f64>)]) -> Vec<f64> {
    let n = per_query.len();
    (0..measures.len())
        .map(|i| {
            // Folded from +0.0: `Sum` for floats starts at -0.0, which would print as "-0.0000".
            let sum = per_query.iter().fold(0.0, |acc, (_, v)| acc + v[i]);
            if measures[i].family.is_count() || n == 0 {
                sum
            } else {
                sum / n as f64
            }
        })
        .collect()
}
