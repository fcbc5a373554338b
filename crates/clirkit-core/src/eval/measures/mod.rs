//! The measures: what a measure is and how its names parse (`spec.rs`: [`Measure`], [`Family`],
//! [`parse_measures`]), then one family per file, each computed from trec_eval's ranked relevance
//! list (see [`crate::eval::ranked`]) and the query's judgements (α-nDCG from the judged document
//! at each rank, for its aspects).

mod alpha_ndcg;
mod bpref;
mod counts;
mod judged;
mod map;
mod ndcg;
mod precision;
mod rbp;
mod recall;
mod rprec;
mod rr;
pub mod spec;
mod success;

use crate::eval::qrels::Judgements;
pub use spec::{parse_measure, parse_measures, parse_measures_for, Family, Measure};

/// One query, ready to be measured.
pub struct QueryRanking<'a> {
    /// Label per rank (with the `NOT_IN_QRELS` / `UNJUDGED` markers).
    pub labels: &'a [i32],
    pub judgements: &'a Judgements,
    /// Minimum label that counts as relevant (trec_eval -l).
    pub level: i32,
    /// Relevant documents in the qrels at `level`.
    pub num_rel: usize,
    /// The judged document at each rank (its index in `judgements`, or `NO_DOC`), as `labels`;
    /// empty unless a measure needs it ([`Family::needs_aspects`]).
    pub docs: &'a [u32],
}

impl<'a> QueryRanking<'a> {
    pub fn new(labels: &'a [i32], judgements: &'a Judgements, level: i32) -> Self {
        QueryRanking {
            labels,
            judgements,
            level,
            num_rel: judgements.num_relevant(level),
            docs: &[],
        }
    }

    /// With the judged document at each rank.
    pub fn with_docs(self, docs: &'a [u32]) -> Self {
        QueryRanking { docs, ..self }
    }

    #[inline]
    fn is_relevant(&self, label: i32) -> bool {
        // Markers are negative, so a level <= -1 must not make them relevant.
        label >= 0 && label >= self.level
    }

    /// Relevant documents among the top `k` (all retrieved when `k` exceeds the ranking).
    fn relevant_in_top(&self, k: usize) -> usize {
        self.labels
            .iter()
            .take(k)
            .filter(|&&l| self.is_relevant(l))
            .count()
    }
}

/// Compute one measure for one query.
pub fn compute(measure: &Measure, q: &QueryRanking) -> f64 {
    let k = measure.cutoff;
    match measure.family {
        Family::Map => map::average_precision(q, usize::MAX),
        Family::MapCut => map::average_precision(q, k),
        Family::Precision => precision::precision_at(q, k),
        Family::Recall => recall::recall_at(q, k),
        Family::Ndcg => ndcg::ndcg(q, usize::MAX),
        Family::NdcgCut => ndcg::ndcg(q, k),
        Family::RecipRank => rr::reciprocal_rank(q),
        Family::Rprec => rprec::r_precision(q),
        Family::Bpref => bpref::bpref(q),
        Family::Success => success::success_at(q, k),
        Family::NumRet => counts::num_ret(q),
        Family::NumRel => counts::num_rel(q),
        Family::NumRelRet => counts::num_rel_ret(q),
        Family::Judged => judged::judged_at(q, k),
        Family::Rbp => rbp::rbp(q, measure.rel, measure.param()),
        Family::AlphaNdcg => alpha_ndcg::alpha_ndcg(q, k, measure.rel, measure.param()),
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// Hand-checkable rankings: labels per rank plus the qrels' labels.
    pub fn ranking(labels: &[i32], qrels: &[i32]) -> (Vec<i32>, Judgements) {
        let ids: Vec<String> = (0..qrels.len()).map(|i| format!("d{i}")).collect();
        let j = Judgements::new(ids.iter().map(|s| s.as_bytes()).zip(qrels.iter().copied()));
        (labels.to_vec(), j)
    }
}
