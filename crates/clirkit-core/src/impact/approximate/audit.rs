//! How far an approximate run is from exact: [`audit`] re-runs a seeded sample of its queries
//! exactly and compares the top 10s; [`calibrate`] picks the cheapest search knobs whose
//! Accuracy@10 on such a sample reaches a target with 95% confidence ([`lower_bound`]).
//!
//! Per audited query: Accuracy@10 is the share of the exact top 10 that the approximate top 10
//! holds (1 when the exact search finds nothing), and the score gap is the relative shortfall of
//! the approximate top 10's score sum against the exact top 10's (0 when they hold the same
//! documents; every approximate score is exact, so it is never negative).

use super::params::{check_target, SearchParams};
use super::structure::ApproximateIndex;
use crate::error::{Error, Result};
use crate::eval::significance::student_t_upper_quantile;
use crate::impact::vectors::WeightedVector;
use crate::impact::{Hit, ImpactIndex};
use crate::ranking::Run;
use crate::rng::SplitMix64;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// The depth the audit compares at.
pub const AUDIT_DEPTH: usize = 10;

/// One audited query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryAudit {
    pub query: String,
    pub accuracy_at_10: f64,
    pub score_gap: f64,
}

/// What an audit found (`queries` lists every audited query, in query order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    /// Queries re-run exactly.
    pub audited: usize,
    /// Queries of the run the sample was drawn from.
    pub of: usize,
    pub seed: u64,
    /// Mean Accuracy@10 over the audited queries.
    pub accuracy_at_10: f64,
    pub min_accuracy_at_10: f64,
    /// Mean and largest score gap.
    pub score_gap: f64,
    pub max_score_gap: f64,
    pub params: SearchParams,
    pub queries: Vec<QueryAudit>,
}

/// The positions of the `n` queries of `count` an audit seeded `seed` draws, in query order.
pub fn sample(count: usize, n: usize, seed: u64) -> Vec<usize> {
    SplitMix64::new(seed).sample(count, n)
}

/// Accuracy@10 and score gap of `approximate` against `exact` (each best first).
pub fn compare(exact: &[Hit], approximate: &[Hit]) -> (f64, f64) {
    compare_by(
        exact,
        approximate,
        |a, b| a.doc == b.doc,
        |h| h.score as f64,
    )
}

/// [`compare`] over any kind of hit: `same` says whether two hits are one document, `score`
/// gives a hit's score.
fn compare_by<T>(
    exact: &[T],
    approximate: &[T],
    same: impl Fn(&T, &T) -> bool,
    score: impl Fn(&T) -> f64,
) -> (f64, f64) {
    let exact = &exact[..exact.len().min(AUDIT_DEPTH)];
    let approximate = &approximate[..approximate.len().min(AUDIT_DEPTH)];
    if exact.is_empty() {
        return (1.0, 0.0);
    }
    let found = exact
        .iter()
        .filter(|e| approximate.iter().any(|a| same(a, e)))
        .count();
    let sum = |hits: &[T]| hits.iter().map(&score).sum::<f64>();
    let (want, got) = (sum(exact), sum(approximate));
    let gap = if want > 0.0 {
        ((want - got) / want).max(0.0)
    } else {
        0.0
    };
    (found as f64 / exact.len() as f64, gap)
}

/// Exact top 10s of the queries at `positions`, in parallel.
fn exact_top(
    index: &ImpactIndex,
    queries: &[WeightedVector],
    positions: &[usize],
) -> Result<Vec<Vec<Hit>>> {
    positions
        .par_iter()
        .map(|&i| {
            let q = &queries[i];
            index
                .search(&q.terms, AUDIT_DEPTH)
                .map_err(|e| Error::invalid(format!("query '{}': exact search: {e}", q.id)))
        })
        .collect()
}

/// Approximate top `k`s of the queries at `positions`, in parallel.
fn approximate_top(
    approx: &ApproximateIndex,
    index: &ImpactIndex,
    queries: &[WeightedVector],
    positions: &[usize],
    k: usize,
    params: SearchParams,
) -> Result<Vec<Vec<Hit>>> {
    positions
        .par_iter()
        .map(|&i| {
            let q = &queries[i];
            let at = |m: String| Error::invalid(format!("query '{}': {m}", q.id));
            approx.search_with(index, &q.terms, k.max(AUDIT_DEPTH), params, &at)
        })
        .collect()
}

/// Re-run `n` queries of `queries` (drawn with `seed`) exactly and compare them with the
/// approximate search at depth `k` under `params` (its top 10: what the run holds).
pub fn audit(
    approx: &ApproximateIndex,
    index: &ImpactIndex,
    queries: &[WeightedVector],
    n: usize,
    seed: u64,
    k: usize,
    params: SearchParams,
) -> Result<AuditReport> {
    let positions = sample(queries.len(), n, seed);
    let exact = exact_top(index, queries, &positions)?;
    let approximate = approximate_top(approx, index, queries, &positions, k, params)?;
    let per_query: Vec<QueryAudit> = positions
        .iter()
        .zip(exact.iter().zip(&approximate))
        .map(|(&i, (e, a))| {
            let (accuracy_at_10, score_gap) = compare(e, a);
            QueryAudit {
                query: queries[i].id.clone(),
                accuracy_at_10,
                score_gap,
            }
        })
        .collect();
    Ok(report(per_query, queries.len(), seed, params))
}

/// The audit of a search whose runs were merged from shards ([`crate::sharded::merge_hits`]):
/// `exact` holds the exact top 10 of the queries an audit seeded `seed` draws from `of`
/// ([`sample`]), `approximate` their approximate top k under `params`, both in the sample's
/// order; documents are matched by id, as the single index's audit matches them by number.
pub fn audit_runs(
    exact: &Run,
    approximate: &Run,
    of: usize,
    seed: u64,
    params: SearchParams,
) -> Result<AuditReport> {
    if exact.queries.len() != approximate.queries.len() {
        return Err(Error::invalid(format!(
            "audit: {} exact and {} approximate queries",
            exact.queries.len(),
            approximate.queries.len()
        )));
    }
    let per_query = exact
        .queries
        .iter()
        .zip(&approximate.queries)
        .map(|((qid, e), (other, a))| {
            if qid != other {
                return Err(Error::invalid(format!(
                    "audit: exact query '{qid}' against approximate query '{other}'"
                )));
            }
            let (accuracy_at_10, score_gap) =
                compare_by(e, a, |x, y| x.doc_id == y.doc_id, |h| h.score);
            Ok(QueryAudit {
                query: qid.clone(),
                accuracy_at_10,
                score_gap,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(report(per_query, of, seed, params))
}

/// The report of the audited queries `per_query`, drawn with `seed` from `of` queries.
fn report(per_query: Vec<QueryAudit>, of: usize, seed: u64, params: SearchParams) -> AuditReport {
    let count = per_query.len().max(1) as f64;
    let fold = |f: fn(&QueryAudit) -> f64, init: f64, pick: fn(f64, f64) -> f64| {
        per_query.iter().map(f).fold(init, pick)
    };
    AuditReport {
        audited: per_query.len(),
        of,
        seed,
        accuracy_at_10: fold(|q| q.accuracy_at_10, 0.0, |a, b| a + b) / count,
        min_accuracy_at_10: if per_query.is_empty() {
            1.0
        } else {
            fold(|q| q.accuracy_at_10, 1.0, f64::min)
        },
        score_gap: fold(|q| q.score_gap, 0.0, |a, b| a + b) / count,
        max_score_gap: fold(|q| q.score_gap, 0.0, f64::max),
        params,
        queries: per_query,
    }
}

/// The search settings [`calibrate`] chooses from.
pub fn ladder() -> Vec<SearchParams> {
    let mut out = Vec::new();
    for query_terms in [4, 8, 16, 32, 0] {
        for candidates in [25, 50, 100, 200, 400, 800, 1600, 3200, 6400] {
            out.push(SearchParams {
                query_terms,
                candidates,
            });
        }
    }
    out
}

/// The confidence of [`calibrate`]'s lower bound (one-sided).
pub const CALIBRATION_CONFIDENCE: f64 = 0.95;

/// The per-query Accuracy@10 shortfall a sample is assumed able to hide: [`lower_bound`] never
/// takes the sample's spread below that of a sample where one query missed one document of ten.
const ONE_MISS: f64 = 1.0 / AUDIT_DEPTH as f64;

/// A one-sided lower confidence bound, at [`CALIBRATION_CONFIDENCE`], for the mean of `all` values
/// of which `sample` were drawn without replacement: the sample mean less Student's t (n - 1
/// degrees of freedom) times the standard error, corrected for the finite population
/// (`sqrt((all - n) / (all - 1))`: the bound is the mean itself when the sample is every value).
/// The sample variance is taken as at least [`ONE_MISS`]² / n, the variance of a sample where one
/// value fell short by [`ONE_MISS`]: a sample without a miss does not show there is none.
pub fn lower_bound(sample: &[f64], all: usize) -> f64 {
    let n = sample.len();
    if n == 0 {
        return 0.0;
    }
    let mean = sample.iter().sum::<f64>() / n as f64;
    if n >= all {
        return mean;
    }
    let nf = n as f64;
    let variance = if n > 1 {
        sample.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (nf - 1.0)
    } else {
        0.0
    };
    let variance = variance.max(ONE_MISS * ONE_MISS / nf);
    let finite = ((all - n) as f64 / (all - 1) as f64).sqrt();
    let t = student_t_upper_quantile(1.0 - CALIBRATION_CONFIDENCE, (nf - 1.0).max(1.0));
    mean - t * (variance / nf).sqrt() * finite
}

/// What [`calibrate`] chose, and the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The settings chosen.
    pub params: SearchParams,
    pub target: f64,
    /// Queries re-run exactly, of how many, drawn with which seed.
    pub sample: usize,
    pub of: usize,
    pub seed: u64,
    /// Mean Accuracy@10 of `params` on the sample.
    pub accuracy_at_10: f64,
    /// The [`lower_bound`] of the mean Accuracy@10 of all `of` queries under `params`.
    pub lower_bound: f64,
    pub confidence: f64,
    /// Whether `lower_bound` reaches `target`; when not, `params` are the ladder's setting of
    /// highest bound and the run will likely fall short (its audit says by how much).
    pub reached: bool,
}

impl Calibration {
    /// The calibration as one JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a calibration serializes")
    }
}

/// The setting of [`ladder`] of least estimated work whose Accuracy@10 on the whole query set
/// reaches `target` with [`CALIBRATION_CONFIDENCE`], judged on `n` queries drawn with `seed` at
/// depth `k`: the cheapest whose [`lower_bound`] reaches the target (a sample mean that merely
/// reaches it misses on the whole set about half the time a setting sits at the target). When
/// none does, the setting of highest bound (`reached` false: the audit then says by how much the
/// run falls short). The work of a query is counted, not timed, so the choice does not depend on
/// the machine's load: the postings its walked lists hold plus the forward-index entries of the
/// documents it re-scores.
pub fn calibrate(
    approx: &ApproximateIndex,
    index: &ImpactIndex,
    queries: &[WeightedVector],
    target: f64,
    n: usize,
    seed: u64,
    k: usize,
) -> Result<Calibration> {
    check_target(target)?;
    let positions = sample(queries.len(), n, seed);
    let exact = exact_top(index, queries, &positions)?;
    // (reached, bound, mean, work, params) of the best setting so far.
    let mut best: Option<(bool, f64, f64, u64, SearchParams)> = None;
    for params in ladder() {
        let approximate = approximate_top(approx, index, queries, &positions, k, params)?;
        let accuracies: Vec<f64> = exact
            .iter()
            .zip(&approximate)
            .map(|(e, a)| compare(e, a).0)
            .collect();
        let mean = accuracies.iter().sum::<f64>() / accuracies.len().max(1) as f64;
        let bound = lower_bound(&accuracies, queries.len());
        let work: u64 = positions
            .iter()
            .map(|&i| approx.work(index, &queries[i].terms, k, params))
            .sum();
        let reached = bound >= target - 1e-9;
        let better = match best {
            None => true,
            Some((r, b, m, w, _)) => match (reached, r) {
                (true, false) => true,
                (false, true) => false,
                (true, true) => work < w,
                (false, false) => (bound, mean) > (b, m) || (bound == b && mean == m && work < w),
            },
        };
        if better {
            best = Some((reached, bound, mean, work, params));
        }
    }
    let (reached, lower_bound, accuracy_at_10, _, params) = best.expect("the ladder is not empty");
    Ok(Calibration {
        params,
        target,
        sample: positions.len(),
        of: queries.len(),
        seed,
        accuracy_at_10,
        lower_bound,
        confidence: CALIBRATION_CONFIDENCE,
        reached,
    })
}

impl AuditReport {
    /// The report as one JSON object (what a run's audit sidecar holds).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an audit report serializes")
    }
}
