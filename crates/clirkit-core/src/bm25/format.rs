//! The on-disk layout of a BM25 index directory.
//!
//! Files (each a checked `io::format` file, memory-mapped on open):
//! - `terms.bin` (`BM25TERM`): `n u64` · `entries [TermEntry; n]` (sorted by term bytes, so the
//!   dictionary is binary-searchable in place) · the term strings back to back.
//! - `terms.bin` and `postings.bin` follow the inverted-index layout of [`crate::postings::termdict`].
//! - `postings.bin` (`BM25POST`): per term, its block-max postings ([`crate::postings`]: block
//!   metadata then the blocks' data), each posting's value its term frequency; 8 zero bytes at
//!   the end let the decoder read whole little-endian words without bounds checks.
//! - `docs.bin` (`BM25DOCS`): `n u64` · one-byte Lucene norms `[u8; n]` · zero padding to 4 ·
//!   `rank [u32; n]`, each document's position in byte order of its string id, so ties are
//!   broken by a number comparison in the top-k heap.
//! - `ids.bin`: the [`crate::ids::IdTable`].
//! - `blockmax.bin` (`BM25BMAX`, optional): each block's largest BM25 score for the index's own
//!   k1, b and avgdl ([`super::block_maxima`]).
//!
//! A block's max tf and min norm bound every BM25 score in it, whatever k1 and b: the bound
//! searches use when `blockmax.bin` is absent or was computed for other parameters.

use crate::io::format::Kind;
use crate::io::manifest::manifest_of;
use crate::postings::termdict::TermFileKinds;
pub use crate::postings::termdict::{DOCS_FILE, IDS_FILE, POSTINGS_FILE, TERMS_FILE};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const FORMAT: &str = "clirkit-bm25";
pub const VERSION: u64 = 2;
pub const FILE_VERSION: u32 = 1;
pub const TERMS_KIND: Kind = *b"BM25TERM";
pub const POSTINGS_KIND: Kind = *b"BM25POST";
pub const DOCS_KIND: Kind = *b"BM25DOCS";

pub const BM25_TERM_FILES: TermFileKinds = TermFileKinds {
    terms: TERMS_KIND,
    postings: POSTINGS_KIND,
    version: FILE_VERSION,
};

/// A BM25 index's `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bm25Manifest {
    pub format: String,
    pub version: u64,
    pub num_docs: u64,
    /// Documents with at least one term (Lucene's `docCount`).
    pub doc_count: u64,
    pub sum_total_term_freq: u64,
    pub avgdl: f32,
    pub num_terms: u64,
    pub languages: Vec<String>,
    /// Language code -> the id (name and version) of the analyzer the index was built with.
    pub analyzers: BTreeMap<String, String>,
    pub lang_field: Option<String>,
    pub fields: Vec<String>,
    pub k1: f32,
    pub b: f32,
    pub build: Bm25BuildRecord,
    /// Whether `docvectors.bin` (the forward index RM3 needs) was written; absent when not, so
    /// the manifests of indexes without it are unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub docvectors: bool,
}

/// How a BM25 index was built (recorded, not read back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bm25BuildRecord {
    pub corpus: String,
    pub keep_first_duplicate: bool,
    pub skipped_duplicates: u64,
    pub memory_budget_bytes: u64,
    pub spilled_runs: u64,
}

manifest_of!(Bm25Manifest, FORMAT, VERSION);
