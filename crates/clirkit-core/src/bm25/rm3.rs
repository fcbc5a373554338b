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

use super::scoring::NormCache;
use super::{Bm25Index, Bm25Params};
use crate::error::{Error, Result};
use crate::postings::query::{Hit, Strategy};
use crate::text::Analyzer;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

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

impl Bm25Index {
    /// Whether the index has the forward index RM3 needs.
    pub fn has_docvectors(&self) -> bool {
        self.docvectors.is_some()
    }

    /// The pruned term vector of feedback document `doc` (`createdFeatureVector`).
    fn feedback_vector(&self, doc: u32, rm3: &Rm3Params) -> Result<Vec<(String, f32)>> {
        let vectors = self.docvectors.as_ref().expect("checked by the caller");
        // Lucene's `numDocs` counts the documents Anserini indexed, and Anserini skips those
        // without text: the documents with a term are the closest count clirkit has.
        let num_docs = self.doc_count as f32;
        let mut features = HashMap::new();
        for (term, tf) in vectors.terms(doc, self.num_terms)? {
            let e = self.term_entry(term as usize);
            let text = std::str::from_utf8(self.term_text(&e))
                .map_err(|_| Error::format(self.terms.path(), "a term is not UTF-8"))?;
            if !is_feedback_term(text, rm3.filter_terms) || e.doc_freq as f32 / num_docs > 0.1 {
                continue;
            }
            features.insert(text.to_string(), tf as f32);
        }
        Ok(prune(features, rm3.fb_terms))
    }

    /// `estimateRelevanceModel`: the pruned, L1-normalized relevance model of `feedback`.
    fn relevance_model(&self, feedback: &[Hit], rm3: &Rm3Params) -> Result<Vec<(String, f32)>> {
        let mut vectors = Vec::with_capacity(feedback.len());
        for hit in feedback {
            let vector: HashMap<String, f32> =
                self.feedback_vector(hit.doc, rm3)?.into_iter().collect();
            let norm = l1_norm(vector.values()) as f32;
            vectors.push((vector, norm, hit.score));
        }
        let vocab: std::collections::BTreeSet<&String> =
            vectors.iter().flat_map(|(v, _, _)| v.keys()).collect();
        let mut model = HashMap::with_capacity(vocab.len());
        for term in vocab {
            let mut weight = 0f32;
            for (vector, norm, score) in &vectors {
                // Anserini skips (near-)empty feedback documents rather than divide by zero.
                if *norm > 0.001 {
                    weight += (vector.get(term).copied().unwrap_or(0.0) / norm) * score;
                }
            }
            model.insert(term.clone(), weight);
        }
        let mut model = prune(model, rm3.fb_terms);
        scale_to_unit_l1(&mut model);
        Ok(model)
    }

    /// The top `n` documents of the query in Lucene's order, score descending and ties by doc
    /// id ascending (Anserini's `BREAK_SCORE_TIES_BY_DOCID`; clirkit's runs break ties the other
    /// way): which documents tie at the cut, and the order their weights are summed in, matter.
    fn feedback_docs(
        &self,
        analyzer: &Analyzer,
        text: &str,
        cache: &NormCache,
        n: usize,
    ) -> Result<Vec<Hit>> {
        let ranks = self.ranks();
        let mut k = n;
        let mut hits = loop {
            let hits = self.top_k(Strategy::Auto, self.cursors(analyzer, text, cache)?, k)?;
            // Widen until every document tied with the n-th is in.
            let complete = hits.len() < k || hits[k - 1].score < hits[n - 1].score;
            if complete {
                break hits;
            }
            k *= 2;
        };
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| ranks.rank(a.doc).cmp(&ranks.rank(b.doc)))
        });
        hits.truncate(n);
        Ok(hits)
    }

    /// The RM3 expansion of the query `text` analyzed by `analyzer`.
    fn expand(
        &self,
        analyzer: &Analyzer,
        text: &str,
        cache: &NormCache,
        rm3: &Rm3Params,
    ) -> Result<Expansion> {
        let feedback = self.feedback_docs(analyzer, text, cache, rm3.fb_docs)?;
        let model = self.relevance_model(&feedback, rm3)?;
        let bag = Self::bag_of_words(analyzer, text);
        let mut original: Vec<(String, f32)> =
            bag.into_iter().map(|(t, c)| (t, c as f32)).collect();
        scale_to_unit_l1(&mut original);
        // `FeatureVector.interpolate`: the query side in f32, the model side in f64.
        let w = rm3.original_weight;
        let mut terms: BTreeMap<String, (f32, f32)> = BTreeMap::new();
        for (t, v) in original {
            terms.entry(t).or_default().0 = v;
        }
        for (t, v) in model {
            terms.entry(t).or_default().1 = v;
        }
        let mut expansion: Expansion = terms
            .into_iter()
            .map(|(t, (x, y))| (t, ((w * x) as f64 + (1.0 - w as f64) * y as f64) as f32))
            .collect();
        expansion.sort_by(by_value_then_term);
        Ok(expansion)
    }

    /// The top `k` documents of an expanded query, each term's score scaled by its weight.
    fn search_expansion(
        &self,
        expansion: &Expansion,
        k: usize,
        cache: &NormCache,
    ) -> Result<Vec<Hit>> {
        let terms = expansion.iter().map(|(t, w)| (t.as_str(), *w));
        let cursors = self.weighted_cursors(terms, cache)?;
        self.top_k(Strategy::Auto, cursors, k)
    }

    pub(super) fn check_rm3(&self, rm3: &Rm3Params) -> Result<()> {
        rm3.check()?;
        if self.global_terms.is_some() {
            return Err(Error::invalid(
                "RM3 takes its feedback documents from the whole collection: it is not available \
                 on a shard of a sharded index",
            ));
        }
        if !self.has_docvectors() {
            return Err(Error::invalid(format!(
                "RM3 needs document vectors, but the index at {} was built without them; rebuild it with --store-docvectors",
                self.dir.display()
            )));
        }
        Ok(())
    }

    /// RM3 for one query: the top `k` documents of its expansion, and the expansion.
    pub fn search_rm3(
        &self,
        query: &str,
        lang: Option<&str>,
        k: usize,
        params: Bm25Params,
        rm3: &Rm3Params,
    ) -> Result<(Vec<Hit>, Expansion)> {
        self.check_rm3(rm3)?;
        let cache = self.cache(params)?;
        let analyzer = self.query_analyzer(lang)?;
        let expansion = self.expand(&analyzer, query, &cache, rm3)?;
        Ok((self.search_expansion(&expansion, k, &cache)?, expansion))
    }

    /// One query of a batch: plain BM25, or RM3 with its expansion.
    pub(super) fn search_one(
        &self,
        analyzer: &Analyzer,
        text: &str,
        k: usize,
        cache: &NormCache,
        rm3: Option<&Rm3Params>,
    ) -> Result<(Vec<Hit>, Option<Expansion>)> {
        match rm3 {
            None => {
                let cursors = self.cursors(analyzer, text, cache)?;
                Ok((self.top_k(Strategy::Auto, cursors, k)?, None))
            }
            Some(rm3) => {
                let expansion = self.expand(analyzer, text, cache, rm3)?;
                Ok((
                    self.search_expansion(&expansion, k, cache)?,
                    Some(expansion),
                ))
            }
        }
    }

    /// [`Bm25Index::batch_search`] with RM3: each query's hits and expansion.
    #[allow(clippy::too_many_arguments)]
    pub fn batch_search_rm3(
        &self,
        queries: &[super::BatchQuery],
        k: usize,
        lang: Option<&str>,
        params: Bm25Params,
        rm3: &Rm3Params,
        threads: usize,
        quiet: bool,
    ) -> Result<(Vec<Vec<Hit>>, Vec<Expansion>)> {
        let settings = super::BatchSettings {
            k,
            lang,
            params,
            rm3: Some(rm3),
            threads,
            quiet,
        };
        let results = self.batch_search_with(queries, &settings)?;
        Ok(results
            .into_iter()
            .map(|(hits, expansion)| (hits, expansion.expect("RM3 was asked for")))
            .unzip())
    }
}

#[cfg(test)]
mod tests;
