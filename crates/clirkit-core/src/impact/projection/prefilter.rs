//! The int8 prefilter of [`super::VocabProjection::positive_max_logits`]: which vocabulary entries'
//! maximum logit can be positive, from int8 dot products (AVX-512 VNNI: four multiply-adds per
//! lane and instruction, against one for float32) and a bound on their error.
//!
//! Token `t`'s state `h` is quantized as `h ≈ s_t q` (`s_t = max |h_k| / 127`, `q` rounded) and entry
//! `v`'s weights as `w ≈ s_v p`; then `h . w - s_t s_v (q . p) = h . d + e . w - e . d` with
//! `|e_k| <= s_t / 2` and `|d_k| <= s_v / 2`, so the error is at most
//! `s_v / 2 ‖h‖₁ + s_t / 2 ‖w‖₁ + hidden s_t s_v / 4`. Over a text's tokens the largest
//! `s_t` and `‖h‖₁` bound every token's error, so an entry whose approximate maximum plus that
//! bound (plus a margin for the float rounding of both computations) is at most `-bias` cannot have
//! a positive maximum logit: its weight is 0 without the float32 product. The few others (2 % of
//! splade-tiny-en's vocabulary on SciFact) are recomputed exactly by the float32 kernel.

use super::layout::{ROWS, TILE};

/// 64 int8 weights: 16 vocabulary entries x 4 consecutive hidden units.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct ByteLine([i8; 64]);

/// Whether this CPU runs the prefilter (AVX-512F with VNNI).
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The projection's weights quantized per entry, packed in the float tiles' order.
pub(super) struct Int8Weights {
    /// Groups of 4 hidden units (the last one zero-padded).
    pub quads: usize,
    /// Tile `j`, quad `g`, line `i`: entries `j TILE + 16 i ..`, each its 4 weights of the quad.
    packed: Vec<ByteLine>,
    /// Per entry (tiles x TILE, zero past the vocabulary): its scale `s_v`.
    scale: Vec<f32>,
    /// Per entry: `128 Σ_k p_k`, taken off the unsigned-by-signed sums.
    offset: Vec<i32>,
    /// Per entry: `‖w‖₁`.
    l1: Vec<f32>,
}

/// One text's tokens quantized: each token's codes (`q + 128`, `4 quads` bytes) and scale, and the
/// largest scale and L1 norm over its tokens.
pub(super) struct Int8Tokens {
    codes: Vec<u8>,
    scales: Vec<f32>,
    max_scale: f32,
    max_l1: f32,
}

/// `round(x / scale)` within `[-127, 127]`; 0 when the scale is 0.
fn code(x: f32, scale: f32) -> i32 {
    if scale > 0.0 {
        (x / scale).round().clamp(-127.0, 127.0) as i32
    } else {
        0
    }
}

impl Int8Weights {
    pub(super) fn new(weight: &[f32], vocab: usize, hidden: usize) -> Self {
        let quads = hidden.div_ceil(4);
        let tiles = vocab.div_ceil(TILE);
        let mut packed = vec![ByteLine([0; 64]); tiles * quads * (TILE / 16)];
        let mut scale = vec![0f32; tiles * TILE];
        let mut offset = vec![0i32; tiles * TILE];
        let mut l1 = vec![0f32; tiles * TILE];
        for v in 0..vocab {
            let row = &weight[v * hidden..(v + 1) * hidden];
            let s = row.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0;
            let (tile, lane) = (v / TILE, v % TILE);
            for (k, &x) in row.iter().enumerate() {
                let p = code(x, s);
                let line = (tile * quads + k / 4) * (TILE / 16) + lane / 16;
                packed[line].0[(lane % 16) * 4 + k % 4] = p as i8;
                offset[v] += 128 * p;
            }
            scale[v] = s;
            l1[v] = row.iter().map(|x| x.abs()).sum();
        }
        Int8Weights {
            quads,
            packed,
            scale,
            offset,
            l1,
        }
    }

    /// Quantize a text's `len` tokens (`text`: `len x hidden` floats).
    pub(super) fn tokens(&self, text: &[f32], hidden: usize) -> Int8Tokens {
        let len = text.len() / hidden;
        let width = self.quads * 4;
        let mut codes = vec![128u8; len * width];
        let mut scales = Vec::with_capacity(len);
        let (mut max_scale, mut max_l1) = (0f32, 0f32);
        for (t, h) in text.chunks_exact(hidden).enumerate() {
            let s = h.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0;
            for (c, &x) in codes[t * width..].iter_mut().zip(h) {
                *c = (code(x, s) + 128) as u8;
            }
            scales.push(s);
            max_scale = max_scale.max(s);
            max_l1 = max_l1.max(h.iter().map(|x| x.abs()).sum());
        }
        Int8Tokens {
            codes,
            scales,
            max_scale,
            max_l1,
        }
    }

    /// Each entry of tile `tile`: the largest `s_t (q_t . p_v)` over the text's tokens (`len`).
    pub(super) fn tile_maxima(&self, tile: usize, tokens: &Int8Tokens, best: &mut [f32; TILE]) {
        let lines = self.quads * (TILE / 16);
        let packed = &self.packed[tile * lines..(tile + 1) * lines];
        let offsets = &self.offset[tile * TILE..(tile + 1) * TILE];
        let width = self.quads * 4;
        let len = tokens.scales.len();
        best.fill(f32::NEG_INFINITY);
        for group in (0..len).step_by(ROWS) {
            let index: [usize; ROWS] = std::array::from_fn(|r| (group + r).min(len - 1));
            let rows = index.map(|t| &tokens.codes[t * width..(t + 1) * width]);
            let scales = index.map(|t| tokens.scales[t]);
            // SAFETY: `available()` is checked before an `Int8Weights` is made; `packed` holds
            // `quads x 4` lines and every row `quads x 4` bytes.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                tile_step_vnni(packed, rows, scales, offsets, best)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (packed, rows, scales, offsets);
        }
    }

    /// Whether entry `v`'s maximum logit over the text can be positive, given `maximum`, its
    /// [`Int8Weights::tile_maxima`] value (a NaN or infinity counts as possible).
    pub(super) fn may_be_positive(
        &self,
        v: usize,
        maximum: f32,
        bias: f32,
        tokens: &Int8Tokens,
        hidden: usize,
    ) -> bool {
        let (s, h) = (self.scale[v], hidden as f32);
        let approximate = maximum * s;
        let bound = 0.5 * s * tokens.max_l1
            + 0.5 * tokens.max_scale * self.l1[v]
            + 0.25 * h * tokens.max_scale * s;
        // Float rounding: of the float32 dot product (at most hidden x 2^-24 x ‖h‖₁ max |w|, with
        // max |w| = 127 s, taken twice over), and of the approximation and the bound (relative).
        let margin = 2.0 * h * 6.0e-8 * tokens.max_l1 * 127.0 * s
            + 1e-4 * (approximate.abs() + bound)
            + 1e-6;
        let upper = approximate + bound + margin + bias;
        upper > 0.0 || upper.is_nan()
    }
}

/// One tile's int8 dot products with `ROWS` tokens, scaled by each token's scale and folded into
/// `best`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn tile_step_vnni(
    lines: &[ByteLine],
    rows: [&[u8]; ROWS],
    scales: [f32; ROWS],
    offsets: &[i32],
    best: &mut [f32; TILE],
) {
    use std::arch::x86_64::*;
    let quads = lines.len() / 4;
    debug_assert!(rows.iter().all(|r| r.len() == quads * 4) && offsets.len() == TILE);
    let w = lines.as_ptr() as *const __m512i;
    let x: [*const u8; ROWS] = std::array::from_fn(|r| rows[r].as_ptr());
    let mut acc = [[_mm512_setzero_si512(); 4]; ROWS];
    for g in 0..quads {
        // SAFETY: lines `4 g .. 4 g + 4` exist and are 64-byte aligned; row bytes `4 g .. 4 g + 4`
        // exist.
        let w0 = _mm512_load_si512(w.add(4 * g));
        let w1 = _mm512_load_si512(w.add(4 * g + 1));
        let w2 = _mm512_load_si512(w.add(4 * g + 2));
        let w3 = _mm512_load_si512(w.add(4 * g + 3));
        for r in 0..ROWS {
            let xr = _mm512_set1_epi32((x[r].add(4 * g) as *const i32).read_unaligned());
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], xr, w0);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], xr, w1);
            acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], xr, w2);
            acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], xr, w3);
        }
    }
    let b = best.as_mut_ptr();
    for j in 0..4 {
        let offset = _mm512_loadu_si512(offsets.as_ptr().add(16 * j) as *const __m512i);
        let mut m = _mm512_loadu_ps(b.add(16 * j));
        for (row, &scale) in acc.iter().zip(&scales) {
            let sums = _mm512_cvtepi32_ps(_mm512_sub_epi32(row[j], offset));
            m = _mm512_max_ps(m, _mm512_mul_ps(sums, _mm512_set1_ps(scale)));
        }
        _mm512_storeu_ps(b.add(16 * j), m);
    }
}
