//! Multi-head attention in float32 with the arithmetic of onnxruntime's CPU `MultiHeadAttention` off its
//! flash path, which is also what the unfused `MatMul`, `Softmax` and `MatMul` operators compute: the
//! float operations of onnxruntime's math library (MLAS) on an AVX-512 CPU, in its order, so the outputs
//! are its outputs bit for bit.
//!
//! A dynamically quantized encoder requantizes every attention output, which amplifies any change of
//! rounding into changed vectors; so an attention kernel that merely computes the same function is not
//! enough to keep an encoder's vectors. What MLAS computes, per head:
//!
//! - **scores**: each `q . k` one fused multiply-add per dimension, in order, from zero (its SGEMM
//!   kernel), then times the scale. SGEMM steps the inner dimension in blocks (`sgemm_stride_k`); each
//!   later block's sum `s` is added as `fma(s, scale, c)`.
//! - **softmax** of each row: its maximum `m`; each weight's exponential of `x - m` by MLAS's polynomial
//!   (`exp_shifted`); their sum taken by a vector of sixteen lanes (lane `l` adds the values at `l`,
//!   `l + 16`, ... in order) and then reduced as its AVX-512 kernel does (`reduce_lanes`); the weights
//!   times `1 / sum`.
//! - **outputs**: each `sum_j w_j v_j` one fused multiply-add per key, in order, from zero, per SGEMM
//!   block of keys; the blocks' sums added in order.
//!
//! onnxruntime writes every head's `tokens × tokens` scores to memory before its softmax, and its
//! softmax's weights before the products with the values; here each block of query rows goes through
//! all three steps while its scores are in cache, which changes no rounding.
//!
//! (MLAS takes a matrix-vector kernel of its own for a single query row scored at scale 1; in
//! self-attention that row has a single key, whose weight is exactly 1 either way.)
//!
//! The portable kernel performs the same float operations (`f32::mul_add` is a fused multiply-add), so
//! both kernels give the same bits.

use crate::error::{Error, Result};

/// Query rows computed together.
const ROWS: usize = 12;
/// Keys scored together per query row (two vectors of sixteen).
const KEY_BLOCK: usize = 32;
const LANES: usize = 16;
/// MLAS's SGEMM strides (`MLAS_SGEMM_STRIDEN`, `MLAS_SGEMM_STRIDEK`), from which it derives the blocks
/// it steps the inner dimension in.
const SGEMM_STRIDE_N: usize = 128;
const SGEMM_STRIDE_K: usize = 128;

// MLAS's `MlasExpConstants`, as its AVX-512 sum-of-exponentials kernel uses them.
const LOWER_RANGE: f32 = f32::from_bits(0xc2cf_f1b5);
const ROUNDING_BIAS: f32 = f32::from_bits(0x4b40_0000);
const LOG2_RECIPROCAL: f32 = f32::from_bits(0x3fb8_aa3b);
const LOG2_HIGH: f32 = f32::from_bits(0xbf31_7200);
const LOG2_LOW: f32 = f32::from_bits(0xb5bf_be8e);
/// The polynomial's coefficients, highest power first; the last is applied twice.
const POLY: [f32; 6] = [
    f32::from_bits(0x3ab4_a000),
    f32::from_bits(0x3c09_2f6e),
    f32::from_bits(0x3d2a_adad),
    f32::from_bits(0x3e2a_aa28),
    f32::from_bits(0x3eff_fffb),
    f32::from_bits(0x3f80_0000),
];

/// The operands of one call: `batch` texts, `tokens` queries and `keys` keys and values each, heads of
/// `head_dim` (queries and keys) and `value_dim` (values) side by side in every row, as onnxruntime's
/// `MultiHeadAttention` takes them (`batch × tokens × heads·head_dim`).
pub struct MultiHeadAttention<'a> {
    pub query: &'a [f32],
    pub key: &'a [f32],
    pub value: &'a [f32],
    pub batch: usize,
    pub tokens: usize,
    pub keys: usize,
    pub heads: usize,
    /// The scores' factor; 0 means `1 / sqrt(head_dim)`, as in onnxruntime.
    pub scale: f32,
}

/// The inner dimension's block for an SGEMM of `n` columns and `k` inner values (MLAS's rule, for an
/// untransposed left operand).
fn sgemm_stride_k(n: usize, k: usize) -> usize {
    let (mut stride_n, mut stride_k) = (SGEMM_STRIDE_N, SGEMM_STRIDE_K);
    if n >= k {
        // (MLAS widens its column stride as it narrows this one; only this one matters here.)
        while stride_k / 2 >= k {
            stride_k /= 2;
        }
    } else {
        while stride_n > 16 && stride_n / 2 >= n {
            stride_k *= 2;
            stride_n /= 2;
        }
    }
    stride_k
}

/// The shapes one call works with.
#[derive(Clone, Copy)]
struct Shape {
    tokens: usize,
    keys: usize,
    heads: usize,
    head_dim: usize,
    value_dim: usize,
    scale: f32,
    /// Inner-dimension blocks of the scores' and the outputs' products.
    score_block: usize,
    value_block: usize,
    /// Keys rounded up to whole key blocks (the scores' row length).
    padded_keys: usize,
}

impl Shape {
    fn query_row(&self, text: usize, token: usize, head: usize) -> usize {
        ((text * self.tokens + token) * self.heads + head) * self.head_dim
    }
    fn key_row(&self, text: usize, key: usize, head: usize) -> usize {
        ((text * self.keys + key) * self.heads + head) * self.head_dim
    }
    /// Where key `j`'s value at dimension `d` sits among a head's packed keys: key blocks one after
    /// another, each dimension-major (so the vector kernel reads each block front to back).
    fn packed_key(&self, d: usize, j: usize) -> usize {
        (j / KEY_BLOCK) * self.head_dim * KEY_BLOCK + d * KEY_BLOCK + j % KEY_BLOCK
    }
    fn value_row(&self, text: usize, key: usize, head: usize) -> usize {
        ((text * self.keys + key) * self.heads + head) * self.value_dim
    }
}

impl MultiHeadAttention<'_> {
    /// Writes the attention outputs (`batch × tokens × heads·value_dim`) into `output`.
    pub fn run(&self, output: &mut [f32]) -> Result<()> {
        self.compute(output, true)
    }

    /// [`run`](Self::run), with the vector kernel where the CPU has it and `vector` allows.
    fn compute(&self, output: &mut [f32], vector: bool) -> Result<()> {
        let shape = self.shape(output.len())?;
        if output.is_empty() {
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        let vector = vector
            && shape.value_dim.is_multiple_of(LANES)
            && std::arch::is_x86_feature_detected!("avx512f");
        #[cfg(not(target_arch = "x86_64"))]
        let vector = {
            let _ = vector;
            false
        };
        let mut work = Work::new(&shape);
        for text in 0..self.batch {
            for head in 0..shape.heads {
                work.pack_keys(self.key, &shape, text, head);
                for first in (0..shape.tokens).step_by(ROWS) {
                    let tile = Tile {
                        shape: &shape,
                        text,
                        head,
                        first,
                    };
                    if vector {
                        #[cfg(target_arch = "x86_64")]
                        // SAFETY: the CPU has AVX-512F; the shapes were checked against the operands.
                        unsafe {
                            avx512::scores(self.query, &mut work, &tile);
                            avx512::softmax(&mut work.scores, &work.maxima, &tile);
                            avx512::outputs(self.value, &work.scores, output, &tile);
                        }
                        continue;
                    }
                    scores(self.query, &work.packed_keys, &mut work.scores, &tile);
                    for row in 0..tile.rows() {
                        softmax(&mut work.scores[row * shape.padded_keys..][..shape.keys]);
                    }
                    outputs(self.value, &work.scores, output, &tile);
                }
            }
        }
        Ok(())
    }

    fn shape(&self, output: usize) -> Result<Shape> {
        let invalid = |what: String| Error::InvalidInput(format!("MultiHeadAttention: {what}"));
        if self.heads == 0 {
            return Err(invalid("no heads".into()));
        }
        let query_rows = self.batch * self.tokens;
        let key_rows = self.batch * self.keys;
        if query_rows == 0 || key_rows == 0 {
            if self.query.is_empty() && self.key.is_empty() && self.value.is_empty() && output == 0
            {
                return Ok(Shape {
                    tokens: self.tokens,
                    keys: self.keys,
                    heads: self.heads,
                    head_dim: 0,
                    value_dim: 0,
                    scale: 1.0,
                    score_block: 1,
                    value_block: 1,
                    padded_keys: 0,
                });
            }
            return Err(invalid(format!(
                "{} texts of {} queries and {} keys, but operands of {}, {} and {} values",
                self.batch,
                self.tokens,
                self.keys,
                self.query.len(),
                self.key.len(),
                self.value.len()
            )));
        }
        let row_width = |len: usize, rows: usize, name: &str| -> Result<usize> {
            if !len.is_multiple_of(rows) || !(len / rows).is_multiple_of(self.heads) {
                return Err(invalid(format!(
                    "{name} has {len} values, not {rows} rows of {} heads",
                    self.heads
                )));
            }
            Ok(len / rows / self.heads)
        };
        let head_dim = row_width(self.query.len(), query_rows, "the query")?;
        let key_dim = row_width(self.key.len(), key_rows, "the key")?;
        let value_dim = row_width(self.value.len(), key_rows, "the value")?;
        if key_dim != head_dim {
            return Err(invalid(format!(
                "query heads of {head_dim} values but key heads of {key_dim}"
            )));
        }
        if output != query_rows * self.heads * value_dim {
            return Err(invalid(format!(
                "the output holds {output} values, not {query_rows} rows of {} heads of {value_dim}",
                self.heads
            )));
        }
        let scale = if self.scale == 0.0 {
            1.0 / (head_dim as f32).sqrt()
        } else {
            self.scale
        };
        Ok(Shape {
            tokens: self.tokens,
            keys: self.keys,
            heads: self.heads,
            head_dim,
            value_dim,
            scale,
            score_block: sgemm_stride_k(self.keys, head_dim),
            value_block: sgemm_stride_k(value_dim, self.keys),
            padded_keys: self.keys.div_ceil(KEY_BLOCK) * KEY_BLOCK,
        })
    }
}

/// One head's keys packed (`Shape::packed_key`, padded with zeros to whole key blocks), a block of
/// query rows (interleaved, for the vector kernel), their scores and the scores' row maxima.
struct Work {
    packed_keys: Vec<f32>,
    queries: Vec<f32>,
    scores: Vec<f32>,
    maxima: [f32; ROWS],
}

impl Work {
    fn new(shape: &Shape) -> Work {
        Work {
            packed_keys: vec![0.0; shape.head_dim * shape.padded_keys],
            queries: vec![0.0; shape.head_dim * ROWS],
            scores: vec![0.0; ROWS * shape.padded_keys],
            maxima: [0.0; ROWS],
        }
    }

    fn pack_keys(&mut self, key: &[f32], shape: &Shape, text: usize, head: usize) {
        for j in 0..shape.keys {
            let row = &key[shape.key_row(text, j, head)..][..shape.head_dim];
            for (d, &value) in row.iter().enumerate() {
                self.packed_keys[shape.packed_key(d, j)] = value;
            }
        }
    }
}

/// Up to `ROWS` query rows from `first` of one text's head: what each step of the kernels works on.
#[derive(Clone, Copy)]
struct Tile<'s> {
    shape: &'s Shape,
    text: usize,
    head: usize,
    first: usize,
}

impl Tile<'_> {
    fn rows(&self) -> usize {
        ROWS.min(self.shape.tokens - self.first)
    }

    /// Where the tile's row `r` of outputs starts.
    fn output_row(&self, r: usize) -> usize {
        let shape = self.shape;
        ((self.text * shape.tokens + self.first + r) * shape.heads + self.head) * shape.value_dim
    }

    /// Where key `j`'s values for the tile's head start.
    fn value_row(&self, j: usize) -> usize {
        self.shape.value_row(self.text, j, self.head)
    }

    /// The tile's query rows (the last one repeated past the end), as offsets into the query.
    fn query_rows(&self) -> [usize; ROWS] {
        let Tile {
            shape,
            text,
            head,
            first,
        } = *self;
        std::array::from_fn(|r| shape.query_row(text, (first + r).min(shape.tokens - 1), head))
    }
}

/// MLAS's exponential of `x + negative_max` (at most 0), as its AVX-512 sum-of-exponentials kernel
/// computes it: range reduction by `ln 2` in two parts, a polynomial, and the power of two applied
/// with one rounding (`VSCALEFPS`).
fn exp_shifted(x: f32, negative_max: f32) -> f32 {
    let shifted = x + negative_max;
    // `VMAXPS lower, x` gives `x` unless `lower > x` (so a NaN passes through).
    let mut x = if LOWER_RANGE > shifted {
        LOWER_RANGE
    } else {
        shifted
    };
    let biased = x.mul_add(LOG2_RECIPROCAL, ROUNDING_BIAS);
    let m = biased - ROUNDING_BIAS;
    x = m.mul_add(LOG2_HIGH, x);
    x = m.mul_add(LOG2_LOW, x);
    let mut p = POLY[0];
    for &c in &POLY[1..] {
        p = p.mul_add(x, c);
    }
    p = p.mul_add(x, POLY[5]);
    scale_by_power_of_two(p, m)
}

/// `p × 2^m` rounded once (`VSCALEFPS` for an integral `m`): exact in float64, then rounded to float32
/// (which rounds subnormal results as the instruction does).
fn scale_by_power_of_two(p: f32, m: f32) -> f32 {
    if !m.is_finite() || !p.is_finite() {
        return p * m.exp2();
    }
    let power = f64::from_bits(((1023 + m as i64).clamp(1, 2046) as u64) << 52);
    (f64::from(p) * power) as f32
}

/// The sum of sixteen lane sums as MLAS's AVX-512 kernel reduces them: the upper eight added to the lower
/// eight, then adjacent pairs twice (`VHADDPS`), then the two halves.
fn reduce_lanes(lanes: &[f32; LANES]) -> f32 {
    let t: [f32; 8] = std::array::from_fn(|i| lanes[i + 8] + lanes[i]);
    ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]))
}

fn softmax(row: &mut [f32]) {
    // (The vector kernel takes the maximum from the scores' kernel: a maximum has no rounding.)
    let maximum = row.iter().fold(f32::MIN, |m, &x| if x > m { x } else { m });
    let negative_max = -maximum;
    let mut lanes = [0f32; LANES];
    for (j, value) in row.iter_mut().enumerate() {
        *value = exp_shifted(*value, negative_max);
        lanes[j % LANES] += *value;
    }
    let factor = 1.0 / reduce_lanes(&lanes);
    for value in row.iter_mut() {
        *value *= factor;
    }
}

fn scores(query: &[f32], packed_keys: &[f32], scores: &mut [f32], tile: &Tile) {
    let Tile { shape, .. } = *tile;
    let rows = tile.query_rows();
    for (r, &at) in rows.iter().enumerate() {
        let q = &query[at..][..shape.head_dim];
        for j in 0..shape.keys {
            let mut score = 0f32;
            for (block, start) in (0..shape.head_dim).step_by(shape.score_block).enumerate() {
                let end = (start + shape.score_block).min(shape.head_dim);
                let mut sum = 0f32;
                for d in start..end {
                    sum = q[d].mul_add(packed_keys[shape.packed_key(d, j)], sum);
                }
                score = if block == 0 {
                    sum * shape.scale
                } else {
                    sum.mul_add(shape.scale, score)
                };
            }
            scores[r * shape.padded_keys + j] = score;
        }
    }
}

fn outputs(value: &[f32], weights: &[f32], output: &mut [f32], tile: &Tile) {
    let shape = tile.shape;
    for r in 0..tile.rows() {
        let weights = &weights[r * shape.padded_keys..][..shape.keys];
        let out_at = tile.output_row(r);
        for h in 0..shape.value_dim {
            let mut total = 0f32;
            for (block, start) in (0..shape.keys).step_by(shape.value_block).enumerate() {
                let end = (start + shape.value_block).min(shape.keys);
                let mut sum = 0f32;
                for (j, &w) in weights.iter().enumerate().take(end).skip(start) {
                    sum = w.mul_add(value[tile.value_row(j) + h], sum);
                }
                total = if block == 0 { sum } else { sum + total };
            }
            output[out_at + h] = total;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{
        reduce_lanes, Shape, Tile, Work, KEY_BLOCK, LANES, LOG2_HIGH, LOG2_LOW, LOG2_RECIPROCAL,
        LOWER_RANGE, POLY, ROUNDING_BIAS, ROWS,
    };
    use std::arch::x86_64::*;

    /// The scores of query rows `first..first + ROWS` against every key (see the portable `scores`),
    /// and each row's largest.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn scores(query: &[f32], work: &mut Work, tile: &Tile) {
        let shape = tile.shape;
        let Work {
            packed_keys,
            queries: block,
            scores,
            maxima,
        } = work;
        // The rows' values interleaved (dimension-major), so a row's value at `d` is a fixed offset.
        let rows = tile.query_rows();
        for (r, &at) in rows.iter().enumerate() {
            for (d, &q) in query[at..at + shape.head_dim].iter().enumerate() {
                block[d * ROWS + r] = q;
            }
        }
        let scale = _mm512_set1_ps(shape.scale);
        let stride = shape.padded_keys;
        let mut largest = [_mm512_set1_ps(f32::MIN); ROWS];
        for key in (0..stride).step_by(KEY_BLOCK) {
            let packed = packed_keys.as_ptr().add(key * shape.head_dim);
            for start in (0..shape.head_dim).step_by(shape.score_block) {
                let end = (start + shape.score_block).min(shape.head_dim);
                let mut sums = [[_mm512_setzero_ps(); 2]; ROWS];
                let mut k = packed.add(start * KEY_BLOCK);
                let mut q = block.as_ptr().add(start * ROWS);
                for _ in start..end {
                    let (k0, k1) = (_mm512_loadu_ps(k), _mm512_loadu_ps(k.add(LANES)));
                    for (r, pair) in sums.iter_mut().enumerate() {
                        let q = _mm512_set1_ps(*q.add(r));
                        pair[0] = _mm512_fmadd_ps(q, k0, pair[0]);
                        pair[1] = _mm512_fmadd_ps(q, k1, pair[1]);
                    }
                    k = k.add(KEY_BLOCK);
                    q = q.add(ROWS);
                }
                let last = end == shape.head_dim;
                for (r, pair) in sums.iter().enumerate() {
                    let at = scores.as_mut_ptr().add(r * stride + key);
                    for (half, &sum) in pair.iter().enumerate() {
                        let out = at.add(half * LANES);
                        let score = if start == 0 {
                            _mm512_mul_ps(sum, scale)
                        } else {
                            _mm512_fmadd_ps(sum, scale, _mm512_loadu_ps(out))
                        };
                        _mm512_storeu_ps(out, score);
                        if last {
                            // Keys past the last are padding, not scores.
                            let valid = shape.keys.saturating_sub(key + half * LANES).min(LANES);
                            let mask = ((1u32 << valid) - 1) as __mmask16;
                            largest[r] = _mm512_mask_max_ps(largest[r], mask, largest[r], score);
                        }
                    }
                }
            }
        }
        for (maximum, &vector) in maxima.iter_mut().zip(&largest) {
            *maximum = _mm512_reduce_max_ps(vector);
        }
    }

    /// The softmax in place of the tile's rows of `scores` (`padded_keys` apart), given their largest
    /// scores (see the portable `softmax`); two rows at a time, so that two exponentials' chains of
    /// dependent operations overlap.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn softmax(scores: &mut [f32], maxima: &[f32; ROWS], tile: &Tile) {
        let (stride, keys) = (tile.shape.padded_keys, tile.shape.keys);
        let rows = tile.rows();
        let base = scores.as_mut_ptr();
        for first in (0..rows).step_by(2) {
            if first + 1 < rows {
                let pair = [base.add(first * stride), base.add((first + 1) * stride)];
                softmax_rows(pair, keys, [maxima[first], maxima[first + 1]]);
            } else {
                softmax_rows([base.add(first * stride)], keys, [maxima[first]]);
            }
        }
    }

    /// The softmax of `R` rows of `n` values in place, given their largest values.
    #[inline(always)]
    unsafe fn softmax_rows<const R: usize>(rows: [*mut f32; R], n: usize, maxima: [f32; R]) {
        let tail = n % LANES;
        let tail_mask: __mmask16 = ((1u32 << tail) - 1) as __mmask16;
        let negative_max: [__m512; R] = std::array::from_fn(|r| _mm512_set1_ps(-maxima[r]));
        let mut lanes = [_mm512_setzero_ps(); R];
        let mut at = 0;
        while at + LANES <= n {
            for r in 0..R {
                let e = exp_shifted(_mm512_loadu_ps(rows[r].add(at)), negative_max[r]);
                lanes[r] = _mm512_add_ps(lanes[r], e);
                _mm512_storeu_ps(rows[r].add(at), e);
            }
            at += LANES;
        }
        if tail > 0 {
            for r in 0..R {
                let values = _mm512_maskz_loadu_ps(tail_mask, rows[r].add(at));
                let e = exp_shifted(values, negative_max[r]);
                lanes[r] = _mm512_mask_add_ps(lanes[r], tail_mask, lanes[r], e);
                _mm512_mask_storeu_ps(rows[r].add(at), tail_mask, e);
            }
        }
        for r in 0..R {
            let mut sums = [0f32; LANES];
            _mm512_storeu_ps(sums.as_mut_ptr(), lanes[r]);
            let factor = _mm512_set1_ps(1.0 / reduce_lanes(&sums));
            let row = rows[r];
            let mut at = 0;
            while at + LANES <= n {
                let values = _mm512_loadu_ps(row.add(at));
                _mm512_storeu_ps(row.add(at), _mm512_mul_ps(factor, values));
                at += LANES;
            }
            if tail > 0 {
                let values = _mm512_maskz_loadu_ps(tail_mask, row.add(at));
                _mm512_mask_storeu_ps(row.add(at), tail_mask, _mm512_mul_ps(factor, values));
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn exp_shifted(x: __m512, negative_max: __m512) -> __m512 {
        let bias = _mm512_set1_ps(ROUNDING_BIAS);
        let mut x = _mm512_max_ps(_mm512_set1_ps(LOWER_RANGE), _mm512_add_ps(negative_max, x));
        let m = _mm512_sub_ps(
            _mm512_fmadd_ps(_mm512_set1_ps(LOG2_RECIPROCAL), x, bias),
            bias,
        );
        x = _mm512_fmadd_ps(m, _mm512_set1_ps(LOG2_HIGH), x);
        x = _mm512_fmadd_ps(m, _mm512_set1_ps(LOG2_LOW), x);
        let mut p = _mm512_set1_ps(POLY[0]);
        for &c in &POLY[1..] {
            p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(c));
        }
        p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(POLY[5]));
        _mm512_scalef_ps(p, m)
    }

    /// The outputs of query rows `first..` (see the portable `outputs`); `value_dim` is a multiple of
    /// sixteen.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn outputs(value: &[f32], weights: &[f32], output: &mut [f32], tile: &Tile) {
        let shape = tile.shape;
        let rows = tile.rows();
        for h in (0..shape.value_dim).step_by(2 * LANES) {
            let columns = (shape.value_dim - h).min(2 * LANES) / LANES;
            let mut totals = [[_mm512_setzero_ps(); 2]; ROWS];
            for start in (0..shape.keys).step_by(shape.value_block) {
                let end = (start + shape.value_block).min(shape.keys);
                let v = value.as_ptr().add(tile.value_row(start) + h);
                let w = weights.as_ptr().add(start);
                let sums = if columns == 2 {
                    weighted_sums::<2>(v, w, end - start, shape)
                } else {
                    weighted_sums::<1>(v, w, end - start, shape)
                };
                for (total, sum) in totals.iter_mut().zip(&sums) {
                    for half in 0..columns {
                        total[half] = if start == 0 {
                            sum[half]
                        } else {
                            _mm512_add_ps(sum[half], total[half])
                        };
                    }
                }
            }
            for (r, total) in totals.iter().enumerate().take(rows) {
                let out = output.as_mut_ptr().add(tile.output_row(r) + h);
                for (half, &sum) in total.iter().enumerate().take(columns) {
                    _mm512_storeu_ps(out.add(half * LANES), sum);
                }
            }
        }
    }

    /// `sum_j w[r][j] v[j]` over `count` keys from zero, for `ROWS` rows of weights (`padded_keys`
    /// apart) and `COLUMNS` vectors of values from `v` (a key's row `heads × value_dim` apart).
    #[inline(always)]
    unsafe fn weighted_sums<const COLUMNS: usize>(
        mut v: *const f32,
        mut w: *const f32,
        count: usize,
        shape: &Shape,
    ) -> [[__m512; 2]; ROWS] {
        let (v_step, w_step) = (shape.heads * shape.value_dim, shape.padded_keys);
        let mut sums = [[_mm512_setzero_ps(); 2]; ROWS];
        for _ in 0..count {
            let columns: [__m512; COLUMNS] =
                std::array::from_fn(|c| _mm512_loadu_ps(v.add(c * LANES)));
            for (r, sum) in sums.iter_mut().enumerate() {
                let weight = _mm512_set1_ps(*w.add(r * w_step));
                for c in 0..COLUMNS {
                    sum[c] = _mm512_fmadd_ps(weight, columns[c], sum[c]);
                }
            }
            v = v.add(v_step);
            w = w.add(1);
        }
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::test_values as values;

    /// Attention in float64, for the kernels' accuracy.
    fn reference(op: &MultiHeadAttention, head_dim: usize, value_dim: usize) -> Vec<f64> {
        let (heads, tokens, keys) = (op.heads, op.tokens, op.keys);
        let scale = 1.0 / (head_dim as f64).sqrt();
        let mut out = vec![0f64; op.batch * tokens * heads * value_dim];
        for b in 0..op.batch {
            for n in 0..heads {
                for i in 0..tokens {
                    let q = &op.query[((b * tokens + i) * heads + n) * head_dim..][..head_dim];
                    let s: Vec<f64> = (0..keys)
                        .map(|j| {
                            let k = &op.key[((b * keys + j) * heads + n) * head_dim..][..head_dim];
                            q.iter()
                                .zip(k)
                                .map(|(&a, &c)| f64::from(a) * f64::from(c))
                                .sum::<f64>()
                                * scale
                        })
                        .collect();
                    let max = s.iter().cloned().fold(f64::MIN, f64::max);
                    let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                    let total: f64 = e.iter().sum();
                    for h in 0..value_dim {
                        out[((b * tokens + i) * heads + n) * value_dim + h] = (0..keys)
                            .map(|j| {
                                e[j] / total
                                    * f64::from(
                                        op.value[((b * keys + j) * heads + n) * value_dim + h],
                                    )
                            })
                            .sum();
                    }
                }
            }
        }
        out
    }

    #[test]
    fn portable_and_vector_kernels_agree_bit_for_bit_and_are_accurate() {
        for &(batch, tokens, keys, heads, head_dim, value_dim) in &[
            (1, 1, 1, 1, 16, 16),
            (1, 7, 7, 2, 32, 32),
            (2, 37, 37, 3, 32, 48),
            (1, 130, 130, 2, 64, 64),
            (1, 9, 600, 1, 16, 16),
            (1, 5, 5, 2, 20, 20),
        ] {
            let query = values(batch * tokens * heads * head_dim, 1);
            let key = values(batch * keys * heads * head_dim, 2);
            let value = values(batch * keys * heads * value_dim, 3);
            let op = MultiHeadAttention {
                query: &query,
                key: &key,
                value: &value,
                batch,
                tokens,
                keys,
                heads,
                scale: 0.0,
            };
            let mut fast = vec![0f32; batch * tokens * heads * value_dim];
            op.run(&mut fast).unwrap();
            let mut slow = vec![0f32; fast.len()];
            op.compute(&mut slow, false).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&fast),
                bits(&slow),
                "shape {tokens}x{keys}x{heads}x{head_dim}"
            );
            let exact = reference(&op, head_dim, value_dim);
            for (got, want) in fast.iter().zip(&exact) {
                assert!(
                    (f64::from(*got) - want).abs() < 1e-4 * (1.0 + want.abs()),
                    "{got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn the_exponential_matches_the_function_and_scales_subnormals_once() {
        for i in 0..2_000 {
            let x = -(i as f32) * 0.05;
            let got = f64::from(exp_shifted(x, 0.0));
            let want = f64::from(x).exp();
            assert!(
                (got - want).abs() <= 2e-7 * want + 1e-45,
                "exp({x}) = {got}, not {want}"
            );
        }
        // Far below the maximum, MLAS's clamp and one rounding to a subnormal (or zero).
        assert_eq!(exp_shifted(-200.0, 0.0), exp_shifted(LOWER_RANGE, 0.0));
        assert!(exp_shifted(-95.0, 0.0) > 0.0 && exp_shifted(-95.0, 0.0) < f32::MIN_POSITIVE);
    }

    #[test]
    fn blocks_follow_mlas_strides() {
        assert_eq!(sgemm_stride_k(369, 32), 32);
        assert_eq!(sgemm_stride_k(32, 369), 512);
        assert_eq!(sgemm_stride_k(64, 369), 256);
        assert_eq!(sgemm_stride_k(10, 32), 1024);
    }

    #[test]
    fn operands_that_do_not_fit_are_errors() {
        let data = values(2 * 3 * 8, 4);
        let mut output = vec![0f32; 48];
        let op = |heads, tokens| MultiHeadAttention {
            query: &data,
            key: &data,
            value: &data,
            batch: 2,
            tokens,
            keys: tokens,
            heads,
            scale: 0.0,
        };
        assert!(op(0, 3).run(&mut output).is_err());
        assert!(op(5, 3).run(&mut output).is_err());
        assert!(op(2, 5).run(&mut output).is_err());
        assert!(op(2, 3).run(&mut output[..40]).is_err());
        assert!(op(2, 3).run(&mut output).is_ok());
    }
}
