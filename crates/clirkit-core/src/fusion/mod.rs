//! Fusion of several runs into one: reciprocal rank fusion ([`rrf`]), CombSUM ([`combsum`]),
//! CombMNZ ([`combmnz`]) and weighted interpolation ([`interpolate`]) of per-query normalized
//! scores ([`normalize`]).
//!
//! All methods work on [`RunLists`], the common input type: a run held compactly (one flat array
//! of (16-byte id key, score) entries; ids longer than 15 bytes and query ids in one byte arena)
//! with every query's documents in canonical order, so "rank" always means the 1-based position
//! in canonical order. It is read
//! straight from a TREC file by a specialized parallel parser ([`run_file`]), or built from a
//! [`Run`](crate::ranking::Run). Fusion is parallel over queries and its result does not depend
//! on the thread count: every query is fused independently, contributions are added in run
//! order, and the output is sorted canonically.
//!
//! Where things are:
//! - `run_lists.rs`: [`RunLists`], its builder and allocation helpers;
//! - `driver.rs`: [`FusionOptions`], [`fuse`], [`fuse_runs`] and [`fuse_to_file`] (the parallel
//!   driver, and fusing pipelined with writing);
//! - `accumulator.rs`, `order.rs`, `id_key.rs`: per-query accumulation, canonical ordering of a
//!   fused list, and the compact id keys;
//! - one file per method; `tests.rs`: the methods against a naive reference.

mod accumulator;
pub mod combmnz;
pub mod combsum;
mod driver;
mod id_key;
pub mod interpolate;
pub mod method_name;
pub mod normalize;
mod order;
pub mod rrf;
pub mod run_file;
mod run_lists;

pub use driver::{fuse, fuse_runs, fuse_to_file, FusionOptions, Method};
pub use run_lists::{RunLists, RunListsBuilder};

// The run file reader builds `RunLists` from its parts.
pub(crate) use run_lists::{
    first_duplicate, sort_entries, zeroed_entries, DocEntry, QueryEntry, Span,
};

#[cfg(test)]
mod tests;
