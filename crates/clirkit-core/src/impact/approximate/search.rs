//! One approximate query: the pruned lists of the query's heaviest terms walked score-at-a-time
//! into partial scores, the `candidates` best of them scored exactly through the forward index
//! with the whole query, the top k kept by [`crate::topk`] under BM25's tie rule (so ties come
//! out in canonical order, as from exact search).

use super::params::SearchParams;
use super::structure::ApproximateIndex;
use crate::error::{Error, Result};
use crate::impact::vectors::{self, WeightedVector};
use crate::impact::{Hit, ImpactIndex};
use crate::progress::Progress;
use crate::topk::{HigherKeyFirst, Hit as RankedHit, TopK};
use std::cell::RefCell;

/// Scores at or above this are not all representable in f32 (as exact search refuses them).
const EXACT_SCORE_LIMIT: u64 = 1 << 24;

/// Documents whose partial scores are summed together: the pruned lists are walked one window of
/// document numbers at a time, so the partial scores written at random stay in a cache-sized array
/// (256 KiB) instead of one spanning the collection. Small in tests, so they cross windows.
const WINDOW: usize = if cfg!(test) { 64 } else { 1 << 16 };

/// Per-thread working memory, all zero between queries: partial scores of one window's documents
/// (and the documents touched), the query's impact per term number.
#[derive(Default)]
struct Scratch {
    partial: Vec<u32>,
    touched: Vec<u32>,
    /// The touched documents as packed (partial score, !document) keys, for the selection.
    keyed: Vec<u64>,
    weights: Vec<u32>,
    /// Set while a query runs: a query that stopped half-way (a panic) left it dirty.
    busy: bool,
}

impl Scratch {
    fn ready(&mut self, num_terms: usize) {
        if self.busy || self.partial.len() < WINDOW || self.weights.len() < num_terms {
            self.partial = vec![0; WINDOW];
            self.weights = vec![0; num_terms.max(self.weights.len())];
            self.touched.clear();
        }
        self.busy = true;
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// How many of `query`'s terms (heaviest first) are walked.
fn walked(query: &[(usize, u32)], params: SearchParams) -> usize {
    match params.query_terms {
        0 => query.len(),
        n => n.min(query.len()),
    }
}

impl ApproximateIndex {
    /// The query's terms in the index as (term number, impact), heaviest first (equal weights by
    /// term number, so the walked terms are well defined), checked as exact search checks them.
    fn prepare(
        &self,
        index: &ImpactIndex,
        terms: &[(String, f64)],
        at: &dyn Fn(String) -> Error,
    ) -> Result<Vec<(usize, u32)>> {
        self.check_source(index)?;
        vectors::check_terms(terms, at)?;
        let quantized = vectors::quantize_terms(terms, index.quantize(), at)?;
        let mut query: Vec<(usize, u32)> = quantized
            .iter()
            .filter_map(|(term, q)| index.term_number(term).map(|t| (t, *q)))
            .collect();
        let bound: u64 = query
            .iter()
            .map(|&(t, q)| q as u64 * self.term_max[t] as u64)
            .sum();
        if bound >= EXACT_SCORE_LIMIT {
            return Err(at(format!(
                "its scores could reach {bound}, beyond 2^24 where f32 scores stop being exact; \
                 build the index with a smaller --quantize"
            )));
        }
        query.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(query)
    }

    /// The work a query costs under `params`, counted: the postings of its walked lists plus the
    /// forward-index entries of as many average documents as it re-scores (0 for a query that
    /// cannot be searched).
    pub fn work(
        &self,
        index: &ImpactIndex,
        terms: &[(String, f64)],
        k: usize,
        params: SearchParams,
    ) -> u64 {
        let Ok(query) = self.prepare(index, terms, &|m| Error::invalid(m)) else {
            return 0;
        };
        let walked = walked(&query, params);
        let postings: u64 = query[..walked]
            .iter()
            .map(|&(t, _)| self.list(t).0.len() as u64)
            .sum();
        let average = self.entries.len() as u64 / (self.doc_starts.len() as u64 - 1).max(1);
        postings + postings.min(params.candidates.max(k) as u64) * average
    }

    /// The approximate top `k` of the weighted `terms` in `index` (the index this structure was
    /// built from). `at` names the query in errors.
    pub fn search_with(
        &self,
        index: &ImpactIndex,
        terms: &[(String, f64)],
        k: usize,
        params: SearchParams,
        at: &dyn Fn(String) -> Error,
    ) -> Result<Vec<Hit>> {
        let query = self.prepare(index, terms, at)?;
        if k == 0 || query.is_empty() {
            return Ok(Vec::new());
        }
        let walked = walked(&query, params);
        let candidates = params.candidates.max(k);
        let ranks = index.ranks();
        SCRATCH.with(|cell| {
            let mut s = cell.borrow_mut();
            s.ready(index.num_terms());
            let Scratch {
                partial,
                touched,
                keyed,
                weights,
                ..
            } = &mut *s;
            // The candidates: the `candidates` touched documents of highest (partial score
            // descending, then document number ascending: a total order, so the set does not
            // depend on the order documents are met in), kept as packed (partial, !document) keys.
            // Keys at or below `floor` (the best `candidates` keys' least so far) cannot make it.
            let lists: Vec<(&[u32], &[u32], u32)> = query[..walked]
                .iter()
                .map(|&(term, q)| {
                    let (docs, impacts) = self.list(term);
                    (docs, impacts, q)
                })
                .collect();
            let mut at = vec![0usize; lists.len()];
            let mut floor = 0u64;
            keyed.clear();
            for base in (0..index.num_docs()).step_by(WINDOW) {
                let end = (base + WINDOW).min(index.num_docs()) as u32;
                for ((docs, impacts, q), from) in lists.iter().zip(at.iter_mut()) {
                    let to = *from + docs[*from..].partition_point(|&d| d < end);
                    for (&doc, &impact) in docs[*from..to].iter().zip(&impacts[*from..to]) {
                        let p = &mut partial[doc as usize - base];
                        if *p == 0 {
                            touched.push(doc);
                        }
                        *p += q * impact;
                    }
                    *from = to;
                }
                for &doc in touched.iter() {
                    let p = &mut partial[doc as usize - base];
                    let key = ((*p as u64) << 32) | (!doc) as u64;
                    *p = 0;
                    if key > floor {
                        keyed.push(key);
                        if keyed.len() >= candidates.max(64).saturating_mul(2) {
                            keyed.select_nth_unstable_by(candidates - 1, |a, b| b.cmp(a));
                            keyed.truncate(candidates);
                            floor = keyed[candidates - 1];
                        }
                    }
                }
                touched.clear();
            }
            if keyed.len() > candidates {
                keyed.select_nth_unstable_by(candidates - 1, |a, b| b.cmp(a));
                keyed.truncate(candidates);
            }
            for &(term, q) in &query {
                weights[term] = q;
            }
            let shift = self.impact_bits;
            let mask = (1u32 << shift) - 1;
            let mut top: TopK<f32, HigherKeyFirst> = TopK::new(k);
            for &key in keyed.iter() {
                let doc = !(key as u32);
                let mut score = 0u64;
                for &e in self.doc_entries(doc) {
                    score += weights[(e >> shift) as usize] as u64 * (e & mask) as u64;
                }
                top.push_hit(RankedHit {
                    score: score as f32,
                    id: doc,
                    key: ranks.rank(doc),
                });
            }
            for &(term, _) in &query {
                weights[term] = 0;
            }
            s.busy = false;
            Ok(top.into_sorted().into_iter().map(Hit::from).collect())
        })
    }

    /// [`ApproximateIndex::search_with`], errors naming the query as "query".
    pub fn search(
        &self,
        index: &ImpactIndex,
        terms: &[(String, f64)],
        k: usize,
        params: SearchParams,
    ) -> Result<Vec<Hit>> {
        self.search_with(index, terms, k, params, &|m| {
            Error::invalid(format!("query: {m}"))
        })
    }

    /// Every query's approximate top `k` in parallel (inside the caller's thread pool), in
    /// query order.
    pub fn search_each(
        &self,
        index: &ImpactIndex,
        queries: &[WeightedVector],
        k: usize,
        params: SearchParams,
        progress: &Progress,
    ) -> Result<Vec<Vec<Hit>>> {
        crate::impact::each_query(queries, progress, |terms, at| {
            self.search_with(index, terms, k, params, at)
        })
    }
}

/// How a batch of queries is searched: the depth `k`, the per-query knobs, the thread count
/// (0 = all cores) and the progress each finished query is counted in.
#[derive(Debug, Clone, Copy)]
pub struct BatchSettings<'a> {
    pub k: usize,
    pub params: SearchParams,
    pub threads: usize,
    pub progress: &'a Progress,
}

impl ApproximateIndex {
    /// Search many queries on `settings.threads` threads; results in query order and
    /// independent of the thread count.
    pub fn batch_search(
        &self,
        index: &ImpactIndex,
        queries: &[WeightedVector],
        settings: BatchSettings,
    ) -> Result<Vec<Vec<Hit>>> {
        in_pool(queries, settings, |progress| {
            self.search_each(index, queries, settings.k, settings.params, progress)
        })
    }

    /// Search `queries` and write their run to `path` atomically in query order, a window of
    /// queries at a time (exact search's run writer).
    pub fn batch_search_to_run_file(
        &self,
        index: &ImpactIndex,
        queries: &[WeightedVector],
        settings: BatchSettings,
        path: &std::path::Path,
        tag: &str,
    ) -> Result<()> {
        in_pool(queries, settings, |progress| {
            index.write_run_with(queries, path, tag, |window| {
                self.search_each(index, window, settings.k, settings.params, progress)
            })
        })
    }
}

/// `work` inside a pool of `settings.threads` threads, counting `queries` in `settings.progress`.
fn in_pool<T: Send>(
    queries: &[WeightedVector],
    settings: BatchSettings,
    work: impl FnOnce(&Progress) -> Result<T> + Send,
) -> Result<T> {
    settings.progress.expect(queries.len());
    crate::parallel::install(settings.threads, |_| work(settings.progress))?
}
