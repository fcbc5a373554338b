//! Searching an opened BM25 index: one query ([`Bm25Index::search`], by a chosen strategy
//! [`Bm25Index::search_by`]) and batches, on a pool, in query order whatever the thread count,
//! plain or with RM3 (`rm3/search.rs`), collected or streamed window by window into a run file.
//! The drivers on top of the index type (`mod.rs`) and of RM3.

use super::rm3::{Expansion, Rm3Params};
use super::scoring::{Bm25Params, NormCache};
use super::{BatchQuery, BatchSettings, Bm25Index};
use crate::error::{Error, Result};
use crate::io::atomic::AtomicFile;
use crate::io::id_text::write_error;
use crate::io::trec::write_run_to;
use crate::postings::query::{Hit, Strategy};
use crate::progress::Progress;
use crate::ranking::Run;
use crate::text::Analyzer;
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

impl Bm25Index {
    /// The top `k` documents for `query`, by the cheaper of the two exact strategies.
    pub fn search(
        &self,
        query: &str,
        lang: Option<&str>,
        k: usize,
        params: Bm25Params,
    ) -> Result<Vec<Hit>> {
        self.search_by(Strategy::Auto, query, lang, k, params)
    }

    /// The top `k` documents by a chosen strategy; all return the same hits.
    pub fn search_by(
        &self,
        strategy: Strategy,
        query: &str,
        lang: Option<&str>,
        k: usize,
        params: Bm25Params,
    ) -> Result<Vec<Hit>> {
        let cache = self.cache(params)?;
        let analyzer = self.query_analyzer(lang)?;
        let cursors = self.cursors(&analyzer, query, &cache)?;
        self.top_k(strategy, cursors, k)
    }

    /// Search many queries on `threads` threads (0 = all cores). Each query is analyzed with
    /// `lang` if given, else its own language, else the index's only language. Results are in
    /// query order and independent of the thread count.
    pub fn batch_search(
        &self,
        queries: &[BatchQuery],
        k: usize,
        lang: Option<&str>,
        params: Bm25Params,
        threads: usize,
        progress: &Progress,
    ) -> Result<Vec<Vec<Hit>>> {
        let settings = BatchSettings {
            k,
            lang,
            params,
            rm3: None,
            threads,
            progress,
        };
        let results = self.batch_search_with(queries, &settings)?;
        Ok(results.into_iter().map(|(hits, _)| hits).collect())
    }

    fn batch_search_with(
        &self,
        queries: &[BatchQuery],
        settings: &BatchSettings,
    ) -> Result<Vec<(Vec<Hit>, Option<Expansion>)>> {
        let mut results = Vec::with_capacity(queries.len());
        let each = |_: &[BatchQuery], window: Vec<(Vec<Hit>, Option<Expansion>)>| {
            results.extend(window);
            Ok(())
        };
        self.batch_search_each(queries, settings, each)?;
        Ok(results)
    }

    /// Search `queries` and write their run to `path` (atomically, with `tag`) as they finish:
    /// the same bytes as [`Bm25Index::to_run`] written whole, at any thread count, while at
    /// most one window of queries' results is held in memory.
    pub fn batch_search_to_run_file(
        &self,
        queries: &[BatchQuery],
        settings: &BatchSettings,
        path: &Path,
        tag: &str,
    ) -> Result<()> {
        let mut out = AtomicFile::create(path)?;
        let each = |window_queries: &[BatchQuery], window: Vec<(Vec<Hit>, Option<Expansion>)>| {
            let run = Run {
                queries: window_queries
                    .iter()
                    .zip(window)
                    .map(|(q, (hits, _))| (q.id.clone(), self.to_scored(&hits)))
                    .collect(),
            };
            write_run_to(&mut out, &run, tag).map_err(|e| write_error(path, e))
        };
        self.batch_search_each(queries, settings, each)?;
        out.commit()
    }

    /// Search `queries` window by window (each window in parallel), handing each window's
    /// results to `each` in query order: a bounded reorder buffer, so callers can stream.
    fn batch_search_each(
        &self,
        queries: &[BatchQuery],
        settings: &BatchSettings,
        mut each: impl FnMut(&[BatchQuery], Vec<(Vec<Hit>, Option<Expansion>)>) -> Result<()> + Send,
    ) -> Result<()> {
        let &BatchSettings {
            k,
            lang,
            params,
            rm3,
            threads,
            progress,
        } = settings;
        if let Some(rm3) = rm3 {
            self.check_rm3(rm3)?;
        }
        progress.expect(queries.len());
        let cache = self.cache(params)?;
        // Resolve every query's analyzer first, so a bad language fails before any work.
        let mut owned: BTreeMap<String, Analyzer> = BTreeMap::new();
        let mut choice: Vec<Option<String>> = Vec::with_capacity(queries.len());
        for q in queries {
            let code = lang.or(q.lang.as_deref());
            let analyzer = self.query_analyzer(code).map_err(|e| match e {
                Error::InvalidInput(m) => Error::invalid(format!("query '{}': {m}", q.id)),
                other => other,
            })?;
            let key = code.map(|c| c.trim().to_ascii_lowercase());
            if let (Cow::Owned(a), Some(key)) = (analyzer, &key) {
                owned.entry(key.clone()).or_insert(a);
            }
            choice.push(key);
        }
        let analyzer_for = |key: &Option<String>| -> &Analyzer {
            match key {
                None => self.analyzers.values().next().expect("checked above"),
                Some(k) => self
                    .analyzers
                    .get(k)
                    .or_else(|| owned.get(k))
                    .expect("resolved"),
            }
        };
        crate::parallel::install(threads, |_| {
            for (window, keys) in queries
                .chunks(crate::io::trec::RUN_WINDOW)
                .zip(choice.chunks(crate::io::trec::RUN_WINDOW))
            {
                let results = window
                    .par_iter()
                    .zip(keys.par_iter())
                    .map(|(q, key)| {
                        let result = self.search_one(analyzer_for(key), &q.text, k, &cache, rm3);
                        progress.advance(1);
                        result.map_err(|e| match e {
                            Error::InvalidInput(m) => {
                                Error::invalid(format!("query '{}': {m}", q.id))
                            }
                            other => other,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                each(window, results)?;
            }
            Ok(())
        })??;
        Ok(())
    }

    /// One query of a batch: plain BM25, or RM3 with its expansion.
    fn search_one(
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
        queries: &[BatchQuery],
        k: usize,
        lang: Option<&str>,
        params: Bm25Params,
        rm3: &Rm3Params,
        threads: usize,
        progress: &Progress,
    ) -> Result<(Vec<Vec<Hit>>, Vec<Expansion>)> {
        let settings = BatchSettings {
            k,
            lang,
            params,
            rm3: Some(rm3),
            threads,
            progress,
        };
        let results = self.batch_search_with(queries, &settings)?;
        Ok(results
            .into_iter()
            .map(|(hits, expansion)| (hits, expansion.expect("RM3 was asked for")))
            .unzip())
    }
}
