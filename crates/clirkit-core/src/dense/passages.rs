//! Dense search over passages, aggregated by MaxP ([`crate::passages`]): [`search_maxp`] fetches
//! passages until `k` distinct documents are certain, so a top-`k` search returns `k` documents,
//! not `k` passages; [`DenseSearch`] is a whole dense search, by passages or not, as a run or
//! written window by window.

use super::index::{DenseIndex, Hits, SearchOptions};
use crate::error::{Error, Result};
use crate::ids::check_query_ids;
use crate::io::trec;
use crate::passages::{check_separator, doc_id, maxp};
use crate::ranking::Run;
use std::collections::HashSet;
use std::path::Path;

/// The first fetch asks for this many passages per wanted document; each further fetch doubles it.
const INITIAL_PASSAGES_PER_DOCUMENT: usize = 4;

/// Dense search over a passage index, aggregated by MaxP: the top `opts.k` documents per query.
///
/// Passages are fetched `4 k` at a time, doubling for the queries that still need more, until `k`
/// documents score strictly above the last passage fetched (no unfetched passage can then change
/// the top `k`, ties included) or the index (or the IVF lists probed) has no more passages. On a
/// flat index the result therefore equals searching every passage and then [`maxp`] at depth `k`.
/// With `opts.refine > 0` each fetch re-scores at least as many PQ candidates as it fetches.
pub fn search_maxp(
    index: &DenseIndex,
    queries: &[f32],
    dim: usize,
    qids: &[String],
    opts: &SearchOptions,
    separator: &str,
) -> Result<Run> {
    check_separator(separator)?;
    if opts.k == 0 {
        return Err(Error::invalid("k must be at least 1"));
    }
    let nq = queries.len().checked_div(dim).unwrap_or(0);
    let mut hits: Hits = vec![Vec::new(); nq];
    let mut pending: Vec<usize> = (0..nq).collect();
    let mut fetch = opts
        .k
        .saturating_mul(INITIAL_PASSAGES_PER_DOCUMENT)
        .min(index.ntotal())
        .max(1);
    // The first round searches every query, which also checks the query matrix; it alone is
    // counted by `opts.progress` (the later rounds search the few queries left, deeper).
    let mut progress = opts.progress.clone();
    loop {
        let subset: Vec<f32> = pending
            .iter()
            .flat_map(|&q| queries[q * dim..(q + 1) * dim].iter().copied())
            .collect();
        let round = SearchOptions {
            k: fetch,
            refine: if opts.refine > 0 {
                opts.refine.max(fetch)
            } else {
                0
            },
            progress: std::mem::take(&mut progress),
            ..*opts
        };
        let fetched = index.search(&subset, dim, &round)?;
        let mut still_pending = Vec::new();
        for (&q, passages) in pending.iter().zip(fetched) {
            let exhausted = passages.len() < fetch || fetch >= index.ntotal();
            if !exhausted && settled_documents(index, &passages, separator) < opts.k {
                still_pending.push(q);
            }
            hits[q] = passages;
        }
        pending = still_pending;
        if pending.is_empty() {
            break;
        }
        fetch = fetch.saturating_mul(2).min(index.ntotal());
    }
    maxp(&index.to_run(hits, qids)?, separator, Some(opts.k))
}

/// Documents whose best passage scores strictly above the last (lowest) passage fetched: their MaxP
/// scores and their order can no longer change, whatever the unfetched passages score.
fn settled_documents(index: &DenseIndex, passages: &[(f32, u32)], separator: &str) -> usize {
    let Some(&(floor, _)) = passages.last() else {
        return 0;
    };
    passages
        .iter()
        .take_while(|&&(score, _)| score > floor)
        .map(|&(_, id)| doc_id(index.ids().get(id), separator))
        .collect::<HashSet<_>>()
        .len()
}

/// A dense search: `queries` (row-major, `dim` columns) named by `qids`, ranking passages'
/// documents by [`search_maxp`] when `maxp` names the separator, else the index's own ids.
pub struct DenseSearch<'a> {
    index: &'a DenseIndex,
    queries: &'a [f32],
    dim: usize,
    qids: &'a [String],
    opts: &'a SearchOptions,
    maxp: Option<&'a str>,
}

impl<'a> DenseSearch<'a> {
    pub fn new(
        index: &'a DenseIndex,
        (queries, dim): (&'a [f32], usize),
        qids: &'a [String],
        opts: &'a SearchOptions,
        maxp: Option<&'a str>,
    ) -> Self {
        Self {
            index,
            queries,
            dim,
            qids,
            opts,
            maxp,
        }
    }

    /// The whole run.
    pub fn run(&self) -> Result<Run> {
        self.run_of(self.queries, self.qids)
    }

    /// The run written to `path` atomically, `window` queries at a time (each query's results
    /// depend on it alone), so at most one window of results is held.
    pub fn write_run(&self, path: &Path, tag: &str, window: usize) -> Result<()> {
        let dim = self.dim;
        // Checked whole first: a window sees only its own ids.
        check_query_ids(self.qids, self.queries.len().checked_div(dim).unwrap_or(0))?;
        trec::write_run_windowed(path, tag, self.qids.len(), window, |range| {
            let rows = &self.queries[range.start * dim..range.end * dim];
            self.run_of(rows, &self.qids[range])
        })
    }

    fn run_of(&self, queries: &[f32], qids: &[String]) -> Result<Run> {
        let (index, dim, opts) = (self.index, self.dim, self.opts);
        match self.maxp {
            Some(separator) => search_maxp(index, queries, dim, qids, opts, separator),
            None => index.to_run(index.search(queries, dim, opts)?, qids),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs` documents of 1 to `max_passages` passages each (ids `d{i}#{j}`), the passages of a
    /// document near one another, so that the top passages of a query crowd into few documents.
    fn passage_index(docs: usize, max_passages: usize, dim: usize) -> DenseIndex {
        let (data, ids) = passage_vectors(docs, max_passages, dim);
        DenseIndex::build(&data, dim, &ids, &Default::default()).unwrap()
    }

    /// Passages `d{doc}#{p}` clustered around their document's random centre.
    fn passage_vectors(docs: usize, max_passages: usize, dim: usize) -> (Vec<f32>, Vec<String>) {
        let mut rng = crate::rng::SplitMix64::new(11);
        let (mut data, mut ids) = (Vec::new(), Vec::new());
        for d in 0..docs {
            let center: Vec<f32> = (0..dim).map(|_| rng.unit() as f32 - 0.5).collect();
            for p in 0..1 + rng.below(max_passages) {
                data.extend(center.iter().map(|c| c + 0.05 * (rng.unit() as f32 - 0.5)));
                ids.push(format!("d{d}#{p}"));
            }
        }
        (data, ids)
    }

    fn random_queries(n: usize, dim: usize) -> (Vec<f32>, Vec<String>) {
        let mut rng = crate::rng::SplitMix64::new(5);
        let data = (0..n * dim).map(|_| rng.unit() as f32 - 0.5).collect();
        (data, (0..n).map(|q| format!("q{q}")).collect())
    }

    #[test]
    fn search_maxp_returns_k_documents_equal_to_exhaustive_search_then_maxp() {
        let (dim, nq) = (8, 12);
        let index = passage_index(300, 30, dim);
        let (queries, qids) = random_queries(nq, dim);
        let everything = SearchOptions {
            k: index.ntotal(),
            ..Default::default()
        };
        let all_passages = index
            .to_run(index.search(&queries, dim, &everything).unwrap(), &qids)
            .unwrap();
        for k in [1, 10, 50] {
            let opts = SearchOptions {
                k,
                ..Default::default()
            };
            let got = search_maxp(&index, &queries, dim, &qids, &opts, "#").unwrap();
            assert!(got.queries.iter().all(|(_, docs)| docs.len() == k), "k={k}");
            assert_eq!(got, maxp(&all_passages, "#", Some(k)).unwrap(), "k={k}");
            // A plain top-k passage search finds fewer documents: that is what MaxP search fixes.
            let plain = SearchOptions { k, ..opts };
            let passages = index.to_run(index.search(&queries, dim, &plain).unwrap(), &qids);
            let docs = maxp(&passages.unwrap(), "#", None).unwrap();
            if k > 1 {
                assert!(docs.queries.iter().any(|(_, d)| d.len() < k), "k={k}");
            }
        }
    }

    #[test]
    fn search_maxp_counts_its_first_round_once_per_query() {
        use crate::progress::{Counter, Progress};
        let (dim, nq) = (8, 12);
        let index = passage_index(300, 30, dim);
        let (queries, qids) = random_queries(nq, dim);
        let counter = std::sync::Arc::new(Counter::default());
        let opts = SearchOptions {
            k: 50,
            progress: Progress::to(counter.clone()),
            ..Default::default()
        };
        let got = search_maxp(&index, &queries, dim, &qids, &opts, "#").unwrap();
        let quiet = SearchOptions {
            k: 50,
            ..Default::default()
        };
        assert_eq!(
            got,
            search_maxp(&index, &queries, dim, &qids, &quiet, "#").unwrap()
        );
        assert_eq!(counter.done(), nq as u64);
    }

    #[test]
    fn run_written_window_by_window_equals_the_whole_run() {
        let dim = 8;
        let (data, ids) = passage_vectors(200, 6, dim);
        let flat = DenseIndex::build(&data, dim, &ids, &Default::default()).unwrap();
        let pq_options = crate::dense::BuildOptions {
            pq: Some(4),
            ..Default::default()
        };
        let pq = DenseIndex::build(&data, dim, &ids, &pq_options).unwrap();
        let (queries, qids) = random_queries(30, dim);
        let dir = tempfile::tempdir().unwrap();
        let (whole, streamed) = (dir.path().join("whole"), dir.path().join("streamed"));
        for (index, refine) in [(&flat, 0), (&pq, 0), (&pq, 40)] {
            for (maxp, threads) in [(None, 1), (None, 3), (Some("#"), 1), (Some("#"), 3)] {
                let opts = SearchOptions {
                    k: 10,
                    refine,
                    threads,
                    ..Default::default()
                };
                let search = DenseSearch::new(index, (&queries, dim), &qids, &opts, maxp);
                trec::write_run(&whole, &search.run().unwrap(), "t").unwrap();
                search.write_run(&streamed, "t", 7).unwrap();
                let want = std::fs::read(&whole).unwrap();
                assert!(!want.is_empty());
                let got = std::fs::read(&streamed).unwrap();
                assert!(
                    got == want,
                    "{} maxp={maxp:?} threads={threads}",
                    index.kind()
                );
            }
        }
    }

    #[test]
    fn search_maxp_stops_when_the_index_runs_out() {
        let dim = 4;
        let index = passage_index(5, 4, dim);
        let (queries, qids) = random_queries(3, dim);
        let opts = SearchOptions {
            k: 100,
            ..Default::default()
        };
        let got = search_maxp(&index, &queries, dim, &qids, &opts, "#").unwrap();
        assert!(got.queries.iter().all(|(_, docs)| docs.len() == 5));
        let no_separator = search_maxp(&index, &queries, dim, &qids, &opts, "");
        assert!(no_separator.unwrap_err().to_string().contains("separator"));
        let wrong_dim = search_maxp(&index, &queries, 3, &qids, &opts, "#");
        assert!(wrong_dim.unwrap_err().to_string().contains("dimension 3"));
    }
}
