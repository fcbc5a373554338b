//! Quantizing a query's float look-up table to 8 bits, FAISS's way
//! (`quantize_lut::quantize_LUT_and_bias` without bias): subtract each sub-quantizer's minimum,
//! scale all tables by one factor `a` chosen so that every entry fits 0..=255 and any sum over
//! the sub-quantizers fits 16 bits, round to nearest. Then `score ~= bias + sum / a`.
//!
//! One deliberate difference: `a` uses `65535 - m` instead of 65535, since rounding can add up
//! to 1/2 per sub-quantizer; so the 16-bit sum provably never overflows.

use super::{layout, Isa, QUERY_GROUP};

/// How to turn a quantized score back into the float scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LutScale {
    pub a: f32,
    pub bias: f32,
}

impl LutScale {
    pub fn to_float(&self, q: u32) -> f32 {
        if self.a > 0.0 {
            self.bias + q as f32 / self.a
        } else {
            self.bias
        }
    }
}

/// Quantize one query's float LUT (`m * 16`, higher is better) into `out`, the query's slot `qi`
/// of a query group's interleaved table: for chunk `g`, 64 bytes at `(g * QUERY_GROUP + qi) * 64`
/// holding the 4 sub-quantizers' 16 entries in order.
pub fn quantize_into(lut: &[f32], m: usize, qi: usize, out: &mut [u8]) -> LutScale {
    let ranges: Vec<(f32, f32)> = lut[..m * 16].chunks_exact(16).map(table_range).collect();
    let LutScale { a, bias } = scale_of(&ranges);
    // Round half up: clamp to 0..=255 (NaN -> 0) and truncate, which is
    // `floor().clamp(0.0, 255.0)` for every value (floor and truncation differ only below zero,
    // where both give 0), in compares and selects the 16 entries of a table can do together.
    for s in 0..layout::chunks(m) * 4 {
        let dst = &mut out[((s / 4) * QUERY_GROUP + qi) * 64 + (s % 4) * 16..][..16];
        if s < m {
            let lo = ranges[s].0;
            for (d, &x) in dst.iter_mut().zip(&lut[s * 16..(s + 1) * 16]) {
                let y = (x - lo) * a + 0.5;
                let y = if y > 0.0 { y } else { 0.0 };
                *d = (if y < 255.0 { y } else { 255.0 }) as i32 as u8;
            }
        } else {
            dst.fill(0);
        }
    }
    LutScale { a, bias }
}

/// The scale and bias of tables with these (least, greatest) entries, one per sub-quantizer.
fn scale_of(ranges: &[(f32, f32)]) -> LutScale {
    let m = ranges.len();
    let mut max_span = 0f32;
    let mut sum_span = 0f32;
    let mut bias = 0f32;
    for &(lo, hi) in ranges {
        max_span = max_span.max(hi - lo);
        sum_span += hi - lo;
        bias += lo;
    }
    let limit = (65535 - m.min(65535)) as f32;
    let a = if max_span > 0.0 {
        (255.0 / max_span).min(limit / sum_span)
    } else {
        0.0
    };
    LutScale { a, bias }
}

/// [`quantize_into`] with the `isa` level: the same bytes and scale, with AVX-512F taking each
/// 16-entry table as one register (tables holding a NaN take the scalar code).
pub fn quantize_with(isa: Isa, lut: &[f32], m: usize, qi: usize, out: &mut [u8]) -> LutScale {
    match isa {
        // SAFETY: the CPU feature is checked here.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if isa.is_float_available() => unsafe { quantize_avx512(lut, m, qi, out) },
        _ => quantize_into(lut, m, qi, out),
    }
}

/// A register's least and greatest entry can differ from [`table_range`]'s only in the sign of a
/// zero bound, on which no entry, bias or scale depends (the bias and span sums start from +0.0,
/// so adding either zero leaves them unchanged).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn quantize_avx512(lut: &[f32], m: usize, qi: usize, out: &mut [u8]) -> LutScale {
    use std::arch::x86_64::*;
    assert!(lut.len() >= m * 16);
    assert!(out.len() >= (layout::chunks(m) - 1) * QUERY_GROUP * 64 + (qi + 1) * 64);
    let mut ranges = Vec::with_capacity(m);
    for t in lut[..m * 16].chunks_exact(16) {
        let v = _mm512_loadu_ps(t.as_ptr());
        if _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v) != 0 {
            return quantize_into(lut, m, qi, out);
        }
        ranges.push((_mm512_reduce_min_ps(v), _mm512_reduce_max_ps(v)));
    }
    let LutScale { a, bias } = scale_of(&ranges);
    // As the scalar code: `max` and `min` return their second operand for a NaN, so a NaN
    // (an infinite scale times a zero difference) becomes 0 and the rest is clamped to 0..=255
    // before truncation.
    let (scale, half) = (_mm512_set1_ps(a), _mm512_set1_ps(0.5));
    let (floor, ceiling) = (_mm512_setzero_ps(), _mm512_set1_ps(255.0));
    for s in 0..layout::chunks(m) * 4 {
        let dst = out
            .as_mut_ptr()
            .add(((s / 4) * QUERY_GROUP + qi) * 64 + (s % 4) * 16);
        let bytes = if let Some(&(lo, _)) = ranges.get(s) {
            let lo = _mm512_set1_ps(lo);
            let x = _mm512_loadu_ps(lut.as_ptr().add(s * 16));
            let y = _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(x, lo), scale), half);
            let y = _mm512_min_ps(_mm512_max_ps(y, floor), ceiling);
            _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(y))
        } else {
            _mm_setzero_si128()
        };
        _mm_storeu_si128(dst as *mut __m128i, bytes);
    }
    LutScale { a, bias }
}

/// The least and greatest entry of a 16-entry table by `f32::min` / `f32::max` (NaN ignored),
/// taken pairwise in a tree rather than in a chain of 15 dependent steps. The values are those
/// of a fold; only the sign of a zero bound may differ, and no quantized entry depends on it
/// (an entry equal to a zero minimum quantizes to 0 either way).
fn table_range(t: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = ([0f32; 8], [0f32; 8]);
    for i in 0..8 {
        lo[i] = t[i].min(t[i + 8]);
        hi[i] = t[i].max(t[i + 8]);
    }
    for width in [4, 2, 1] {
        for i in 0..width {
            lo[i] = lo[i].min(lo[i + width]);
            hi[i] = hi[i].max(hi[i + width]);
        }
    }
    (lo[0], hi[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_range_is_the_folds_range() {
        let mut t: Vec<f32> = (0..16).map(|i| ((i * 7) % 16) as f32 - 5.5).collect();
        for nan_at in [None, Some(0), Some(9), Some(15)] {
            if let Some(i) = nan_at {
                t[i] = f32::NAN;
            }
            let lo = t.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = t.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(table_range(&t), (lo, hi), "{nan_at:?}");
        }
    }

    #[test]
    fn every_level_quantizes_to_the_same_bytes_and_scale() {
        let mut rng = crate::rng::SplitMix64::new(8);
        for m in [1usize, 3, 4, 7, 96, 192] {
            for case in 0..6 {
                let mut lut: Vec<f32> = (0..m * 16)
                    .map(|_| (rng.unit() as f32 - 0.5) * 10f32.powi(case % 3))
                    .collect();
                match case {
                    // Signed zeros, some as a table's bounds.
                    3 => lut.iter_mut().step_by(5).for_each(|x| *x = -0.0),
                    // All-equal tables: zero spans, zero scale.
                    4 => lut.fill(0.25),
                    // A NaN, an infinity and a tiny span (infinite scale).
                    5 => {
                        lut[7] = f32::NAN;
                        lut[(m - 1) * 16] = f32::INFINITY;
                    }
                    _ => {}
                }
                let mut want = vec![7u8; layout::chunks(m) * QUERY_GROUP * 64];
                let mut got = want.clone();
                let want_scale = quantize_into(&lut, m, 5, &mut want);
                for isa in [Isa::Scalar, Isa::Avx2, Isa::Avx512] {
                    let scale = quantize_with(isa, &lut, m, 5, &mut got);
                    assert_eq!(got, want, "{isa:?} m={m} case={case}");
                    assert_eq!(scale.a.to_bits(), want_scale.a.to_bits());
                    assert_eq!(scale.bias.to_bits(), want_scale.bias.to_bits());
                }
            }
        }
        let mut lut = vec![0f32; 32];
        lut[3] = 1e-45;
        let mut want = vec![0u8; QUERY_GROUP * 64];
        let mut got = want.clone();
        quantize_into(&lut, 2, 0, &mut want);
        quantize_with(Isa::Avx512, &lut, 2, 0, &mut got);
        assert_eq!(got, want);
    }

    #[test]
    fn clamped_truncation_is_floor_then_clamp() {
        let specials = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            f32::MAX,
            -f32::MAX,
        ];
        let mut x = -300.0f32;
        let mut values = specials.to_vec();
        while x < 300.0 {
            values.extend([x, x.next_up(), x.next_down()]);
            x += 0.125;
        }
        for y in values {
            let clamped = if y > 0.0 { y } else { 0.0 };
            let clamped = if clamped < 255.0 { clamped } else { 255.0 };
            assert_eq!(
                clamped as i32 as u8,
                y.floor().clamp(0.0, 255.0) as u8,
                "{y}"
            );
        }
    }

    #[test]
    fn sums_fit_sixteen_bits_and_track_the_float_sum() {
        let m = 400;
        let lut: Vec<f32> = (0..m * 16)
            .map(|i| ((i * 37) % 101) as f32 / 7.0 - 3.0)
            .collect();
        let mut out = vec![0u8; layout::chunks(m) * QUERY_GROUP * 64];
        let scale = quantize_into(&lut, m, 3, &mut out);
        let max_sum: u32 = (0..m)
            .map(|s| {
                let g = s / 4;
                let base = (g * QUERY_GROUP + 3) * 64 + (s % 4) * 16;
                *out[base..base + 16].iter().max().unwrap() as u32
            })
            .sum();
        assert!(max_sum <= 65535, "{max_sum}");
        let codes: Vec<usize> = (0..m).map(|s| (s * 5) % 16).collect();
        let exact: f32 = codes
            .iter()
            .enumerate()
            .map(|(s, &c)| lut[s * 16 + c])
            .sum();
        let q: u32 = codes
            .iter()
            .enumerate()
            .map(|(s, &c)| out[((s / 4) * QUERY_GROUP + 3) * 64 + (s % 4) * 16 + c] as u32)
            .sum();
        let approx = scale.to_float(q);
        assert!(
            (approx - exact).abs() < 0.02 * exact.abs().max(1.0),
            "{approx} vs {exact}"
        );
    }
}
