//! The build driver: batch i is inverted while batch i + 1 is read; then the final merge, the
//! document files, block maxima, ids, the optional forward index and the manifest, committed
//! atomically.

use super::batches::{part_spec, Analyzers, BatchReader, DocLines};
use super::final_merge::{merge_and_write, write_docs};
use super::inversion::Accumulator;
use super::options::{BuildOptions, BuildSummary, CorpusPart};
use crate::bm25::format::{self, Bm25BuildRecord, Bm25Manifest};
use crate::bm25::memory_index::{MemoryIndex, MAX_DOC_SPAN};
use crate::bm25::sorted_run::SortedRun;
use crate::error::{Error, IoContext, Result};
use crate::ids::{IdTable, UniqueIds};
use crate::io::atomic::AtomicDir;
use crate::io::jsonl::{LineBlock, LineReader};
use crate::io::manifest;
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

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
    build_parts_cancellable(&[CorpusPart::whole(corpus)], index, opts, cancel)
}

/// [`build_cancellable`] over several corpus files read in sequence, as one corpus: the index
/// equals that of a build over the files concatenated (each document's language chosen by its
/// part's rule), with no concatenated copy written. Ids must be unique across the files (a
/// duplicate names both files) unless `keep_first_duplicate`.
pub fn build_parts_cancellable(
    parts: &[CorpusPart],
    index: &Path,
    opts: &BuildOptions,
    cancel: &AtomicBool,
) -> Result<BuildSummary> {
    crate::parallel::install(opts.threads, |_| build_in_pool(parts, index, opts, cancel))?
}

fn build_in_pool(
    parts: &[CorpusPart],
    index: &Path,
    opts: &BuildOptions,
    cancel: &AtomicBool,
) -> Result<BuildSummary> {
    let Some(first) = parts.first() else {
        return Err(Error::invalid("no corpus file to index"));
    };
    if parts.len() > 1 && opts.range.is_some() {
        return Err(Error::invalid(
            "a line range indexes one corpus file, not several",
        ));
    }
    if opts.lang_field.is_none() {
        if let Some(part) = parts
            .iter()
            .find(|p| p.lang.is_some() || p.default_lang.is_some())
        {
            return Err(Error::invalid(format!(
                "{}: a language for one corpus file needs a language field for the index",
                part.path.display()
            )));
        }
    }
    let corpus = first.path.as_path();
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
    let spec = part_spec(&fields, opts.lang_field.as_deref(), first);

    // Progress: the bytes of the input read from disk, against the inputs' sizes.
    let mut input_bytes = 0;
    for part in parts {
        input_bytes += LineReader::disk_bytes(&part.path, opts.range.as_ref())?;
    }
    opts.progress.expect(input_bytes as usize);
    let reader = LineReader::open_counted(corpus, opts.range.as_ref(), &opts.progress)?;
    let out = AtomicDir::create(index)?;
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
        parts,
        part: 0,
        part_starts: vec![0],
        spec,
        fields: &fields,
        lang_field: opts.lang_field.as_deref(),
        reader,
        progress: &opts.progress,
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
                corpus_names(parts)
            )));
        }
        let list = batches.analyzers.list.clone();
        let (added, next) = rayon::join(|| acc.add_batch(batch, &list), || batches.next_batch());
        added?;
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
    let avgdl = crate::bm25::scoring::avg_length(sum_lengths, docs_with_terms);
    let (k1, b) = (
        crate::bm25::scoring::DEFAULT_K1,
        crate::bm25::scoring::DEFAULT_B,
    );
    crate::bm25::block_maxima::write(out.path(), &norms, k1, b, avgdl)?;
    IdTable::write_unique(out.path().join(format::IDS_FILE), &ids, &sorted)?;
    if opts.store_docvectors {
        crate::bm25::docvectors::write(out.path(), ids.len(), opts.memory_budget_bytes)?;
    }

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
                None => corpus_names(parts),
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

/// The corpus files of a build, joined by ` + ` (as a merged index names its inputs).
fn corpus_names(parts: &[CorpusPart]) -> String {
    let names: Vec<String> = parts.iter().map(|p| p.path.display().to_string()).collect();
    names.join(" + ")
}
