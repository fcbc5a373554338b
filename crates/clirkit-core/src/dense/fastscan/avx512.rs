//! AVX-512 kernel (needs BW, VBMI and VNNI: Ice Lake, Sapphire Rapids, Zen 4 and later).
//!
//! With the chunk layout of [`super::layout`], one 64-byte `vpermb` looks up 4 sub-quantizers
//! for 16 vectors at once (the byte's position picks its table, the nibble its entry), and
//! `vpdpbusd` against all-ones adds each vector's 4 looked-up bytes into its 32-bit lane. So a
//! chunk of 32 vectors x 4 sub-quantizers costs 2 `vpermb` + 2 `vpdpbusd` per query, with the
//! index preparation shared by the 8 queries of a group whose accumulators stay in registers.

use super::{Sink, QUERY_GROUP};

/// Whether this CPU can run [`scan`].
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// Same contract as [`super::scalar::scan`].
///
/// # Safety
/// The CPU must support the features [`available`] checks.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
pub unsafe fn scan(
    codes: &[u8],
    m: usize,
    luts: &[u8],
    thresholds: &mut [i32; QUERY_GROUP],
    sink: &mut Sink<'_>,
) {
    use std::arch::x86_64::*;
    let chunks = super::layout::chunks(m);
    let bb = chunks * 64;
    assert!(luts.len() >= chunks * QUERY_GROUP * 64);
    let low4 = _mm512_set1_epi8(0x0f);
    // Byte 4t + j selects table j: its index gets j * 16 on top of the 4-bit code.
    let table_of_byte = _mm512_set1_epi32(0x3020_1000);
    let ones = _mm512_set1_epi8(1);
    for (b, block) in codes.chunks_exact(bb).enumerate() {
        let mut lo = [_mm512_setzero_si512(); QUERY_GROUP];
        let mut hi = [_mm512_setzero_si512(); QUERY_GROUP];
        for g in 0..chunks {
            let c = _mm512_loadu_si512(block.as_ptr().add(g * 64) as *const _);
            // (c & 0x0f) | table offset, and the same for the high nibbles.
            let idx_lo = _mm512_ternarylogic_epi32::<0xEA>(c, low4, table_of_byte);
            let idx_hi =
                _mm512_ternarylogic_epi32::<0xEA>(_mm512_srli_epi16::<4>(c), low4, table_of_byte);
            let tables = luts.as_ptr().add(g * QUERY_GROUP * 64);
            for q in 0..QUERY_GROUP {
                let t = _mm512_loadu_si512(tables.add(q * 64) as *const _);
                lo[q] = _mm512_dpbusd_epi32(lo[q], _mm512_permutexvar_epi8(idx_lo, t), ones);
                hi[q] = _mm512_dpbusd_epi32(hi[q], _mm512_permutexvar_epi8(idx_hi, t), ones);
            }
        }
        // Masks first, scores stored and sinks called only for a block that has hits: with the
        // accumulators still live across a sink call, the compiler would save all of them to
        // the stack for every block, hits or not.
        let mut masks = [0u32; QUERY_GROUP];
        for q in 0..QUERY_GROUP {
            let t = _mm512_set1_epi32(thresholds[q]);
            masks[q] = _mm512_cmpgt_epi32_mask(lo[q], t) as u32
                | (_mm512_cmpgt_epi32_mask(hi[q], t) as u32) << 16;
        }
        if masks.iter().any(|&mask| mask != 0) {
            let mut scores = [[0u32; 32]; QUERY_GROUP];
            for q in 0..QUERY_GROUP {
                _mm512_storeu_si512(scores[q].as_mut_ptr() as *mut _, lo[q]);
                _mm512_storeu_si512(scores[q].as_mut_ptr().add(16) as *mut _, hi[q]);
            }
            for q in 0..QUERY_GROUP {
                if masks[q] != 0 {
                    thresholds[q] = sink(q, b, masks[q], &scores[q]);
                }
            }
        }
    }
}
