//! RM3 over an opened index: the feedback documents (Lucene's top `fb_docs`, ties by ascending
//! doc id), their pruned term vectors from the forward index, the relevance model, its
//! interpolation with the query, and the second search with each term's weight as its boost.
//! The arithmetic is the parent's ([`super`]); the batch drivers that call this are
//! `bm25/search.rs`.

use super::{by_value_then_term, is_feedback_term, l1_norm, prune, scale_to_unit_l1};
use super::{Expansion, Rm3Params};
use crate::bm25::scoring::{Bm25Params, NormCache};
use crate::bm25::Bm25Index;
use crate::error::{Error, Result};
use crate::postings::query::{Hit, Strategy};
use crate::text::Analyzer;
use std::collections::{BTreeMap, HashMap};

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
    pub(in crate::bm25) fn expand(
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
    pub(in crate::bm25) fn search_expansion(
        &self,
        expansion: &Expansion,
        k: usize,
        cache: &NormCache,
    ) -> Result<Vec<Hit>> {
        let terms = expansion.iter().map(|(t, w)| (t.as_str(), *w));
        let cursors = self.weighted_cursors(terms, cache)?;
        self.top_k(Strategy::Auto, cursors, k)
    }

    pub(in crate::bm25) fn check_rm3(&self, rm3: &Rm3Params) -> Result<()> {
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
}
