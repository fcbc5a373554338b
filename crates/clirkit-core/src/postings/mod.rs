//! Block-max postings, independent of any scoring model: the codec ([`codec`]) that writes and
//! reads a term's postings in blocks with skip and bound metadata, and the [`Cursor`] that walks
//! them. What a posting's value means is the [`PostingScorer`]'s business: BM25 reads term
//! frequencies and document norms, an impact-scored index would read stored impacts.

pub mod codec;
pub mod cursor;
mod unpack;

pub use codec::{
    encode_postings, BlockMeta, BLOCK_LEN, BLOCK_META_LEN, MAX_BLOCK_DATA_LEN, POSTINGS_PADDING,
};
pub use cursor::{postings_intact, Cursor, PostingScorer, TermPostings, END};
