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
//!
//! One file per concern: `options.rs` (what a build is asked and reports), `batches.rs` (reading,
//! parsing and numbering the corpus a batch at a time), `inversion.rs` (the workers' in-memory
//! indexes and the sorted runs spilled past the budget), `final_merge.rs` (the term-range merge
//! and encoding of the runs, and the `terms.bin`/`docs.bin` writers `merge.rs` shares), and
//! `build.rs` (the driver tying them together).

mod batches;
mod build;
mod final_merge;
mod inversion;
mod options;

pub use build::{build, build_cancellable, build_parts_cancellable};
pub(super) use final_merge::{write_docs, write_terms};
pub use options::{BuildOptions, BuildSummary, CorpusPart};
