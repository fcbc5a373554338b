//! Inversion: one in-memory index per worker, filled from a batch's documents taken in small
//! pieces in increasing order, spilled as sorted runs past the memory budget.

use super::batches::Batch;
use crate::bm25::memory_index::{MemoryIndex, MAX_DOC_SPAN};
use crate::bm25::scoring::length_to_norm;
use crate::bm25::sorted_run::SortedRun;
use crate::error::Result;
use crate::text::Analyzer;
use rayon::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Documents a worker takes at a time: small enough to balance two threads under uneven load,
/// large enough that taking one costs nothing.
pub(super) const PIECE_DOCS: usize = 64;

/// Everything the build keeps per document, and the inverted indexes being filled.
pub(super) struct Accumulator {
    pub(super) dir: PathBuf,
    pub(super) budget: usize,
    pub(super) num_docs: usize,
    pub(super) norms: Vec<u8>,
    pub(super) sum_lengths: u64,
    pub(super) docs_with_terms: u64,
    /// One in-memory index per worker thread.
    pub(super) workers: Vec<MemoryIndex>,
    /// Runs spilled to files in the index directory.
    pub(super) runs: Vec<(PathBuf, SortedRun)>,
}

impl Accumulator {
    /// Number the documents in input order, analyze them and add their postings; spill sorted
    /// runs when the in-memory postings outgrow the budget.
    pub(super) fn add_batch(&mut self, batch: Batch, analyzers: &[Analyzer]) -> Result<()> {
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
    pub(super) fn spill(&mut self, next_doc: u32) -> Result<()> {
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
