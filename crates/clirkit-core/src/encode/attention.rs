//! Multi-head self-attention of one unpadded text with int8 products: what onnxruntime's
//! `MultiHeadAttention` computes in float32, for a dynamically quantized encoder's fast mode.
//!
//! Per head, each query and each key row is quantized to int8 with a scale of its own (symmetric:
//! `max |x| / 127`), the values with a scale per channel. The scores `q . k` are exact integer dot
//! products (AVX-512 VNNI: 64 multiply-adds an instruction, four times float32's), rescaled to float
//! and put through a float softmax; each weight is then rounded to sixteen bits of its row's largest
//! (which is 1 once the maximum is subtracted), kept as a low and a high byte, and the output is the
//! integer weighted sum of the values by each byte, divided by the sum of the rounded weights, so a
//! row's weights still sum to one. Sixteen bits lose nothing against float weights; eight would zero
//! the many small weights of long, diffuse rows. What the int8 operands cost in accuracy is measured
//! end to end in `benches/results/encoders.md` (fast mode).
//!
//! The portable kernel computes the same integers and applies the same float operations in the same
//! order (the exponential is the same polynomial), so both kernels give the same bits.

use crate::error::{Error, Result};

/// Query rows computed together (their scores, weights and outputs).
const ROW_BLOCK: usize = 8;
/// Keys scored together per query row (two registers of sixteen).
const KEY_BLOCK: usize = 32;
/// A row's largest weight once rounded (sixteen bits, products taken a byte at a time).
const WEIGHT_SCALE: f32 = 65535.0;
/// Exponentials of scores below the row's maximum by more than this are ~1e-35: zero once rounded
/// to sixteen bits, and clamping keeps `2^n` a normal float in both kernels.
const LOWEST_EXPONENT: f32 = -80.0;
const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` split so that `n * LN2_HIGH` is exact for the `n` that occur (Cody and Waite).
const LN2_HIGH: f32 = 0.693_359_4;
const LN2_LOW: f32 = -2.121_944_4e-4;
/// `WEIGHT_SCALE * exp(r) ~ S + S r + r^2 P(r)` on `|r| <= ln 2 / 2` (`S` the weight scale), `P`
/// the Taylor polynomial times `S`, highest power first: relative error below 3e-6, a fifth of a
/// weight's rounding step.
const WEIGHT_POLY: [f32; 4] = [
    WEIGHT_SCALE / 120.0,
    WEIGHT_SCALE / 24.0,
    WEIGHT_SCALE / 6.0,
    WEIGHT_SCALE / 2.0,
];
/// `1.5 * 2^23`: adding it rounds a float of magnitude below `2^22` to an integer (ties to even).
const ROUNDING_SHIFT: f32 = 12_582_912.0;

/// The kernel a CPU runs (both give the same bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Portable,
    /// AVX-512 with VNNI (the integer products, `VPDPBUSD`) and VBMI (byte shuffles).
    Avx512Vnni,
}

impl Kernel {
    /// The fastest kernel this CPU runs for heads of `head_dim` values.
    pub fn detect(head_dim: usize) -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            if head_dim.is_multiple_of(16)
                && head_dim <= 64
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vbmi")
                && std::arch::is_x86_feature_detected!("avx512vnni")
            {
                return Kernel::Avx512Vnni;
            }
        }
        let _ = head_dim;
        Kernel::Portable
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Portable => "portable",
            Kernel::Avx512Vnni => "avx512-vnni",
        }
    }
}

/// The shape of one text's attention: `tokens` rows of `heads * head_dim` floats in each of the
/// query, key, value and output matrices (row-major, head `h` in columns `h * head_dim ..`).
#[derive(Clone, Copy, Debug)]
pub struct AttentionShape {
    pub tokens: usize,
    pub heads: usize,
    pub head_dim: usize,
}

impl AttentionShape {
    /// The shape of `hidden`-wide rows split into `heads` heads; heads of a size that is not a
    /// multiple of four (the integer products take four values at a time) are refused.
    pub fn new(tokens: usize, hidden: usize, heads: usize) -> Result<Self> {
        if heads == 0 || !hidden.is_multiple_of(heads) {
            return Err(Error::invalid(format!(
                "attention: {hidden} hidden units do not split into {heads} heads"
            )));
        }
        let head_dim = hidden / heads;
        if !head_dim.is_multiple_of(4) {
            return Err(Error::invalid(format!(
                "attention: int8 attention needs a head size that is a multiple of 4, got {head_dim}"
            )));
        }
        Ok(AttentionShape {
            tokens,
            heads,
            head_dim,
        })
    }

    fn hidden(&self) -> usize {
        self.heads * self.head_dim
    }
}

/// `softmax(scale * q k^T) v` per head, in int8 (see the module documentation), written to `out`;
/// `kernel` from [`Kernel::detect`] (a kernel the CPU cannot run is refused).
pub fn quantized_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
    shape: AttentionShape,
    scale: f32,
    kernel: Kernel,
) -> Result<()> {
    let size = shape.tokens * shape.hidden();
    if [q.len(), k.len(), v.len(), out.len()] != [size; 4] {
        return Err(Error::invalid(format!(
            "attention: queries, keys, values and output must each hold {} x {} floats, got {}, {}, {} and {}",
            shape.tokens,
            shape.hidden(),
            q.len(),
            k.len(),
            v.len(),
            out.len()
        )));
    }
    if kernel != Kernel::Portable && kernel != Kernel::detect(shape.head_dim) {
        return Err(Error::invalid(format!(
            "attention: this CPU cannot run the {} kernel for heads of {}",
            kernel.name(),
            shape.head_dim
        )));
    }
    for (name, m) in [("queries", q), ("keys", k), ("values", v)] {
        // An exponent of all ones is an infinity or a NaN; the fold vectorizes, `position` would not.
        let non_finite = |x: &f32| x.to_bits() & 0x7f80_0000 == 0x7f80_0000;
        if m.iter().fold(false, |any, x| any | non_finite(x)) {
            let at = m.iter().position(non_finite).unwrap_or(0);
            return Err(Error::invalid(format!(
                "attention: {name} hold a non-finite value ({}) at token {}, unit {}",
                m[at],
                at / shape.hidden(),
                at % shape.hidden()
            )));
        }
    }
    if shape.tokens == 0 {
        return Ok(());
    }
    match kernel {
        // SAFETY: the CPU has the kernel's features (checked above).
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512Vnni => unsafe { avx512::attend_heads([q, k, v], out, shape, scale) },
        _ => attend_heads([q, k, v], out, shape, scale, Kernel::Portable),
    }
    Ok(())
}

/// Every head of queries, keys and values `qkv`, with `kernel`'s products and softmax; the quantization
/// and the output inlined into the caller, so that the AVX-512 kernel's copy of them is vectorized with
/// its instructions.
#[inline(always)]
fn attend_heads(
    qkv: [&[f32]; 3],
    out: &mut [f32],
    shape: AttentionShape,
    scale: f32,
    kernel: Kernel,
) {
    let [q, k, v] = qkv;
    let mut head = Head::new(shape);
    for h in 0..shape.heads {
        match kernel {
            // SAFETY: only avx512::attend_heads passes this kernel, on a CPU that has it.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => unsafe { avx512::pack(&mut head, q, k, v, h) },
            _ => head.pack(q, k, v, h),
        }
        for first in (0..head.query_rows).step_by(ROW_BLOCK) {
            head.attend(first, h, scale, kernel, out);
        }
    }
}

/// One head's quantized operands and the scratch of a block of query rows.
struct Head {
    shape: AttentionShape,
    /// Query rows padded to a multiple of [`ROW_BLOCK`]; keys padded to a multiple of [`KEY_BLOCK`].
    query_rows: usize,
    keys: usize,
    /// `query_words[i * groups + g]`: query `i`'s values `4g .. 4g + 4` as unsigned bytes (int8 + 128).
    query_words: Vec<i32>,
    query_scales: Vec<f32>,
    /// `key_words[g * keys + j]`: key `j`'s values `4g .. 4g + 4` as signed bytes.
    key_words: Vec<i32>,
    key_scales: Vec<f32>,
    /// `-128 * sum of key j's int8 values`: takes away what the +128 of the unsigned queries adds to
    /// their products (the products' starting value).
    key_corrections: Vec<i32>,
    /// `value_words[(j / 4) * head_dim + c]`: channel `c` of values `j .. j + 4` as signed bytes.
    value_words: Vec<i32>,
    value_scales: Vec<f32>,
    scores: Vec<f32>,
    /// Each row's largest score over the real keys.
    tops: [f32; ROW_BLOCK],
    /// Each row's weights rounded to sixteen bits (zero past the real keys), `2 * keys` bytes a row:
    /// per sixteen keys, their low bytes then their high bytes.
    weights: Vec<u8>,
    weight_sums: [i32; ROW_BLOCK],
    /// Each row's integer weighted sums of the values by the high and by the low bytes.
    high_products: Vec<i32>,
    low_products: Vec<i32>,
}

impl Head {
    fn new(shape: AttentionShape) -> Self {
        let query_rows = shape.tokens.div_ceil(ROW_BLOCK) * ROW_BLOCK;
        let keys = shape.tokens.div_ceil(KEY_BLOCK) * KEY_BLOCK;
        let groups = shape.head_dim / 4;
        Head {
            shape,
            query_rows,
            keys,
            query_words: vec![0; query_rows * groups],
            query_scales: vec![0.0; query_rows],
            key_words: vec![0; groups * keys],
            key_scales: vec![0.0; keys],
            key_corrections: vec![0; keys],
            value_words: vec![0; keys / 4 * shape.head_dim],
            value_scales: vec![0.0; shape.head_dim],
            scores: vec![0.0; ROW_BLOCK * keys],
            tops: [0.0; ROW_BLOCK],
            weights: vec![0; ROW_BLOCK * 2 * keys],
            weight_sums: [0; ROW_BLOCK],
            high_products: vec![0; ROW_BLOCK * shape.head_dim],
            low_products: vec![0; ROW_BLOCK * shape.head_dim],
        }
    }

    /// Quantize head `h` of `q`, `k` and `v` into the packed layouts (the portable kernel's way;
    /// [`avx512::pack`] gives the same words).
    fn pack(&mut self, q: &[f32], k: &[f32], v: &[f32], h: usize) {
        let AttentionShape {
            tokens, head_dim, ..
        } = self.shape;
        let hidden = self.shape.hidden();
        let groups = head_dim / 4;
        let span = |i: usize| i * hidden + h * head_dim..i * hidden + (h + 1) * head_dim;
        let mut bytes = vec![0i8; head_dim];
        self.query_words.fill(i32::from_le_bytes([128; 4]));
        self.query_scales.fill(0.0);
        for i in 0..tokens {
            self.query_scales[i] = quantize(&q[span(i)], &mut bytes);
            for g in 0..groups {
                let word: [u8; 4] = std::array::from_fn(|b| (bytes[4 * g + b] as i16 + 128) as u8);
                self.query_words[i * groups + g] = i32::from_le_bytes(word);
            }
        }
        self.key_words.fill(0);
        self.key_scales.fill(0.0);
        self.key_corrections.fill(0);
        for j in 0..tokens {
            self.key_scales[j] = quantize(&k[span(j)], &mut bytes);
            self.key_corrections[j] = -128 * bytes.iter().map(|&b| b as i32).sum::<i32>();
            for g in 0..groups {
                let word: [u8; 4] = std::array::from_fn(|b| bytes[4 * g + b] as u8);
                self.key_words[g * self.keys + j] = i32::from_le_bytes(word);
            }
        }
        // Values: one scale per channel, bytes laid out as value_words reads them.
        let inverse = self.value_scales_of(v, h);
        let mut value_bytes = vec![0u8; self.value_words.len() * 4];
        for j in 0..tokens {
            for (c, (&x, &inv)) in v[span(j)].iter().zip(&inverse).enumerate() {
                value_bytes[(j / 4 * head_dim + c) * 4 + j % 4] = nearest(x * inv) as i8 as u8;
            }
        }
        for (word, bytes) in self.value_words.iter_mut().zip(value_bytes.chunks_exact(4)) {
            *word = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
    }

    /// Set each channel's value scale of head `h` (the largest magnitude over the tokens / 127);
    /// the inverses, `127 / largest` (0 for an all-zero channel).
    #[inline(always)]
    fn value_scales_of(&mut self, v: &[f32], h: usize) -> Vec<f32> {
        let (head_dim, hidden) = (self.shape.head_dim, self.shape.hidden());
        let mut largest_bits = vec![0u32; head_dim];
        for row in v.chunks_exact(hidden).take(self.shape.tokens) {
            for (m, x) in largest_bits
                .iter_mut()
                .zip(&row[h * head_dim..(h + 1) * head_dim])
            {
                *m = (*m).max(magnitude_bits(*x));
            }
        }
        let mut inverse = vec![0f32; head_dim];
        for c in 0..head_dim {
            let largest = f32::from_bits(largest_bits[c]);
            self.value_scales[c] = largest / 127.0;
            inverse[c] = if largest == 0.0 { 0.0 } else { 127.0 / largest };
        }
        inverse
    }

    /// Query rows `first .. first + ROW_BLOCK` of head `h`: scores, weights, and the real rows'
    /// outputs into `out`.
    #[inline(always)]
    fn attend(&mut self, first: usize, h: usize, scale: f32, kernel: Kernel, out: &mut [f32]) {
        let row_scales: [f32; ROW_BLOCK] =
            std::array::from_fn(|r| self.query_scales[first + r] * scale);
        // SAFETY (each AVX-512 call): only avx512::attend_heads passes this kernel, on a CPU that has it.
        let vector = cfg!(target_arch = "x86_64") && kernel == Kernel::Avx512Vnni;
        match vector {
            #[cfg(target_arch = "x86_64")]
            true => unsafe { avx512::scores(self, first, &row_scales) },
            _ => portable::scores(self, first, &row_scales),
        }
        let keys = self.keys;
        for r in 0..ROW_BLOCK {
            let (scores, top) = (&self.scores[r * keys..(r + 1) * keys], self.tops[r]);
            let weights = &mut self.weights[2 * r * keys..2 * (r + 1) * keys];
            self.weight_sums[r] = match vector {
                #[cfg(target_arch = "x86_64")]
                true => unsafe { avx512::weights(scores, self.shape.tokens, top, weights) },
                _ => portable::weights(scores, self.shape.tokens, top, weights),
            };
        }
        match vector {
            #[cfg(target_arch = "x86_64")]
            true => unsafe { avx512::weighted_values(self) },
            _ => portable::weighted_values(self),
        }
        let (d, hidden) = (self.shape.head_dim, self.shape.hidden());
        for r in 0..ROW_BLOCK.min(self.shape.tokens.saturating_sub(first)) {
            let share = 1.0 / self.weight_sums[r] as f32;
            let row = &mut out[(first + r) * hidden + h * d..(first + r) * hidden + (h + 1) * d];
            let high = &self.high_products[r * d..(r + 1) * d];
            let low = &self.low_products[r * d..(r + 1) * d];
            for (((o, &high), &low), &scale) in
                row.iter_mut().zip(high).zip(low).zip(&self.value_scales)
            {
                *o = (high as f32 * 256.0 + low as f32) * (scale * share);
            }
        }
    }
}

/// `x` (finite) rounded to int8 in `bytes` with a symmetric scale (returned: `x ~ scale * bytes`); an
/// all-zero row gets scale 0.
#[inline(always)]
fn quantize(x: &[f32], bytes: &mut [i8]) -> f32 {
    let largest = f32::from_bits(x.iter().fold(0, |m, v| m.max(magnitude_bits(*v))));
    if largest == 0.0 {
        bytes.fill(0);
        return 0.0;
    }
    let inverse = 127.0 / largest;
    for (b, &v) in bytes.iter_mut().zip(x) {
        *b = nearest(v * inverse) as i8;
    }
    largest / 127.0
}

/// The bits of `|x|`, which order finite magnitudes as the floats do: their maximum is a vectorized
/// integer maximum (a float maximum is not, for its NaN rules).
#[inline(always)]
fn magnitude_bits(x: f32) -> u32 {
    x.to_bits() & 0x7fff_ffff
}

/// `x` rounded to the nearest integer, ties to even, for `|x| < 2^22`: the float addition rounds
/// (inline, where `round_ties_even` is a library call on CPUs without SSE4.1 in the baseline).
#[inline(always)]
fn nearest(x: f32) -> i32 {
    ((x + ROUNDING_SHIFT) - ROUNDING_SHIFT) as i32
}

/// `WEIGHT_SCALE * exp(x)` for `x <= 0` (the score minus its row's maximum), as both kernels
/// compute it.
fn scaled_exp(x: f32) -> f32 {
    let x = x.max(LOWEST_EXPONENT);
    let n = x.mul_add(LOG2_E, ROUNDING_SHIFT) - ROUNDING_SHIFT;
    let r = (-n).mul_add(LN2_HIGH, x);
    let r = (-n).mul_add(LN2_LOW, r);
    let p = WEIGHT_POLY[1..]
        .iter()
        .fold(WEIGHT_POLY[0], |p, &c| p.mul_add(r, c));
    let e = p.mul_add(r * r, r.mul_add(WEIGHT_SCALE, WEIGHT_SCALE));
    e * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// Where the four weight bytes (low or `high`) of row `r` at keys `4 * group ..` are, in
/// [`Head::weights`] of rows of `keys` keys.
#[inline(always)]
fn weight_bytes_at(r: usize, keys: usize, group: usize, high: bool) -> usize {
    2 * r * keys + 32 * (group / 4) + 4 * (group % 4) + if high { 16 } else { 0 }
}

mod portable {
    use super::{nearest, scaled_exp, weight_bytes_at, Head, KEY_BLOCK, ROW_BLOCK};

    pub(super) fn scores(head: &mut Head, first: usize, row_scales: &[f32; ROW_BLOCK]) {
        let (keys, groups) = (head.keys, head.shape.head_dim / 4);
        let queries = &head.query_words[first * groups..(first + ROW_BLOCK) * groups];
        for r in 0..ROW_BLOCK {
            head.tops[r] = f32::NEG_INFINITY;
            for j in 0..keys {
                let mut acc = head.key_corrections[j];
                for g in 0..groups {
                    let a = queries[r * groups + g].to_le_bytes();
                    let b = head.key_words[g * keys + j].to_le_bytes();
                    for t in 0..4 {
                        acc += a[t] as i32 * b[t] as i8 as i32;
                    }
                }
                let score = acc as f32 * head.key_scales[j] * row_scales[r];
                head.scores[r * keys + j] = score;
                if j < head.shape.tokens {
                    head.tops[r] = head.tops[r].max(score);
                }
            }
        }
        debug_assert_eq!(keys % KEY_BLOCK, 0);
    }

    /// Round the softmax of `scores[..tokens]` (their largest: `top`) to sixteen bits of its
    /// largest into `weights` (laid out as [`Head::weights`]' rows; zero past `tokens`); the sum of
    /// the rounded weights.
    pub(super) fn weights(scores: &[f32], tokens: usize, top: f32, weights: &mut [u8]) -> i32 {
        let mut sum = 0;
        for j in 0..weights.len() / 2 {
            let w = if j < tokens {
                nearest(scaled_exp(scores[j] - top))
            } else {
                0
            };
            weights[weight_bytes_at(0, 0, j / 4, false) + j % 4] = w as u8;
            weights[weight_bytes_at(0, 0, j / 4, true) + j % 4] = (w >> 8) as u8;
            sum += w;
        }
        sum
    }

    pub(super) fn weighted_values(head: &mut Head) {
        let (d, keys) = (head.shape.head_dim, head.keys);
        for r in 0..ROW_BLOCK {
            for c in 0..d {
                let (mut high, mut low) = (0i32, 0i32);
                for j in 0..keys {
                    let value = head.value_words[j / 4 * d + c].to_le_bytes()[j % 4] as i8 as i32;
                    let at = |high| weight_bytes_at(r, keys, j / 4, high) + j % 4;
                    high += head.weights[at(true)] as i32 * value;
                    low += head.weights[at(false)] as i32 * value;
                }
                head.high_products[r * d + c] = high;
                head.low_products[r * d + c] = low;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{
        weight_bytes_at, Head, KEY_BLOCK, LN2_HIGH, LN2_LOW, LOG2_E, LOWEST_EXPONENT,
        ROUNDING_SHIFT, ROW_BLOCK, WEIGHT_POLY, WEIGHT_SCALE,
    };
    use std::arch::x86_64::*;

    /// [`Head::pack`], sixteen values at a time (the same words: the same scales, and
    /// `VCVTPS2DQ` rounds to nearest even as `nearest` does).
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub(super) fn pack(head: &mut Head, q: &[f32], k: &[f32], v: &[f32], h: usize) {
        let (tokens, d, keys) = (head.shape.tokens, head.shape.head_dim, head.keys);
        let (hidden, groups, blocks) = (head.shape.hidden(), d / 4, d / 16);
        assert!(d.is_multiple_of(16) && q.len().min(k.len()).min(v.len()) >= tokens * hidden);
        assert!(head.query_words.len() >= tokens * groups && head.key_words.len() >= groups * keys);
        assert!(head.value_words.len() >= keys / 4 * d);
        // Row `i` of head `h` rounded to int8 with its own scale: (scale, 16 bytes per block, the
        // bytes' sum).
        let quantize_row = |m: &[f32], i: usize| -> (f32, [__m128i; 4], i32) {
            let at = i * hidden + h * d;
            let mut rows = [_mm512_setzero_ps(); 4];
            let mut largest = _mm512_setzero_ps();
            for (b, row) in rows.iter_mut().enumerate().take(blocks) {
                // SAFETY: at + 16 * b + 16 <= tokens * hidden <= m.len().
                *row = unsafe { _mm512_loadu_ps(m.as_ptr().add(at + 16 * b)) };
                largest = _mm512_max_ps(largest, _mm512_abs_ps(*row));
            }
            let largest = _mm512_reduce_max_ps(largest);
            let inverse = _mm512_set1_ps(if largest == 0.0 { 0.0 } else { 127.0 / largest });
            let mut bytes = [_mm_setzero_si128(); 4];
            let mut sum = _mm512_setzero_si512();
            for b in 0..blocks {
                let ints = _mm512_cvtps_epi32(_mm512_mul_ps(rows[b], inverse));
                sum = _mm512_add_epi32(sum, ints);
                bytes[b] = _mm512_cvtsepi32_epi8(ints);
            }
            (largest / 127.0, bytes, _mm512_reduce_add_epi32(sum))
        };
        head.query_words.fill(i32::from_le_bytes([128; 4]));
        head.query_scales.fill(0.0);
        for i in 0..tokens {
            let (scale, bytes, _) = quantize_row(q, i);
            head.query_scales[i] = scale;
            for (b, bytes) in bytes.iter().take(blocks).enumerate() {
                // +128 (the unsigned operand of VPDPBUSD) is the top bit flipped.
                let unsigned = _mm_xor_si128(*bytes, _mm_set1_epi8(-128));
                // SAFETY: (i * groups + 4 * b + 4) words <= tokens * groups.
                unsafe {
                    _mm_storeu_si128(
                        head.query_words.as_mut_ptr().add(i * groups + 4 * b).cast(),
                        unsigned,
                    )
                };
            }
        }
        head.key_words.fill(0);
        head.key_scales.fill(0.0);
        head.key_corrections.fill(0);
        for j in 0..tokens {
            let (scale, bytes, sum) = quantize_row(k, j);
            head.key_scales[j] = scale;
            head.key_corrections[j] = -128 * sum;
            for (b, bytes) in bytes.iter().take(blocks).enumerate() {
                let mut words = [0i32; 4];
                // SAFETY: four words are sixteen bytes.
                unsafe { _mm_storeu_si128(words.as_mut_ptr().cast(), *bytes) };
                for (w, word) in words.into_iter().enumerate() {
                    head.key_words[(4 * b + w) * keys + j] = word;
                }
            }
        }
        let inverse = head.value_scales_of(v, h);
        head.value_words.fill(0);
        // Four tokens' bytes of sixteen channels, transposed so that each channel's four are one word.
        for j in (0..tokens).step_by(4) {
            for b in 0..blocks {
                // SAFETY: 16 * b + 16 <= d = inverse.len().
                let scales = unsafe { _mm512_loadu_ps(inverse.as_ptr().add(16 * b)) };
                let row = |t: usize| -> __m128i {
                    if j + t >= tokens {
                        return _mm_setzero_si128();
                    }
                    // SAFETY: (j + t) * hidden + h * d + 16 * b + 16 <= tokens * hidden.
                    let x = unsafe {
                        _mm512_loadu_ps(v.as_ptr().add((j + t) * hidden + h * d + 16 * b))
                    };
                    _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x, scales)))
                };
                let (t0, t1, t2, t3) = (row(0), row(1), row(2), row(3));
                let (low01, high01) = (_mm_unpacklo_epi8(t0, t1), _mm_unpackhi_epi8(t0, t1));
                let (low23, high23) = (_mm_unpacklo_epi8(t2, t3), _mm_unpackhi_epi8(t2, t3));
                let words = [
                    _mm_unpacklo_epi16(low01, low23),
                    _mm_unpackhi_epi16(low01, low23),
                    _mm_unpacklo_epi16(high01, high23),
                    _mm_unpackhi_epi16(high01, high23),
                ];
                for (w, words) in words.into_iter().enumerate() {
                    // SAFETY: (j / 4) * d + 16 * b + 4 * w + 4 <= keys / 4 * d.
                    unsafe {
                        _mm_storeu_si128(
                            head.value_words
                                .as_mut_ptr()
                                .add(j / 4 * d + 16 * b + 4 * w)
                                .cast(),
                            words,
                        )
                    };
                }
            }
        }
    }

    /// [`super::attend_heads`] compiled for AVX-512.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub(super) fn attend_heads(
        qkv: [&[f32]; 3],
        out: &mut [f32],
        shape: super::AttentionShape,
        scale: f32,
    ) {
        super::attend_heads(qkv, out, shape, scale, super::Kernel::Avx512Vnni)
    }

    /// Scores of [`ROW_BLOCK`] query rows against every (padded) key, [`KEY_BLOCK`] keys at a time.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub(super) fn scores(head: &mut Head, first: usize, row_scales: &[f32; ROW_BLOCK]) {
        let (keys, groups) = (head.keys, head.shape.head_dim / 4);
        let queries = &head.query_words[first * groups..(first + ROW_BLOCK) * groups];
        assert!(queries.len() >= ROW_BLOCK * groups && head.key_words.len() >= groups * keys);
        assert!(head.scores.len() >= ROW_BLOCK * keys && head.key_corrections.len() >= keys);
        let mut tops = [_mm512_set1_ps(f32::NEG_INFINITY); ROW_BLOCK];
        for j in (0..keys).step_by(KEY_BLOCK) {
            // SAFETY: j + 32 <= keys <= key_corrections.len().
            let corrections = unsafe {
                let base = head.key_corrections.as_ptr().add(j);
                [
                    _mm512_loadu_si512(base.cast()),
                    _mm512_loadu_si512(base.add(16).cast()),
                ]
            };
            let mut acc = [corrections; ROW_BLOCK];
            for g in 0..groups {
                // SAFETY: g * keys + j + 32 <= groups * keys (keys is a multiple of KEY_BLOCK).
                let (k0, k1) = unsafe {
                    let base = head.key_words.as_ptr().add(g * keys + j);
                    (
                        _mm512_loadu_si512(base.cast()),
                        _mm512_loadu_si512(base.add(16).cast()),
                    )
                };
                for (r, acc) in acc.iter_mut().enumerate() {
                    let a = _mm512_set1_epi32(queries[r * groups + g]);
                    acc[0] = _mm512_dpbusd_epi32(acc[0], a, k0);
                    acc[1] = _mm512_dpbusd_epi32(acc[1], a, k1);
                }
            }
            for half in 0..2 {
                let at = j + 16 * half;
                // SAFETY: at + 16 <= keys (asserted lengths above).
                let key_scales = unsafe { _mm512_loadu_ps(head.key_scales.as_ptr().add(at)) };
                for (r, acc) in acc.iter().enumerate() {
                    let s = _mm512_cvtepi32_ps(acc[half]);
                    let s =
                        _mm512_mul_ps(_mm512_mul_ps(s, key_scales), _mm512_set1_ps(row_scales[r]));
                    // SAFETY: r * keys + at + 16 <= ROW_BLOCK * keys.
                    unsafe { _mm512_storeu_ps(head.scores.as_mut_ptr().add(r * keys + at), s) };
                    tops[r] = _mm512_mask_max_ps(tops[r], live(head.shape.tokens, at), tops[r], s);
                }
            }
        }
        for (top, lanes) in head.tops.iter_mut().zip(tops) {
            *top = _mm512_reduce_max_ps(lanes);
        }
    }

    /// The lanes of keys `at .. at + 16` that are real (below `tokens`).
    #[inline(always)]
    fn live(tokens: usize, at: usize) -> __mmask16 {
        let n = tokens.saturating_sub(at).min(16);
        ((1u32 << n) - 1) as __mmask16
    }

    /// [`super::portable::weights`], sixteen scores at a time.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub(super) fn weights(scores: &[f32], tokens: usize, top: f32, weights: &mut [u8]) -> i32 {
        let keys = weights.len() / 2;
        assert!(scores.len() >= keys && keys.is_multiple_of(16) && tokens <= keys);
        let top = _mm512_set1_ps(top);
        // Byte 0 of each of the sixteen lanes, then byte 1: the low bytes, then the high ones.
        let split = _mm512_set_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 61, 57, 53, 49, 45, 41, 37, 33, 29, 25, 21, 17, 13, 9, 5, 1, 60, 56, 52, 48,
            44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0,
        );
        let mut sum = _mm512_setzero_si512();
        for at in (0..keys).step_by(16) {
            // SAFETY: at + 16 <= keys <= scores.len().
            let s = unsafe { _mm512_loadu_ps(scores.as_ptr().add(at)) };
            let w = _mm512_maskz_cvtps_epi32(live(tokens, at), scaled_exp(_mm512_sub_ps(s, top)));
            sum = _mm512_add_epi32(sum, w);
            let bytes = _mm512_castsi512_si256(_mm512_permutexvar_epi8(split, w));
            // SAFETY: weight_bytes_at(0, 0, at / 4, false) + 32 = 2 * at + 32 <= 2 * keys.
            unsafe {
                _mm256_storeu_si256(
                    weights
                        .as_mut_ptr()
                        .add(weight_bytes_at(0, 0, at / 4, false))
                        .cast(),
                    bytes,
                )
            };
        }
        _mm512_reduce_add_epi32(sum)
    }

    /// [`super::scaled_exp`], operation for operation.
    #[target_feature(enable = "avx512f")]
    fn scaled_exp(x: __m512) -> __m512 {
        let x = _mm512_max_ps(x, _mm512_set1_ps(LOWEST_EXPONENT));
        let shift = _mm512_set1_ps(ROUNDING_SHIFT);
        let n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(LOG2_E), shift), shift);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HIGH), x);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LOW), r);
        let mut p = _mm512_set1_ps(WEIGHT_POLY[0]);
        for &c in &WEIGHT_POLY[1..] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        let scale = _mm512_set1_ps(WEIGHT_SCALE);
        let e = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_fmadd_ps(r, scale, scale));
        // e * 2^n: exact, as the portable kernel's product with a power of two (n >= -116).
        _mm512_scalef_ps(e, n)
    }

    /// Each row's integer weighted sums of the values by its weights' high and low bytes, head sizes
    /// of 16 to 64 (`ROWS` rows a pass: their sums stay in registers).
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub(super) fn weighted_values(head: &mut Head) {
        match head.shape.head_dim / 16 {
            1 => weighted_values_of::<1, 4>(head),
            2 => weighted_values_of::<2, 4>(head),
            3 => weighted_values_of::<3, 2>(head),
            _ => weighted_values_of::<4, 2>(head),
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    fn weighted_values_of<const BLOCKS: usize, const ROWS: usize>(head: &mut Head) {
        let (d, keys) = (head.shape.head_dim, head.keys);
        assert!(d == 16 * BLOCKS && head.value_words.len() >= keys / 4 * d);
        assert!(head.weights.len() >= ROW_BLOCK * 2 * keys);
        assert!(
            head.high_products.len() >= ROW_BLOCK * d && head.low_products.len() >= ROW_BLOCK * d
        );
        // Reads four weight bytes of row `r` at key `4 * group` of a plane.
        // The four weight bytes of row `r` at keys `4 * group ..`, in each of the four lanes.
        let word = |r: usize, group: usize, high: bool| -> __m512i {
            let at = weight_bytes_at(r, keys, group, high);
            // SAFETY: at + 4 <= 2 * ROW_BLOCK * keys <= weights.len().
            let bytes = unsafe { head.weights.as_ptr().add(at).cast::<i32>().read_unaligned() };
            _mm512_set1_epi32(bytes)
        };
        for first in (0..ROW_BLOCK).step_by(ROWS) {
            let mut high = [[_mm512_setzero_si512(); BLOCKS]; ROWS];
            let mut low = [[_mm512_setzero_si512(); BLOCKS]; ROWS];
            for group in 0..keys / 4 {
                let values: [__m512i; BLOCKS] = std::array::from_fn(|b| {
                    // SAFETY: group * d + 16 * b + 16 <= keys / 4 * d.
                    unsafe {
                        _mm512_loadu_si512(head.value_words.as_ptr().add(group * d + 16 * b).cast())
                    }
                });
                for r in 0..ROWS {
                    let (h, l) = (word(first + r, group, true), word(first + r, group, false));
                    for b in 0..BLOCKS {
                        high[r][b] = _mm512_dpbusd_epi32(high[r][b], h, values[b]);
                        low[r][b] = _mm512_dpbusd_epi32(low[r][b], l, values[b]);
                    }
                }
            }
            for r in 0..ROWS {
                for b in 0..BLOCKS {
                    let at = (first + r) * d + 16 * b;
                    // SAFETY: at + 16 <= ROW_BLOCK * d.
                    unsafe {
                        _mm512_storeu_si512(
                            head.high_products.as_mut_ptr().add(at).cast(),
                            high[r][b],
                        );
                        _mm512_storeu_si512(
                            head.low_products.as_mut_ptr().add(at).cast(),
                            low[r][b],
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn matrix(rng: &mut SplitMix64, n: usize, spread: f64) -> Vec<f32> {
        (0..n)
            .map(|_| ((rng.unit() * 2.0 - 1.0) * spread) as f32)
            .collect()
    }

    /// Float attention, the reference.
    fn float_attention(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        shape: AttentionShape,
        scale: f32,
    ) -> Vec<f32> {
        let (n, d, hidden) = (shape.tokens, shape.head_dim, shape.hidden());
        let mut out = vec![0f32; n * hidden];
        for h in 0..shape.heads {
            for i in 0..n {
                let s: Vec<f64> = (0..n)
                    .map(|j| {
                        (0..d)
                            .map(|c| (q[i * hidden + h * d + c] * k[j * hidden + h * d + c]) as f64)
                            .sum::<f64>()
                            * scale as f64
                    })
                    .collect();
                let top = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = e.iter().sum();
                for c in 0..d {
                    let o: f64 = (0..n)
                        .map(|j| e[j] * v[j * hidden + h * d + c] as f64)
                        .sum();
                    out[i * hidden + h * d + c] = (o / total) as f32;
                }
            }
        }
        out
    }

    /// Queries and keys uniform in `[-spread, spread]`, values in `[-1, 1]`.
    fn operands(rng: &mut SplitMix64, shape: AttentionShape, spread: f64) -> [Vec<f32>; 3] {
        let size = shape.tokens * shape.hidden();
        [
            matrix(rng, size, spread),
            matrix(rng, size, spread),
            matrix(rng, size, 1.0),
        ]
    }

    fn run(q: &[f32], k: &[f32], v: &[f32], shape: AttentionShape, kernel: Kernel) -> Vec<f32> {
        let mut out = vec![f32::NAN; q.len()];
        quantized_attention(q, k, v, &mut out, shape, 0.25, kernel).unwrap();
        out
    }

    /// (tokens, heads, hidden): one token, short texts, 12 heads of 32, heads of 6, 12, 16, 32 and 48.
    const CASES: [(usize, usize, usize); 8] = [
        (1, 2, 64),
        (5, 2, 64),
        (9, 2, 64),
        (33, 12, 384),
        (37, 4, 128),
        (70, 2, 24),
        (77, 1, 48),
        (200, 2, 128),
    ];

    #[test]
    fn close_to_float_attention() {
        let mut rng = SplitMix64::new(7);
        for (tokens, heads, hidden) in CASES {
            let shape = AttentionShape::new(tokens, hidden, heads).unwrap();
            let [q, k, v] = operands(&mut rng, shape, 2.0);
            let exact = float_attention(&q, &k, &v, shape, 0.25);
            let got = run(&q, &k, &v, shape, Kernel::Portable);
            let worst = exact
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                worst < 0.02,
                "{tokens} tokens, {heads} heads: largest error {worst}"
            );
        }
    }

    #[test]
    fn kernels_give_the_same_bits() {
        let mut rng = SplitMix64::new(11);
        for (tokens, heads, hidden) in CASES {
            let shape = AttentionShape::new(tokens, hidden, heads).unwrap();
            let kernel = Kernel::detect(shape.head_dim);
            if kernel == Kernel::Portable {
                continue; // this CPU has one kernel only
            }
            let [q, k, v] = operands(&mut rng, shape, 3.0);
            let portable = run(&q, &k, &v, shape, Kernel::Portable);
            let fast = run(&q, &k, &v, shape, kernel);
            assert!(
                portable
                    .iter()
                    .zip(&fast)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{tokens} tokens, {heads} heads: the kernels differ"
            );
        }
    }

    #[test]
    fn one_token_attends_to_itself() {
        let shape = AttentionShape::new(1, 8, 2).unwrap();
        let v = [0.5, -1.0, 2.0, 0.25, 3.0, -3.0, 1.0, 0.0];
        let out = run(&[1.0; 8], &[1.0; 8], &v, shape, Kernel::detect(4));
        for (o, x) in out.iter().zip(v) {
            assert!((o - x).abs() <= x.abs() / 127.0, "{o} for {x}");
        }
    }

    #[test]
    fn refuses_what_it_cannot_compute() {
        assert!(AttentionShape::new(4, 30, 4).is_err()); // 30 units in 4 heads
        assert!(AttentionShape::new(4, 24, 4).is_err()); // heads of 6
        let shape = AttentionShape::new(2, 8, 2).unwrap();
        let mut out = vec![0f32; 15];
        let err = quantized_attention(
            &[0.0; 16],
            &[0.0; 16],
            &[0.0; 16],
            &mut out,
            shape,
            1.0,
            Kernel::Portable,
        );
        assert!(err
            .unwrap_err()
            .to_string()
            .contains("must each hold 2 x 8 floats"));
    }
}
