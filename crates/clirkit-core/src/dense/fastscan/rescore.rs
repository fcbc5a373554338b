//! Float PQ scores of chosen vectors of packed 4-bit codes: for each slot, the sum over the
//! sub-quantizers, in their order, of the float table entry its code selects. This is what
//! [`ProductQuantizer::adc_score`](crate::dense::codebook::ProductQuantizer::adc_score) computes
//! one vector at a time; the SIMD kernels give each slot a lane and add the entries in the same
//! order, starting from the same zero, so the scores are the same bits.
//!
//! A 16-entry float table is one AVX-512 register, so a lookup for 16 slots is one `vpermps`
//! (AVX2: two 8-entry permutes and a blend). A slot's 4 codes of a chunk sit in one 32-bit word
//! of its block (see [`super::layout`]): one gather fetches them for 16 (8) slots, and `vpermps`
//! reads only the low 4 bits of each lane, so the codes need shifting but no masking.

use super::{layout, Isa, BLOCK};

/// The identity `f32`'s `Sum` starts from (`-0.0`, or `0.0` on older toolchains): starting the
/// lanes from it keeps the sums equal to `Iterator::sum` bit for bit.
fn sum_identity() -> f32 {
    std::iter::empty::<f32>().sum()
}

/// Byte offset of `slot`'s code word in chunk 0, and the shift bringing its nibbles down.
#[inline]
fn word_of(slot: u32, bb: usize) -> (usize, u32) {
    let (block, v) = (slot as usize / BLOCK, slot as usize % BLOCK);
    (block * bb + 4 * (v % 16), if v < 16 { 0 } else { 4 })
}

/// `out[i]` = float PQ score of `slots[i]` in `codes` (packed blocks, `m` sub-quantizers) with
/// the float table `lut` (`m * 16` entries), with the `isa` kernel. Every slot must lie within
/// `codes`.
pub fn rescore(isa: Isa, codes: &[u8], m: usize, lut: &[f32], slots: &[u32], out: &mut [f32]) {
    assert_eq!(slots.len(), out.len());
    assert!(lut.len() >= m * 16);
    let bb = layout::block_bytes(m);
    let end = slots
        .iter()
        .map(|&s| s as usize / BLOCK + 1)
        .max()
        .unwrap_or(0)
        * bb;
    assert!(end <= codes.len(), "slot beyond the packed codes");
    assert!(
        isa.is_float_available(),
        "{} kernel not supported here",
        isa.name()
    );
    // The gathers take 32-bit offsets.
    let gatherable = end <= i32::MAX as usize;
    match isa {
        // SAFETY: AVX-512F was asserted above; offsets fit i32 and slots lie within `codes`.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if gatherable => unsafe { avx512(codes, m, lut, slots, out) },
        // SAFETY: as above, with AVX2.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if gatherable => unsafe { avx2(codes, m, lut, slots, out) },
        _ => scalar(codes, m, lut, slots, out),
    }
}

/// The reference: one slot at a time, as `adc_score` reads it.
pub fn scalar(codes: &[u8], m: usize, lut: &[f32], slots: &[u32], out: &mut [f32]) {
    let bb = layout::block_bytes(m);
    for (o, &slot) in out.iter_mut().zip(slots) {
        let block = &codes[(slot as usize / BLOCK) * bb..];
        let v = slot as usize % BLOCK;
        *o = (0..m)
            .map(|s| lut[s * 16 + layout::code_at(block, v, s) as usize])
            .sum();
    }
}

/// Per SIMD group of a step (`L` lanes each), per lane: its slot's word offset and nibble shift;
/// a short group's missing lanes repeat its first slot (in range) and are discarded. Also the
/// number of groups the step fills.
#[allow(clippy::type_complexity)]
fn step_lanes<const L: usize>(
    step: &[u32],
    bb: usize,
) -> ([[i32; L]; STEP_GROUPS], [[u32; L]; STEP_GROUPS], usize) {
    let mut offsets = [[0i32; L]; STEP_GROUPS];
    let mut shifts = [[0u32; L]; STEP_GROUPS];
    for (i, group) in step.chunks(L).enumerate() {
        for lane in 0..L {
            let (o, s) = word_of(*group.get(lane).unwrap_or(&group[0]), bb);
            offsets[i][lane] = o as i32;
            shifts[i][lane] = s;
        }
    }
    (offsets, shifts, step.len().div_ceil(L))
}

/// Slots per SIMD step: several independent sums in flight hide the latency of each add
/// (every lane's adds form one chain, in sub-quantizer order).
const STEP_GROUPS: usize = 4;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512(codes: &[u8], m: usize, lut: &[f32], slots: &[u32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    const L: usize = 16;
    let bb = layout::block_bytes(m);
    let zero = _mm512_set1_ps(sum_identity());
    for (step, dst) in slots
        .chunks(L * STEP_GROUPS)
        .zip(out.chunks_mut(L * STEP_GROUPS))
    {
        let (o, s, groups) = step_lanes::<L>(step, bb);
        let offsets = o.map(|o| _mm512_loadu_si512(o.as_ptr() as *const _));
        let shifts = s.map(|s| _mm512_loadu_si512(s.as_ptr() as *const _));
        let mut acc = [zero; STEP_GROUPS];
        for g in 0..layout::chunks(m) {
            let base = codes.as_ptr().add(g * 64);
            let table = lut.as_ptr().add(g * 64);
            let subs = (m - 4 * g).min(4);
            let tables = [
                _mm512_loadu_ps(table),
                _mm512_loadu_ps(table.add(16 * (subs > 1) as usize)),
                _mm512_loadu_ps(table.add(32 * (subs > 2) as usize)),
                _mm512_loadu_ps(table.add(48 * (subs > 3) as usize)),
            ];
            for i in 0..groups {
                let words = _mm512_srlv_epi32(
                    _mm512_i32gather_epi32::<1>(offsets[i], base as *const _),
                    shifts[i],
                );
                let mut a = _mm512_add_ps(acc[i], _mm512_permutexvar_ps(words, tables[0]));
                if subs > 1 {
                    let idx = _mm512_srli_epi32::<8>(words);
                    a = _mm512_add_ps(a, _mm512_permutexvar_ps(idx, tables[1]));
                }
                if subs > 2 {
                    let idx = _mm512_srli_epi32::<16>(words);
                    a = _mm512_add_ps(a, _mm512_permutexvar_ps(idx, tables[2]));
                }
                if subs > 3 {
                    let idx = _mm512_srli_epi32::<24>(words);
                    a = _mm512_add_ps(a, _mm512_permutexvar_ps(idx, tables[3]));
                }
                acc[i] = a;
            }
        }
        for (i, dst) in dst.chunks_mut(L).enumerate() {
            let mut sums = [0f32; L];
            _mm512_storeu_ps(sums.as_mut_ptr(), acc[i]);
            dst.copy_from_slice(&sums[..dst.len()]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2(codes: &[u8], m: usize, lut: &[f32], slots: &[u32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    const L: usize = 8;
    let bb = layout::block_bytes(m);
    let zero = _mm256_set1_ps(sum_identity());
    // A 16-entry lookup: both halves permuted by the low 3 bits, bit 3 (moved to the sign) picks.
    #[inline(always)]
    unsafe fn lookup(table: *const f32, idx: __m256i) -> __m256 {
        let lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table), idx);
        let hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table.add(8)), idx);
        _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32::<28>(idx)))
    }
    for (step, dst) in slots
        .chunks(L * STEP_GROUPS)
        .zip(out.chunks_mut(L * STEP_GROUPS))
    {
        let (o, s, groups) = step_lanes::<L>(step, bb);
        let offsets = o.map(|o| _mm256_loadu_si256(o.as_ptr() as *const _));
        let shifts = s.map(|s| _mm256_loadu_si256(s.as_ptr() as *const _));
        let mut acc = [zero; STEP_GROUPS];
        for g in 0..layout::chunks(m) {
            let base = codes.as_ptr().add(g * 64);
            let table = lut.as_ptr().add(g * 64);
            let subs = (m - 4 * g).min(4);
            for i in 0..groups {
                let words = _mm256_srlv_epi32(
                    _mm256_i32gather_epi32::<1>(base as *const i32, offsets[i]),
                    shifts[i],
                );
                let mut a = _mm256_add_ps(acc[i], lookup(table, words));
                if subs > 1 {
                    a = _mm256_add_ps(a, lookup(table.add(16), _mm256_srli_epi32::<8>(words)));
                }
                if subs > 2 {
                    a = _mm256_add_ps(a, lookup(table.add(32), _mm256_srli_epi32::<16>(words)));
                }
                if subs > 3 {
                    a = _mm256_add_ps(a, lookup(table.add(48), _mm256_srli_epi32::<24>(words)));
                }
                acc[i] = a;
            }
        }
        for (i, dst) in dst.chunks_mut(L).enumerate() {
            let mut sums = [0f32; L];
            _mm256_storeu_ps(sums.as_mut_ptr(), acc[i]);
            dst.copy_from_slice(&sums[..dst.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dense::codebook::ProductQuantizer;
    use crate::dense::Metric;
    use crate::rng::SplitMix64;

    #[test]
    fn every_kernel_equals_adc_score_bit_for_bit() {
        let mut rng = SplitMix64::new(11);
        for m in [1usize, 2, 3, 4, 5, 6, 8, 16, 48, 96, 192] {
            let n = 32 * 4 + 9;
            let raw: Vec<u8> = (0..n * m).map(|_| rng.below(16) as u8).collect();
            let mut codes = Vec::new();
            layout::pack(&raw, m, &mut codes);
            // Mixed signs and magnitudes (rounding differs with the order), signed zeros.
            let lut: Vec<f32> = (0..m * 16)
                .map(|i| match i % 7 {
                    0 => -0.0,
                    1 => 0.0,
                    _ => (rng.unit() as f32 - 0.5) * 10f32.powi((i % 5) as i32 - 2),
                })
                .collect();
            let mut slots: Vec<u32> = (0..n as u32).collect();
            slots.reverse();
            slots.extend([0, 17, 17, n as u32 - 1]);
            let want: Vec<f32> = slots
                .iter()
                .map(|&s| {
                    let c = &raw[s as usize * m..(s as usize + 1) * m];
                    // `adc_score` takes ksub from the quantizer; 4-bit tables have 16 entries.
                    c.iter()
                        .enumerate()
                        .map(|(j, &c)| lut[j * 16 + c as usize])
                        .sum()
                })
                .collect();
            for isa in Isa::available() {
                for len in [0, 1, 7, 8, 15, 16, 17, 33, 63, 64, 65, 100, slots.len()] {
                    let mut got = vec![f32::NAN; len];
                    rescore(isa, &codes, m, &lut, &slots[..len], &mut got);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want[..len]), "{isa:?} m={m} len={len}");
                }
            }
        }
        // And against the quantizer's own scoring on a trained codebook.
        let (d, m) = (16, 8);
        let data: Vec<f32> = (0..600 * d).map(|_| rng.unit() as f32 - 0.5).collect();
        let pq = ProductQuantizer::train(&data, d, m, 4, 3).unwrap();
        let raw = pq.encode(&data);
        let mut codes = Vec::new();
        layout::pack(&raw, m, &mut codes);
        let mut lut = vec![0f32; m * 16];
        pq.lut(Metric::InnerProduct, &data[..d], &mut lut);
        let slots: Vec<u32> = (0..600).collect();
        for isa in Isa::available() {
            let mut got = vec![0f32; 600];
            rescore(isa, &codes, m, &lut, &slots, &mut got);
            for (i, g) in got.iter().enumerate() {
                let want = pq.adc_score(&lut, raw[i * m..(i + 1) * m].iter().copied());
                assert_eq!(g.to_bits(), want.to_bits(), "{isa:?} slot {i}");
            }
        }
    }
}
