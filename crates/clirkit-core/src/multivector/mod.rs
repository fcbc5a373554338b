//! Multi-vector late interaction (ColBERT scoring, PLAID-style index), without PyTorch.
//!
//! A document (or passage) is a matrix of token vectors; a query is one too. The score of a document
//! for a query is MaxSim: the sum over query tokens of the best inner product with any document token.
//!
//! - [`tokens`]: [`TokenMatrix`], the token vectors of many documents back to back with offsets, as
//!   `clirkit encode --multivector` writes them, checked on the way in.
//! - [`exact`]: exhaustive exact MaxSim, the reference and the small-collection path.
//! - [`codec`]: PLAID's residual codec: each token is its nearest centroid plus a residual quantized
//!   to 1, 2 or 4 bits per dimension by global quantile buckets.
//! - [`parts`]: [`TokenParts`], what a build reads: one or more parts (a matrix in memory, or `.npy`
//!   token files read a chunk at a time), each with its items and the items kept, as one collection.
//! - [`build`]: centroids by k-means over a seeded token sample, codes, residuals, and the inverted
//!   lists (centroid -> documents holding a token of it).
//! - [`format`]: the index directory (manifest `clirkit-multivector` v1), checked memory-mapped files.
//! - [`search`]: PLAID's stages: candidate generation by centroid interaction, approximate scores from
//!   centroid scores alone (pruned, then full), exact MaxSim over decompressed residuals for the
//!   shortlist; passages aggregated to documents by MaxP.

pub mod build;
pub mod codec;
pub mod exact;
pub mod format;
mod matmul;
pub mod parts;
pub mod search;
#[cfg(test)]
mod tests;
pub mod tokens;

pub use build::BuildOptions;
pub use exact::Hits;
pub use format::MultiVectorIndex;
pub use parts::{TokenPart, TokenParts};
pub use search::SearchOptions;
pub use tokens::TokenMatrix;
