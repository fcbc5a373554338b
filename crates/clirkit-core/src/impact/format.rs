//! The on-disk layout of an impact index directory; each file a checked `io::format` file,
//! memory-mapped on open.
//! - `terms.bin` (`IMPTERMS`): BM25's term dictionary layout ([`crate::postings::termdict`]).
//! - `postings.bin` (`IMPPOSTS`): per term, its block-max postings ([`crate::postings`]), each
//!   posting's value its integer impact, then 8 zero bytes of padding.
//! - `docs.bin` (`IMPDOCS`): `n u64` · `rank [u32; n]`, each document's position in byte order
//!   of its string id (the top-k's tie key).
//! - `ids.bin`: the [`crate::ids::IdTable`].

use crate::io::format::Kind;
use crate::io::manifest::{manifest_of, Layout};
use serde::{Deserialize, Serialize};

pub const FORMAT: &str = "clirkit-impact";
pub const VERSION: u64 = 2;
pub const FILE_VERSION: u32 = 1;
pub const TERMS_KIND: Kind = *b"IMPTERMS";
pub const POSTINGS_KIND: Kind = *b"IMPPOSTS";
pub const DOCS_KIND: Kind = *b"IMPDOCS\0";
pub use crate::postings::termdict::{DOCS_FILE, IDS_FILE, POSTINGS_FILE, TERMS_FILE};

pub const TERM_FILES: crate::postings::termdict::TermFileKinds =
    crate::postings::termdict::TermFileKinds {
        terms: TERMS_KIND,
        postings: POSTINGS_KIND,
        version: FILE_VERSION,
    };

/// An impact index's `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactManifest {
    pub format: String,
    pub version: u64,
    pub num_docs: u64,
    pub num_terms: u64,
    pub num_postings: u64,
    /// Impacts are `round(weight × quantize)`; query weights are quantized the same way.
    pub quantize: u32,
    pub max_impact: u32,
    pub build: ImpactBuildRecord,
}

/// How an impact index was built (recorded, not read back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactBuildRecord {
    pub vectors: String,
    /// Weighted terms left out because their impact rounded to 0.
    pub zero_impact_terms_dropped: u64,
}

manifest_of!(ImpactManifest, FORMAT, VERSION);

/// An impact index's files, for `verify`: an inverted index's, under the impact kinds.
#[rustfmt::skip]
pub const LAYOUT: Layout = crate::ids::layout_with_ids!(FORMAT, VERSION, FILE_VERSION, [
    (TERMS_FILE, TERMS_KIND), (POSTINGS_FILE, POSTINGS_KIND), (DOCS_FILE, DOCS_KIND),
]);
