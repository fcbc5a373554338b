//! The final merge: the term space cut into ranges, each range's terms merged from every run (a
//! term's postings joined in doc order) and encoded in parallel, the ranges written in order; and
//! the `terms.bin` and `docs.bin` writers, which `merge.rs` shares.

use crate::bm25::format;
use crate::bm25::sorted_run::SortedRun;
use crate::error::Result;
use crate::io::format::FileWriter;
use crate::postings::termdict::TermEntry;
use rayon::prelude::*;
use std::path::Path;

/// Joins one term's postings lists (each in doc order, no doc in two lists) into `docs` and
/// `tfs` in doc order. Lists from different workers interleave piece by piece, so whole runs
/// of one list are copied until another list's next doc comes first.
pub(super) fn join_postings(lists: &[Vec<u32>], docs: &mut Vec<u32>, tfs: &mut Vec<u32>) {
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
pub(super) struct EncodedRange {
    bytes: Vec<u8>,
    texts: Vec<u8>,
    terms: Vec<(u32, usize, u32, u32)>,
}

/// Merge and encode the terms of `runs` in `[from[i], to[i])` (ranks of run `i`), reading each
/// run through a cursor with buffers of `buffer_len` bytes.
pub(super) fn encode_range(
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
pub(super) const CURSOR_SECTIONS: usize = 5;
/// Bounds on one cursor section's read buffer: large enough that reads stay few, small enough
/// that the merge's buffers stay a small part of the memory budget with many runs.
pub(super) const MIN_READ_BUFFER: usize = 64 << 10;
pub(super) const MAX_READ_BUFFER: usize = 1 << 20;

/// Merge the runs term by term into `postings.bin` and `terms.bin`. The term space is cut into
/// ranges at terms of the largest run, several per thread and more for runs much larger than
/// `budget` (so a wave's encoded postings stay within a quarter of it); ranges are merged and
/// encoded in parallel, a wave at a time, and written in order. Each range reads every run
/// through its own cursor, whose buffers together stay within another quarter of `budget`.
pub(super) fn merge_and_write(
    dir: &Path,
    runs: &[SortedRun],
    norms: &[u8],
    budget: usize,
) -> Result<u64> {
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
pub(in crate::bm25) fn write_terms(
    dir: &Path,
    num_terms: u64,
    entries: &[u8],
    texts: &[u8],
) -> Result<()> {
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
pub(in crate::bm25) fn write_docs(dir: &Path, norms: &[u8], sorted: &[u32]) -> Result<()> {
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
