//! The on-disk layout of an impact index directory; each file a checked `io::format` file,
//! memory-mapped on open.
//! - `terms.bin` (`IMPTERMS`): BM25's term dictionary layout ([`crate::postings::termdict`]).
//! - `postings.bin` (`IMPPOSTS`): per term, its block-max postings ([`crate::postings`]), each
//!   posting's value its integer impact, then 8 zero bytes of padding.
//! - `docs.bin` (`IMPDOCS`): `n u64` · `rank [u32; n]`, each document's position in byte order
//!   of its string id (the top-k's tie key).
//! - `ids.bin`: the [`crate::ids::IdTable`].

use crate::io::format::Kind;

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
