//! Streaming, parallel, memory-bounded index construction.
//!
//! The corpus is read in batches of lines; each batch is parsed in parallel, its ids checked and
//! numbered in input order, then analyzed and inverted by one worker per thread, each filling its
//! own [`MemoryIndex`] (its own term dictionary: no shared table, no locks). Workers take the
//! batch's documents in small contiguous pieces from a shared counter, so each worker's postings
//! stay in doc order while a worker slowed down by other load just takes fewer pieces. When the
//! indexes outgrow the memory budget each is written as a sorted run file inside the (temporary)
//! index directory and cleared. The final k-way merge by term joins each term's postings from
//! every worker and run in doc order (no doc is in two of them) and encodes the postings lists in
//! parallel, then writes them in term order. The finished index is renamed into place by
//! [`AtomicDir`], so a failed or interrupted build leaves nothing loadable.

use super::format::{self, TermEntry};
use super::memory_index::{FxHasher, MemoryIndex, SortedPostings, MAX_DOC_SPAN};
use super::scoring::length_to_norm;
use crate::error::{Error, IoContext, Result};
use crate::ids::IdTable;
use crate::io::atomic::AtomicDir;
use crate::io::format::FileWriter;
use crate::io::jsonl::{parse_record, FieldSpec, LineBlock, LineReader, Record};
use crate::text::Analyzer;
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
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

type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

/// Documents a worker takes at a time: small enough to balance two threads under uneven load,
/// large enough that taking one costs nothing.
const PIECE_DOCS: usize = 64;

fn write_varint(w: &mut impl Write, mut v: u64) -> std::io::Result<()> {
    while v >= 0x80 {
        w.write_all(&[(v as u8) | 0x80])?;
        v >>= 7;
    }
    w.write_all(&[v as u8])
}

fn read_varint(r: &mut impl BufRead) -> std::io::Result<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let mut byte = [0u8];
        r.read_exact(&mut byte)?;
        v |= ((byte[0] & 0x7f) as u64) << shift;
        if byte[0] < 0x80 {
            return Ok(v);
        }
        shift += 7;
    }
}

/// Spill a worker's index to a run file, terms in byte order: per term
/// `len, bytes, count, (gap, tf)*` as varints.
fn spill_run(path: &Path, index: MemoryIndex) -> Result<()> {
    let mut sorted = index.into_sorted();
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).at(path)?);
    let mut write = || -> std::io::Result<()> {
        write_varint(&mut w, sorted.num_terms() as u64)?;
        while let Some((term, list)) = sorted.next_term() {
            write_varint(&mut w, term.len() as u64)?;
            w.write_all(term)?;
            write_varint(&mut w, (list.len() / 2) as u64)?;
            let mut prev = 0u32;
            for pair in list.chunks_exact(2) {
                write_varint(&mut w, (pair[0] - prev) as u64)?;
                write_varint(&mut w, pair[1] as u64)?;
                prev = pair[0];
            }
        }
        w.flush()
    };
    write().at(path)
}

/// A term with its postings: (doc, tf) pairs flattened, docs increasing.
type TermPostingsList = (Vec<u8>, Vec<u32>);

/// A sorted source of (term, postings) for the final merge.
enum Source {
    Run {
        path: PathBuf,
        reader: BufReader<File>,
        remaining: u64,
    },
    Memory(SortedPostings),
}

impl Source {
    fn open_run(path: PathBuf) -> Result<Self> {
        let mut reader = BufReader::with_capacity(1 << 20, File::open(&path).at(&path)?);
        let remaining = read_varint(&mut reader).at(&path)?;
        Ok(Source::Run {
            path,
            reader,
            remaining,
        })
    }

    fn next(&mut self) -> Result<Option<TermPostingsList>> {
        match self {
            Source::Memory(sorted) => {
                Ok(sorted.next_term().map(|(term, list)| (term.to_vec(), list)))
            }
            Source::Run {
                path,
                reader,
                remaining,
            } => {
                if *remaining == 0 {
                    return Ok(None);
                }
                *remaining -= 1;
                let mut read = || -> std::io::Result<TermPostingsList> {
                    let len = read_varint(reader)? as usize;
                    let mut term = vec![0u8; len];
                    reader.read_exact(&mut term)?;
                    let count = read_varint(reader)? as usize;
                    let mut list = Vec::with_capacity(2 * count);
                    let mut doc = 0u32;
                    for _ in 0..count {
                        doc += read_varint(reader)? as u32;
                        list.push(doc);
                        list.push(read_varint(reader)? as u32);
                    }
                    Ok((term, list))
                };
                read().map(Some).at(&*path)
            }
        }
    }
}

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

/// Terms merged from the sources, waiting to be encoded together in parallel.
#[derive(Default)]
struct MergedGroup {
    terms: Vec<(Vec<u8>, Vec<Vec<u32>>)>,
    postings: usize,
}

/// Terms per group and postings per group before it is encoded: enough work to share among
/// threads, little enough memory for the encoded copy.
const GROUP_TERMS: usize = 1 << 16;
const GROUP_POSTINGS: usize = 1 << 22;

/// Writes merged postings and collects the dictionary.
struct PostingsWriter<'a> {
    file: FileWriter,
    norms: &'a [u8],
    entries: Vec<u8>,
    texts: Vec<u8>,
    num_terms: u64,
}

/// One encoded slice of a group: the blocks of its terms back to back, and per term its offset
/// in `bytes`, its block count and its doc frequency.
struct EncodedChunk {
    bytes: Vec<u8>,
    terms: Vec<(usize, u32, u32)>,
}

impl PostingsWriter<'_> {
    /// Encode the group's postings lists in parallel, then append them in term order.
    fn write_group(&mut self, group: &mut MergedGroup) -> Result<()> {
        let norms = self.norms;
        let chunk_len = group
            .terms
            .len()
            .div_ceil(4 * rayon::current_num_threads())
            .max(1);
        let encoded: Vec<EncodedChunk> = group
            .terms
            .par_chunks(chunk_len)
            .map(|chunk| {
                let (mut docs, mut tfs) = (Vec::new(), Vec::new());
                let mut out = EncodedChunk {
                    bytes: Vec::new(),
                    terms: Vec::with_capacity(chunk.len()),
                };
                for (_, lists) in chunk {
                    join_postings(lists, &mut docs, &mut tfs);
                    let start = out.bytes.len();
                    let blocks = format::encode_postings(&docs, &tfs, norms, &mut out.bytes);
                    out.terms.push((start, blocks, docs.len() as u32));
                }
                out
            })
            .collect();
        let mut terms = group.terms.iter();
        for chunk in &encoded {
            let base = self.file.position();
            for &(start, blocks, doc_freq) in &chunk.terms {
                let (term, _) = terms.next().expect("one entry per term");
                TermEntry {
                    text_offset: self.texts.len() as u64,
                    text_len: term.len() as u32,
                    doc_freq,
                    postings_offset: base + start as u64,
                    blocks,
                }
                .encode(&mut self.entries);
                self.texts.extend_from_slice(term);
                self.num_terms += 1;
            }
            self.file.write(&chunk.bytes)?;
        }
        group.terms.clear();
        group.postings = 0;
        Ok(())
    }
}

/// Merge the sources term by term into `postings.bin` and `terms.bin`.
fn merge_and_write(dir: &Path, mut sources: Vec<Source>, norms: &[u8]) -> Result<u64> {
    let mut writer = PostingsWriter {
        file: FileWriter::create(
            dir.join(format::POSTINGS_FILE),
            format::POSTINGS_KIND,
            format::FILE_VERSION,
        )?,
        norms,
        entries: Vec::new(),
        texts: Vec::new(),
        num_terms: 0,
    };
    let mut heads: Vec<Option<Vec<u32>>> = vec![None; sources.len()];
    let mut heap = BinaryHeap::new();
    for (i, s) in sources.iter_mut().enumerate() {
        if let Some((term, list)) = s.next()? {
            heads[i] = Some(list);
            heap.push(Reverse((term, i)));
        }
    }
    let mut group = MergedGroup::default();
    let mut members = Vec::new();
    while let Some(Reverse((term, first))) = heap.pop() {
        members.clear();
        members.push(first);
        while let Some(Reverse((t, _))) = heap.peek() {
            if *t != term {
                break;
            }
            let Reverse((_, i)) = heap.pop().unwrap();
            members.push(i);
        }
        let mut lists = Vec::with_capacity(members.len());
        for &i in &members {
            let list = heads[i].take().expect("head present for a queued source");
            group.postings += list.len() / 2;
            lists.push(list);
            if let Some((t, list)) = sources[i].next()? {
                heads[i] = Some(list);
                heap.push(Reverse((t, i)));
            }
        }
        group.terms.push((term, lists));
        if group.terms.len() >= GROUP_TERMS || group.postings >= GROUP_POSTINGS {
            writer.write_group(&mut group)?;
        }
    }
    writer.write_group(&mut group)?;
    writer.file.write(&[0u8; format::POSTINGS_PADDING])?;
    writer.file.finish()?;

    let mut terms = FileWriter::create(
        dir.join(format::TERMS_FILE),
        format::TERMS_KIND,
        format::FILE_VERSION,
    )?;
    terms.write(&writer.num_terms.to_le_bytes())?;
    terms.write(&writer.entries)?;
    terms.write(&writer.texts)?;
    terms.finish()?;
    Ok(writer.num_terms)
}

fn write_docs(dir: &Path, norms: &[u8], ids: &[String]) -> Result<()> {
    let n = ids.len();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.par_sort_unstable_by(|&a, &b| ids[a as usize].as_bytes().cmp(ids[b as usize].as_bytes()));
    let mut rank = vec![0u32; n];
    for (position, &doc) in order.iter().enumerate() {
        rank[doc as usize] = position as u32;
    }
    let mut w = FileWriter::create(
        dir.join(format::DOCS_FILE),
        format::DOCS_KIND,
        format::FILE_VERSION,
    )?;
    w.write(&(n as u64).to_le_bytes())?;
    w.write(norms)?;
    w.align(4)?;
    let mut bytes = Vec::with_capacity(4 * n);
    for r in rank {
        bytes.extend_from_slice(&r.to_le_bytes());
    }
    w.write(&bytes)?;
    w.finish()
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
    first_line: FxMap<String, u64>,
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
            if let Some(&first) = self.first_line.get(&rec.id) {
                if self.keep_first_duplicate {
                    self.skipped += 1;
                    continue;
                }
                return Err(Error::DuplicateId {
                    path: corpus.to_path_buf(),
                    id: rec.id,
                    line: rec.line,
                    first_line: first,
                });
            }
            self.first_line.insert(rec.id.clone(), rec.line);
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
    ids: Vec<String>,
    norms: Vec<u8>,
    sum_lengths: u64,
    docs_with_terms: u64,
    /// One in-memory index per worker thread.
    workers: Vec<MemoryIndex>,
    runs: Vec<PathBuf>,
}

impl Accumulator {
    /// Number the documents in input order, analyze them and add their postings; spill sorted
    /// runs when the in-memory postings outgrow the budget.
    fn add_batch(&mut self, batch: Batch, analyzers: &[Analyzer]) -> Result<()> {
        let Batch { records, chosen } = batch;
        if self.ids.len() + records.len() > u32::MAX as usize {
            return Err(Error::invalid("more than 2^32 - 1 documents"));
        }
        let first_doc = self.ids.len();
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
        self.ids.extend(records.iter().map(|rec| rec.id.clone()));
        if self.workers.iter().map(MemoryIndex::bytes).sum::<usize>() > self.budget {
            self.spill(self.ids.len() as u32)?;
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
        let spills: Vec<(PathBuf, MemoryIndex)> = workers
            .into_iter()
            .enumerate()
            .filter(|(_, index)| !index.is_empty())
            .map(|(i, index)| (self.dir.join(format!("run-{generation}-{i}.tmp")), index))
            .collect();
        let paths: Vec<PathBuf> = spills.iter().map(|(path, _)| path.clone()).collect();
        spills
            .into_par_iter()
            .map(|(path, index)| spill_run(&path, index))
            .collect::<Result<Vec<()>>>()?;
        self.runs.extend(paths);
        Ok(())
    }
}

fn thread_pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::invalid(format!("cannot start {threads} worker threads: {e}")))
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
    thread_pool(opts.threads)?.install(|| build_in_pool(corpus, index, opts, cancel))
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

    let reader = LineReader::open(corpus)?;
    let out = AtomicDir::create(index)?;
    let progress = crate::progress::bar(None, "indexing", opts.quiet);
    let mut acc = Accumulator {
        dir: out.path().to_path_buf(),
        budget: opts.memory_budget_bytes,
        ids: Vec::new(),
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
        first_line: FxMap::default(),
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
        progress.set_position(acc.ids.len() as u64);
        pending = next?;
    }
    let BatchReader {
        skipped, analyzers, ..
    } = batches;

    let Accumulator {
        ids,
        norms,
        sum_lengths,
        docs_with_terms,
        workers,
        runs,
        ..
    } = acc;
    let spilled_runs = runs.len() as u64;
    let mut sources = runs
        .iter()
        .map(|p| Source::open_run(p.clone()))
        .collect::<Result<Vec<_>>>()?;
    let sorted: Vec<SortedPostings> = workers
        .into_par_iter()
        .filter(|index| !index.is_empty())
        .map(MemoryIndex::into_sorted)
        .collect();
    sources.extend(sorted.into_iter().map(Source::Memory));
    let num_terms = merge_and_write(out.path(), sources, &norms)?;
    for p in &runs {
        std::fs::remove_file(p).at(p)?;
    }
    write_docs(out.path(), &norms, &ids)?;
    IdTable::write(out.path().join(format::IDS_FILE), &ids)?;
    progress.finish_and_clear();

    let recorded = analyzers.recorded();
    let languages: Vec<&String> = recorded.keys().collect();
    let manifest = serde_json::json!({
        "format": format::FORMAT,
        "version": format::VERSION,
        "num_docs": ids.len(),
        "doc_count": docs_with_terms,
        "sum_total_term_freq": sum_lengths,
        "avgdl": super::scoring::avg_length(sum_lengths, docs_with_terms),
        "num_terms": num_terms,
        "languages": languages,
        "analyzers": recorded,
        "lang_field": opts.lang_field,
        "fields": opts.fields,
        "k1": super::DEFAULT_K1,
        "b": super::DEFAULT_B,
        "build": {
            "corpus": corpus.display().to_string(),
            "keep_first_duplicate": opts.keep_first_duplicate,
            "skipped_duplicates": skipped,
            "memory_budget_bytes": opts.memory_budget_bytes,
            "spilled_runs": spilled_runs,
        },
    });
    out.commit(&manifest)?;
    Ok(BuildSummary {
        num_docs: ids.len() as u64,
        num_terms,
        skipped_duplicates: skipped,
        spilled_runs,
    })
}
