//! RM3 pseudo-relevance feedback, reproducing Anserini's `Rm3Reranker` (with its
//! `FeatureVector`) operation for operation, in its f32/f64 mix, so that expansion weights and
//! the second search's scores match Pyserini's bit for bit:
//!
//! 1. the top `fb_docs` documents of the BM25 query are the feedback documents;
//! 2. each one's term vector keeps the terms of 2 to 20 UTF-16 units, made only of `[a-z0-9]`
//!    (unless `filter_terms` is off), in at most 10% of the (non-empty) documents; it is pruned to its
//!    `fb_terms` most frequent terms (ties by term) and L1-normalized;
//! 3. a term's relevance weight is the sum over feedback documents of its normalized frequency
//!    times the document's BM25 score; the model is pruned to `fb_terms` terms and L1-normalized;
//! 4. it is interpolated with the L1-normalized query (token multiplicities):
//!    `original_weight * query + (1 - original_weight) * model`;
//! 5. the second search scores each term of the interpolated model with its weight as boost
//!    (Lucene's `BooleanQuery` of `BoostQuery`s: `boost * idf` in BM25).

use crate::error::{Error, Result};
use std::cmp::Ordering;
use std::collections::HashMap;

/// RM3's parameters; the defaults are Anserini's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rm3Params {
    pub fb_docs: usize,
    pub fb_terms: usize,
    pub original_weight: f32,
    /// Keep only feedback terms made of `[a-z0-9]` (Anserini's English term filter).
    pub filter_terms: bool,
}

impl Default for Rm3Params {
    fn default() -> Self {
        Rm3Params {
            fb_docs: 10,
            fb_terms: 10,
            original_weight: 0.5,
            filter_terms: true,
        }
    }
}

impl Rm3Params {
    pub fn check(&self) -> Result<()> {
        if self.fb_docs == 0 || self.fb_terms == 0 {
            return Err(Error::invalid(format!(
                "RM3 needs at least one feedback document and term (got fb_docs={}, fb_terms={})",
                self.fb_docs, self.fb_terms
            )));
        }
        if !(0.0..=1.0).contains(&self.original_weight) {
            return Err(Error::invalid(format!(
                "RM3's original query weight must be in [0, 1] (got {})",
                self.original_weight
            )));
        }
        Ok(())
    }
}

/// A query's expanded form: each term with its weight in the second search, by weight
/// descending, ties by term.
pub type Expansion = Vec<(String, f32)>;

/// `FeatureVector`'s order: value descending, ties by term in Java's (UTF-16) string order.
fn by_value_then_term(a: &(String, f32), b: &(String, f32)) -> Ordering {
    b.1.partial_cmp(&a.1)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.0.encode_utf16().cmp(b.0.encode_utf16()))
}

/// `FeatureVector.pruneToSize`.
fn prune(features: HashMap<String, f32>, k: usize) -> Vec<(String, f32)> {
    let mut pairs: Vec<(String, f32)> = features.into_iter().collect();
    pairs.sort_by(by_value_then_term);
    pairs.truncate(k);
    pairs
}

/// `FeatureVector.computeL1Norm`: summed in f64.
fn l1_norm<'a>(values: impl Iterator<Item = &'a f32>) -> f64 {
    values.map(|v| v.abs() as f64).sum()
}

/// `FeatureVector.scaleToUnitL1Norm`.
fn scale_to_unit_l1(pairs: &mut [(String, f32)]) {
    let norm = l1_norm(pairs.iter().map(|(_, v)| v));
    for (_, v) in pairs.iter_mut() {
        *v = (*v as f64 / norm) as f32;
    }
}

fn is_feedback_term(term: &str, filter_terms: bool) -> bool {
    let len = term.encode_utf16().count();
    if !(2..=20).contains(&len) {
        return false;
    }
    !filter_terms
        || term
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

mod search;

#[cfg(test)]
mod tests;
