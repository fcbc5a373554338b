//! Portable reference kernel: the definition every SIMD kernel must reproduce bit for bit.

use super::{layout, Sink, BLOCK, QUERY_GROUP};

/// Score every vector of the packed `codes` (whole blocks) for a group of [`QUERY_GROUP`]
/// queries whose tables `luts` are laid out as [`super::lut::quantize_into`] writes them.
/// Vectors scoring above `thresholds[q]` are reported to `sink`, which returns the new threshold.
pub fn scan(
    codes: &[u8],
    m: usize,
    luts: &[u8],
    thresholds: &mut [i32; QUERY_GROUP],
    sink: &mut Sink<'_>,
) {
    let chunks = layout::chunks(m);
    let bb = layout::block_bytes(m);
    for (b, block) in codes.chunks_exact(bb).enumerate() {
        for (q, threshold) in thresholds.iter_mut().enumerate() {
            let mut scores = [0u32; BLOCK];
            let mut mask = 0u32;
            for (v, score) in scores.iter_mut().enumerate() {
                let mut sum = 0u32;
                for g in 0..chunks {
                    let table = &luts[(g * QUERY_GROUP + q) * 64..];
                    for j in 0..4 {
                        let code = layout::code_at(block, v, 4 * g + j) as usize;
                        sum += table[j * 16 + code] as u32;
                    }
                }
                *score = sum;
                if sum as i64 > *threshold as i64 {
                    mask |= 1 << v;
                }
            }
            if mask != 0 {
                *threshold = sink(q, b, mask, &scores);
            }
        }
    }
}
