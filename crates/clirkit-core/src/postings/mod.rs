//! The inverted-index layer, independent of any scoring model (tantivy keeps `termdict/`,
//! `postings/` and `query/` apart; PISA's query algorithms know only cursors and a top-k queue):
//! - [`bitpack`]: packing and unpacking values of a given bit width (full blocks with AVX2
//!   where the CPU has it);
//! - [`codec`]: a term's postings in blocks with skip and bound metadata;
//! - [`cursor`]: the [`Cursor`] that walks them, scoring through a [`PostingScorer`];
//! - [`termdict`]: the term dictionary (`terms.bin`) and the file names of an index directory;
//! - [`doc_ranks`]: each document's rank in id byte order, the top-k's tie key;
//! - [`query`]: the exact top-k algorithms (block-max MaxScore, block-max WAND, exhaustive).
//!
//! What a posting's value means is the [`PostingScorer`]'s business: BM25 reads term
//! frequencies and document norms, an impact-scored index reads stored impacts.

pub mod bitpack;
pub mod codec;
pub mod cursor;
pub mod doc_ranks;
pub mod query;
pub mod termdict;

pub use codec::{
    encode_postings, BlockMeta, BLOCK_LEN, BLOCK_META_LEN, MAX_BLOCK_DATA_LEN, POSTINGS_PADDING,
};
pub use cursor::{postings_intact, Cursor, PostingScorer, TermPostings, END};
