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

use super::{layout, sum_identity, Isa, BLOCK};

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

/// Blocks holding at least this many of a shortlist's slots are scored whole by
/// [`rescore_shortlist`]: plain loads of all 32 vectors then cost less than gathering these.
const WHOLE_BLOCK: usize = 4;

/// Buffers [`rescore_shortlist`] reuses from call to call.
#[derive(Default)]
pub struct ShortlistScratch {
    /// Per block: shortlist slots in it while counting, then its row of `block_scores` (or
    /// `u32::MAX` for a block scored slot by slot).
    block_rows: Vec<u32>,
    whole_blocks: Vec<u32>,
    block_scores: Vec<f32>,
    /// The slots scored one by one, their places in the shortlist, and their scores.
    single: Vec<u32>,
    single_at: Vec<u32>,
    single_scores: Vec<f32>,
}

/// [`rescore`]'s result (the same bits), faster for long shortlists: with AVX-512, blocks
/// holding many of the slots are scored whole and the rest slot by slot.
pub fn rescore_shortlist(
    isa: Isa,
    codes: &[u8],
    m: usize,
    lut: &[f32],
    slots: &[u32],
    out: &mut [f32],
    scratch: &mut ShortlistScratch,
) {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && isa.is_float_available() && slots.len() >= WHOLE_BLOCK {
        assert_eq!(slots.len(), out.len());
        assert!(lut.len() >= m * 16);
        let bb = layout::block_bytes(m);
        let nblocks = codes.len() / bb;
        let rows = &mut scratch.block_rows;
        rows.clear();
        rows.resize(nblocks, 0);
        for &slot in slots {
            let block = slot as usize / BLOCK;
            assert!(block < nblocks, "slot beyond the packed codes");
            rows[block] += 1;
        }
        scratch.whole_blocks.clear();
        for (b, row) in rows.iter_mut().enumerate() {
            if *row as usize >= WHOLE_BLOCK {
                *row = scratch.whole_blocks.len() as u32;
                scratch.whole_blocks.push(b as u32);
            } else {
                *row = u32::MAX;
            }
        }
        if !scratch.whole_blocks.is_empty() {
            let whole = scratch.whole_blocks.len();
            let scores = &mut scratch.block_scores;
            // One row more, which slots scored one by one read and then overwrite.
            scores.resize((whole + 1) * BLOCK, 0.0);
            // SAFETY: AVX-512F was checked above; the blocks lie within `codes`.
            unsafe { avx512_blocks(codes, m, lut, &scratch.whole_blocks, scores) };
            // Branch-free: every slot is written to the single list, and counted there only
            // if its block is not whole (a coin toss to a branch predictor).
            let (single, single_at) = (&mut scratch.single, &mut scratch.single_at);
            single.resize(slots.len(), 0);
            single_at.resize(slots.len(), 0);
            let mut singles = 0;
            for (i, (&slot, o)) in slots.iter().zip(out.iter_mut()).enumerate() {
                let row = rows[slot as usize / BLOCK];
                single[singles] = slot;
                single_at[singles] = i as u32;
                singles += (row == u32::MAX) as usize;
                *o = scores[row.min(whole as u32) as usize * BLOCK + slot as usize % BLOCK];
            }
            single.truncate(singles);
            single_at.truncate(singles);
            scratch.single_scores.resize(scratch.single.len(), 0.0);
            rescore(
                isa,
                codes,
                m,
                lut,
                &scratch.single,
                &mut scratch.single_scores,
            );
            for (&i, &score) in scratch.single_at.iter().zip(&scratch.single_scores) {
                out[i as usize] = score;
            }
            return;
        }
    }
    let _ = scratch;
    rescore(isa, codes, m, lut, slots, out)
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

/// Codes beyond this size are fetched ahead ([`prefetch_chunk`]); smaller ones stay in a core's
/// cache, where the prefetches would only cost instructions.
const PREFETCH_ABOVE_BYTES: usize = 2 << 20;

/// The slots of the step after step `i_step` (steps of `STEP_GROUPS` groups of `lanes`), to
/// fetch ahead; none where `codes` fit in cache.
fn next_step<'a>(codes: &[u8], slots: &'a [u32], i_step: usize, lanes: usize) -> &'a [u32] {
    if codes.len() <= PREFETCH_ABOVE_BYTES {
        return &[];
    }
    let step = lanes * STEP_GROUPS;
    let rest = slots.get((i_step + 1) * step..).unwrap_or_default();
    &rest[..rest.len().min(step)]
}

/// Fetch chunk `base` (the codes of chunk g, as offset from block 0) of the `slots`' blocks
/// into the cache while the current step computes: in a large collection the slots are far
/// apart, and each gather would otherwise wait on memory.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_chunk(base: *const u8, slots: &[u32], bb: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    for &slot in slots {
        // SAFETY: prefetching never faults, and the address stays within `codes`, whose
        // bounds the caller checked for every slot.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(base.add(slot as usize / BLOCK * bb) as *const i8) };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512(codes: &[u8], m: usize, lut: &[f32], slots: &[u32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    const L: usize = 16;
    let bb = layout::block_bytes(m);
    let zero = _mm512_set1_ps(sum_identity());
    for (i_step, (step, dst)) in slots
        .chunks(L * STEP_GROUPS)
        .zip(out.chunks_mut(L * STEP_GROUPS))
        .enumerate()
    {
        let (o, s, groups) = step_lanes::<L>(step, bb);
        let offsets = o.map(|o| _mm512_loadu_si512(o.as_ptr() as *const _));
        let shifts = s.map(|s| _mm512_loadu_si512(s.as_ptr() as *const _));
        let next = next_step(codes, slots, i_step, L);
        let mut acc = [zero; STEP_GROUPS];
        for g in 0..layout::chunks(m) {
            let base = codes.as_ptr().add(g * 64);
            prefetch_chunk(base, next, bb);
            let (tables, subs) = avx512_chunk_tables(lut, m, g);
            for i in 0..groups {
                let words = _mm512_srlv_epi32(
                    _mm512_i32gather_epi32::<1>(offsets[i], base as *const _),
                    shifts[i],
                );
                acc[i] = avx512_add_chunk(acc[i], words, &tables, subs);
            }
        }
        for (i, dst) in dst.chunks_mut(L).enumerate() {
            let mut sums = [0f32; L];
            _mm512_storeu_ps(sums.as_mut_ptr(), acc[i]);
            dst.copy_from_slice(&sums[..dst.len()]);
        }
    }
}

/// The float tables of chunk `g` (its missing sub-quantizers repeat the first one) and how
/// many sub-quantizers it has.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn avx512_chunk_tables(
    lut: &[f32],
    m: usize,
    g: usize,
) -> ([std::arch::x86_64::__m512; 4], usize) {
    use std::arch::x86_64::*;
    let table = lut.as_ptr().add(g * 64);
    let subs = (m - 4 * g).min(4);
    let tables = [
        _mm512_loadu_ps(table),
        _mm512_loadu_ps(table.add(16 * (subs > 1) as usize)),
        _mm512_loadu_ps(table.add(32 * (subs > 2) as usize)),
        _mm512_loadu_ps(table.add(48 * (subs > 3) as usize)),
    ];
    (tables, subs)
}

/// `acc` plus, in sub-quantizer order, the entries that each lane's code word (one byte per
/// sub-quantizer of a chunk, read by its low 4 bits) selects.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn avx512_add_chunk(
    acc: std::arch::x86_64::__m512,
    words: std::arch::x86_64::__m512i,
    tables: &[std::arch::x86_64::__m512; 4],
    subs: usize,
) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let mut sum = _mm512_add_ps(acc, _mm512_permutexvar_ps(words, tables[0]));
    if subs > 1 {
        let idx = _mm512_srli_epi32::<8>(words);
        sum = _mm512_add_ps(sum, _mm512_permutexvar_ps(idx, tables[1]));
    }
    if subs > 2 {
        let idx = _mm512_srli_epi32::<16>(words);
        sum = _mm512_add_ps(sum, _mm512_permutexvar_ps(idx, tables[2]));
    }
    if subs > 3 {
        let idx = _mm512_srli_epi32::<24>(words);
        sum = _mm512_add_ps(sum, _mm512_permutexvar_ps(idx, tables[3]));
    }
    sum
}

/// All 32 scores of each of `blocks` into `out` (32 per block, in vector order), two blocks at
/// a time: a chunk's 16 words are one load, the high nibbles a shift away.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512_blocks(codes: &[u8], m: usize, lut: &[f32], blocks: &[u32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    let bb = layout::block_bytes(m);
    let zero = _mm512_set1_ps(sum_identity());
    for (pair, dst) in blocks.chunks(2).zip(out.chunks_mut(2 * BLOCK)) {
        let first = codes.as_ptr().add(pair[0] as usize * bb);
        let second = codes.as_ptr().add(pair[pair.len() - 1] as usize * bb);
        let mut acc = [zero; 4];
        for g in 0..layout::chunks(m) {
            let (tables, subs) = avx512_chunk_tables(lut, m, g);
            let w0 = _mm512_loadu_si512(first.add(g * 64) as *const _);
            let w1 = _mm512_loadu_si512(second.add(g * 64) as *const _);
            let words = [
                w0,
                _mm512_srli_epi32::<4>(w0),
                w1,
                _mm512_srli_epi32::<4>(w1),
            ];
            for (a, &words) in acc.iter_mut().zip(&words) {
                *a = avx512_add_chunk(*a, words, &tables, subs);
            }
        }
        for (half, dst) in dst.chunks_mut(16).enumerate() {
            _mm512_storeu_ps(dst.as_mut_ptr(), acc[half]);
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
    for (i_step, (step, dst)) in slots
        .chunks(L * STEP_GROUPS)
        .zip(out.chunks_mut(L * STEP_GROUPS))
        .enumerate()
    {
        let (o, s, groups) = step_lanes::<L>(step, bb);
        let offsets = o.map(|o| _mm256_loadu_si256(o.as_ptr() as *const _));
        let shifts = s.map(|s| _mm256_loadu_si256(s.as_ptr() as *const _));
        let next = next_step(codes, slots, i_step, L);
        let mut acc = [zero; STEP_GROUPS];
        for g in 0..layout::chunks(m) {
            let base = codes.as_ptr().add(g * 64);
            prefetch_chunk(base, next, bb);
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
            let mut scratch = ShortlistScratch::default();
            for isa in Isa::available() {
                for len in [0, 1, 7, 8, 15, 16, 17, 33, 63, 64, 65, 100, slots.len()] {
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    let mut got = vec![f32::NAN; len];
                    rescore(isa, &codes, m, &lut, &slots[..len], &mut got);
                    assert_eq!(bits(&got), bits(&want[..len]), "{isa:?} m={m} len={len}");
                    // Whole blocks (the reversed slots fill them), slot by slot, or both.
                    let mut got = vec![f32::NAN; len];
                    rescore_shortlist(isa, &codes, m, &lut, &slots[..len], &mut got, &mut scratch);
                    assert_eq!(bits(&got), bits(&want[..len]), "{isa:?} m={m} len={len}");
                }
                // One block full, one with WHOLE_BLOCK slots, one with fewer, in mixed order.
                let mixed: Vec<u32> = (0..32)
                    .chain(32..32 + WHOLE_BLOCK as u32)
                    .chain(64..64 + WHOLE_BLOCK as u32 - 1)
                    .chain([128, 3, 135])
                    .rev()
                    .collect();
                let want_mixed: Vec<f32> = mixed
                    .iter()
                    .map(|&s| want[slots.iter().position(|&x| x == s).unwrap()])
                    .collect();
                let mut got = vec![f32::NAN; mixed.len()];
                rescore_shortlist(isa, &codes, m, &lut, &mixed, &mut got, &mut scratch);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want_mixed), "{isa:?} m={m} mixed");
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
