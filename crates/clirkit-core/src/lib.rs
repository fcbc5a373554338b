//! clirkit-core: the pure-Rust engine behind clirkit.
//!
//! Data flows one way: text -> [`text`] analysis -> [`bm25`] / [`dense`] indexes -> [`ranking`]s ->
//! [`fusion`] -> [`rerank`] -> [`eval`]. Every stage speaks two currencies: a [`ranking::Run`]
//! (per query, doc ids with scores in canonical order) and qrels. No PyO3 here: the bindings
//! live in `clirkit-py`, so this crate is usable from Rust alone and from `cargo bench`.

pub mod bm25;
pub mod dense;
pub mod encode;
pub mod error;
pub mod eval;
pub mod fusion;
#[cfg(test)]
mod fuzz;
pub mod ids;
pub mod impact;
pub mod index_kinds;
pub mod io;
pub mod multivector;
pub mod options;
pub mod parallel;
pub mod passages;
pub mod postings;
pub mod progress;
pub mod ranking;
pub mod rerank;
pub mod rng;
pub mod sharded;
pub mod text;
pub mod topk;

pub use error::{Error, Result};
