//! AVX2 kernel. `pshufb` looks up 16-entry tables per 128-bit lane, so each 64-byte chunk is
//! first regrouped per sub-quantizer (in-lane byte shuffle, dword permute, qword unpack: shared
//! by the queries of a pass) into `[s0 | s2]` and `[s1 | s3]` registers for 16 vectors, matching
//! tables arranged as `[s0 s2 s1 s3]` (see [`arrange_luts`]). Looked-up bytes are accumulated in
//! 16-bit lanes with FAISS's even/odd trick: add the bytes as u16 and separately the odd bytes
//! shifted down; the even sums are recovered at the end. Four queries per pass keep the
//! accumulators in registers.

use super::{Sink, QUERY_GROUP};
use std::arch::x86_64::*;

pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Queries per pass over the codes.
const PASS: usize = 4;

/// Reorder each 64-byte table from `[s0 s1 s2 s3]` to `[s0 s2 s1 s3]` (in place).
pub fn arrange_luts(luts: &mut [u8]) {
    for t in luts.chunks_exact_mut(64) {
        let (a, b) = t.split_at_mut(32);
        a[16..32].swap_with_slice(&mut b[0..16]);
    }
}

#[inline(always)]
unsafe fn regroup(a: __m256i, b: __m256i) -> (__m256i, __m256i) {
    // Within each lane, bytes 4t + j -> 4j + t (group by sub-quantizer).
    let by_sub = _mm256_setr_epi8(
        0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10,
        14, 3, 7, 11, 15,
    );
    let perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let a = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(a, by_sub), perm);
    let b = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(b, by_sub), perm);
    (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b))
}

/// Even/odd 16-bit accumulators -> 16 per-vector sums as two registers of 8 u32.
#[inline(always)]
unsafe fn finish(even: __m256i, odd: __m256i) -> (__m256i, __m256i) {
    let even = _mm256_sub_epi16(even, _mm256_slli_epi16::<8>(odd));
    let e = _mm_add_epi16(
        _mm256_castsi256_si128(even),
        _mm256_extracti128_si256::<1>(even),
    );
    let o = _mm_add_epi16(
        _mm256_castsi256_si128(odd),
        _mm256_extracti128_si256::<1>(odd),
    );
    (
        _mm256_cvtepu16_epi32(_mm_unpacklo_epi16(e, o)),
        _mm256_cvtepu16_epi32(_mm_unpackhi_epi16(e, o)),
    )
}

#[inline(always)]
unsafe fn mask8(x: __m256i, t: __m256i) -> u32 {
    _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(x, t))) as u32
}

/// Same contract as [`super::scalar::scan`], with tables passed through [`arrange_luts`].
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn scan(
    codes: &[u8],
    m: usize,
    luts: &[u8],
    thresholds: &mut [i32; QUERY_GROUP],
    sink: &mut Sink<'_>,
) {
    let chunks = super::layout::chunks(m);
    let bb = chunks * 64;
    assert!(luts.len() >= chunks * QUERY_GROUP * 64);
    let low4 = _mm256_set1_epi8(0x0f);
    for pass in (0..QUERY_GROUP).step_by(PASS) {
        for (b, block) in codes.chunks_exact(bb).enumerate() {
            // Per query: even/odd accumulators for vectors 0..16 (low nibbles) and 16..32.
            let mut acc = [[_mm256_setzero_si256(); 4]; PASS];
            for g in 0..chunks {
                let p = block.as_ptr().add(g * 64);
                let (t02, t13) = regroup(
                    _mm256_loadu_si256(p as *const _),
                    _mm256_loadu_si256(p.add(32) as *const _),
                );
                let c02_lo = _mm256_and_si256(t02, low4);
                let c02_hi = _mm256_and_si256(_mm256_srli_epi16::<4>(t02), low4);
                let c13_lo = _mm256_and_si256(t13, low4);
                let c13_hi = _mm256_and_si256(_mm256_srli_epi16::<4>(t13), low4);
                let tables = luts.as_ptr().add((g * QUERY_GROUP + pass) * 64);
                for (q, a) in acc.iter_mut().enumerate() {
                    let l02 = _mm256_loadu_si256(tables.add(q * 64) as *const _);
                    let l13 = _mm256_loadu_si256(tables.add(q * 64 + 32) as *const _);
                    let r0 = _mm256_shuffle_epi8(l02, c02_lo);
                    let r1 = _mm256_shuffle_epi8(l13, c13_lo);
                    let r2 = _mm256_shuffle_epi8(l02, c02_hi);
                    let r3 = _mm256_shuffle_epi8(l13, c13_hi);
                    a[0] = _mm256_add_epi16(a[0], _mm256_add_epi16(r0, r1));
                    a[1] = _mm256_add_epi16(
                        a[1],
                        _mm256_add_epi16(_mm256_srli_epi16::<8>(r0), _mm256_srli_epi16::<8>(r1)),
                    );
                    a[2] = _mm256_add_epi16(a[2], _mm256_add_epi16(r2, r3));
                    a[3] = _mm256_add_epi16(
                        a[3],
                        _mm256_add_epi16(_mm256_srli_epi16::<8>(r2), _mm256_srli_epi16::<8>(r3)),
                    );
                }
            }
            for (qi, a) in acc.iter().enumerate() {
                let q = pass + qi;
                let (v0, v8) = finish(a[0], a[1]);
                let (v16, v24) = finish(a[2], a[3]);
                let t = _mm256_set1_epi32(thresholds[q]);
                let mask =
                    mask8(v0, t) | mask8(v8, t) << 8 | mask8(v16, t) << 16 | mask8(v24, t) << 24;
                if mask != 0 {
                    let mut scores = [0u32; 32];
                    let s = scores.as_mut_ptr() as *mut __m256i;
                    _mm256_storeu_si256(s, v0);
                    _mm256_storeu_si256(s.add(1), v8);
                    _mm256_storeu_si256(s.add(2), v16);
                    _mm256_storeu_si256(s.add(3), v24);
                    thresholds[q] = sink(q, b, mask, &scores);
                }
            }
        }
    }
}
