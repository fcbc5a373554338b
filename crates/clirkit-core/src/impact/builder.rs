//! Building an impact index: vectors are read in blocks of lines, parsed and quantized in
//! parallel, and appended to in-memory postings in document order (8 bytes each); past the memory
//! budget they are spilled to disk as a run (`spill.rs`). Terms are then encoded in parallel and
//! written in byte order, each term's list gathered from the runs and memory a bounded slice of
//! terms at a time; the files do not depend on the budget (nor on the thread count).

use super::format;
use super::format::{ImpactBuildRecord, ImpactManifest};
use super::spill::{Postings, Runs, POSTING_BYTES};
use super::vectors::{parse_vector_line, quantize_terms};
use crate::error::{Error, Result};
use crate::ids::{IdTable, UniqueIds};
use crate::io::atomic::AtomicDir;
use crate::io::format::{FileWriter, Kind};
use crate::io::jsonl::{LineBlock, LineRange, LineReader};
use crate::io::manifest::{self, Manifest};
use crate::postings::{encode_postings, POSTINGS_PADDING};
use crate::progress::Progress;
use rayon::prelude::*;
use std::path::Path;

/// How to build an impact index.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Impacts are `round(weight × quantize)`.
    pub quantize: u32,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    /// Counts the bytes of the vectors files read from disk, against their sizes.
    pub progress: Progress,
    /// Postings held in memory before a run is spilled to disk (and the bound of the postings
    /// gathered at once by the final merge).
    pub memory_budget_bytes: usize,
    /// Index only this range of lines of the one vectors file (a shard of a sharded index,
    /// [`crate::io::jsonl::split_lines`]); errors keep the file's true line numbers.
    pub range: Option<LineRange>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            quantize: super::vectors::DEFAULT_QUANTIZE,
            threads: 0,
            progress: Progress::default(),
            memory_budget_bytes: 1 << 30,
            range: None,
        }
    }
}

/// One document as parsed: its id and line, its quantized terms, and how many weighted terms
/// it had before zero impacts were dropped.
struct ParsedDoc {
    id: String,
    line: u64,
    terms: Vec<(String, u32)>,
    weighted: usize,
}

/// Index the JSONL vectors at `vectors` into directory `index`, atomically.
pub fn build(vectors: &Path, index: &Path, opts: &BuildOptions) -> Result<ImpactManifest> {
    build_files(&[vectors], index, opts)
}

/// Index the JSONL vectors of several files, one after another (document numbers in that order,
/// ids unique across them), into directory `index`, atomically: the index of their concatenation.
pub fn build_files(files: &[&Path], index: &Path, opts: &BuildOptions) -> Result<ImpactManifest> {
    if opts.quantize == 0 {
        return Err(Error::invalid("--quantize must be at least 1"));
    }
    if files.is_empty() {
        return Err(Error::invalid("no vector files given"));
    }
    if files.len() > 1 && opts.range.is_some() {
        return Err(Error::invalid(
            "a line range indexes one vectors file, not several",
        ));
    }
    crate::parallel::install(opts.threads, |_| build_in_pool(files, index, opts))?
}

fn build_in_pool(files: &[&Path], index: &Path, opts: &BuildOptions) -> Result<ImpactManifest> {
    let out = AtomicDir::create(index)?;
    let mut ids = UniqueIds::default();
    // where each document was read: (file, line), for the duplicate-id error
    let mut lines: Vec<(u32, u64)> = Vec::new();
    let mut postings = Postings::default();
    let mut runs = Runs::default();
    let mut num_postings = 0u64;
    let mut dropped_zero = 0u64;
    let mut input_bytes = 0;
    for &vectors in files {
        input_bytes += LineReader::disk_bytes(vectors, opts.range.as_ref())?;
    }
    opts.progress.expect(input_bytes as usize);
    for (file, &vectors) in files.iter().enumerate() {
        let mut reader = LineReader::open_counted(vectors, opts.range.as_ref(), &opts.progress)?;
        let mut block = LineBlock::default();
        loop {
            reader.next_block(8192, &mut block)?;
            if block.is_empty() {
                break;
            }
            let parsed: Vec<Result<ParsedDoc>> = (0..block.len())
                .into_par_iter()
                .map(|i| {
                    let (line, bytes) = block.line(i);
                    let v = parse_vector_line(vectors, line, bytes)?;
                    let at = |m: String| Error::parse(vectors, line, format!("'{}': {m}", v.id));
                    let terms = quantize_terms(&v.terms, opts.quantize, at)?;
                    Ok(ParsedDoc {
                        weighted: v.terms.len(),
                        id: v.id,
                        line,
                        terms,
                    })
                })
                .collect();
            for record in parsed {
                let ParsedDoc {
                    id,
                    line,
                    terms,
                    weighted,
                } = record?;
                let doc = match ids.insert(&id) {
                    Ok(doc) => doc,
                    Err(first) => {
                        let (first_file, first_line) = lines[first as usize];
                        if first_file as usize != file {
                            return Err(Error::invalid(format!(
                                "{}:{line}: duplicate id '{id}' (first at {}:{first_line})",
                                vectors.display(),
                                files[first_file as usize].display()
                            )));
                        }
                        return Err(Error::duplicate_id(vectors, id, line, first_line));
                    }
                };
                lines.push((file as u32, line));
                dropped_zero += (weighted - terms.len()) as u64;
                num_postings += terms.len() as u64;
                for (term, impact) in &terms {
                    postings.add(term, doc, *impact);
                }
            }
            if postings.held_bytes() > opts.memory_budget_bytes {
                runs.spill(out.path(), &mut postings)?;
            }
        }
    }
    if ids.len() >= u32::MAX as usize {
        return Err(Error::invalid("more than 2^32 - 2 documents"));
    }
    let num_docs = ids.len();
    let (num_terms, max_impact) = write_postings(
        out.path(),
        postings,
        &runs,
        num_docs,
        opts.memory_budget_bytes,
    )?;
    runs.remove()?;
    let sorted = ids.sorted_positions();
    write_docs(out.path(), &sorted)?;
    IdTable::write_unique(out.path().join(format::IDS_FILE), &ids, &sorted)?;
    let manifest = ImpactManifest {
        format: ImpactManifest::FORMAT.into(),
        version: ImpactManifest::VERSION,
        num_docs: num_docs as u64,
        num_terms,
        num_postings,
        quantize: opts.quantize,
        max_impact,
        build: ImpactBuildRecord {
            vectors: match &opts.range {
                Some(r) => format!("{} (bytes {}..{})", files[0].display(), r.start, r.end),
                None => files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" + "),
            },
            zero_impact_terms_dropped: dropped_zero,
        },
    };
    manifest::commit(out, &manifest)?;
    Ok(manifest)
}

/// A term's encoded postings, block count, document frequency and largest impact.
type EncodedTerm = (Vec<u8>, u32, u32, u32);

/// Encode every term's postings (in parallel) and write them and the term dictionary in term
/// byte order; returns the number of terms and the largest impact. A term's list is its pieces in
/// `runs`, then its postings in memory; terms are gathered and encoded in slices of at most 4096
/// terms and about half of `budget` bytes of postings (one term at least).
fn write_postings(
    dir: &Path,
    postings: Postings,
    runs: &Runs,
    num_docs: usize,
    budget: usize,
) -> Result<(u64, u32)> {
    let Postings {
        term_ids,
        mut lists,
        ..
    } = postings;
    let mut terms: Vec<(String, u32)> = term_ids.into_iter().collect();
    terms.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // Impact postings have no document norms: every block's bound is its largest impact.
    let norms = vec![0u8; num_docs];
    let mut postings_file = create_file(dir, format::POSTINGS_FILE, format::POSTINGS_KIND)?;
    let mut entries = Vec::with_capacity(terms.len() * crate::postings::termdict::TERM_ENTRY_LEN);
    let mut texts = Vec::new();
    let mut max_impact = 0u32;
    let mut start = 0;
    while start < terms.len() {
        let (mut end, mut bytes) = (start, 0usize);
        while end < terms.len() && end - start < 4096 {
            let id = terms[end].1;
            let df = runs.count(id) + lists[id as usize].len();
            if end > start && bytes + df * POSTING_BYTES > budget / 2 {
                break;
            }
            bytes += df * POSTING_BYTES;
            end += 1;
        }
        let chunk = &terms[start..end];
        let encoded: Vec<Result<EncodedTerm>> = chunk
            .par_iter()
            .map(|(_, id)| {
                let held = &lists[*id as usize];
                let gathered;
                let list: &[(u32, u32)] = if runs.len() == 0 {
                    held
                } else {
                    let mut all = Vec::with_capacity(runs.count(*id) + held.len());
                    runs.read(*id, &mut all)?;
                    all.extend_from_slice(held);
                    gathered = all;
                    &gathered
                };
                let docs: Vec<u32> = list.iter().map(|p| p.0).collect();
                let impacts: Vec<u32> = list.iter().map(|p| p.1).collect();
                let mut bytes = Vec::new();
                let blocks = encode_postings(&docs, &impacts, &norms, &mut bytes);
                let max = impacts.iter().copied().max().unwrap_or(0);
                Ok((bytes, blocks, docs.len() as u32, max))
            })
            .collect();
        for ((term, id), encoded) in chunk.iter().zip(encoded) {
            let (bytes, blocks, doc_freq, max) = encoded?;
            crate::postings::termdict::TermEntry {
                text_offset: texts.len() as u64,
                text_len: term.len() as u32,
                doc_freq,
                postings_offset: postings_file.position(),
                blocks,
            }
            .encode(&mut entries);
            texts.extend_from_slice(term.as_bytes());
            postings_file.write(&bytes)?;
            max_impact = max_impact.max(max);
            lists[*id as usize] = Vec::new();
        }
        start = end;
    }
    postings_file.write(&[0u8; POSTINGS_PADDING])?;
    postings_file.finish()?;
    let mut terms_file = create_file(dir, format::TERMS_FILE, format::TERMS_KIND)?;
    terms_file.write(&(terms.len() as u64).to_le_bytes())?;
    terms_file.write(&entries)?;
    terms_file.write(&texts)?;
    terms_file.finish()?;
    Ok((terms.len() as u64, max_impact))
}

/// Create the index file `name` under `dir`, of kind `kind` at this format's file version.
fn create_file(dir: &Path, name: &str, kind: Kind) -> Result<FileWriter> {
    FileWriter::create(dir.join(name), kind, format::FILE_VERSION)
}

/// Write each document's rank in id byte order (`sorted`: documents in id order).
fn write_docs(dir: &Path, sorted: &[u32]) -> Result<()> {
    let mut w = create_file(dir, format::DOCS_FILE, format::DOCS_KIND)?;
    w.write(&(sorted.len() as u64).to_le_bytes())?;
    w.write(&crate::postings::doc_ranks::rank_bytes(sorted))?;
    w.finish()
}
