//! Each document's position in byte order of its string id (`rank [u32; n]` at the end of an
//! inverted index's `docs.bin`): the top-k's tie key, so that exact score ties come out in
//! canonical order (doc id descending) by a number comparison.

use crate::topk::TieKeys;

/// The ranks of a mapped `docs.bin`, read in place.
#[derive(Clone, Copy)]
pub struct DocRanks<'a> {
    bytes: &'a [u8],
}

impl<'a> DocRanks<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        DocRanks { bytes }
    }

    pub fn num_docs(&self) -> usize {
        self.bytes.len() / 4
    }

    #[inline]
    pub fn rank(&self, doc: u32) -> u32 {
        let at = doc as usize * 4;
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap())
    }
}

impl TieKeys for DocRanks<'_> {
    #[inline(always)]
    fn key(&self, doc: u32) -> u32 {
        self.rank(doc)
    }
}

/// Each document's rank in id byte order (`sorted`: documents in id order), as little-endian
/// `u32`s: the top-k's tie key, as `docs.bin` stores it.
pub fn rank_bytes(sorted: &[u32]) -> Vec<u8> {
    let mut rank = vec![0u32; sorted.len()];
    for (position, &doc) in sorted.iter().enumerate() {
        rank[doc as usize] = position as u32;
    }
    rank.iter().flat_map(|r| r.to_le_bytes()).collect()
}
