//! Search, PLAID's way (Santhanam et al., 2022), for each query:
//!
//! 1. Candidate generation: the `ncells` centroids nearest each query token; the documents holding a
//!    token of any of them (inverted lists).
//! 2. Approximate scores from centroid scores alone, pruned: a document token counts only when its
//!    centroid scores at least `centroid_score_threshold` with some query token. The best `ndocs` go on.
//! 3. The same without pruning; the best `rerank` go on.
//! 4. Exact MaxSim over the decompressed tokens (centroid + residual, normalized again when the
//!    input tokens had unit length).
//!
//! With `refine`, stage 4 scores with the stored full vectors instead of decompressed ones (the
//! ranking then converges to exact MaxSim as the budgets grow); with `exact`, every document is
//! scored with them. Passage indexes are
//! aggregated to documents by MaxP. Queries run in parallel; results do not depend on thread count.

use super::exact::{self, check_dims, maxsim, Hits};
use super::format::{MultiVectorIndex, StoredVectors};
use super::matmul::dot_rows;
use super::tokens::TokenMatrix;
use crate::error::{Error, Result};
use crate::ids::check_query_ids;
use crate::io::trec;
use crate::parallel;
use crate::passages;
use crate::progress::Progress;
use crate::ranking::Run;
use crate::topk::TopK;
use rayon::prelude::*;
use std::path::Path;

/// How to search; `None` budgets take PLAID's defaults for `k` (see [`SearchOptions::resolve`]).
#[derive(Clone, Debug)]
pub struct SearchOptions {
    pub k: usize,
    /// Centroids probed per query token.
    pub ncells: Option<usize>,
    /// Pruning threshold of stage 2 (`-inf`: no pruning).
    pub centroid_score_threshold: Option<f32>,
    /// Documents kept after stage 2.
    pub ndocs: Option<usize>,
    /// Documents scored with decompressed tokens (stage 4).
    pub rerank: Option<usize>,
    /// Score the stage-4 documents with the stored full vectors.
    pub refine: bool,
    /// Score every document exactly with the stored full vectors.
    pub exact: bool,
    pub threads: usize,
    /// Counts each query as it finishes.
    pub progress: Progress,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            k: 1000,
            ncells: None,
            centroid_score_threshold: None,
            ndocs: None,
            rerank: None,
            refine: false,
            exact: false,
            threads: 0,
            progress: Progress::default(),
        }
    }
}

/// The budgets of one search, every one set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    pub ncells: usize,
    pub threshold: f32,
    pub ndocs: usize,
    pub rerank: usize,
}

impl SearchOptions {
    /// PLAID's defaults (colbert/searcher.py): k <= 10: 1 cell, threshold 0.5, 256 documents;
    /// k <= 100: 2, 0.45, 1024; larger: 4, 0.4, max(4k, 4096); stage 4 scores `ndocs / 4` (at least k).
    pub fn resolve(&self) -> Budget {
        let (ncells, threshold, ndocs) = match self.k {
            0..=10 => (1, 0.5, 256),
            11..=100 => (2, 0.45, 1024),
            k => (4, 0.4, (4 * k).max(4096)),
        };
        let ndocs = self.ndocs.unwrap_or(ndocs).max(self.k);
        Budget {
            ncells: self.ncells.unwrap_or(ncells),
            threshold: self.centroid_score_threshold.unwrap_or(threshold),
            ndocs,
            rerank: self.rerank.unwrap_or(ndocs / 4).clamp(self.k, ndocs),
        }
    }
}

/// Buffers one worker reuses from query to query.
struct Scratch {
    /// Centroid scores, `ncentroids x query tokens` (a centroid's scores side by side).
    by_centroid: Vec<f32>,
    by_token: Vec<f32>,
    keep: Vec<bool>,
    probed: Vec<bool>,
    seen: Vec<bool>,
    candidates: Vec<u32>,
    best: Vec<f32>,
    decoded: Vec<f32>,
    sims: Vec<f32>,
}

impl MultiVectorIndex {
    /// The top `k` documents (passages) of every query: (score, internal id), best first.
    pub fn search(&self, queries: &TokenMatrix, opts: &SearchOptions) -> Result<Hits> {
        exact::finite_scores(self.scored(queries, opts, false)?, |q| format!("query {q}"))
    }

    /// Search and return a run; with `maxp` (the passage id separator), `k` documents per query,
    /// each scored by its best passage among those scored (all of them with `exact`).
    pub fn search_run(
        &self,
        queries: &TokenMatrix,
        qids: &[String],
        opts: &SearchOptions,
        maxp: Option<&str>,
    ) -> Result<Run> {
        if maxp.is_some_and(str::is_empty) {
            return Err(Error::invalid("the passage id separator must not be empty"));
        }
        let hits = self.scored(queries, opts, maxp.is_some())?;
        let hits = exact::finite_scores(hits, |q| match qids.get(q) {
            Some(qid) => format!("query '{qid}'"),
            None => format!("query {q}"),
        })?;
        let run = self.to_run(hits, qids)?;
        match maxp {
            None => Ok(run),
            Some(separator) => passages::maxp(&run, separator, Some(opts.k)),
        }
    }

    /// [`MultiVectorIndex::search_run`] written to `path` atomically in the queries' order,
    /// `window` queries at a time (e.g. [`crate::io::trec::RUN_WINDOW`]), so the results of at
    /// most one window are held whatever the query count; the file is the one the whole run makes.
    pub fn write_run(
        &self,
        queries: &TokenMatrix,
        qids: &[String],
        opts: &SearchOptions,
        maxp: Option<&str>,
        (path, tag): (&Path, &str),
        window: usize,
    ) -> Result<()> {
        // Checked whole first: a window sees only its own ids. Each query's results depend on
        // it alone, so windows make the same lines as one search.
        check_query_ids(qids, queries.len())?;
        trec::write_run_windowed(path, tag, queries.len(), window, |range| {
            let (rows, offsets) = queries.window(range.clone());
            let part = TokenMatrix::trusted(rows, queries.dim(), &offsets);
            self.search_run(&part, &qids[range], opts, maxp)
        })
    }

    /// Hits with string ids; `qids` name the queries in order.
    pub fn to_run(&self, hits: Hits, qids: &[String]) -> Result<Run> {
        self.ids.run_from_hits(hits, qids)
    }

    /// Scored documents per query, best first: the top `k`, or with `all_scored` every document of
    /// the last stage (for MaxP).
    fn scored(
        &self,
        queries: &TokenMatrix,
        opts: &SearchOptions,
        all_scored: bool,
    ) -> Result<Hits> {
        check_dims(queries, self.dim())?;
        if opts.k == 0 {
            return Err(Error::invalid("k must be at least 1"));
        }
        let vectors = match &self.vectors {
            Some(v) => Some(v),
            None if opts.exact || opts.refine => {
                return Err(Error::invalid(format!(
                    "{}: exact search and refine need the full token vectors; build the index with keep_vectors",
                    self.dir.display()
                )))
            }
            None => None,
        };
        if let Some(vectors) = vectors.filter(|_| opts.exact) {
            let docs =
                TokenMatrix::trusted(vectors.all()?, self.dim(), self.doc_offsets.as_slice());
            let depth = if all_scored { self.ndocs() } else { opts.k };
            return exact::search(&docs, queries, depth, opts.threads, &opts.progress);
        }
        let budget = opts.resolve();
        if budget.ncells == 0 || budget.threshold.is_nan() {
            return Err(Error::invalid(
                "ncells must be at least 1 and the centroid score threshold a number",
            ));
        }
        let keep = if all_scored { usize::MAX } else { opts.k };
        let full = vectors.filter(|_| opts.refine);
        parallel::install(opts.threads, |_| {
            (0..queries.len())
                .into_par_iter()
                .map_init(
                    || self.scratch(),
                    |s, q| {
                        let hits = self.search_one(queries.item(q), &budget, keep, full, s);
                        opts.progress.advance(1);
                        hits
                    },
                )
                .collect()
        })?
    }

    fn scratch(&self) -> Scratch {
        Scratch {
            by_centroid: Vec::new(),
            by_token: Vec::new(),
            keep: vec![false; self.ncentroids()],
            probed: vec![false; self.ncentroids()],
            seen: vec![false; self.ndocs()],
            candidates: Vec::new(),
            best: Vec::new(),
            decoded: Vec::new(),
            sims: Vec::new(),
        }
    }

    /// One query through the four stages; stage 4 reads `full` vectors when given.
    fn search_one(
        &self,
        query: &[f32],
        b: &Budget,
        keep: usize,
        full: Option<&StoredVectors>,
        s: &mut Scratch,
    ) -> Result<Vec<(f32, u32)>> {
        let (dim, ncent) = (self.dim(), self.ncentroids());
        let nq = query.len() / dim;
        s.by_token.resize(nq * ncent, 0.0);
        dot_rows(query, self.centroids.as_slice(), dim, &mut s.by_token);
        s.by_centroid.resize(ncent * nq, 0.0);
        for (i, row) in s.by_token.chunks_exact(ncent).enumerate() {
            for (c, &v) in row.iter().enumerate() {
                s.by_centroid[c * nq + i] = v;
            }
        }
        // Stage 1: probe the ncells best centroids of each query token.
        let ncells = b.ncells.min(ncent);
        let mut order: Vec<u32> = Vec::with_capacity(ncent);
        let mut probed = Vec::new();
        for row in s.by_token.chunks_exact(ncent) {
            order.clear();
            order.extend(0..ncent as u32);
            let by_score =
                |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
            if ncells < ncent {
                order.select_nth_unstable_by(ncells - 1, by_score);
            }
            for &c in &order[..ncells] {
                if !s.probed[c as usize] {
                    s.probed[c as usize] = true;
                    probed.push(c);
                }
            }
        }
        let (ivf_offsets, ivf_docs) = (self.ivf_offsets.as_slice(), self.ivf_docs.as_slice());
        s.candidates.clear();
        for &c in &probed {
            s.probed[c as usize] = false;
            let list =
                &ivf_docs[ivf_offsets[c as usize] as usize..ivf_offsets[c as usize + 1] as usize];
            for &d in list {
                if !s.seen[d as usize] {
                    s.seen[d as usize] = true;
                    s.candidates.push(d);
                }
            }
        }
        for &d in &s.candidates {
            s.seen[d as usize] = false;
        }
        // Stage 2: pruned centroid interaction.
        for (k, scores) in s.keep.iter_mut().zip(s.by_centroid.chunks_exact(nq)) {
            *k = scores.iter().any(|&v| v >= b.threshold);
        }
        s.best.resize(nq, 0.0);
        let mut stage2 = TopK::new(b.ndocs);
        for &d in &s.candidates {
            stage2.push(
                self.centroid_score(d, &s.by_centroid, Some(&s.keep), &mut s.best),
                d,
            );
        }
        // Stage 3: full centroid interaction.
        let mut stage3 = TopK::new(b.rerank);
        for hit in stage2.iter() {
            stage3.push(
                self.centroid_score(hit.id, &s.by_centroid, None, &mut s.best),
                hit.id,
            );
        }
        // Stage 4: MaxSim over the decompressed (or full) tokens.
        let mut last = TopK::new(keep.min(b.rerank));
        for hit in stage3.iter() {
            let tokens = match full {
                Some(vectors) => {
                    let (start, end) = self.token_range(hit.id);
                    vectors.read(start * dim..end * dim)?
                }
                None => {
                    self.decompress(hit.id, &mut s.decoded);
                    &s.decoded[..]
                }
            };
            last.push(maxsim(query, tokens, dim, &mut s.sims), hit.id);
        }
        Ok(last.into_sorted().iter().map(|h| (h.score, h.id)).collect())
    }

    /// Sum over query tokens of their best centroid score among the document's tokens (only tokens
    /// whose centroid is kept, when `keep` is given).
    fn centroid_score(
        &self,
        doc: u32,
        by_centroid: &[f32],
        keep: Option<&[bool]>,
        best: &mut [f32],
    ) -> f32 {
        let nq = best.len();
        best.fill(f32::NEG_INFINITY);
        let (start, end) = self.token_range(doc);
        for &c in &self.codes.as_slice()[start..end] {
            let c = c as usize;
            if keep.is_some_and(|k| !k[c]) {
                continue;
            }
            for (b, &v) in best.iter_mut().zip(&by_centroid[c * nq..(c + 1) * nq]) {
                *b = b.max(v);
            }
        }
        best.iter().sum()
    }

    /// A document's tokens restored from centroids and residuals, into `out`.
    pub(crate) fn decompress(&self, doc: u32, out: &mut Vec<f32>) {
        let dim = self.dim();
        let (start, end) = self.token_range(doc);
        let bpt = self.codec.bytes_per_token();
        let (centroids, codes, residuals) = (
            self.centroids.as_slice(),
            self.codes.as_slice(),
            self.residuals.as_slice(),
        );
        out.resize((end - start) * dim, 0.0);
        for (t, row) in (start..end).zip(out.chunks_exact_mut(dim)) {
            let c = codes[t] as usize;
            self.codec.decode(
                &centroids[c * dim..(c + 1) * dim],
                &residuals[t * bpt..(t + 1) * bpt],
                row,
            );
            if self.manifest.normalized {
                let norm = crate::dense::flat::norm_sq(row).sqrt();
                if norm > 0.0 {
                    row.iter_mut().for_each(|v| *v /= norm);
                }
            }
        }
    }
}
