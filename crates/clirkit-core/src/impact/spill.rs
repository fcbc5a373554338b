//! Postings of an impact build held in memory up to a budget, then spilled to disk as sorted runs.
//!
//! Documents arrive in order, so every posting of a run precedes every posting of the next one: a
//! term's list is its pieces from each run in order, then what is still in memory. A run file holds
//! each term's `(doc, impact)` pairs (little-endian u32s) one term after another, in the order of the
//! terms' build numbers, with an index of (term, offset, count) kept in memory; the final merge reads a
//! term's pieces with positioned reads (never a mapping, so the resident set stays the budget's), a
//! bounded slice of terms at a time. A term's list is the same whether or not anything was spilled, so
//! the files are too (tested byte for byte).

use crate::error::{IoContext, Result};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Bytes one posting takes in memory and in a run.
pub(super) const POSTING_BYTES: usize = 8;

/// Postings of the terms seen so far, in document order, with the memory their lists hold.
#[derive(Default)]
pub(super) struct Postings {
    pub term_ids: FxHashMap<String, u32>,
    pub lists: Vec<Vec<(u32, u32)>>,
    /// Bytes the lists' buffers hold (their capacities).
    held: usize,
}

impl Postings {
    pub fn add(&mut self, term: &str, doc: u32, impact: u32) {
        let id = match self.term_ids.get(term) {
            Some(&id) => id,
            None => {
                let id = self.lists.len() as u32;
                self.term_ids.insert(term.to_string(), id);
                self.lists.push(Vec::new());
                id
            }
        };
        let list = &mut self.lists[id as usize];
        let before = list.capacity();
        list.push((doc, impact));
        self.held += (list.capacity() - before) * POSTING_BYTES;
    }

    pub fn held_bytes(&self) -> usize {
        self.held
    }
}

/// One spilled run: its file and, by term number, where each term's pieces are.
struct Run {
    path: PathBuf,
    file: Mutex<File>,
    /// (term, offset in postings, count), in increasing term order.
    entries: Vec<(u32, u64, u32)>,
}

/// The runs spilled so far, in document order.
#[derive(Default)]
pub(super) struct Runs {
    runs: Vec<Run>,
}

impl Runs {
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Write the postings held in memory as the next run under `dir` and empty them (the term
    /// numbers stay).
    pub fn spill(&mut self, dir: &Path, postings: &mut Postings) -> Result<()> {
        let path = dir.join(format!("spill-{}.tmp", self.runs.len()));
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&path).at(&path)?);
        let mut entries = Vec::new();
        let mut offset = 0u64;
        for (term, list) in postings.lists.iter_mut().enumerate() {
            if list.is_empty() {
                continue;
            }
            for &(doc, impact) in list.iter() {
                w.write_all(&doc.to_le_bytes()).at(&path)?;
                w.write_all(&impact.to_le_bytes()).at(&path)?;
            }
            entries.push((term as u32, offset, list.len() as u32));
            offset += list.len() as u64;
            *list = Vec::new();
        }
        postings.held = 0;
        w.flush().at(&path)?;
        drop(w);
        let file = Mutex::new(File::open(&path).at(&path)?);
        self.runs.push(Run {
            path,
            file,
            entries,
        });
        Ok(())
    }

    /// How many postings of `term` the runs hold.
    pub fn count(&self, term: u32) -> usize {
        self.runs
            .iter()
            .filter_map(|r| r.entry(term))
            .map(|(_, n)| n as usize)
            .sum()
    }

    /// Append `term`'s pieces, run after run, to `out`.
    pub fn read(&self, term: u32, out: &mut Vec<(u32, u32)>) -> Result<()> {
        let mut bytes = Vec::new();
        for run in &self.runs {
            let Some((offset, count)) = run.entry(term) else {
                continue;
            };
            bytes.resize(count as usize * POSTING_BYTES, 0);
            {
                let mut file = run.file.lock().unwrap_or_else(|e| e.into_inner());
                file.seek(SeekFrom::Start(offset * POSTING_BYTES as u64))
                    .at(&run.path)?;
                file.read_exact(&mut bytes).at(&run.path)?;
            }
            out.extend(bytes.chunks_exact(POSTING_BYTES).map(|p| {
                (
                    u32::from_le_bytes(p[..4].try_into().unwrap()),
                    u32::from_le_bytes(p[4..].try_into().unwrap()),
                )
            }));
        }
        Ok(())
    }

    /// Delete the run files.
    pub fn remove(self) -> Result<()> {
        for run in self.runs {
            drop(run.file);
            std::fs::remove_file(&run.path).at(&run.path)?;
        }
        Ok(())
    }
}

impl Run {
    fn entry(&self, term: u32) -> Option<(u64, u32)> {
        self.entries
            .binary_search_by_key(&term, |e| e.0)
            .ok()
            .map(|i| (self.entries[i].1, self.entries[i].2))
    }
}
