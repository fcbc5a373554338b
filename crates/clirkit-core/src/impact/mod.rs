//! Impact-scored retrieval over term-weight vectors (SPLADE-family learned sparse, or any
//! Anserini JSON vector collection): documents' weights are quantized to integer impacts
//! ([`vectors`]), stored as block-max postings ([`crate::postings`]) and searched with BM25's
//! exact top-k algorithms ([`crate::postings::query`]), scored by [`ImpactScorer`].
//!
//! A document's score is the sum over query terms of query impact × document impact, both
//! integers (query weights are quantized like the documents'). Sums are exact: every score of
//! a query is at most the sum of its terms' largest products, and a query whose sum could
//! reach 2^24 (beyond which f32 scores skip integers) is refused. Ties go to the canonical
//! order (doc id descending), so pruned and exhaustive search return the same hits.

pub mod approximate;
pub mod block_max;
pub mod builder;
pub mod exhaustive;
pub mod format;
pub mod projection;
pub mod sharded;
mod spill;
pub mod vectors;

pub use crate::postings::query::{Hit, Strategy};
pub use builder::{build, build_files, BuildOptions};
pub use vectors::{read_queries, WeightedVector, DEFAULT_QUANTIZE};

use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::format::{read_u64, MappedFile};
use crate::io::manifest;
use crate::io::trec::{self, RUN_WINDOW};
use crate::postings::query::{self, DocRanks};
use crate::postings::termdict::{
    check_dictionary, find_term, lookup_term, open_term_files, require_len, TermEntry,
    TERM_ENTRY_LEN,
};
use crate::postings::{postings_intact, BlockMeta, Cursor, PostingScorer};
use crate::progress::Progress;
use crate::ranking::{Run, ScoredDoc};
use format::ImpactManifest;
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Scores a posting as the query term's impact × the stored document impact.
#[derive(Debug, Clone, Copy)]
pub struct ImpactScorer {
    pub query_impact: u32,
}

impl PostingScorer for ImpactScorer {
    #[inline(always)]
    fn score(&self, _doc: u32, value: u32) -> f32 {
        (self.query_impact as u64 * value as u64) as f32
    }

    #[inline(always)]
    fn block_bound(&self, meta: &BlockMeta) -> f32 {
        (self.query_impact as u64 * meta.max_value as u64) as f32
    }
}

/// The exact algorithm one query runs: what a [`Strategy`] resolves to for it. Every path
/// returns the same hits, scores and tie order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExactPath {
    /// Block-max pruning over document blocks ([`block_max`]).
    BlockMax,
    /// Every posting into one integer accumulator per document ([`exhaustive`]).
    Exhaustive,
    /// A generic algorithm of [`crate::postings::query`] over cursors (`MaxScore`, `BlockMaxWand`).
    Cursors(Strategy),
}

/// Collections of at most this many documents are searched exhaustively by [`Strategy::Auto`].
pub const SMALL_COLLECTION: usize = 16_384;
/// Depths of at most this many hits are "a few" to [`Strategy::Auto`] (where MaxScore keeps an
/// exact threshold, `postings::query`'s heap selection; measured at 10 and at 1000).
pub const FEW_HITS: usize = 64;
/// Queries of at most this many terms (found in the index) are short to [`Strategy::Auto`]
/// (measured at 8 terms and at 20 and more).
pub const SHORT_QUERY: usize = 16;

/// What the choice of an exact path looks at for one query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryShape {
    /// Documents in the index.
    pub num_docs: usize,
    /// The query's terms found in the index.
    pub terms: usize,
    /// Their postings, summed.
    pub postings: usize,
    /// The depth asked for.
    pub k: usize,
}

impl QueryShape {
    fn of(terms: &[block_max::QueryTerm<'_>], num_docs: usize, k: usize) -> Self {
        QueryShape {
            num_docs,
            terms: terms.len(),
            postings: terms.iter().map(|t| t.postings.doc_freq()).sum(),
            k,
        }
    }

    /// The path [`Strategy::Auto`] runs for a query of this shape. Measured per query, every path
    /// on the same queries in CPU time (`benches/impact/impact_strategy_timing.rs`; SciFact with
    /// splade-tiny-en, the synthetic SPLADE-like set at 100k and 1M documents with whole queries
    /// and their 8 heaviest terms, 100k Zipfian documents with 8-term queries; k = 10 and 1000;
    /// benches/results/impact.md):
    /// - a small collection ([`SMALL_COLLECTION`]): exhaustive, its accumulator is cache-sized;
    /// - postings few next to the collection (at most half of it for a few hits, [`FEW_HITS`], a
    ///   sixteenth for many): MaxScore over cursors, which touches only them, where exhaustive
    ///   pays for an accumulator per document and block-max for a bound per document block;
    /// - a few hits of a short query ([`SHORT_QUERY`]): block-max pruning, whose k-th score soon
    ///   passes most blocks' bounds;
    /// - otherwise (long queries, many hits): exhaustive, as pruning cannot skip enough.
    pub fn auto_path(&self) -> ExactPath {
        let few_hits = self.k <= FEW_HITS;
        let sparse_ratio = if few_hits { 2 } else { 16 };
        if self.num_docs <= SMALL_COLLECTION {
            ExactPath::Exhaustive
        } else if self.postings.saturating_mul(sparse_ratio) <= self.num_docs {
            ExactPath::Cursors(Strategy::MaxScore)
        } else if few_hits && self.terms <= SHORT_QUERY {
            ExactPath::BlockMax
        } else {
            ExactPath::Exhaustive
        }
    }

    /// The path `strategy` runs for a query of this shape.
    pub fn path(&self, strategy: Strategy) -> ExactPath {
        match strategy {
            Strategy::Auto => self.auto_path(),
            Strategy::Exhaustive => ExactPath::Exhaustive,
            named => ExactPath::Cursors(named),
        }
    }
}

/// Scores at or above this are not all representable in f32.
const EXACT_SCORE_LIMIT: f64 = (1u64 << 24) as f64;

/// An opened (memory-mapped) impact index.
pub struct ImpactIndex {
    dir: PathBuf,
    manifest: ImpactManifest,
    ids: IdTable,
    terms: MappedFile,
    postings: MappedFile,
    docs: MappedFile,
}

impl ImpactIndex {
    /// Open the index at `dir` as one build, even while another process rebuilds it.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        crate::io::snapshot::open_named(dir.as_ref(), Self::open_files)
    }

    /// Open the files under `dir` (a snapshot's root) of the index named `named`, checking
    /// format, headers and (except the postings', checked where they are read) their checksums.
    fn open_files(dir: &Path, named: &Path) -> Result<Self> {
        let dir = dir.to_path_buf();
        let manifest: ImpactManifest = manifest::read(&dir)?;
        let v = format::FILE_VERSION;
        let (terms, postings) = open_term_files(&dir, format::TERM_FILES, true)?;
        let docs = MappedFile::open(dir.join(format::DOCS_FILE), format::DOCS_KIND, v, true)?;
        let ids = IdTable::open(dir.join(format::IDS_FILE))?;
        let (num_docs, num_terms) = (manifest.num_docs as usize, manifest.num_terms as usize);
        check_dictionary(&terms, num_terms)?;
        let d = docs.payload();
        require_len(docs.path(), d, 8 + 4 * num_docs, "docs")?;
        if read_u64(d, 0) as usize != num_docs || ids.len() != num_docs {
            return Err(Error::format(
                &dir,
                "document count disagrees with meta.json",
            ));
        }
        if manifest.quantize == 0 {
            return Err(Error::format(&dir, "quantize is 0 in meta.json"));
        }
        Ok(ImpactIndex {
            dir: named.to_path_buf(),
            manifest,
            ids,
            terms,
            postings,
            docs,
        })
    }

    /// Check every file of the index directory against the manifest's checksums, in full.
    pub fn verify(&self) -> Result<()> {
        manifest::verify_dir(&self.dir, &format::LAYOUT).map(|_| ())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &ImpactManifest {
        &self.manifest
    }

    pub fn num_docs(&self) -> usize {
        self.manifest.num_docs as usize
    }

    pub fn num_terms(&self) -> usize {
        self.manifest.num_terms as usize
    }

    /// The factor weights are multiplied by before rounding to impacts.
    pub fn quantize(&self) -> u32 {
        self.manifest.quantize
    }

    /// The string id of internal document number `doc`.
    pub fn doc_id(&self, doc: u32) -> &str {
        self.ids.get(doc)
    }

    /// Each document's rank in id byte order: the top-k's tie key.
    pub fn ranks(&self) -> DocRanks<'_> {
        DocRanks::new(&self.docs.payload()[8..8 + 4 * self.num_docs()])
    }

    /// The position of `term` in the dictionary (its term number), if the index has it.
    pub fn term_number(&self, term: &str) -> Option<usize> {
        find_term(self.terms.payload(), self.num_terms(), term.as_bytes()).map(|(i, _)| i)
    }

    /// A cursor over every posting of term number `term` (each scored as its stored impact),
    /// for readers that walk whole lists; its blocks are checked as they are read, and
    /// [`ImpactIndex::postings_intact`] reports a malformed one afterwards.
    pub fn term_cursor(&self, term: usize) -> Result<Cursor<'_, ImpactScorer>> {
        if term >= self.num_terms() {
            return Err(Error::invalid(format!(
                "term number {term} of an index of {} terms",
                self.num_terms()
            )));
        }
        let at = 8 + term * TERM_ENTRY_LEN;
        let entry = TermEntry::decode(self.terms.payload(), at);
        let postings = entry.postings(&self.postings, self.num_docs())?;
        Ok(Cursor::new(postings, ImpactScorer { query_impact: 1 }))
    }

    /// An error if a cursor met a postings block that does not decode as its metadata says.
    pub fn postings_intact(&self) -> Result<()> {
        postings_intact(&self.postings)
    }

    /// The query's terms present in the index, each with its quantized weight, once the sum of
    /// their largest products is known to stay below [`EXACT_SCORE_LIMIT`]. `at` names the query
    /// in errors.
    fn query_terms(
        &self,
        terms: &[(String, f64)],
        at: &dyn Fn(String) -> Error,
    ) -> Result<Vec<block_max::QueryTerm<'_>>> {
        vectors::check_terms(terms, at)?;
        let quantized = vectors::quantize_terms(terms, self.quantize(), at)?;
        let found: Vec<_> = quantized
            .into_iter()
            .filter_map(|(term, impact)| {
                let e = lookup_term(self.terms.payload(), self.num_terms(), term.as_bytes())?;
                Some(
                    e.postings(&self.postings, self.num_docs())
                        .map(|postings| block_max::QueryTerm { postings, impact }),
                )
            })
            .collect::<Result<_>>()?;
        let bound: f64 = found
            .iter()
            .map(|t| {
                let max = (0..t.postings.blocks)
                    .map(|b| BlockMeta::decode(t.postings.metas, b).max_value)
                    .max()
                    .unwrap_or(0);
                t.impact as f64 * max as f64
            })
            .sum();
        if bound >= EXACT_SCORE_LIMIT {
            return Err(at(format!(
                "its scores could reach {bound}, beyond 2^24 where f32 scores stop being exact; \
                 build the index with a smaller --quantize"
            )));
        }
        Ok(found)
    }

    /// The top `k` for the checked query terms by `path`.
    fn top_k(&self, path: ExactPath, terms: &[block_max::QueryTerm<'_>], k: usize) -> Vec<Hit> {
        match path {
            ExactPath::BlockMax => block_max::top_k(terms, k, self.ranks()),
            ExactPath::Exhaustive => exhaustive::top_k(terms, k, self.ranks()),
            ExactPath::Cursors(strategy) => {
                let cursors = terms
                    .iter()
                    .map(|t| {
                        let scorer = ImpactScorer {
                            query_impact: t.impact,
                        };
                        Cursor::new(t.postings, scorer)
                    })
                    .collect();
                query::top_k(strategy, cursors, k, self.ranks())
            }
        }
    }

    /// The shape of the query `terms` at depth `k`: what [`QueryShape::auto_path`] decides by.
    pub fn query_shape(&self, terms: &[(String, f64)], k: usize) -> Result<QueryShape> {
        let terms = self.query_terms(terms, &|m| Error::invalid(format!("query: {m}")))?;
        Ok(QueryShape::of(&terms, self.num_docs(), k))
    }

    /// The top `k` documents for the weighted `terms` by the exact path `choose` picks for their
    /// shape (every path returns the same hits; benchmarks compare the paths through this).
    pub fn search_with(
        &self,
        terms: &[(String, f64)],
        k: usize,
        choose: impl FnOnce(QueryShape) -> ExactPath,
    ) -> Result<Vec<Hit>> {
        let terms = self.query_terms(terms, &|m| Error::invalid(format!("query: {m}")))?;
        let path = choose(QueryShape::of(&terms, self.num_docs(), k));
        let hits = self.top_k(path, &terms, k);
        postings_intact(&self.postings)?;
        Ok(hits)
    }

    /// The top `k` documents for the weighted `terms` by `strategy` (every strategy returns the
    /// same hits; `Auto` picks by [`QueryShape::auto_path`]). A query none of whose terms is in
    /// the index returns no hits.
    pub fn search_by(
        &self,
        strategy: Strategy,
        terms: &[(String, f64)],
        k: usize,
    ) -> Result<Vec<Hit>> {
        self.search_with(terms, k, |shape| shape.path(strategy))
    }

    /// The top `k` documents, by the exact path [`Strategy::Auto`] picks.
    pub fn search(&self, terms: &[(String, f64)], k: usize) -> Result<Vec<Hit>> {
        self.search_by(Strategy::Auto, terms, k)
    }

    /// Search many queries on `threads` threads (0 = all cores); results in query order and
    /// independent of the thread count.
    pub fn batch_search(
        &self,
        queries: &[WeightedVector],
        k: usize,
        threads: usize,
        progress: &Progress,
    ) -> Result<Vec<Vec<Hit>>> {
        progress.expect(queries.len());
        crate::parallel::install(threads, |_| self.search_each(queries, k, progress))?
    }

    /// Search `queries` and write their run to `path` atomically in query order, window by
    /// window, so the results of at most one window are held whatever the query count.
    pub fn batch_search_to_run_file(
        &self,
        queries: &[WeightedVector],
        k: usize,
        threads: usize,
        progress: &Progress,
        path: &Path,
        tag: &str,
    ) -> Result<()> {
        progress.expect(queries.len());
        crate::parallel::install(threads, |_| {
            self.write_run_windowed(queries, k, progress, path, tag, RUN_WINDOW)
        })?
    }

    fn write_run_windowed(
        &self,
        queries: &[WeightedVector],
        k: usize,
        progress: &Progress,
        path: &Path,
        tag: &str,
        window: usize,
    ) -> Result<()> {
        self.write_run_windowed_with(queries, path, tag, window, |window| {
            self.search_each(window, k, progress)
        })
    }

    /// Write the run of `queries` to `path` atomically in query order, a window of queries at a
    /// time, each window's hits from `search` (exact or approximate search).
    pub fn write_run_with(
        &self,
        queries: &[WeightedVector],
        path: &Path,
        tag: &str,
        search: impl Fn(&[WeightedVector]) -> Result<Vec<Vec<Hit>>>,
    ) -> Result<()> {
        self.write_run_windowed_with(queries, path, tag, RUN_WINDOW, search)
    }

    fn write_run_windowed_with(
        &self,
        queries: &[WeightedVector],
        path: &Path,
        tag: &str,
        window: usize,
        search: impl Fn(&[WeightedVector]) -> Result<Vec<Vec<Hit>>>,
    ) -> Result<()> {
        trec::write_run_windowed(path, tag, queries.len(), window, |range| {
            let window = &queries[range];
            let hits = search(window)?;
            Ok(Run {
                queries: window
                    .iter()
                    .zip(hits)
                    .map(|(q, hits)| (q.id.clone(), self.to_scored(&hits)))
                    .collect(),
            })
        })
    }

    /// Hits as scored documents with string ids (f32 scores widened exactly to f64).
    pub fn to_scored(&self, hits: &[Hit]) -> Vec<ScoredDoc> {
        hits.iter()
            .map(|h| ScoredDoc::new(self.doc_id(h.doc), h.score as f64))
            .collect()
    }

    /// Every query's top `k` in parallel (inside the caller's thread pool), in query order.
    fn search_each(
        &self,
        queries: &[WeightedVector],
        k: usize,
        progress: &Progress,
    ) -> Result<Vec<Vec<Hit>>> {
        each_query(queries, progress, |terms, at| {
            let terms = self.query_terms(terms, at)?;
            let path = QueryShape::of(&terms, self.num_docs(), k).auto_path();
            let hits = self.top_k(path, &terms, k);
            postings_intact(&self.postings)?;
            Ok(hits)
        })
    }
}

/// Every query's hits by `search` (given its terms and how to word an error about it: naming the
/// query) in parallel (inside the caller's thread pool), in query order, each counted in
/// `progress` as it finishes: what exact and approximate batch searches share.
pub(crate) fn each_query(
    queries: &[WeightedVector],
    progress: &Progress,
    search: impl Fn(&[(String, f64)], &dyn Fn(String) -> Error) -> Result<Vec<Hit>> + Sync,
) -> Result<Vec<Vec<Hit>>> {
    queries
        .par_iter()
        .map(|q| {
            let at = |m: String| Error::invalid(format!("query '{}': {m}", q.id));
            let hits = search(&q.terms, &at)?;
            progress.advance(1);
            Ok(hits)
        })
        .collect()
}

#[cfg(test)]
mod tests;
