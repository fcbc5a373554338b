//! Packed 4-bit codes. A block holds 32 vectors and `ceil(m / 4)` chunks of 64 bytes; chunk `g`
//! covers sub-quantizers `4g..4g+4` (missing ones are code 0 with an all-zero table). In a chunk,
//! byte `4t + j` holds the code of sub-quantizer `4g + j` for vector `t` in its low nibble and
//! for vector `t + 16` in its high nibble. A byte's position thus selects one of 4 tables of 16
//! entries, which is exactly a 64-byte `vpermb` table (AVX-512 VBMI); the AVX2 kernel regroups
//! the bytes per sub-quantizer with in-register shuffles.

/// Vectors per packed block.
pub const BLOCK: usize = 32;
// A block's hits reach the top-k reservoir as one `u32` mask and one array of scores.
const _: () = assert!(BLOCK == crate::topk::reservoir::BLOCK);
/// Queries per kernel call; LUTs of a query group are interleaved per chunk of 4 sub-quantizers.
pub const QUERY_GROUP: usize = 8;

/// Called by a kernel when some of a block's scores for query `q` exceed its threshold:
/// `(q, block, mask of those vectors, the 32 scores)`; returns the query's new threshold.
pub type Sink<'a> = dyn FnMut(usize, usize, u32, &[u32; BLOCK]) -> i32 + 'a;

/// Chunks of 4 sub-quantizers per block.
pub fn chunks(m: usize) -> usize {
    m.div_ceil(4)
}

/// Bytes per packed block of 32 vectors.
pub fn block_bytes(m: usize) -> usize {
    chunks(m) * 64
}

/// Append `codes` (`m` codes of 4 bits, one per byte, per vector) as packed blocks; the last
/// block is padded with code-0 vectors.
pub fn pack(codes: &[u8], m: usize, out: &mut Vec<u8>) {
    let n = codes.len() / m;
    let bb = block_bytes(m);
    for first in (0..n).step_by(BLOCK) {
        let start = out.len();
        out.resize(start + bb, 0);
        let block = &mut out[start..];
        for v in 0..BLOCK.min(n - first) {
            let code = &codes[(first + v) * m..(first + v + 1) * m];
            for (s, &c) in code.iter().enumerate() {
                let byte = &mut block[(s / 4) * 64 + 4 * (v % 16) + s % 4];
                if v < 16 {
                    *byte |= c & 0x0f;
                } else {
                    *byte |= (c & 0x0f) << 4;
                }
            }
        }
    }
}

/// Code of sub-quantizer `s` of vector `v` (0..32) in a packed block.
#[inline]
pub fn code_at(block: &[u8], v: usize, s: usize) -> u8 {
    let byte = block[(s / 4) * 64 + 4 * (v % 16) + s % 4];
    if v < 16 {
        byte & 0x0f
    } else {
        byte >> 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_then_read_back() {
        let m = 6;
        let n = 45;
        let codes: Vec<u8> = (0..n * m).map(|i| ((i * 7 + i / 5) % 16) as u8).collect();
        let mut packed = Vec::new();
        pack(&codes, m, &mut packed);
        assert_eq!(packed.len(), 2 * block_bytes(m));
        for i in 0..n {
            let block = &packed[(i / 32) * block_bytes(m)..];
            for s in 0..m {
                assert_eq!(code_at(block, i % 32, s), codes[i * m + s]);
            }
        }
        assert_eq!(code_at(&packed[block_bytes(m)..], 31, 5), 0);
    }
}
