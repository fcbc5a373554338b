//! Streaming, parallel, memory-bounded index construction.
//!
//! The corpus is read in batches of lines; each batch is parsed and analyzed in parallel, then
//! its postings are appended to an in-memory inverted index sharded by term hash, one shard per
//! worker thread, all shards filled at once (while the next batch is analyzed). When that index
//! outgrows the memory budget each shard is written as a sorted run file inside the (temporary)
//! index directory and cleared; a term lives in one shard, so runs still hold each term once.
//! Doc numbers grow with the input, so every run covers a later doc range than the one before it
//! and the final k-way merge by term only concatenates postings lists. The finished index is
//! renamed into place by [`AtomicDir`], so a failed or interrupted build leaves nothing loadable.

use super::format::{self, TermEntry};
use super::scoring::length_to_norm;
use crate::error::{Error, IoContext, Result};
use crate::ids::IdTable;
use crate::io::atomic::AtomicDir;
use crate::io::format::FileWriter;
use crate::io::jsonl::{parse_record, FieldSpec, LineReader, Record};
use crate::text::Analyzer;
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

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

/// FxHash (rustc's hasher) with MurmurHash3's finalizer: term keys are not attacker-chosen,
/// and SipHash was a tenth of the build time. The finalizer spreads every input bit into the low
/// bits the hash table indexes with; without it, terms sharing their first bytes collide.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }
    #[inline]
    fn write_u8(&mut self, b: u8) {
        self.add(b as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

/// One document after analysis: its distinct terms with frequencies, and its length.
struct AnalyzedDoc {
    terms: Vec<(String, u32)>,
    length: u32,
}

/// Distinct terms by sorting the token list and counting runs: no per-document hash map.
fn analyze(analyzer: &Analyzer, text: &str) -> AnalyzedDoc {
    let mut tokens = analyzer.analyze(text);
    let length = tokens.len() as u32;
    tokens.sort_unstable();
    let mut terms: Vec<(String, u32)> = Vec::with_capacity(tokens.len());
    for t in tokens {
        match terms.last_mut() {
            Some((last, tf)) if *last == t => *tf += 1,
            _ => terms.push((t, 1)),
        }
    }
    AnalyzedDoc { terms, length }
}

/// Which shard of the in-memory index owns `term`: a hash of its bytes, independent of the
/// hash the shard's own table uses (its high bits, where the table indexes with the low ones).
#[inline]
fn shard_of(term: &str, shards: usize) -> usize {
    use std::hash::Hasher;
    let mut h = FxHasher::default();
    h.write(term.as_bytes());
    ((h.finish() >> 32) as usize) % shards
}

/// A term as a hash-table key: up to 22 bytes inline (nearly every term), so comparing keys
/// reads the table slot and no second cache line.
#[derive(Clone)]
enum TermKey {
    Inline { len: u8, bytes: [u8; 22] },
    Heap(Box<str>),
}

impl TermKey {
    fn new(term: &str) -> Self {
        let mut bytes = [0u8; 22];
        match bytes.get_mut(..term.len()) {
            Some(head) => {
                head.copy_from_slice(term.as_bytes());
                TermKey::Inline {
                    len: term.len() as u8,
                    bytes,
                }
            }
            None => TermKey::Heap(term.into()),
        }
    }

    #[inline]
    fn as_str(&self) -> &str {
        match self {
            // Only ever filled from a whole `&str`.
            TermKey::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..*len as usize]).expect("copied from a str")
            }
            TermKey::Heap(s) => s,
        }
    }
}

impl std::borrow::Borrow<str> for TermKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl std::hash::Hash for TermKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialEq for TermKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for TermKey {}

/// One shard of the in-memory inverted index: the terms whose [`shard_of`] is this shard.
/// Shards are filled in parallel, one thread each, over the same batch of documents.
#[derive(Default)]
struct MemoryIndex {
    /// Term -> its (doc, tf) postings in increasing doc order, in the table slot itself.
    postings: FxMap<TermKey, Vec<(u32, u32)>>,
    bytes: usize,
}

impl MemoryIndex {
    /// Append the postings of this shard's terms among `docs`, numbered from `first_doc`.
    fn add_batch(&mut self, shard: usize, shards: usize, first_doc: u32, docs: &[AnalyzedDoc]) {
        for (doc, analyzed) in (first_doc..).zip(docs) {
            for (term, tf) in &analyzed.terms {
                if shards > 1 && shard_of(term, shards) != shard {
                    continue;
                }
                let list = match self.postings.get_mut(term.as_str()) {
                    Some(list) => list,
                    None => {
                        // table slot, and the key's bytes when they do not fit inline
                        self.bytes += 64 + if term.len() > 22 { term.len() } else { 0 };
                        self.postings.entry(TermKey::new(term)).or_default()
                    }
                };
                if list.len() == list.capacity() {
                    self.bytes += 8 * list.capacity().max(4);
                }
                list.push((doc, *tf));
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.postings.is_empty()
    }

    /// Terms in byte order with their postings, emptying the shard.
    fn take_sorted(&mut self) -> Vec<TermPostingsList> {
        let postings = std::mem::take(&mut self.postings);
        self.bytes = 0;
        let mut all: Vec<TermPostingsList> = postings
            .into_iter()
            .map(|(term, list)| (term.as_str().to_string(), list))
            .collect();
        all.par_sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        all
    }
}

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

/// Spill sorted postings to a run file: per term `len, bytes, count, (gap, tf)*` as varints.
fn spill_run(path: &Path, sorted: &[TermPostingsList]) -> Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).at(path)?);
    let mut write = || -> std::io::Result<()> {
        write_varint(&mut w, sorted.len() as u64)?;
        for (term, list) in sorted {
            write_varint(&mut w, term.len() as u64)?;
            w.write_all(term.as_bytes())?;
            write_varint(&mut w, list.len() as u64)?;
            let mut prev = 0u32;
            for &(doc, tf) in list {
                write_varint(&mut w, (doc - prev) as u64)?;
                write_varint(&mut w, tf as u64)?;
                prev = doc;
            }
        }
        w.flush()
    };
    write().at(path)
}

/// A term with its (doc, tf) postings in doc order.
type TermPostingsList = (String, Vec<(u32, u32)>);

/// A sorted source of (term, postings) for the final merge.
enum Source {
    Run {
        path: PathBuf,
        reader: BufReader<File>,
        remaining: u64,
    },
    Memory(std::vec::IntoIter<TermPostingsList>),
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
            Source::Memory(it) => Ok(it.next()),
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
                    let mut bytes = vec![0u8; len];
                    reader.read_exact(&mut bytes)?;
                    let term = String::from_utf8(bytes).map_err(|_| {
                        std::io::Error::new(std::io::ErrorKind::InvalidData, "bad term bytes")
                    })?;
                    let count = read_varint(reader)? as usize;
                    let mut list = Vec::with_capacity(count);
                    let mut doc = 0u32;
                    for _ in 0..count {
                        doc += read_varint(reader)? as u32;
                        list.push((doc, read_varint(reader)? as u32));
                    }
                    Ok((term, list))
                };
                read().map(Some).at(&*path)
            }
        }
    }
}

/// Writes merged postings and collects the dictionary.
struct PostingsWriter<'a> {
    file: FileWriter,
    norms: &'a [u8],
    entries: Vec<u8>,
    texts: Vec<u8>,
    num_terms: u64,
    buf: Vec<u8>,
    docs: Vec<u32>,
    tfs: Vec<u32>,
}

impl PostingsWriter<'_> {
    fn add(&mut self, term: &str, lists: &[Vec<(u32, u32)>]) -> Result<()> {
        self.docs.clear();
        self.tfs.clear();
        for list in lists {
            for &(d, tf) in list {
                self.docs.push(d);
                self.tfs.push(tf);
            }
        }
        self.buf.clear();
        let postings_offset = self.file.position();
        let blocks = format::encode_postings(&self.docs, &self.tfs, self.norms, &mut self.buf);
        self.file.write(&self.buf)?;
        TermEntry {
            text_offset: self.texts.len() as u64,
            text_len: term.len() as u32,
            doc_freq: self.docs.len() as u32,
            postings_offset,
            blocks,
        }
        .encode(&mut self.entries);
        self.texts.extend_from_slice(term.as_bytes());
        self.num_terms += 1;
        Ok(())
    }
}

/// Merge the sources (ordered by doc range) term by term into `postings.bin` and `terms.bin`.
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
        buf: Vec::new(),
        docs: Vec::new(),
        tfs: Vec::new(),
    };
    let mut heads: Vec<Option<Vec<(u32, u32)>>> = vec![None; sources.len()];
    let mut heap = BinaryHeap::new();
    for (i, s) in sources.iter_mut().enumerate() {
        if let Some((term, list)) = s.next()? {
            heads[i] = Some(list);
            heap.push(Reverse((term, i)));
        }
    }
    let mut lists: Vec<Vec<(u32, u32)>> = Vec::new();
    while let Some(Reverse((term, first))) = heap.pop() {
        lists.clear();
        let mut members = vec![first];
        while let Some(Reverse((t, _))) = heap.peek() {
            if *t != term {
                break;
            }
            let Reverse((_, i)) = heap.pop().unwrap();
            members.push(i);
        }
        // Sources are numbered in doc order, so concatenating in source order keeps doc order.
        members.sort_unstable();
        for &i in &members {
            lists.push(heads[i].take().expect("head present for a queued source"));
        }
        writer.add(&term, &lists)?;
        for &i in &members {
            if let Some((t, list)) = sources[i].next()? {
                heads[i] = Some(list);
                heap.push(Reverse((t, i)));
            }
        }
    }
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

/// Everything the build keeps per document, and the inverted index being filled.
struct Accumulator {
    dir: PathBuf,
    budget: usize,
    ids: Vec<String>,
    norms: Vec<u8>,
    sum_lengths: u64,
    docs_with_terms: u64,
    /// The in-memory index, one shard per worker thread.
    shards: Vec<MemoryIndex>,
    runs: Vec<PathBuf>,
}

impl Accumulator {
    /// Number the documents in input order and add their postings; spill a sorted run when
    /// the in-memory postings outgrow the budget.
    fn add_batch(&mut self, records: Vec<Record>, analyzed: Vec<AnalyzedDoc>) -> Result<()> {
        if self.ids.len() + records.len() > u32::MAX as usize {
            return Err(Error::invalid("more than 2^32 - 1 documents"));
        }
        let first_doc = self.ids.len() as u32;
        for (rec, doc) in records.into_iter().zip(&analyzed) {
            self.ids.push(rec.id);
            self.norms.push(length_to_norm(doc.length));
            self.sum_lengths += doc.length as u64;
            self.docs_with_terms += (doc.length > 0) as u64;
        }
        let shards = self.shards.len();
        self.shards
            .par_iter_mut()
            .enumerate()
            .for_each(|(i, m)| m.add_batch(i, shards, first_doc, &analyzed));
        // Freed on a worker thread: dropping a batch's strings is not free either.
        rayon::spawn(move || drop(analyzed));
        if self.shards.iter().map(|m| m.bytes).sum::<usize>() > self.budget {
            // One run per shard: a term lives in one shard, so the merge still meets each
            // term's postings in doc order.
            let generation = self.runs.len();
            let paths: Vec<PathBuf> = (0..shards)
                .map(|i| self.dir.join(format!("run-{generation}-{i}.tmp")))
                .collect();
            self.shards
                .par_iter_mut()
                .zip(&paths)
                .map(|(m, path)| spill_run(path, &m.take_sorted()))
                .collect::<Result<Vec<()>>>()?;
            self.runs.extend(paths);
        }
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
    let mut analyzers = Analyzers::new(opts.lang.as_deref(), opts.lang_field.as_deref())?;
    let fields: Vec<&str> = opts.fields.iter().map(String::as_str).collect();
    let spec = FieldSpec::corpus()
        .with_text_fields(&fields)
        .with_lang_field(opts.lang_field.as_deref());

    let mut reader = LineReader::open(corpus)?;
    let out = AtomicDir::create(index)?;
    let progress = crate::progress::bar(None, "indexing", opts.quiet);
    let mut acc = Accumulator {
        dir: out.path().to_path_buf(),
        budget: opts.memory_budget_bytes,
        ids: Vec::new(),
        norms: Vec::new(),
        sum_lengths: 0,
        docs_with_terms: 0,
        shards: (0..rayon::current_num_threads().max(1))
            .map(|_| MemoryIndex::default())
            .collect(),
        runs: Vec::new(),
    };
    let mut first_line: FxMap<String, u64> = FxMap::default();
    let mut skipped = 0u64;
    // Batch i is added to the index while batch i + 1 is analyzed: the one sequential step
    // overlaps the parallel one.
    let mut pending: Option<(Vec<Record>, Vec<AnalyzedDoc>)> = None;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::invalid(format!(
                "indexing {} interrupted; nothing was written",
                corpus.display()
            )));
        }
        let chunk = reader.next_chunk(opts.batch_lines.max(1))?;
        if chunk.is_empty() {
            break;
        }
        let parsed: Vec<Result<Record>> = chunk
            .par_iter()
            .map(|(line, bytes)| parse_record(corpus, *line, bytes, &spec))
            .collect();
        drop(chunk);
        let mut records = Vec::with_capacity(parsed.len());
        let mut chosen = Vec::with_capacity(parsed.len());
        for rec in parsed {
            let rec = rec?;
            if let Some(&first) = first_line.get(&rec.id) {
                if opts.keep_first_duplicate {
                    skipped += 1;
                    continue;
                }
                return Err(Error::DuplicateId {
                    path: corpus.to_path_buf(),
                    id: rec.id,
                    line: rec.line,
                    first_line: first,
                });
            }
            first_line.insert(rec.id.clone(), rec.line);
            chosen.push(analyzers.for_record(corpus, &rec)?);
            records.push(rec);
        }
        let list = &analyzers.list;
        let (analyzed, added) = rayon::join(
            || {
                records
                    .par_iter()
                    .zip(chosen.par_iter())
                    .map(|(rec, &a)| analyze(&list[a], &rec.text))
                    .collect::<Vec<_>>()
            },
            || match pending.take() {
                Some((recs, docs)) => acc.add_batch(recs, docs),
                None => Ok(()),
            },
        );
        added?;
        progress.set_position(acc.ids.len() as u64);
        pending = Some((records, analyzed));
    }
    if let Some((recs, docs)) = pending.take() {
        acc.add_batch(recs, docs)?;
    }
    drop(first_line);

    let Accumulator {
        ids,
        norms,
        sum_lengths,
        docs_with_terms,
        mut shards,
        runs,
        ..
    } = acc;
    let spilled_runs = runs.len() as u64;
    let mut sources = runs
        .iter()
        .map(|p| Source::open_run(p.clone()))
        .collect::<Result<Vec<_>>>()?;
    for m in shards.iter_mut().filter(|m| !m.is_empty()) {
        sources.push(Source::Memory(m.take_sorted().into_iter()));
    }
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
