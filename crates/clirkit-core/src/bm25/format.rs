//! The on-disk layout of a BM25 index directory and the postings codec.
//!
//! Files (each a checked `io::format` file, memory-mapped on open):
//! - `terms.bin` (`BM25TERM`): `n u64` · `entries [TermEntry; n]` (sorted by term bytes, so the
//!   dictionary is binary-searchable in place) · the term strings back to back.
//! - `postings.bin` (`BM25POST`): per term, `[BlockMeta; blocks]` then the blocks' data; 8 zero
//!   bytes at the end let the decoder read whole little-endian words without bounds checks.
//! - `docs.bin` (`BM25DOCS`): `n u64` · one-byte Lucene norms `[u8; n]` · zero padding to 4 ·
//!   `rank [u32; n]`, each document's position in byte order of its string id, so ties are
//!   broken by a number comparison in the top-k heap.
//! - `ids.bin`: the [`crate::ids::IdTable`].
//!
//! A block holds up to [`BLOCK_LEN`] postings: doc-id gaps then `tf - 1`, each bit-packed with
//! the block's own width. Its `BlockMeta` keeps the last doc id (for skipping) and the block's
//! max tf and min norm (an upper bound on any score in it, whatever k1 and b).

use crate::error::{Error, Result};
use crate::io::format::{read_u32, read_u64, Kind};

pub const FORMAT: &str = "clirkit-bm25";
pub const VERSION: u64 = 1;
pub const FILE_VERSION: u32 = 1;
pub const TERMS_KIND: Kind = *b"BM25TERM";
pub const POSTINGS_KIND: Kind = *b"BM25POST";
pub const DOCS_KIND: Kind = *b"BM25DOCS";
pub const TERMS_FILE: &str = "terms.bin";
pub const POSTINGS_FILE: &str = "postings.bin";
pub const DOCS_FILE: &str = "docs.bin";
pub const IDS_FILE: &str = "ids.bin";

pub const BLOCK_LEN: usize = 128;
pub const BLOCK_META_LEN: usize = 16;
pub const TERM_ENTRY_LEN: usize = 32;
/// Zero bytes after the last block, so unpacking may read a full word past a block's end.
pub const POSTINGS_PADDING: usize = 8;

/// Skip information for one block of postings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMeta {
    pub last_doc: u32,
    /// Offset of the block's data from the start of its term's data.
    pub offset: u32,
    pub max_tf: u32,
    pub min_norm: u8,
    pub doc_bits: u8,
    pub tf_bits: u8,
    /// Number of postings, 1..=128.
    pub len: u8,
}

impl BlockMeta {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.last_doc.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.max_tf.to_le_bytes());
        out.extend_from_slice(&[self.min_norm, self.doc_bits, self.tf_bits, self.len]);
    }

    #[inline]
    pub fn decode(bytes: &[u8], index: usize) -> Self {
        let at = index * BLOCK_META_LEN;
        BlockMeta {
            last_doc: read_u32(bytes, at),
            offset: read_u32(bytes, at + 4),
            max_tf: read_u32(bytes, at + 8),
            min_norm: bytes[at + 12],
            doc_bits: bytes[at + 13],
            tf_bits: bytes[at + 14],
            len: bytes[at + 15],
        }
    }
}

/// A term's dictionary entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermEntry {
    /// Where the term's bytes start in the string blob, and their length.
    pub text_offset: u64,
    pub text_len: u32,
    pub doc_freq: u32,
    /// Where the term's block metadata starts in the postings payload.
    pub postings_offset: u64,
    pub blocks: u32,
}

impl TermEntry {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.text_offset.to_le_bytes());
        out.extend_from_slice(&self.text_len.to_le_bytes());
        out.extend_from_slice(&self.doc_freq.to_le_bytes());
        out.extend_from_slice(&self.postings_offset.to_le_bytes());
        out.extend_from_slice(&self.blocks.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
    }

    #[inline]
    pub fn decode(bytes: &[u8], at: usize) -> Self {
        TermEntry {
            text_offset: read_u64(bytes, at),
            text_len: read_u32(bytes, at + 8),
            doc_freq: read_u32(bytes, at + 12),
            postings_offset: read_u64(bytes, at + 16),
            blocks: read_u32(bytes, at + 24),
        }
    }
}

fn bits_needed(max: u32) -> u8 {
    (32 - max.leading_zeros()) as u8
}

/// Append `values` bit-packed with `bits` bits each (little endian bit order).
fn pack(values: &[u32], bits: u8, out: &mut Vec<u8>) {
    if bits == 0 {
        return;
    }
    let mut acc: u64 = 0;
    let mut filled = 0u32;
    for &v in values {
        acc |= (v as u64) << filled;
        filled += bits as u32;
        while filled >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            filled -= 8;
        }
    }
    if filled > 0 {
        out.push(acc as u8);
    }
}

fn packed_len(count: usize, bits: u8) -> usize {
    (count * bits as usize).div_ceil(8)
}

/// Unpack `out.len()` values of `bits` bits each from `bytes`, which must extend at least 8
/// bytes past the packed data (the postings file's padding guarantees it).
#[inline]
fn unpack(bytes: &[u8], bits: u8, out: &mut [u32]) {
    if bits == 0 {
        out.fill(0);
        return;
    }
    let mask = (1u64 << bits) - 1;
    let need = packed_len(out.len(), bits) + 8;
    let bytes = &bytes[..need];
    let mut bit = 0usize;
    for slot in out.iter_mut() {
        let byte = bit >> 3;
        let word = u64::from_le_bytes(bytes[byte..byte + 8].try_into().unwrap());
        *slot = ((word >> (bit & 7)) & mask) as u32;
        bit += bits as usize;
    }
}

/// Encode one term's postings (doc ids strictly increasing, tfs >= 1) into block metadata
/// followed by block data; `norms` gives each doc's norm for the blocks' bounds.
pub fn encode_postings(docs: &[u32], tfs: &[u32], norms: &[u8], out: &mut Vec<u8>) -> u32 {
    debug_assert_eq!(docs.len(), tfs.len());
    let blocks = docs.len().div_ceil(BLOCK_LEN);
    let meta_start = out.len();
    out.resize(meta_start + blocks * BLOCK_META_LEN, 0);
    let data_start = out.len();
    let mut metas = Vec::with_capacity(blocks * BLOCK_META_LEN);
    let mut gaps = [0u32; BLOCK_LEN];
    let mut tf_minus_one = [0u32; BLOCK_LEN];
    let mut prev = u32::MAX; // so the first gap is doc - 0 after wrapping
    for (b, (doc_chunk, tf_chunk)) in docs
        .chunks(BLOCK_LEN)
        .zip(tfs.chunks(BLOCK_LEN))
        .enumerate()
    {
        let n = doc_chunk.len();
        let mut max_gap = 0;
        let mut max_tf = 0;
        let mut min_norm = u8::MAX;
        for i in 0..n {
            gaps[i] = doc_chunk[i].wrapping_sub(prev).wrapping_sub(1);
            prev = doc_chunk[i];
            max_gap = max_gap.max(gaps[i]);
            tf_minus_one[i] = tf_chunk[i] - 1;
            max_tf = max_tf.max(tf_chunk[i]);
            min_norm = min_norm.min(norms[doc_chunk[i] as usize]);
        }
        let meta = BlockMeta {
            last_doc: prev,
            offset: (out.len() - data_start) as u32,
            max_tf,
            min_norm,
            doc_bits: bits_needed(max_gap),
            tf_bits: bits_needed(max_tf - 1),
            len: n as u8,
        };
        debug_assert!(b < blocks);
        pack(&gaps[..n], meta.doc_bits, out);
        pack(&tf_minus_one[..n], meta.tf_bits, out);
        meta.encode(&mut metas);
    }
    out[meta_start..data_start].copy_from_slice(&metas);
    blocks as u32
}

/// Decode one block's doc ids (given the previous block's last doc) into `docs`.
#[inline]
pub fn decode_docs(data: &[u8], meta: &BlockMeta, prev_last: u32, docs: &mut [u32; BLOCK_LEN]) {
    let n = meta.len as usize;
    unpack(&data[meta.offset as usize..], meta.doc_bits, &mut docs[..n]);
    let mut prev = prev_last;
    for d in docs[..n].iter_mut() {
        prev = prev.wrapping_add(*d).wrapping_add(1);
        *d = prev;
    }
}

/// Decode one block's term frequencies into `tfs`.
#[inline]
pub fn decode_tfs(data: &[u8], meta: &BlockMeta, tfs: &mut [u32; BLOCK_LEN]) {
    let n = meta.len as usize;
    let start = meta.offset as usize + packed_len(n, meta.doc_bits);
    unpack(&data[start..], meta.tf_bits, &mut tfs[..n]);
    for t in tfs[..n].iter_mut() {
        *t += 1;
    }
}

/// Check that a mapped payload is at least `len` bytes.
pub fn require_len(path: &std::path::Path, payload: &[u8], len: usize, what: &str) -> Result<()> {
    if payload.len() < len {
        return Err(Error::format(
            path,
            format!(
                "{what} is inconsistent: needs {len} bytes, has {}",
                payload.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_round_trip() {
        let docs: Vec<u32> = (0..1000u32).map(|i| i * 3 + (i % 7)).collect();
        let tfs: Vec<u32> = (0..1000u32).map(|i| 1 + (i * 31) % 17).collect();
        let norms: Vec<u8> = (0..4000u32).map(|i| (i % 200) as u8).collect();
        let mut buf = Vec::new();
        let blocks = encode_postings(&docs, &tfs, &norms, &mut buf) as usize;
        buf.extend_from_slice(&[0; POSTINGS_PADDING]);
        assert_eq!(blocks, 8);
        let data = &buf[blocks * BLOCK_META_LEN..];
        let mut prev = u32::MAX;
        let (mut d, mut t) = ([0u32; BLOCK_LEN], [0u32; BLOCK_LEN]);
        for b in 0..blocks {
            let meta = BlockMeta::decode(&buf, b);
            decode_docs(data, &meta, prev, &mut d);
            decode_tfs(data, &meta, &mut t);
            let n = meta.len as usize;
            let range = b * BLOCK_LEN..b * BLOCK_LEN + n;
            assert_eq!(&d[..n], &docs[range.clone()]);
            assert_eq!(&t[..n], &tfs[range.clone()]);
            assert_eq!(meta.max_tf, *tfs[range.clone()].iter().max().unwrap());
            let min_norm = docs[range]
                .iter()
                .map(|&x| norms[x as usize])
                .min()
                .unwrap();
            assert_eq!(meta.min_norm, min_norm);
            prev = meta.last_doc;
        }
    }
}
