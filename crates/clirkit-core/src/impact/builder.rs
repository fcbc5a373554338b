//! Building an impact index: vectors are read in blocks of lines, parsed and quantized in
//! parallel, and appended to in-memory postings in document order; terms are then encoded in
//! parallel and written in byte order. Postings are held in memory (8 bytes each).

use super::format;
use super::format::{ImpactBuildRecord, ImpactManifest};
use super::vectors::{parse_vector_line, quantize_terms};
use crate::error::{Error, Result};
use crate::ids::{IdTable, UniqueIds};
use crate::io::atomic::AtomicDir;
use crate::io::format::FileWriter;
use crate::io::jsonl::{LineBlock, LineReader};
use crate::io::manifest::{self, Manifest};
use crate::postings::{encode_postings, POSTINGS_PADDING};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::path::Path;

/// How to build an impact index.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Impacts are `round(weight × quantize)`.
    pub quantize: u32,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    pub quiet: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            quantize: super::vectors::DEFAULT_QUANTIZE,
            threads: 0,
            quiet: false,
        }
    }
}

/// Postings of the terms seen so far, in document order.
#[derive(Default)]
struct Postings {
    term_ids: FxHashMap<String, u32>,
    lists: Vec<Vec<(u32, u32)>>,
}

impl Postings {
    fn add(&mut self, term: &str, doc: u32, impact: u32) {
        let id = match self.term_ids.get(term) {
            Some(&id) => id,
            None => {
                let id = self.lists.len() as u32;
                self.term_ids.insert(term.to_string(), id);
                self.lists.push(Vec::new());
                id
            }
        };
        self.lists[id as usize].push((doc, impact));
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
    if opts.quantize == 0 {
        return Err(Error::invalid("--quantize must be at least 1"));
    }
    crate::parallel::install(opts.threads, |_| build_in_pool(vectors, index, opts))?
}

fn build_in_pool(vectors: &Path, index: &Path, opts: &BuildOptions) -> Result<ImpactManifest> {
    let out = AtomicDir::create(index)?;
    let mut reader = LineReader::open(vectors)?;
    let mut block = LineBlock::default();
    let mut ids = UniqueIds::default();
    let mut lines: Vec<u64> = Vec::new();
    let mut postings = Postings::default();
    let mut num_postings = 0u64;
    let mut dropped_zero = 0u64;
    let progress = crate::progress::bar(None, "indexing vectors", opts.quiet);
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
                    return Err(Error::DuplicateId {
                        path: vectors.to_path_buf(),
                        id,
                        line,
                        first_line: lines[first as usize],
                    })
                }
            };
            lines.push(line);
            dropped_zero += (weighted - terms.len()) as u64;
            num_postings += terms.len() as u64;
            for (term, impact) in &terms {
                postings.add(term, doc, *impact);
            }
        }
        progress.inc(block.len() as u64);
    }
    progress.finish_and_clear();
    if ids.len() >= u32::MAX as usize {
        return Err(Error::invalid("more than 2^32 - 2 documents"));
    }
    let num_docs = ids.len();
    let (num_terms, max_impact) = write_postings(out.path(), postings, num_docs)?;
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
            vectors: vectors.display().to_string(),
            zero_impact_terms_dropped: dropped_zero,
        },
    };
    manifest::commit(out, &manifest)?;
    Ok(manifest)
}

/// Encode every term's postings (in parallel) and write them and the term dictionary in term
/// byte order; returns the number of terms and the largest impact.
fn write_postings(dir: &Path, postings: Postings, num_docs: usize) -> Result<(u64, u32)> {
    let Postings {
        term_ids,
        mut lists,
    } = postings;
    let mut terms: Vec<(String, u32)> = term_ids.into_iter().collect();
    terms.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // Impact postings have no document norms: every block's bound is its largest impact.
    let norms = vec![0u8; num_docs];
    let mut postings_file = FileWriter::create(
        dir.join(format::POSTINGS_FILE),
        format::POSTINGS_KIND,
        format::FILE_VERSION,
    )?;
    let mut entries = Vec::with_capacity(terms.len() * crate::postings::termdict::TERM_ENTRY_LEN);
    let mut texts = Vec::new();
    let mut max_impact = 0u32;
    // Encoded a slice of terms at a time, bounding the memory of encoded postings.
    for chunk in terms.chunks(4096) {
        let encoded: Vec<(Vec<u8>, u32, u32, u32)> = chunk
            .par_iter()
            .map(|(_, id)| {
                let list = &lists[*id as usize];
                let docs: Vec<u32> = list.iter().map(|p| p.0).collect();
                let impacts: Vec<u32> = list.iter().map(|p| p.1).collect();
                let mut bytes = Vec::new();
                let blocks = encode_postings(&docs, &impacts, &norms, &mut bytes);
                let max = impacts.iter().copied().max().unwrap_or(0);
                (bytes, blocks, docs.len() as u32, max)
            })
            .collect();
        for ((term, id), (bytes, blocks, doc_freq, max)) in chunk.iter().zip(encoded) {
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
    }
    postings_file.write(&[0u8; POSTINGS_PADDING])?;
    postings_file.finish()?;
    let mut terms_file = FileWriter::create(
        dir.join(format::TERMS_FILE),
        format::TERMS_KIND,
        format::FILE_VERSION,
    )?;
    terms_file.write(&(terms.len() as u64).to_le_bytes())?;
    terms_file.write(&entries)?;
    terms_file.write(&texts)?;
    terms_file.finish()?;
    Ok((terms.len() as u64, max_impact))
}

/// Write each document's rank in id byte order (`sorted`: documents in id order).
fn write_docs(dir: &Path, sorted: &[u32]) -> Result<()> {
    let mut w = FileWriter::create(
        dir.join(format::DOCS_FILE),
        format::DOCS_KIND,
        format::FILE_VERSION,
    )?;
    w.write(&(sorted.len() as u64).to_le_bytes())?;
    w.write(&crate::postings::doc_ranks::rank_bytes(sorted))?;
    w.finish()
}
