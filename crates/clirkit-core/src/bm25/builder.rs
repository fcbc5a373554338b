//! Streaming, parallel, memory-bounded index construction.
//!
//! The corpus is read in batches of lines. While batch i is analyzed and inverted, batch i + 1
//! is read, parsed in parallel (a fast path picks the needed JSON fields without building a
//! `serde_json::Value`), and its ids are checked and numbered in input order. Inversion runs one
//! worker per thread, each filling its own [`MemoryIndex`] (its own term dictionary: no shared
//! table, no locks); workers take a batch's documents in small contiguous pieces from a shared
//! counter, so each worker's postings stay in doc order while a worker slowed down by other load
//! just takes fewer pieces. Past the memory budget every worker's index is sorted into a
//! [`SortedRun`] and written to a file in the (temporary) index directory. The final merge cuts
//! the term space into ranges, merges each range's terms from every run (a term's postings
//! joined in doc order: no doc is in two runs), reading spilled runs with `pread` through small
//! buffers rather than mapping them (touched pages of a mapping count in the process's RSS), and
//! encodes them in parallel, then writes the ranges in order with `write`. The files do not depend on the thread count or on spilling.
//! The finished index is renamed into place by [`AtomicDir`], so a failed or interrupted build
//! leaves nothing loadable.

use super::format::{self, Bm25BuildRecord, Bm25Manifest};
use super::memory_index::{MemoryIndex, MAX_DOC_SPAN};
use super::scoring::length_to_norm;
use super::sorted_run::SortedRun;
use crate::error::{Error, IoContext, Result};
use crate::ids::{IdTable, UniqueIds};
use crate::io::atomic::AtomicDir;
use crate::io::format::FileWriter;
use crate::io::jsonl::{parse_record, FieldSpec, LineBlock, LineRange, LineReader, Record};
use crate::io::manifest;
use crate::postings::termdict::TermEntry;
use crate::text::Analyzer;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How to build an index.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// One analyzer for the whole corpus (default English when `lang_field` is not set).
    pub lang: Option<String>,
    /// A JSON field naming each document's language; each document gets its own analyzer.
    pub lang_field: Option<String>,
    /// Text fields, joined with a space into the one indexed field.
    pub fields: Vec<String>,
    /// Worker threads; 0 = all cores.
    pub threads: usize,
    /// Keep the first of duplicate doc ids instead of failing.
    pub keep_first_duplicate: bool,
    pub quiet: bool,
    /// In-memory postings budget before a sorted run is spilled to disk.
    pub memory_budget_bytes: usize,
    /// Lines read, parsed and analyzed together.
    pub batch_lines: usize,
    /// Also write the forward index (`docvectors.bin`) that RM3 needs.
    pub store_docvectors: bool,
    /// Index only these lines of the corpus (one shard of a sharded build); all when `None`.
    pub range: Option<LineRange>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            lang: None,
            lang_field: None,
            fields: vec!["title".into(), "text".into()],
            threads: 0,
            keep_first_duplicate: false,
            quiet: false,
            memory_budget_bytes: 1 << 30,
            batch_lines: 8192,
            store_docvectors: false,
            range: None,
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSummary {
    pub num_docs: u64,
    pub num_terms: u64,
    pub skipped_duplicates: u64,
    pub spilled_runs: u64,
}

/// Chooses each document's analyzer: one for the index, or one per language code, created once
/// per code and referred to by position.
struct Analyzers {
    lang_field: Option<String>,
    list: Vec<Analyzer>,
    by_code: HashMap<String, usize>,
}

impl Analyzers {
    fn new(lang: Option<&str>, lang_field: Option<&str>) -> Result<Self> {
        let list = match lang_field {
            None => vec![Analyzer::for_lang(lang.unwrap_or("en"))?],
            Some(_) => Vec::new(),
        };
        Ok(Analyzers {
            lang_field: lang_field.map(String::from),
            list,
            by_code: HashMap::new(),
        })
    }

    fn for_record(&mut self, path: &Path, rec: &Record) -> Result<usize> {
        let Some(field) = &self.lang_field else {
            return Ok(0);
        };
        let code = rec.lang.as_deref().unwrap_or_default();
        if let Some(&i) = self.by_code.get(code) {
            return Ok(i);
        }
        let analyzer = Analyzer::for_lang(code).map_err(|e| {
            Error::parse(
                path,
                rec.line,
                format!("document '{}' ({field} = {code:?}): {e}", rec.id),
            )
        })?;
        let i = match self.list.iter().position(|a| a.lang() == analyzer.lang()) {
            Some(i) => i,
            None => {
                self.list.push(analyzer);
                self.list.len() - 1
            }
        };
        self.by_code.insert(code.to_string(), i);
        Ok(i)
    }

    /// The languages used, sorted, with their analyzer ids.
    fn recorded(&self) -> BTreeMap<String, String> {
        self.list
            .iter()
            .map(|a| (a.lang().to_string(), a.id()))
            .collect()
    }
}

/// Documents a worker takes at a time: small enough to balance two threads under uneven load,
/// large enough that taking one costs nothing.
const PIECE_DOCS: usize = 64;

/// Joins one term's postings lists (each in doc order, no doc in two lists) into `docs` and
/// `tfs` in doc order. Lists from different workers interleave piece by piece, so whole runs
/// of one list are copied until another list's next doc comes first.
fn join_postings(lists: &[Vec<u32>], docs: &mut Vec<u32>, tfs: &mut Vec<u32>) {
    docs.clear();
    tfs.clear();
    let mut heads = vec![0usize; lists.len()];
    loop {
        // The list with the smallest next doc, and the smallest next doc of the others.
        let mut best: Option<(usize, u32)> = None;
        let mut bound = u32::MAX;
        for (i, list) in lists.iter().enumerate() {
            let Some(&doc) = list.get(heads[i]) else {
                continue;
            };
            match best {
                Some((_, best_doc)) if best_doc < doc => bound = bound.min(doc),
                Some((_, best_doc)) => {
                    bound = bound.min(best_doc);
                    best = Some((i, doc));
                }
                None => best = Some((i, doc)),
            }
        }
        let Some((i, _)) = best else {
            return;
        };
        let list = &lists[i];
        let mut at = heads[i];
        while at < list.len() && list[at] < bound {
            docs.push(list[at]);
            tfs.push(list[at + 1]);
            at += 2;
        }
        heads[i] = at;
    }
}

/// One encoded range of terms: their postings back to back, their bytes back to back, and per
/// term its length, the offset of its postings in `bytes`, its block count and doc frequency.
#[derive(Default)]
struct EncodedRange {
    bytes: Vec<u8>,
    texts: Vec<u8>,
    terms: Vec<(u32, usize, u32, u32)>,
}

/// Merge and encode the terms of `runs` in `[from[i], to[i])` (ranks of run `i`), reading each
/// run through a cursor with buffers of `buffer_len` bytes.
fn encode_range(
    runs: &[SortedRun],
    from: &[usize],
    to: &[usize],
    norms: &[u8],
    buffer_len: usize,
) -> Result<EncodedRange> {
    let mut out = EncodedRange::default();
    let mut cursors = runs
        .iter()
        .enumerate()
        .map(|(i, run)| run.cursor(from[i], to[i], buffer_len))
        .collect::<Result<Vec<_>>>()?;
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); runs.len()];
    let (mut docs, mut tfs) = (Vec::new(), Vec::new());
    let mut term = Vec::new();
    loop {
        let smallest = cursors.iter().filter_map(|c| c.term()).min();
        let Some(smallest) = smallest else {
            return Ok(out);
        };
        term.clear();
        term.extend_from_slice(smallest);
        let mut members = 0;
        for cursor in &mut cursors {
            if cursor.term() == Some(term.as_slice()) {
                lists[members].clear();
                cursor.postings(&mut lists[members])?;
                members += 1;
            }
        }
        join_postings(&lists[..members], &mut docs, &mut tfs);
        let start = out.bytes.len();
        let blocks = crate::postings::encode_postings(&docs, &tfs, norms, &mut out.bytes);
        out.terms
            .push((term.len() as u32, start, blocks, docs.len() as u32));
        out.texts.extend_from_slice(&term);
    }
}

/// Sections a run cursor reads through a buffer each.
const CURSOR_SECTIONS: usize = 5;
/// Bounds on one cursor section's read buffer: large enough that reads stay few, small enough
/// that the merge's buffers stay a small part of the memory budget with many runs.
const MIN_READ_BUFFER: usize = 64 << 10;
const MAX_READ_BUFFER: usize = 1 << 20;

/// Merge the runs term by term into `postings.bin` and `terms.bin`. The term space is cut into
/// ranges at terms of the largest run, several per thread and more for runs much larger than
/// `budget` (so a wave's encoded postings stay within a quarter of it); ranges are merged and
/// encoded in parallel, a wave at a time, and written in order. Each range reads every run
/// through its own cursor, whose buffers together stay within another quarter of `budget`.
fn merge_and_write(dir: &Path, runs: &[SortedRun], norms: &[u8], budget: usize) -> Result<u64> {
    let threads = rayon::current_num_threads();
    let wave_len = 2 * threads;
    let run_bytes: usize = runs.iter().map(SortedRun::payload_len).sum();
    let largest = runs.iter().max_by_key(|r| r.num_terms());
    let parts_for_budget = (4 * wave_len * run_bytes).div_ceil(budget.max(1));
    let parts = (8 * threads).max(parts_for_budget.min(largest.map_or(1, SortedRun::num_terms)));
    let mut splitters: Vec<Vec<u8>> = match largest {
        Some(run) => (1..parts)
            .map(|k| run.term(k * run.num_terms() / parts))
            .collect::<Result<_>>()?,
        None => Vec::new(),
    };
    splitters.dedup();
    // bounds[p][i]: the first rank of run i in range p.
    let mut bounds: Vec<Vec<usize>> = vec![vec![0; runs.len()]];
    for s in &splitters {
        bounds.push(
            runs.iter()
                .map(|r| r.lower_bound(s))
                .collect::<Result<_>>()?,
        );
    }
    bounds.push(runs.iter().map(SortedRun::num_terms).collect());
    let buffer_len = (budget / 4 / (wave_len * CURSOR_SECTIONS * runs.len().max(1)))
        .clamp(MIN_READ_BUFFER, MAX_READ_BUFFER);

    let mut postings = FileWriter::create(
        dir.join(format::POSTINGS_FILE),
        format::POSTINGS_KIND,
        format::FILE_VERSION,
    )?;
    let mut entries = Vec::new();
    let mut texts = Vec::new();
    let mut num_terms = 0u64;
    let ranges: Vec<usize> = (0..bounds.len() - 1).collect();
    for wave in ranges.chunks(wave_len) {
        let encoded: Vec<EncodedRange> = wave
            .par_iter()
            .map(|&p| encode_range(runs, &bounds[p], &bounds[p + 1], norms, buffer_len))
            .collect::<Result<_>>()?;
        for range in &encoded {
            let base = postings.position();
            let mut text_at = 0;
            for &(text_len, start, blocks, doc_freq) in &range.terms {
                TermEntry {
                    text_offset: (texts.len() + text_at) as u64,
                    text_len,
                    doc_freq,
                    postings_offset: base + start as u64,
                    blocks,
                }
                .encode(&mut entries);
                text_at += text_len as usize;
            }
            texts.extend_from_slice(&range.texts);
            num_terms += range.terms.len() as u64;
            postings.write(&range.bytes)?;
        }
    }
    postings.write(&[0u8; crate::postings::POSTINGS_PADDING])?;
    postings.finish()?;
    write_terms(dir, num_terms, &entries, &texts)?;
    Ok(num_terms)
}

/// Write `terms.bin`: the term count, the encoded [`TermEntry`]s, the term strings.
pub(super) fn write_terms(dir: &Path, num_terms: u64, entries: &[u8], texts: &[u8]) -> Result<()> {
    let mut terms = FileWriter::create(
        dir.join(format::TERMS_FILE),
        format::TERMS_KIND,
        format::FILE_VERSION,
    )?;
    terms.write(&num_terms.to_le_bytes())?;
    terms.write(entries)?;
    terms.write(texts)?;
    terms.finish()
}

/// Write each document's norm and its rank in id byte order (`sorted`: documents in id order).
pub(super) fn write_docs(dir: &Path, norms: &[u8], sorted: &[u32]) -> Result<()> {
    let n = sorted.len();
    let mut w = FileWriter::create(
        dir.join(format::DOCS_FILE),
        format::DOCS_KIND,
        format::FILE_VERSION,
    )?;
    w.write(&(n as u64).to_le_bytes())?;
    w.write(norms)?;
    w.align(4)?;
    w.write(&crate::postings::doc_ranks::rank_bytes(sorted))?;
    w.finish()
}

/// The corpus line of every document, kept as the few documents from which line minus
/// document number changes (after blank lines or skipped duplicates): usually none.
#[derive(Default)]
struct DocLines {
    changes: Vec<(u32, u64)>,
}

impl DocLines {
    /// Record that document `doc` is on line `line` (documents come in line order).
    fn push(&mut self, doc: u32, line: u64) {
        let offset = line - doc as u64;
        if self.changes.last().map(|&(_, o)| o) != Some(offset) {
            self.changes.push((doc, offset));
        }
    }

    fn line_of(&self, doc: u32) -> u64 {
        let i = self.changes.partition_point(|&(first, _)| first <= doc);
        doc as u64 + self.changes[i - 1].1
    }
}

/// Parsed documents with unique ids, in input order, and each one's analyzer.
struct Batch {
    records: Vec<Record>,
    chosen: Vec<usize>,
}

/// Reads the corpus batch by batch: parses lines in parallel, then checks ids (in input order)
/// and picks each document's analyzer.
struct BatchReader<'a> {
    corpus: &'a Path,
    spec: &'a FieldSpec,
    reader: LineReader,
    block: LineBlock,
    batch_lines: usize,
    keep_first_duplicate: bool,
    /// Every document's id; a document's number is its position.
    ids: UniqueIds,
    lines: DocLines,
    skipped: u64,
    analyzers: Analyzers,
}

impl BatchReader<'_> {
    /// The next batch, or `None` at the end of the corpus.
    fn next_batch(&mut self) -> Result<Option<Batch>> {
        self.reader.next_block(self.batch_lines, &mut self.block)?;
        if self.block.is_empty() {
            return Ok(None);
        }
        let (block, corpus, spec) = (&self.block, self.corpus, self.spec);
        let parsed: Vec<Result<Record>> = (0..block.len())
            .into_par_iter()
            .map(|i| {
                let (line, bytes) = block.line(i);
                parse_record(corpus, line, bytes, spec)
            })
            .collect();
        let mut records = Vec::with_capacity(parsed.len());
        let mut chosen = Vec::with_capacity(parsed.len());
        for rec in parsed {
            let rec = rec?;
            if self.ids.len() >= u32::MAX as usize {
                return Err(Error::invalid("more than 2^32 - 1 documents"));
            }
            match self.ids.insert(&rec.id) {
                Ok(doc) => self.lines.push(doc, rec.line),
                Err(_) if self.keep_first_duplicate => {
                    self.skipped += 1;
                    continue;
                }
                Err(first) => {
                    return Err(Error::duplicate_id(
                        corpus,
                        rec.id,
                        rec.line,
                        self.lines.line_of(first),
                    ))
                }
            }
            chosen.push(self.analyzers.for_record(corpus, &rec)?);
            records.push(rec);
        }
        Ok(Some(Batch { records, chosen }))
    }
}

/// Everything the build keeps per document, and the inverted indexes being filled.
struct Accumulator {
    dir: PathBuf,
    budget: usize,
    num_docs: usize,
    norms: Vec<u8>,
    sum_lengths: u64,
    docs_with_terms: u64,
    /// One in-memory index per worker thread.
    workers: Vec<MemoryIndex>,
    /// Runs spilled to files in the index directory.
    runs: Vec<(PathBuf, SortedRun)>,
}

impl Accumulator {
    /// Number the documents in input order, analyze them and add their postings; spill sorted
    /// runs when the in-memory postings outgrow the budget.
    fn add_batch(&mut self, batch: Batch, analyzers: &[Analyzer]) -> Result<()> {
        let Batch { records, chosen } = batch;
        let first_doc = self.num_docs;
        let last_doc = (first_doc + records.len()) as u32;
        if self
            .workers
            .iter()
            .any(|w| last_doc - w.base() >= MAX_DOC_SPAN)
        {
            // Entries number documents from the index's base in 24 bits.
            self.spill(first_doc as u32)?;
        }
        let pieces = records.len().div_ceil(PIECE_DOCS);
        let next_piece = AtomicUsize::new(0);
        let records = &records;
        // Each worker takes pieces in increasing order, so its postings stay in doc order.
        let done: Vec<Vec<(usize, Vec<u32>)>> = self
            .workers
            .par_iter_mut()
            .map(|index| {
                let mut lengths = Vec::new();
                loop {
                    let piece = next_piece.fetch_add(1, Ordering::Relaxed);
                    if piece >= pieces {
                        return lengths;
                    }
                    let docs = piece * PIECE_DOCS..((piece + 1) * PIECE_DOCS).min(records.len());
                    let piece_lengths = docs
                        .map(|i| {
                            let doc = (first_doc + i) as u32;
                            index.add_document(doc, &analyzers[chosen[i]], &records[i].text)
                        })
                        .collect();
                    lengths.push((piece, piece_lengths));
                }
            })
            .collect();
        let mut by_piece: Vec<(usize, Vec<u32>)> = done.into_iter().flatten().collect();
        by_piece.sort_unstable_by_key(|(piece, _)| *piece);
        for length in by_piece.into_iter().flat_map(|(_, lengths)| lengths) {
            self.norms.push(length_to_norm(length));
            self.sum_lengths += length as u64;
            self.docs_with_terms += (length > 0) as u64;
        }
        self.num_docs += records.len();
        if self.workers.iter().map(MemoryIndex::bytes).sum::<usize>() > self.budget {
            self.spill(self.num_docs as u32)?;
        }
        Ok(())
    }

    /// Write every worker's index as a sorted run and start new ones at document `next_doc`.
    fn spill(&mut self, next_doc: u32) -> Result<()> {
        let generation = self.runs.len();
        let workers = std::mem::take(&mut self.workers);
        self.workers = (0..workers.len())
            .map(|_| MemoryIndex::new(next_doc))
            .collect();
        let spilled = workers
            .into_par_iter()
            .enumerate()
            .filter(|(_, index)| !index.is_empty())
            .map(|(i, index)| {
                let path = self.dir.join(format!("run-{generation}-{i}.tmp"));
                let run = index.into_sorted().spill(&path)?;
                Ok((path, run))
            })
            .collect::<Result<Vec<_>>>()?;
        self.runs.extend(spilled);
        Ok(())
    }
}

/// Build a BM25 index over the JSONL corpus at `corpus`, written atomically to `index`.
pub fn build(corpus: &Path, index: &Path, opts: &BuildOptions) -> Result<BuildSummary> {
    build_cancellable(corpus, index, opts, &AtomicBool::new(false))
}

/// [`build`], stopping with an error (and leaving nothing behind) once `cancel` is set; it is
/// checked between batches. Lets a caller turn Ctrl-C into a clean abort.
pub fn build_cancellable(
    corpus: &Path,
    index: &Path,
    opts: &BuildOptions,
    cancel: &AtomicBool,
) -> Result<BuildSummary> {
    crate::parallel::install(opts.threads, |_| build_in_pool(corpus, index, opts, cancel))?
}

fn build_in_pool(
    corpus: &Path,
    index: &Path,
    opts: &BuildOptions,
    cancel: &AtomicBool,
) -> Result<BuildSummary> {
    if opts.lang.is_some() && opts.lang_field.is_some() {
        return Err(Error::invalid(
            "give either a language for the whole index or a language field, not both",
        ));
    }
    if opts.fields.is_empty() {
        return Err(Error::invalid("no text fields to index"));
    }
    let analyzers = Analyzers::new(opts.lang.as_deref(), opts.lang_field.as_deref())?;
    let fields: Vec<&str> = opts.fields.iter().map(String::as_str).collect();
    let spec = FieldSpec::corpus()
        .with_text_fields(&fields)
        .with_lang_field(opts.lang_field.as_deref());

    let reader = match &opts.range {
        Some(range) => LineReader::open_range(corpus, range)?,
        None => LineReader::open(corpus)?,
    };
    let out = AtomicDir::create(index)?;
    let progress = crate::progress::bar(None, "indexing", opts.quiet);
    let mut acc = Accumulator {
        dir: out.path().to_path_buf(),
        budget: opts.memory_budget_bytes,
        num_docs: 0,
        norms: Vec::new(),
        sum_lengths: 0,
        docs_with_terms: 0,
        workers: (0..rayon::current_num_threads().max(1))
            .map(|_| MemoryIndex::new(0))
            .collect(),
        runs: Vec::new(),
    };

    let mut batches = BatchReader {
        corpus,
        spec: &spec,
        reader,
        block: LineBlock::default(),
        // A batch must fit the documents a worker's index can number.
        batch_lines: opts.batch_lines.clamp(1, MAX_DOC_SPAN as usize / 2),
        keep_first_duplicate: opts.keep_first_duplicate,
        ids: UniqueIds::default(),
        lines: DocLines::default(),
        skipped: 0,
        analyzers,
    };
    // Batch i is analyzed and inverted while batch i + 1 is read, parsed and checked.
    let mut pending = batches.next_batch()?;
    while let Some(batch) = pending {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::invalid(format!(
                "indexing {} interrupted; nothing was written",
                corpus.display()
            )));
        }
        let list = batches.analyzers.list.clone();
        let (added, next) = rayon::join(|| acc.add_batch(batch, &list), || batches.next_batch());
        added?;
        progress.set_position(acc.num_docs as u64);
        pending = next?;
    }
    let BatchReader {
        ids,
        skipped,
        analyzers,
        ..
    } = batches;

    let Accumulator {
        norms,
        sum_lengths,
        docs_with_terms,
        workers,
        runs,
        ..
    } = acc;
    let spilled_runs = runs.len() as u64;
    let (paths, mut sorted): (Vec<PathBuf>, Vec<SortedRun>) = runs.into_iter().unzip();
    sorted.par_extend(
        workers
            .into_par_iter()
            .filter(|index| !index.is_empty())
            .map(MemoryIndex::into_sorted),
    );
    let num_terms = merge_and_write(out.path(), &sorted, &norms, opts.memory_budget_bytes)?;
    drop(sorted);
    for p in &paths {
        std::fs::remove_file(p).at(p)?;
    }
    let sorted = ids.sorted_positions();
    write_docs(out.path(), &norms, &sorted)?;
    let avgdl = super::scoring::avg_length(sum_lengths, docs_with_terms);
    let (k1, b) = (super::scoring::DEFAULT_K1, super::scoring::DEFAULT_B);
    super::block_maxima::write(out.path(), &norms, k1, b, avgdl)?;
    IdTable::write_unique(out.path().join(format::IDS_FILE), &ids, &sorted)?;
    if opts.store_docvectors {
        super::docvectors::write(out.path(), ids.len(), opts.memory_budget_bytes)?;
    }
    progress.finish_and_clear();

    let recorded = analyzers.recorded();
    let manifest = Bm25Manifest {
        format: format::FORMAT.into(),
        version: format::VERSION,
        num_docs: ids.len() as u64,
        doc_count: docs_with_terms,
        sum_total_term_freq: sum_lengths,
        avgdl,
        num_terms,
        languages: recorded.keys().cloned().collect(),
        analyzers: recorded,
        lang_field: opts.lang_field.clone(),
        fields: opts.fields.clone(),
        k1,
        b,
        build: Bm25BuildRecord {
            corpus: match &opts.range {
                Some(r) => format!("{} (bytes {}..{})", corpus.display(), r.start, r.end),
                None => corpus.display().to_string(),
            },
            keep_first_duplicate: opts.keep_first_duplicate,
            skipped_duplicates: skipped,
            memory_budget_bytes: opts.memory_budget_bytes as u64,
            spilled_runs,
        },
        docvectors: opts.store_docvectors,
    };
    manifest::commit(out, &manifest)?;
    Ok(BuildSummary {
        num_docs: ids.len() as u64,
        num_terms,
        skipped_duplicates: skipped,
        spilled_runs,
    })
}
