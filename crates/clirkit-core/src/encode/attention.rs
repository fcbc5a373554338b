//! Multi-head self-attention of one unpadded text with int8 products: what onnxruntime's
//! `MultiHeadAttention` computes in float32, for a dynamically quantized encoder's fast mode.
//!
//! Per head, each query and each key row is quantized to int8 with a scale of its own (symmetric:
//! `max |x| / 127`), the values with a scale per channel. The scores `q . k` are exact integer dot
//! products (AVX-512 VNNI: 64 multiply-adds an instruction, four times float32's), rescaled to float
//! in base-2 units (times `log2 e`) and put through a float softmax of powers of two; each weight is
//! then rounded to sixteen bits of its row's largest (which is 1 once the maximum is subtracted), kept
//! as a low and a high byte, and the output is the integer weighted sum of the values by each byte,
//! divided by the sum of the rounded weights, so a row's weights still sum to one. Sixteen bits lose nothing against float weights; eight would zero
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
const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// `WEIGHT_SCALE * 2^r` on `|r| <= 1/2`, highest power first: a near-minimax quartic fitted to the
/// relative error (below 3e-6, a fifth of a weight's rounding step; `scaled_exp2_is_accurate`),
/// where a Taylor polynomial needs a fifth power for it.
const WEIGHT_POLY: [f32; 5] = [
    WEIGHT_SCALE * 0.009_570_101,
    WEIGHT_SCALE * 0.055_917_86,
    WEIGHT_SCALE * 0.240_247_44,
    WEIGHT_SCALE * 0.693_121_8,
    WEIGHT_SCALE * 0.999_999_3,
];
/// Below `2^-126` a power of two is not a normal float; `WEIGHT_SCALE * 2^-126` rounds to a weight
/// of zero, as any smaller one does.
const LOWEST_POWER: f32 = -126.0;
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
/// `kernel` from [`Kernel::detect`] (a kernel the CPU cannot run is refused). A non-finite query,
/// key or value is refused (`out` is then left partly written).
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
    if shape.tokens == 0 {
        return Ok(());
    }
    let finite = match kernel {
        // SAFETY: the CPU has the kernel's features (checked above).
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512Vnni => unsafe { avx512::attend_heads([q, k, v], out, shape, scale) },
        _ => attend_heads([q, k, v], out, shape, scale, Kernel::Portable),
    };
    if !finite {
        return Err(non_finite_error([q, k, v], shape));
    }
    Ok(())
}

/// Every head of queries, keys and values `qkv`, with `kernel`'s products and softmax; the quantization
/// and the output inlined into the caller, so that the AVX-512 kernel's copy of them is vectorized with
/// its instructions. False, and `out` left part written, when an operand is not finite: the
/// quantization takes each row's and channel's largest magnitude anyway, so it checks them in passing.
#[inline(always)]
fn attend_heads(
    qkv: [&[f32]; 3],
    out: &mut [f32],
    shape: AttentionShape,
    scale: f32,
    kernel: Kernel,
) -> bool {
    let [q, k, v] = qkv;
    let d = shape.head_dim;
    let largest_values = largest_magnitudes(v, shape);
    if largest_values.iter().any(|&bits| bits >= INFINITY_BITS) {
        return false;
    }
    let mut heads: Vec<Head> = (0..shape.heads)
        .map(|h| Head::new(shape, &largest_values[h * d..(h + 1) * d]))
        .collect();
    // The AVX-512 kernel quantizes every head in one pass over the rows: the operands are read in
    // order, once, where a pass per head would read each row a slice at a time.
    let finite = match kernel {
        // SAFETY: only avx512::attend_heads passes this kernel, on a CPU that has it.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512Vnni => unsafe { avx512::pack(&mut heads, q, k, v) },
        _ => heads
            .iter_mut()
            .enumerate()
            .fold(true, |finite, (h, head)| head.pack(q, k, v, h) & finite),
    };
    if !finite {
        return false;
    }
    let mut block = Block::new(&heads[0]);
    for (h, head) in heads.iter().enumerate() {
        for first in (0..head.query_rows).step_by(ROW_BLOCK) {
            head.attend(&mut block, first, h, scale, kernel, out);
        }
    }
    true
}

/// The bits of an infinity: a magnitude's bits at or above them are an infinity or a NaN.
const INFINITY_BITS: u32 = 0x7f80_0000;

/// Each of the `hidden` channels' largest magnitude over the tokens of `m`, as [`magnitude_bits`].
#[inline(always)]
fn largest_magnitudes(m: &[f32], shape: AttentionShape) -> Vec<u32> {
    let mut largest = vec![0u32; shape.hidden()];
    for row in m.chunks_exact(shape.hidden()).take(shape.tokens) {
        for (bits, x) in largest.iter_mut().zip(row) {
            *bits = (*bits).max(magnitude_bits(*x));
        }
    }
    largest
}

/// The error naming the first non-finite value of the queries, then the keys, then the values.
#[cold]
fn non_finite_error(qkv: [&[f32]; 3], shape: AttentionShape) -> Error {
    let hidden = shape.hidden();
    let first = ["queries", "keys", "values"]
        .into_iter()
        .zip(qkv)
        .find_map(|(name, m)| Some((name, m.iter().position(|x| !x.is_finite())?, m)));
    match first {
        Some((name, at, m)) => Error::invalid(format!(
            "attention: {name} hold a non-finite value ({}) at token {}, unit {}",
            m[at],
            at / hidden,
            at % hidden
        )),
        None => Error::invalid("attention: the operands hold a non-finite value"),
    }
}

/// One head's quantized operands.
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
    /// One scale per channel (its largest magnitude over the tokens / 127), and its inverse
    /// (`127 / largest`, 0 for an all-zero channel).
    value_scales: Vec<f32>,
    value_inverses: Vec<f32>,
}

/// The scratch of a block of [`ROW_BLOCK`] query rows.
struct Block {
    /// Each row's query scale times the attention's scale and `log2 e`: what its integer scores are
    /// multiplied by (with each key's scale).
    row_scales: [f32; ROW_BLOCK],
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

impl Block {
    fn new(head: &Head) -> Self {
        Block {
            scores: vec![0.0; ROW_BLOCK * head.keys],
            row_scales: [0.0; ROW_BLOCK],
            tops: [0.0; ROW_BLOCK],
            weights: vec![0; ROW_BLOCK * 2 * head.keys],
            weight_sums: [0; ROW_BLOCK],
            high_products: vec![0; ROW_BLOCK * head.shape.head_dim],
            low_products: vec![0; ROW_BLOCK * head.shape.head_dim],
        }
    }
}

impl Head {
    /// A head whose values' channels have the largest magnitudes `largest_values` (finite); the
    /// padding rows' queries are zero (128 unsigned), their keys and values zero.
    fn new(shape: AttentionShape, largest_values: &[u32]) -> Self {
        let query_rows = shape.tokens.div_ceil(ROW_BLOCK) * ROW_BLOCK;
        let keys = shape.tokens.div_ceil(KEY_BLOCK) * KEY_BLOCK;
        let groups = shape.head_dim / 4;
        let largest = largest_values.iter().map(|&bits| f32::from_bits(bits));
        Head {
            shape,
            query_rows,
            keys,
            query_words: vec![i32::from_le_bytes([128; 4]); query_rows * groups],
            query_scales: vec![0.0; query_rows],
            key_words: vec![0; groups * keys],
            key_scales: vec![0.0; keys],
            key_corrections: vec![0; keys],
            value_words: vec![0; keys / 4 * shape.head_dim],
            value_scales: largest.clone().map(|x| x / 127.0).collect(),
            value_inverses: largest
                .map(|x| if x == 0.0 { 0.0 } else { 127.0 / x })
                .collect(),
        }
    }

    /// Quantize head `h` of `q`, `k` and `v` into the packed layouts (the portable kernel's way;
    /// [`avx512::pack`] gives the same words); false when a query or key is not finite.
    fn pack(&mut self, q: &[f32], k: &[f32], v: &[f32], h: usize) -> bool {
        let AttentionShape {
            tokens, head_dim, ..
        } = self.shape;
        let hidden = self.shape.hidden();
        let groups = head_dim / 4;
        let span = |i: usize| i * hidden + h * head_dim..i * hidden + (h + 1) * head_dim;
        let mut bytes = vec![0i8; head_dim];
        let mut finite = true;
        for i in 0..tokens {
            self.query_scales[i] = quantize(&q[span(i)], &mut bytes);
            finite &= self.query_scales[i].is_finite();
            for g in 0..groups {
                let word: [u8; 4] = std::array::from_fn(|b| (bytes[4 * g + b] as i16 + 128) as u8);
                self.query_words[i * groups + g] = i32::from_le_bytes(word);
            }
        }
        for j in 0..tokens {
            self.key_scales[j] = quantize(&k[span(j)], &mut bytes);
            finite &= self.key_scales[j].is_finite();
            self.key_corrections[j] = -128 * bytes.iter().map(|&b| b as i32).sum::<i32>();
            for g in 0..groups {
                let word: [u8; 4] = std::array::from_fn(|b| bytes[4 * g + b] as u8);
                self.key_words[g * self.keys + j] = i32::from_le_bytes(word);
            }
        }
        // Values: one scale per channel, bytes laid out as value_words reads them.
        let mut value_bytes = vec![0u8; self.value_words.len() * 4];
        for j in 0..tokens {
            for (c, (&x, &inv)) in v[span(j)].iter().zip(&self.value_inverses).enumerate() {
                value_bytes[(j / 4 * head_dim + c) * 4 + j % 4] = nearest(x * inv) as i8 as u8;
            }
        }
        for (word, bytes) in self.value_words.iter_mut().zip(value_bytes.chunks_exact(4)) {
            *word = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        finite
    }

    /// Query rows `first .. first + ROW_BLOCK` of head `h`: scores, weights, and the real rows'
    /// outputs into `out`.
    #[inline(always)]
    fn attend(
        &self,
        block: &mut Block,
        first: usize,
        h: usize,
        scale: f32,
        kernel: Kernel,
        out: &mut [f32],
    ) {
        block.row_scales = std::array::from_fn(|r| self.query_scales[first + r] * scale * LOG2_E);
        // SAFETY (each AVX-512 call): only avx512::attend_heads passes this kernel, on a CPU that has it.
        let vector = cfg!(target_arch = "x86_64") && kernel == Kernel::Avx512Vnni;
        match vector {
            #[cfg(target_arch = "x86_64")]
            true => unsafe { avx512::scores(self, block, first) },
            _ => portable::scores(self, block, first),
        }
        let keys = self.keys;
        for r in 0..ROW_BLOCK {
            let (scores, top) = (&block.scores[r * keys..(r + 1) * keys], block.tops[r]);
            let weights = &mut block.weights[2 * r * keys..2 * (r + 1) * keys];
            block.weight_sums[r] = match vector {
                #[cfg(target_arch = "x86_64")]
                true => unsafe { avx512::weights(scores, self.shape.tokens, top, weights) },
                _ => portable::weights(scores, self.shape.tokens, top, weights),
            };
        }
        match vector {
            #[cfg(target_arch = "x86_64")]
            true => unsafe { avx512::weighted_values(self, block) },
            _ => portable::weighted_values(self, block),
        }
        let (d, hidden) = (self.shape.head_dim, self.shape.hidden());
        for r in 0..ROW_BLOCK.min(self.shape.tokens.saturating_sub(first)) {
            let share = 1.0 / block.weight_sums[r] as f32;
            let row = &mut out[(first + r) * hidden + h * d..(first + r) * hidden + (h + 1) * d];
            let high = &block.high_products[r * d..(r + 1) * d];
            let low = &block.low_products[r * d..(r + 1) * d];
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

/// `WEIGHT_SCALE * 2^x` for `x <= 0` (the score minus its row's maximum, in base-2 units), as both
/// kernels compute it, up to where it rounds to a weight of zero (below [`LOWEST_POWER`]).
fn scaled_exp2(x: f32) -> f32 {
    let n = x.round_ties_even();
    let r = x - n; // exact
    let p = WEIGHT_POLY[1..]
        .iter()
        .fold(WEIGHT_POLY[0], |p, &c| p.mul_add(r, c));
    if n < LOWEST_POWER {
        return 0.0;
    }
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// Where the four weight bytes (low or `high`) of row `r` at keys `4 * group ..` are, in
/// [`Block::weights`] of rows of `keys` keys.
#[inline(always)]
fn weight_bytes_at(r: usize, keys: usize, group: usize, high: bool) -> usize {
    2 * r * keys + 32 * (group / 4) + 4 * (group % 4) + if high { 16 } else { 0 }
}

mod portable {
    use super::{nearest, scaled_exp2, weight_bytes_at, Block, Head, KEY_BLOCK, ROW_BLOCK};

    pub(super) fn scores(head: &Head, block: &mut Block, first: usize) {
        let (keys, groups) = (head.keys, head.shape.head_dim / 4);
        let queries = &head.query_words[first * groups..(first + ROW_BLOCK) * groups];
        for r in 0..ROW_BLOCK {
            block.tops[r] = f32::NEG_INFINITY;
            for j in 0..keys {
                let mut acc = head.key_corrections[j];
                for g in 0..groups {
                    let a = queries[r * groups + g].to_le_bytes();
                    let b = head.key_words[g * keys + j].to_le_bytes();
                    for t in 0..4 {
                        acc += a[t] as i32 * b[t] as i8 as i32;
                    }
                }
                let score = acc as f32 * head.key_scales[j] * block.row_scales[r];
                block.scores[r * keys + j] = score;
                if j < head.shape.tokens {
                    block.tops[r] = block.tops[r].max(score);
                }
            }
        }
        debug_assert_eq!(keys % KEY_BLOCK, 0);
    }

    /// Round the softmax of `scores[..tokens]` (their largest: `top`) to sixteen bits of its
    /// largest into `weights` (laid out as [`Block::weights`]' rows; zero past `tokens`); the sum of
    /// the rounded weights.
    pub(super) fn weights(scores: &[f32], tokens: usize, top: f32, weights: &mut [u8]) -> i32 {
        let mut sum = 0;
        for j in 0..weights.len() / 2 {
            let w = if j < tokens {
                nearest(scaled_exp2(scores[j] - top))
            } else {
                0
            };
            weights[weight_bytes_at(0, 0, j / 4, false) + j % 4] = w as u8;
            weights[weight_bytes_at(0, 0, j / 4, true) + j % 4] = (w >> 8) as u8;
            sum += w;
        }
        sum
    }

    pub(super) fn weighted_values(head: &Head, block: &mut Block) {
        let (d, keys) = (head.shape.head_dim, head.keys);
        for r in 0..ROW_BLOCK {
            for c in 0..d {
                let (mut high, mut low) = (0i32, 0i32);
                for j in 0..keys {
                    let value = head.value_words[j / 4 * d + c].to_le_bytes()[j % 4] as i8 as i32;
                    let at = |high| weight_bytes_at(r, keys, j / 4, high) + j % 4;
                    high += block.weights[at(true)] as i32 * value;
                    low += block.weights[at(false)] as i32 * value;
                }
                block.high_products[r * d + c] = high;
                block.low_products[r * d + c] = low;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{weight_bytes_at, Block, Head, KEY_BLOCK, ROW_BLOCK, WEIGHT_POLY};
    use std::arch::x86_64::*;

    /// [`Head::pack`] of every head, sixteen values at a time and each row of the operands read once,
    /// in order (the same words: the same scales, and `VCVTPS2DQ` rounds to nearest even as
    /// `nearest` does); false when a query or key is not finite.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub(super) fn pack(heads: &mut [Head], q: &[f32], k: &[f32], v: &[f32]) -> bool {
        // The head's blocks of sixteen are a constant, so that a row's loads are unrolled into
        // registers rather than copied by a call.
        match heads[0].shape.head_dim / 16 {
            1 => pack_of::<1>(heads, q, k, v),
            2 => pack_of::<2>(heads, q, k, v),
            3 => pack_of::<3>(heads, q, k, v),
            _ => pack_of::<4>(heads, q, k, v),
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    fn pack_of<const BLOCKS: usize>(heads: &mut [Head], q: &[f32], k: &[f32], v: &[f32]) -> bool {
        let shape = heads[0].shape;
        let (tokens, d, keys) = (shape.tokens, shape.head_dim, heads[0].keys);
        let (hidden, groups) = (shape.hidden(), d / 4);
        assert!(d == 16 * BLOCKS && heads.len() == shape.heads);
        assert!(q.len().min(k.len()).min(v.len()) >= tokens * hidden);
        for head in heads.iter() {
            assert!(head.query_words.len() >= tokens * groups);
            assert!(head.key_words.len() >= groups * keys && head.value_inverses.len() == d);
            assert!(head.value_words.len() >= keys / 4 * d && head.keys == keys);
        }
        // The sixteen-value blocks at `at` rounded to int8 with one scale: (scale, 16 bytes per
        // block, the bytes' sum). The largest magnitude is an integer maximum of the bits, as
        // `super::quantize` takes it, so that a NaN is not lost.
        let quantize_row = |m: &[f32], at: usize| -> (f32, [__m128i; BLOCKS], i32) {
            // SAFETY: at + 16 * BLOCKS <= tokens * hidden <= m.len() (at is a head's row).
            let rows: [__m512; BLOCKS] =
                std::array::from_fn(|b| unsafe { _mm512_loadu_ps(m.as_ptr().add(at + 16 * b)) });
            let magnitude = _mm512_set1_epi32(0x7fff_ffff);
            let largest = rows.iter().fold(_mm512_setzero_si512(), |largest, row| {
                _mm512_max_epu32(
                    largest,
                    _mm512_and_si512(_mm512_castps_si512(*row), magnitude),
                )
            });
            let largest = f32::from_bits(_mm512_reduce_max_epu32(largest));
            let inverse = _mm512_set1_ps(if largest == 0.0 { 0.0 } else { 127.0 / largest });
            let mut sum = _mm512_setzero_si512();
            let bytes = std::array::from_fn(|b| {
                let ints = _mm512_cvtps_epi32(_mm512_mul_ps(rows[b], inverse));
                sum = _mm512_add_epi32(sum, ints);
                _mm512_cvtsepi32_epi8(ints)
            });
            (largest / 127.0, bytes, _mm512_reduce_add_epi32(sum))
        };
        let mut finite = true;
        for i in 0..tokens {
            for (h, head) in heads.iter_mut().enumerate() {
                let (scale, bytes, _) = quantize_row(q, i * hidden + h * d);
                head.query_scales[i] = scale;
                finite &= scale.is_finite();
                for (b, bytes) in bytes.iter().enumerate() {
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
                let (scale, bytes, sum) = quantize_row(k, i * hidden + h * d);
                head.key_scales[i] = scale;
                finite &= scale.is_finite();
                head.key_corrections[i] = -128 * sum;
                for (b, bytes) in bytes.iter().enumerate() {
                    let mut words = [0i32; 4];
                    // SAFETY: four words are sixteen bytes.
                    unsafe { _mm_storeu_si128(words.as_mut_ptr().cast(), *bytes) };
                    for (w, word) in words.into_iter().enumerate() {
                        head.key_words[(4 * b + w) * keys + i] = word;
                    }
                }
            }
        }
        // Four tokens' bytes of sixteen channels, transposed so that each channel's four are one word.
        for j in (0..tokens).step_by(4) {
            for (h, head) in heads.iter_mut().enumerate() {
                for b in 0..BLOCKS {
                    // SAFETY: 16 * b + 16 <= d = value_inverses.len().
                    let scales =
                        unsafe { _mm512_loadu_ps(head.value_inverses.as_ptr().add(16 * b)) };
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
        finite
    }

    /// [`super::attend_heads`] compiled for AVX-512.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub(super) fn attend_heads(
        qkv: [&[f32]; 3],
        out: &mut [f32],
        shape: super::AttentionShape,
        scale: f32,
    ) -> bool {
        super::attend_heads(qkv, out, shape, scale, super::Kernel::Avx512Vnni)
    }

    /// Scores of [`ROW_BLOCK`] query rows against every (padded) key, [`KEY_BLOCK`] keys at a time.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub(super) fn scores(head: &Head, block: &mut Block, first: usize) {
        let (keys, groups) = (head.keys, head.shape.head_dim / 4);
        let queries = &head.query_words[first * groups..(first + ROW_BLOCK) * groups];
        assert!(queries.len() >= ROW_BLOCK * groups && head.key_words.len() >= groups * keys);
        assert!(block.scores.len() >= ROW_BLOCK * keys && head.key_corrections.len() >= keys);
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
                    let s = _mm512_mul_ps(
                        _mm512_mul_ps(s, key_scales),
                        _mm512_set1_ps(block.row_scales[r]),
                    );
                    // SAFETY: r * keys + at + 16 <= ROW_BLOCK * keys.
                    unsafe { _mm512_storeu_ps(block.scores.as_mut_ptr().add(r * keys + at), s) };
                    tops[r] = _mm512_mask_max_ps(tops[r], live(head.shape.tokens, at), tops[r], s);
                }
            }
        }
        for (top, lanes) in block.tops.iter_mut().zip(tops) {
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
        let mut weigh = |at: usize, live: __mmask16| {
            // SAFETY: at + 16 <= keys <= scores.len().
            let s = unsafe { _mm512_loadu_ps(scores.as_ptr().add(at)) };
            let w = _mm512_maskz_cvtps_epi32(live, scaled_exp2(_mm512_sub_ps(s, top)));
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
        };
        // Sixteen real keys at a time with a constant mask, then the last real ones and the padding.
        let whole = tokens / 16 * 16;
        for at in (0..whole).step_by(16) {
            weigh(at, u16::MAX);
        }
        for at in (whole..keys).step_by(16) {
            weigh(at, live(tokens, at));
        }
        _mm512_reduce_add_epi32(sum)
    }

    /// [`super::scaled_exp2`], operation for operation.
    #[target_feature(enable = "avx512f")]
    fn scaled_exp2(x: __m512) -> __m512 {
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
        let r = _mm512_sub_ps(x, n);
        let mut p = _mm512_set1_ps(WEIGHT_POLY[0]);
        for &c in &WEIGHT_POLY[1..] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        // p * 2^n: exact where the portable kernel's product with a power of two is (n >= -126),
        // and below a half (a weight of zero) where it returns zero.
        _mm512_scalef_ps(p, n)
    }

    /// Each row's integer weighted sums of the values by its weights' high and low bytes, head sizes
    /// of 16 to 64 (`ROWS` rows a pass: their sums stay in registers).
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub(super) fn weighted_values(head: &Head, block: &mut Block) {
        match head.shape.head_dim / 16 {
            1 => weighted_values_of::<1, 4>(head, block),
            2 => weighted_values_of::<2, 4>(head, block),
            3 => weighted_values_of::<3, 2>(head, block),
            _ => weighted_values_of::<4, 2>(head, block),
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    fn weighted_values_of<const BLOCKS: usize, const ROWS: usize>(head: &Head, block: &mut Block) {
        let (d, keys) = (head.shape.head_dim, head.keys);
        assert!(d == 16 * BLOCKS && head.value_words.len() >= keys / 4 * d);
        assert!(block.weights.len() >= ROW_BLOCK * 2 * keys);
        assert!(
            block.high_products.len() >= ROW_BLOCK * d && block.low_products.len() >= ROW_BLOCK * d
        );
        // Reads four weight bytes of row `r` at key `4 * group` of a plane.
        // The four weight bytes of row `r` at keys `4 * group ..`, in each of the four lanes.
        let word = |r: usize, group: usize, high: bool| -> __m512i {
            let at = weight_bytes_at(r, keys, group, high);
            // SAFETY: at + 4 <= 2 * ROW_BLOCK * keys <= weights.len().
            let bytes = unsafe {
                block
                    .weights
                    .as_ptr()
                    .add(at)
                    .cast::<i32>()
                    .read_unaligned()
            };
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
                            block.high_products.as_mut_ptr().add(at).cast(),
                            high[r][b],
                        );
                        _mm512_storeu_si512(
                            block.low_products.as_mut_ptr().add(at).cast(),
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

    /// The weight polynomial against `2^x` in double precision, over every step of the weights'
    /// range and past it.
    #[test]
    fn scaled_exp2_is_accurate() {
        for i in 0..=400_000 {
            let x = -(i as f32) * 5e-5;
            let exact = WEIGHT_SCALE as f64 * (x as f64).exp2();
            let error = (scaled_exp2(x) as f64 - exact).abs() / exact;
            assert!(error < 3e-6, "2^{x}: relative error {error}");
        }
        assert_eq!(scaled_exp2(-127.0), 0.0);
        assert_eq!(scaled_exp2(-1e30), 0.0);
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
    fn names_the_first_non_finite_operand() {
        let shape = AttentionShape::new(5, 32, 2).unwrap();
        let mut kernels = vec![Kernel::Portable, Kernel::detect(shape.head_dim)];
        kernels.dedup();
        for kernel in kernels {
            for (matrix, name) in ["queries", "keys", "values"].into_iter().enumerate() {
                for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                    let mut operands = operands(&mut SplitMix64::new(3), shape, 1.0);
                    operands[matrix][3 * 32 + 17] = bad;
                    operands[2][4 * 32 + 30] = f32::NAN; // a later one, in the values
                    let [q, k, v] = &operands;
                    let mut out = vec![0f32; q.len()];
                    let err = quantized_attention(q, k, v, &mut out, shape, 0.25, kernel)
                        .unwrap_err()
                        .to_string();
                    assert!(
                        err.contains(&format!(
                            "{name} hold a non-finite value ({bad}) at token 3, unit 17"
                        )),
                        "{kernel:?}, {name}: {err}"
                    );
                }
            }
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
