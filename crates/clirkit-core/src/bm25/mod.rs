//! BM25 retrieval with Lucene's scoring: a memory-bounded parallel index builder
//! ([`builder`]), the on-disk format ([`format`]; its postings are [`crate::postings`] with term
//! frequencies as values), Lucene's BM25 arithmetic ([`scoring`]) and the top-k query
//! algorithms ([`query`]: block-max MaxScore, exhaustive, and the cost model between them).
//!
//! An index is opened by memory-mapping its files; searching borrows from the mapping, so an
//! opened index costs page cache, not heap.

pub mod block_maxima;
pub mod builder;
pub mod docvectors;
pub mod format;
mod memory_index;
pub mod merge;
pub mod rm3;
pub mod scoring;
mod search;
pub mod sharded;
mod sorted_run;

pub use crate::postings::query::{Hit, Strategy};
pub use builder::{
    build, build_cancellable, build_parts_cancellable, BuildOptions, BuildSummary, CorpusPart,
};
pub use rm3::{Expansion, Rm3Params};
pub use scoring::{Bm25Params, DEFAULT_B, DEFAULT_K1};

use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::format::{read_u64, MappedFile};
use crate::io::manifest::{self, Layout};
use crate::postings::query::{self, DocRanks};
use crate::postings::termdict::{self, TermEntry};
use crate::postings::Cursor;
use crate::progress::Progress;
use crate::ranking::{Run, ScoredDoc};
use crate::text::Analyzer;
use format::Bm25Manifest;
use scoring::{Bm25PostingScorer, NormCache, TermScorer};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A BM25 index's files, for `verify`: the inverted index's, the stored block maxima and the
/// forward index.
#[rustfmt::skip]
pub const LAYOUT: Layout = crate::ids::layout_with_ids!(format::FORMAT, format::VERSION, format::FILE_VERSION, [
    (format::TERMS_FILE, format::TERMS_KIND), (format::POSTINGS_FILE, format::POSTINGS_KIND),
    (format::DOCS_FILE, format::DOCS_KIND), (block_maxima::BLOCK_MAXIMA_FILE, block_maxima::BLOCK_MAXIMA_KIND),
    (docvectors::DOCVECTORS_FILE, docvectors::DOCVECTORS_KIND),
]);

/// A query of a batch: its id, text and (optionally) its language.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchQuery {
    pub id: String,
    pub text: String,
    pub lang: Option<String>,
}

/// An opened (memory-mapped) BM25 index.
pub struct Bm25Index {
    dir: PathBuf,
    manifest: Bm25Manifest,
    ids: IdTable,
    terms: MappedFile,
    postings: MappedFile,
    docs: MappedFile,
    num_docs: usize,
    num_terms: usize,
    /// Documents with at least one term: Lucene's `docCount`, the N of idf.
    doc_count: u64,
    avgdl: f32,
    analyzers: BTreeMap<String, Analyzer>,
    /// The forward index, when the index was built with `store_docvectors`.
    docvectors: Option<docvectors::DocVectors>,
    /// Per-block maximum scores stored at build time, when the index has them.
    block_maxima: Option<block_maxima::BlockMaxima>,
    /// The terms whose postings were found well formed ([`termdict::TermEntry::postings_once`]).
    checked_terms: termdict::CheckedTerms,
    /// For a shard of a sharded index, the whole collection's document frequencies, which
    /// scores use instead of the shard's own (as `doc_count` and `avgdl` are then the whole
    /// collection's): every shard scores as the one index over all documents would.
    global_terms: Option<sharded::GlobalTerms>,
}

impl Bm25Index {
    /// Open the index at `dir` as one build, even while another process rebuilds it.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        crate::io::snapshot::open_named(dir.as_ref(), Self::open_files)
    }

    /// Open the files under `dir` (a snapshot's root) of the index named `named`; checks format
    /// version, analyzer versions and file checksums (except the postings', which are checked
    /// where they are read, and by [`Bm25Index::verify`]: opening stays near-instant).
    fn open_files(dir: &Path, named: &Path) -> Result<Self> {
        let dir = dir.to_path_buf();
        let manifest: Bm25Manifest = manifest::read(&dir)?;
        let num_docs = manifest.num_docs as usize;
        let num_terms = manifest.num_terms as usize;
        let doc_count = manifest.doc_count;
        let avgdl = manifest.avgdl;
        // The statistics scoring trusts must agree with each other: a hand-edited or corrupt
        // `avgdl` would otherwise change every score silently.
        let expected_avgdl = scoring::avg_length(manifest.sum_total_term_freq, doc_count);
        if !(avgdl.is_finite() && avgdl > 0.0)
            || avgdl != expected_avgdl
            || doc_count > num_docs as u64
        {
            return Err(Error::format(
                dir.join(crate::io::index_dir::MANIFEST),
                format!(
                    "inconsistent statistics: avgdl {avgdl}, doc_count {doc_count}, num_docs {num_docs}, \
                     sum_total_term_freq {} (avgdl should be {expected_avgdl})",
                    manifest.sum_total_term_freq
                ),
            ));
        }
        let analyzers = load_analyzers(&dir, &manifest.analyzers)?;
        let v = format::FILE_VERSION;
        let (terms, postings) = termdict::open_term_files(&dir, format::BM25_TERM_FILES, true)?;
        let docs = MappedFile::open(dir.join(format::DOCS_FILE), format::DOCS_KIND, v, true)?;
        let ids = IdTable::open(dir.join(format::IDS_FILE))?;
        let docvectors = match manifest.docvectors {
            true => Some(docvectors::DocVectors::open(&dir, num_docs)?),
            false => None,
        };

        termdict::check_dictionary(&terms, num_terms)?;
        let block_maxima = block_maxima::BlockMaxima::open(&dir, num_terms)?;
        let d = docs.payload();
        termdict::require_len(
            docs.path(),
            d,
            8 + num_docs.div_ceil(4) * 4 + 4 * num_docs,
            "docs",
        )?;
        if read_u64(d, 0) as usize != num_docs || ids.len() != num_docs {
            return Err(Error::format(
                &dir,
                "document count disagrees with meta.json",
            ));
        }
        Ok(Bm25Index {
            dir: named.to_path_buf(),
            manifest,
            ids,
            terms,
            postings,
            docs,
            num_docs,
            num_terms,
            doc_count,
            avgdl,
            analyzers,
            docvectors,
            block_maxima,
            checked_terms: termdict::CheckedTerms::new(num_terms),
            global_terms: None,
        })
    }

    /// Check every file of the index directory against the manifest's checksums and the headers
    /// [`LAYOUT`] expects, in full.
    pub fn verify(&self) -> Result<()> {
        manifest::verify_dir(&self.dir, &LAYOUT).map(|_| ())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Bm25Manifest {
        &self.manifest
    }

    pub fn num_docs(&self) -> usize {
        self.num_docs
    }

    pub fn num_terms(&self) -> usize {
        self.num_terms
    }

    pub fn avgdl(&self) -> f32 {
        self.avgdl
    }

    /// The languages the index's documents were analyzed in, sorted.
    pub fn languages(&self) -> Vec<String> {
        self.analyzers.keys().cloned().collect()
    }

    /// The string id of internal document number `doc`.
    pub fn doc_id(&self, doc: u32) -> &str {
        self.ids.get(doc)
    }

    /// Each document's one-byte norm.
    fn norms(&self) -> &[u8] {
        &self.docs.payload()[8..8 + self.num_docs]
    }

    /// Each document's doc-id rank, the top-k's tie key.
    fn ranks(&self) -> DocRanks<'_> {
        let ranks_start = (8 + self.num_docs).div_ceil(4) * 4;
        DocRanks::new(&self.docs.payload()[ranks_start..ranks_start + 4 * self.num_docs])
    }

    fn term_entry(&self, i: usize) -> TermEntry {
        TermEntry::decode(self.terms.payload(), 8 + i * termdict::TERM_ENTRY_LEN)
    }

    fn term_text(&self, e: &TermEntry) -> &[u8] {
        let blob = 8 + self.num_terms * termdict::TERM_ENTRY_LEN;
        let start = blob + e.text_offset as usize;
        &self.terms.payload()[start..start + e.text_len as usize]
    }

    /// The dictionary entry of `term`, by binary search over the mapped dictionary.
    pub fn lookup(&self, term: &str) -> Option<TermEntry> {
        termdict::lookup_term(self.terms.payload(), self.num_terms, term.as_bytes())
    }

    /// Document frequency of an (already analyzed) term.
    pub fn doc_freq(&self, term: &str) -> u32 {
        self.lookup(term).map_or(0, |e| e.doc_freq)
    }

    /// The analyzer for a query: the explicit `lang`, else the index's only language.
    pub fn query_analyzer(&self, lang: Option<&str>) -> Result<Cow<'_, Analyzer>> {
        match lang {
            Some(code) => {
                let code = code.trim().to_ascii_lowercase();
                match self.analyzers.get(&code) {
                    Some(a) => Ok(Cow::Borrowed(a)),
                    None => Ok(Cow::Owned(Analyzer::for_lang(&code)?)),
                }
            }
            None if self.analyzers.len() == 1 => {
                Ok(Cow::Borrowed(self.analyzers.values().next().unwrap()))
            }
            None => Err(Error::invalid(format!(
                "the index holds several languages ({}); give the query's language",
                self.languages().join(", ")
            ))),
        }
    }

    /// Query terms with their multiplicity (Anserini's bag of words), in first-seen order.
    fn bag_of_words(analyzer: &Analyzer, text: &str) -> Vec<(String, u32)> {
        let mut bag: Vec<(String, u32)> = Vec::new();
        for t in analyzer.analyze(text) {
            match bag.iter_mut().find(|(x, _)| *x == t) {
                Some((_, c)) => *c += 1,
                None => bag.push((t, 1)),
            }
        }
        bag
    }

    /// The query's terms with their multiplicity as boost.
    fn cursors<'a>(
        &'a self,
        analyzer: &Analyzer,
        text: &str,
        cache: &'a NormCache,
    ) -> Result<Vec<Cursor<'a, Bm25PostingScorer<'a>>>> {
        let bag = Self::bag_of_words(analyzer, text);
        self.weighted_cursors(bag.iter().map(|(t, c)| (t.as_str(), *c as f32)), cache)
    }

    /// Each term's score scaled by its boost, as Lucene's `BoostQuery` does (`boost * idf`).
    fn weighted_cursors<'a, 't>(
        &'a self,
        terms: impl Iterator<Item = (&'t str, f32)>,
        cache: &'a NormCache,
    ) -> Result<Vec<Cursor<'a, Bm25PostingScorer<'a>>>> {
        let norms = self.norms();
        let maxima = self.block_maxima.as_ref().filter(|m| m.fits(cache));
        terms
            .filter_map(|(term, boost)| {
                let (index, e) =
                    termdict::find_term(self.terms.payload(), self.num_terms, term.as_bytes())?;
                let doc_freq = match &self.global_terms {
                    None => e.doc_freq,
                    Some(global) => match global.doc_freq(term) {
                        Ok(doc_freq) => doc_freq,
                        Err(e) => return Some(Err(e)),
                    },
                };
                let term = TermScorer::new(boost, scoring::idf(doc_freq as u64, self.doc_count));
                let scorer = Bm25PostingScorer { term, cache, norms };
                let postings = e
                    .postings_once(&self.postings, self.num_docs, &self.checked_terms, index)
                    .and_then(|mut p| {
                        if let Some(maxima) = maxima {
                            p.block_maxima = Some(maxima.of_term(index, &e)?);
                        }
                        Ok(p)
                    });
                Some(postings.map(|p| Cursor::new(p, scorer)))
            })
            .collect()
    }

    fn cache(&self, params: Bm25Params) -> Result<NormCache> {
        params.check()?;
        Ok(NormCache::new(params.k1, params.b, self.avgdl))
    }

    /// The top `k` documents the `cursors` walk to, unless one met a malformed block.
    pub(crate) fn top_k(
        &self,
        strategy: Strategy,
        cursors: Vec<Cursor<'_, Bm25PostingScorer<'_>>>,
        k: usize,
    ) -> Result<Vec<Hit>> {
        let hits = query::top_k(strategy, cursors, k, self.ranks());
        crate::postings::postings_intact(&self.postings)?;
        Ok(hits)
    }

    /// Hits as scored documents with string ids (f32 scores widened exactly to f64).
    pub fn to_scored(&self, hits: &[Hit]) -> Vec<ScoredDoc> {
        hits.iter()
            .map(|h| ScoredDoc::new(self.doc_id(h.doc), h.score as f64))
            .collect()
    }

    /// A batch's results as a [`Run`] (hits are already in canonical order).
    pub fn to_run(&self, qids: &[String], results: &[Vec<Hit>]) -> Run {
        Run {
            queries: qids
                .iter()
                .zip(results)
                .map(|(q, hits)| (q.clone(), self.to_scored(hits)))
                .collect(),
        }
    }
}

/// The analyzers an index was built with (language -> analyzer id), refused if this clirkit's
/// analyzer for a language is another one.
fn load_analyzers(
    dir: &Path,
    built_with: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Analyzer>> {
    let mut analyzers = BTreeMap::new();
    for (lang, id) in built_with {
        let analyzer = Analyzer::for_lang(lang)?;
        if analyzer.id() != *id {
            return Err(Error::format(
                dir,
                format!(
                    "built with analyzer '{id}', but this clirkit's '{lang}' analyzer is '{}'; rebuild the index",
                    analyzer.id()
                ),
            ));
        }
        analyzers.insert(lang.clone(), analyzer);
    }
    Ok(analyzers)
}

#[cfg(test)]
pub(crate) mod tests;

/// How a batch of queries is searched (see [`Bm25Index::batch_search`]): `k` hits each,
/// analyzed with `lang` if given, BM25 `params`, RM3 if asked, on `threads` threads.
#[derive(Debug, Clone, Copy)]
pub struct BatchSettings<'a> {
    pub k: usize,
    pub lang: Option<&'a str>,
    pub params: Bm25Params,
    pub rm3: Option<&'a Rm3Params>,
    pub threads: usize,
    /// Counts each query as its search finishes.
    pub progress: &'a Progress,
}

/// Read queries: JSONL (id from `_id`/`id`/`qid`/`query_id`, text from the first of `text`,
/// `query`, `title`, optional `lang`) or TSV (`id<TAB>text`).
/// Duplicate query ids are an error naming both lines.
pub fn read_queries(path: impl AsRef<Path>) -> Result<Vec<BatchQuery>> {
    use crate::io::jsonl::{is_tsv, read_records, FieldSpec};
    let path = path.as_ref();
    let records = read_records(path, &FieldSpec::queries())?;
    let tsv = is_tsv(path);
    let mut langs: std::collections::HashMap<u64, String> = std::collections::HashMap::new();
    if !tsv {
        // The language is optional per query, so it is read apart from the required fields.
        let mut reader = crate::io::jsonl::LineReader::open(path)?;
        let mut buf = Vec::new();
        while let Some(line) = reader.next_line(&mut buf)? {
            if let Ok(serde_json::Value::Object(o)) = serde_json::from_slice(&buf) {
                if let Some(serde_json::Value::String(l)) = o.get("lang") {
                    langs.insert(line, l.clone());
                }
            }
        }
    }
    Ok(records
        .into_iter()
        .map(|r| BatchQuery {
            lang: langs.remove(&r.line),
            id: r.id,
            text: r.text,
        })
        .collect())
}
