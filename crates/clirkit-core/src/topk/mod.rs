//! Bounded top-k selection: every search's one home for keeping its best hits, the selections
//! side by side as FAISS keeps its heap and reservoir result handlers in `ResultHandler.h`.
//!
//! Every search ranks by one total order ([`order`]): higher score first, then a tie rule given
//! as a type parameter ([`TieRule`]):
//! - [`LowerIdFirst`] (dense and multi-vector search, fast-scan slots): the lower internal id first;
//! - [`HigherKeyFirst`] (BM25 and impact search): the higher key first; the key is the
//!   document's position in byte order of the string ids, so ties come out in canonical order
//!   (doc id descending).
//!
//! The same order packed into one `u64` ([`Hit::packed`]: the score's order bits above the tie
//! bits) is what the selections that compare integers keep. Because the order is total, the
//! top-k of a collection equals the merge of the top-k of any partition of it, so results do
//! not depend on the thread count or the selection used; each selection is tested to keep the
//! heap's hits. The selections:
//! - [`heap`] ([`TopK`]): a binary heap whose k-th best is exact after every push, for scans that
//!   filter candidates against it and for merging per-thread results ([`merge_slices`]);
//! - [`buffer`] ([`BufferTopK`]): a buffer of 2k packed hits cut back to k, its threshold
//!   lagging, tie keys looked up lazily ([`TieKeys`]): document-at-a-time search above a small k;
//! - [`reservoir`] ([`Reservoir`]): a buffer of a few counts of packed (quantized score, slot)
//!   hits fed by a SIMD kernel's threshold, slots arriving in increasing order: 4-bit fast-scan;
//! - [`array`] ([`select_positive`]): the best k of a dense score accumulator (exhaustive
//!   scoring), by one selection and one sort of packed hits.

pub mod array;
pub mod buffer;
pub mod heap;
pub mod order;
pub mod reservoir;

pub use array::select_positive;
pub use buffer::{BufferTopK, TieKeys};
pub use heap::{merge_slices, TopK};
pub use order::{pack, score_bits_of, HigherKeyFirst, Hit, LowerIdFirst, Score, TieRule};
pub use reservoir::Reservoir;
