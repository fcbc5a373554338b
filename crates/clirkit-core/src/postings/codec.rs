//! The block-max postings codec. A term's postings are `[BlockMeta; blocks]` followed by the
//! blocks' data. A block holds up to [`BLOCK_LEN`] postings: doc-id gaps then `value - 1`, each
//! bit-packed with the block's own width. Its `BlockMeta` keeps the last doc id (for skipping),
//! the block's largest value and smallest document norm (an upper bound on any score in it for a
//! scorer monotone in both), and where its data starts.
//!
//! A posting's value is what the scorer reads: the term frequency in a BM25 index, an integer
//! impact in an impact-scored one; the codec does not interpret it.

use super::bitpack::{bits_needed, pack, packed_len, unpack, unpack_docs_simd, unpack_values_simd};
use crate::io::format::read_u32;

pub use super::bitpack::BLOCK_LEN;
pub const BLOCK_META_LEN: usize = 16;
/// Zero bytes after the last block, so unpacking may read a full word past a block's end.
pub const POSTINGS_PADDING: usize = 8;
/// The most bytes one block's data (and the padding read past it) can span.
pub const MAX_BLOCK_DATA_LEN: usize = 2 * BLOCK_LEN * 4 + POSTINGS_PADDING;

/// Skip information for one block of postings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMeta {
    pub last_doc: u32,
    /// Offset of the block's data from the start of its term's data.
    pub offset: u32,
    /// The largest value in the block.
    pub max_value: u32,
    /// The smallest document norm in the block (from the `norms` given to the encoder).
    pub min_norm: u8,
    pub doc_bits: u8,
    pub value_bits: u8,
    /// Number of postings, 1..=128.
    pub len: u8,
}

impl BlockMeta {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.last_doc.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.max_value.to_le_bytes());
        out.extend_from_slice(&[self.min_norm, self.doc_bits, self.value_bits, self.len]);
    }

    #[inline]
    pub fn decode(bytes: &[u8], index: usize) -> Self {
        let at = index * BLOCK_META_LEN;
        BlockMeta {
            last_doc: read_u32(bytes, at),
            offset: read_u32(bytes, at + 4),
            max_value: read_u32(bytes, at + 8),
            min_norm: bytes[at + 12],
            doc_bits: bytes[at + 13],
            value_bits: bytes[at + 14],
            len: bytes[at + 15],
        }
    }

    /// Whether this block holds what the encoder writes (1..=128 postings, widths of at most 32
    /// bits) and its data, with the padding the decoder reads past it, ends within `data_len`
    /// bytes: the decoder indexes without checks, so a crafted file is refused before it.
    pub fn fits(&self, data_len: usize) -> bool {
        let n = self.len as usize;
        (1..=BLOCK_LEN).contains(&n)
            && self.doc_bits <= 32
            && self.value_bits <= 32
            && self.offset as usize
                + packed_len(n, self.doc_bits)
                + packed_len(n, self.value_bits)
                + POSTINGS_PADDING
                <= data_len
    }
}

/// Encode one term's postings (doc ids strictly increasing, values >= 1) into block metadata
/// followed by block data; `norms` gives each doc's norm for the blocks' bounds.
pub fn encode_postings(docs: &[u32], values: &[u32], norms: &[u8], out: &mut Vec<u8>) -> u32 {
    debug_assert_eq!(docs.len(), values.len());
    let blocks = docs.len().div_ceil(BLOCK_LEN);
    let meta_start = out.len();
    out.resize(meta_start + blocks * BLOCK_META_LEN, 0);
    let data_start = out.len();
    let mut metas = Vec::with_capacity(blocks * BLOCK_META_LEN);
    let mut gaps = [0u32; BLOCK_LEN];
    let mut value_minus_one = [0u32; BLOCK_LEN];
    let mut prev = u32::MAX; // so the first gap is doc - 0 after wrapping
    for (b, (doc_chunk, value_chunk)) in docs
        .chunks(BLOCK_LEN)
        .zip(values.chunks(BLOCK_LEN))
        .enumerate()
    {
        let n = doc_chunk.len();
        let mut max_gap = 0;
        let mut max_value = 0;
        let mut min_norm = u8::MAX;
        for i in 0..n {
            gaps[i] = doc_chunk[i].wrapping_sub(prev).wrapping_sub(1);
            prev = doc_chunk[i];
            max_gap = max_gap.max(gaps[i]);
            value_minus_one[i] = value_chunk[i] - 1;
            max_value = max_value.max(value_chunk[i]);
            min_norm = min_norm.min(norms[doc_chunk[i] as usize]);
        }
        let meta = BlockMeta {
            last_doc: prev,
            offset: (out.len() - data_start) as u32,
            max_value,
            min_norm,
            doc_bits: bits_needed(max_gap),
            value_bits: bits_needed(max_value - 1),
            len: n as u8,
        };
        debug_assert!(b < blocks);
        pack(&gaps[..n], meta.doc_bits, out);
        pack(&value_minus_one[..n], meta.value_bits, out);
        meta.encode(&mut metas);
    }
    out[meta_start..data_start].copy_from_slice(&metas);
    blocks as u32
}

/// Decode one block's doc ids (given the previous block's last doc, `u32::MAX` before the
/// first block) into `docs`. Whether they rise from there and end at the block's last doc, as
/// the encoder writes them: only then do they all lie in the range the block metadata states
/// (a crafted block with recomputed CRCs can decode to anything).
#[inline]
#[must_use]
pub fn decode_docs(
    data: &[u8],
    meta: &BlockMeta,
    prev_last: u32,
    docs: &mut [u32; BLOCK_LEN],
) -> bool {
    // A full block through the SIMD kernel, whose wrapping sums are the true documents when
    // the last one is the block's and lies at or after the first possible one: the steps sum
    // below 2^31, so a sum that wrapped would end below that. Anything else (a crafted block
    // included) is decoded again below, so the answer is always the scalar decoder's.
    let first = prev_last.wrapping_add(1);
    if meta.len as usize == BLOCK_LEN
        && unpack_docs_simd(
            &data[meta.offset as usize..],
            meta.doc_bits,
            prev_last,
            docs,
        )
        && docs[BLOCK_LEN - 1] == meta.last_doc
        && meta.last_doc >= first
    {
        return true;
    }
    decode_docs_scalar(data, meta, prev_last, docs)
}

/// [`decode_docs`] one document at a time, for every block.
#[must_use]
fn decode_docs_scalar(
    data: &[u8],
    meta: &BlockMeta,
    prev_last: u32,
    docs: &mut [u32; BLOCK_LEN],
) -> bool {
    let n = meta.len as usize;
    unpack(&data[meta.offset as usize..], meta.doc_bits, &mut docs[..n]);
    // Summed in 64 bits, so a crafted gap cannot wrap around to a smaller document.
    let mut next = prev_last.wrapping_add(1) as u64;
    for d in docs[..n].iter_mut() {
        let doc = next + *d as u64;
        *d = doc as u32;
        next = doc + 1;
    }
    next == meta.last_doc as u64 + 1
}

/// Decode one block's values into `values`.
#[inline]
pub fn decode_values(data: &[u8], meta: &BlockMeta, values: &mut [u32; BLOCK_LEN]) {
    let n = meta.len as usize;
    let start = meta.offset as usize + packed_len(n, meta.doc_bits);
    if n == BLOCK_LEN && unpack_values_simd(&data[start..], meta.value_bits, values) {
        return;
    }
    unpack(&data[start..], meta.value_bits, &mut values[..n]);
    for t in values[..n].iter_mut() {
        *t += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_round_trip() {
        let docs: Vec<u32> = (0..1000u32).map(|i| i * 7 + (i % 5)).collect();
        let tfs: Vec<u32> = (0..1000u32).map(|i| 1 + (i * 31) % 17).collect();
        let norms: Vec<u8> = (0..8000u32).map(|i| (i % 200) as u8).collect();
        let mut buf = Vec::new();
        let blocks = encode_postings(&docs, &tfs, &norms, &mut buf) as usize;
        buf.extend_from_slice(&[0; POSTINGS_PADDING]);
        assert_eq!(blocks, 8);
        let data = &buf[blocks * BLOCK_META_LEN..];
        let mut prev = u32::MAX;
        let (mut d, mut t) = ([0u32; BLOCK_LEN], [0u32; BLOCK_LEN]);
        for b in 0..blocks {
            let meta = BlockMeta::decode(&buf, b);
            assert!(decode_docs(data, &meta, prev, &mut d));
            decode_values(data, &meta, &mut t);
            let n = meta.len as usize;
            let range = b * BLOCK_LEN..b * BLOCK_LEN + n;
            assert_eq!(&d[..n], &docs[range.clone()]);
            assert_eq!(&t[..n], &tfs[range.clone()]);
            assert_eq!(meta.max_value, *tfs[range.clone()].iter().max().unwrap());
            let min_norm = docs[range]
                .iter()
                .map(|&x| norms[x as usize])
                .min()
                .unwrap();
            assert_eq!(meta.min_norm, min_norm);
            prev = meta.last_doc;
        }
    }

    #[test]
    fn a_block_decoding_past_its_last_doc_is_found() {
        let docs = [3u32, 9, 40];
        let mut buf = Vec::new();
        encode_postings(&docs, &[1, 1, 1], &[0; 64], &mut buf);
        buf.extend_from_slice(&[0; POSTINGS_PADDING]);
        let data = &buf[BLOCK_META_LEN..];
        let mut meta = BlockMeta::decode(&buf, 0);
        let mut d = [0u32; BLOCK_LEN];
        assert!(decode_docs(data, &meta, u32::MAX, &mut d));
        // Metadata that claims an earlier last document than the gaps reach.
        meta.last_doc = 39;
        assert!(!decode_docs(data, &meta, u32::MAX, &mut d));
        // Gaps that would wrap around past u32::MAX back into range.
        meta.last_doc = 40;
        assert!(!decode_docs(data, &meta, u32::MAX - 1, &mut d));
    }

    /// Full blocks (the SIMD decoder's) decode as the scalar decoder does at every width: with
    /// their true last document, a wrong one, and the one the sums reach only by wrapping past
    /// u32::MAX, which both must refuse.
    #[test]
    fn full_blocks_decode_as_the_scalar_decoder_does() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for bits in 1..=32u8 {
            let most = u32::MAX >> (32 - bits);
            for pattern in 0..2 {
                let gaps: Vec<u32> = (0..BLOCK_LEN)
                    .map(|_| match pattern {
                        0 => most,
                        _ => {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            state as u32 & most
                        }
                    })
                    .collect();
                let mut data = Vec::new();
                super::super::bitpack::pack(&gaps, bits, &mut data);
                // Room for the SIMD decoder's reads past the data at every width.
                data.resize(data.len() + 64, 0);
                let sum: u64 = gaps.iter().map(|&g| g as u64 + 1).sum();
                for prev_last in [u32::MAX, 0, 77_777, u32::MAX - 1000, u32::MAX - (1 << 30)] {
                    let last = prev_last.wrapping_add(1) as u64 + sum - 1;
                    let mut refused = 0;
                    for last_doc in [last as u32, (last as u32).wrapping_add(1)] {
                        let meta = BlockMeta {
                            last_doc,
                            offset: 0,
                            max_value: 1,
                            min_norm: 0,
                            doc_bits: bits,
                            value_bits: 0,
                            len: BLOCK_LEN as u8,
                        };
                        let (mut fast, mut slow) = ([0u32; BLOCK_LEN], [1u32; BLOCK_LEN]);
                        let ok = decode_docs(&data, &meta, prev_last, &mut fast);
                        assert_eq!(ok, decode_docs_scalar(&data, &meta, prev_last, &mut slow));
                        if ok {
                            assert_eq!(fast, slow, "bits {bits} from {prev_last}");
                        } else {
                            refused += 1;
                        }
                    }
                    // The true last document is refused only when the sums pass u32::MAX.
                    assert_eq!(refused, if last > u32::MAX as u64 { 2 } else { 1 });
                }
            }
        }
    }
}
