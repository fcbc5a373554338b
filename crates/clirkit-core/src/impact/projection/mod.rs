//! SPLADE's vocabulary projection fused with the max over a text's tokens.
//!
//! A SPLADE model's MLM head ends in a projection of each token's state (`hidden` floats) onto the
//! vocabulary (`vocab` rows of `hidden` weights, plus a bias), and a text's weight for entry `v` is
//! `log(1 + relu(max over its tokens of logit_v))`. For a small encoder that projection is most of
//! the arithmetic, and the `tokens x vocab` logits it gives (30 MB for 256 tokens over BERT's 30,522
//! entries) are written, copied and read again only to keep one maximum per entry.
//! [`VocabProjection::max_logits`] computes those maxima without materializing the logits: the
//! weights are packed once into tiles of [`TILE`] entries, and each tile's dot products with
//! [`ROWS`] tokens at a time are reduced to a running maximum while still in registers.
//!
//! Every dot product is one fused multiply-add chain over the hidden dimension in order, starting
//! from zero, and the bias is added to the maximum (rounding is monotone, so the maximum of
//! `logit + bias` is the maximum logit plus the bias, bit for bit): the AVX-512 kernel and the
//! portable one (compiled with AVX2 + FMA where the CPU has them) give the same bits.
//! Tokens beyond a text's length (padding) never contribute; a short last group of tokens repeats
//! the text's last token, which cannot change a maximum.
//!
//! A SPLADE weight is `log(1 + relu(max logit))`, so only the entries whose maximum is positive
//! matter: [`VocabProjection::positive_max_logits`] finds the few that can be from int8 products and
//! an error bound ([`prefilter`], on CPUs with AVX-512 VNNI) and computes only those in float32,
//! giving `max(0, max_logits)` bit for bit.

mod layout;
mod prefilter;

use crate::error::{Error, Result};
use prefilter::Int8Weights;

pub use layout::{ROWS, TILE};

/// One cache line of packed weights (aligned, so each register load is one line).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// The kernel a CPU runs (every level gives the same bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Portable Rust (`f32::mul_add`).
    Portable,
    /// The portable code compiled with AVX2 and FMA.
    Avx2Fma,
    /// AVX-512F intrinsics.
    Avx512,
}

impl Kernel {
    /// The fastest kernel this CPU supports.
    pub fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Kernel::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Kernel::Avx2Fma;
            }
        }
        Kernel::Portable
    }

    /// Whether this CPU can run the kernel.
    pub fn is_available(self) -> bool {
        match self {
            Kernel::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Fma => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The kernel's name, as [`VocabProjection::kernel_name`] reports it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Portable => "portable",
            Kernel::Avx2Fma => "avx2-fma",
            Kernel::Avx512 => "avx512",
        }
    }
}

/// A padded batch of token states: `lengths.len()` texts of `seq` tokens of `hidden` floats
/// (row-major, right-padded), text `n`'s real tokens its first `lengths[n]` (at least one).
#[derive(Clone, Copy)]
pub struct Batch<'a> {
    pub states: &'a [f32],
    pub seq: usize,
    pub lengths: &'a [usize],
}

/// A vocabulary projection (`vocab` x `hidden` weights and `vocab` biases), packed for
/// [`VocabProjection::max_logits`].
pub struct VocabProjection {
    vocab: usize,
    hidden: usize,
    /// Tile `j` holds, for each hidden index `k` in order, the weights of entries
    /// `j * TILE .. (j + 1) * TILE` at `k` (four lines); entries past `vocab` are zero.
    packed: Vec<Line>,
    bias: Vec<f32>,
    kernel: Kernel,
    /// The int8 copy of the prefilter, where the CPU runs it.
    int8: Option<Int8Weights>,
}

impl VocabProjection {
    /// Pack `weight` (`vocab` rows of `hidden` floats, row-major: entry `v`'s weights are
    /// `weight[v * hidden .. (v + 1) * hidden]`) and `bias` (`vocab` floats).
    pub fn new(weight: &[f32], bias: &[f32], vocab: usize, hidden: usize) -> Result<Self> {
        if vocab == 0 || hidden == 0 {
            return Err(Error::invalid(format!(
                "a vocabulary projection needs at least one entry and one hidden unit, got {vocab} x {hidden}"
            )));
        }
        if weight.len() != vocab * hidden {
            return Err(Error::invalid(format!(
                "projection weights hold {} floats, not {vocab} x {hidden}",
                weight.len()
            )));
        }
        if bias.len() != vocab {
            return Err(Error::invalid(format!(
                "projection bias holds {} floats, not one per vocabulary entry ({vocab})",
                bias.len()
            )));
        }
        let tiles = vocab.div_ceil(TILE);
        let lines_per_k = TILE / 16;
        let mut packed = vec![Line([0.0; 16]); tiles * hidden * lines_per_k];
        for v in 0..vocab {
            let (tile, lane) = (v / TILE, v % TILE);
            for k in 0..hidden {
                let line = (tile * hidden + k) * lines_per_k + lane / 16;
                packed[line].0[lane % 16] = weight[v * hidden + k];
            }
        }
        Ok(VocabProjection {
            vocab,
            hidden,
            packed,
            bias: bias.to_vec(),
            kernel: Kernel::detect(),
            int8: prefilter::available().then(|| Int8Weights::new(weight, vocab, hidden)),
        })
    }

    /// Run `kernel` instead of the detected one (for comparing kernels); refused when this CPU
    /// lacks it.
    pub fn with_kernel(mut self, kernel: Kernel) -> Result<Self> {
        if !kernel.is_available() {
            return Err(Error::invalid(format!(
                "the {} projection kernel needs CPU features this machine lacks",
                kernel.name()
            )));
        }
        self.kernel = kernel;
        Ok(self)
    }

    /// Vocabulary entries.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Hidden units per token.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The kernel in use (with `+int8-prefilter` where [`Self::positive_max_logits`] uses it).
    pub fn kernel_name(&self) -> &'static str {
        match (self.kernel, self.int8.is_some()) {
            (Kernel::Avx512, true) => "avx512+int8-prefilter",
            (kernel, _) => kernel.name(),
        }
    }

    /// Each text's maximum logit per vocabulary entry: `out` receives `batch.lengths.len()` rows
    /// of `vocab` floats, entry `v` of row `n` the maximum over text `n`'s real tokens of
    /// `state . weight_v + bias_v`.
    pub fn max_logits(&self, batch: &Batch<'_>, out: &mut [f32]) -> Result<()> {
        let (states, seq, lengths) = self.check(batch, out)?;
        let h = self.hidden;
        let tile_lines = h * TILE / 16;
        let mut best = [0f32; TILE];
        for (tile, lines) in self.packed.chunks_exact(tile_lines).enumerate() {
            let first = tile * TILE;
            let width = TILE.min(self.vocab - first);
            for (n, &len) in lengths.iter().enumerate() {
                let text = &states[n * seq * h..(n * seq + len) * h];
                self.tile_maxima(lines, text, &mut best);
                let row = &mut out[n * self.vocab + first..n * self.vocab + first + width];
                for ((o, &b), &bias) in row.iter_mut().zip(&best).zip(&self.bias[first..]) {
                    *o = b + bias;
                }
            }
        }
        Ok(())
    }

    /// [`Self::max_logits`] with every entry below zero given as zero (`max(0, x)`, bit for bit), of
    /// which SPLADE's weights are made: with the int8 prefilter, only the entries that may be positive
    /// are computed in float32.
    pub fn positive_max_logits(&self, batch: &Batch<'_>, out: &mut [f32]) -> Result<()> {
        let Some(int8) = &self.int8 else {
            self.max_logits(batch, out)?;
            for o in out.iter_mut() {
                *o = if *o > 0.0 { *o } else { 0.0 };
            }
            return Ok(());
        };
        let (states, seq, lengths) = self.check(batch, out)?;
        let (h, vocab) = (self.hidden, self.vocab);
        let mut best = [0f32; TILE];
        let mut candidates = Vec::new();
        let mut gathered = vec![Line([0.0; 16]); h * TILE / 16];
        for (n, &len) in lengths.iter().enumerate() {
            let text = &states[n * seq * h..(n * seq + len) * h];
            let tokens = int8.tokens(text, h);
            let row = &mut out[n * vocab..(n + 1) * vocab];
            candidates.clear();
            for tile in 0..vocab.div_ceil(TILE) {
                int8.tile_maxima(tile, &tokens, &mut best);
                let first = tile * TILE;
                for (v, &maximum) in (first..vocab.min(first + TILE)).zip(&best) {
                    if int8.may_be_positive(v, maximum, self.bias[v], &tokens, h) {
                        candidates.push(v);
                    }
                }
            }
            row.fill(0.0);
            for chunk in candidates.chunks(TILE) {
                // The candidates' float32 weights, gathered into one tile.
                for (lane, &v) in chunk.iter().enumerate() {
                    let (tile, from) = (v / TILE, v % TILE);
                    for k in 0..h {
                        let line = (tile * h + k) * (TILE / 16) + from / 16;
                        gathered[k * (TILE / 16) + lane / 16].0[lane % 16] =
                            self.packed[line].0[from % 16];
                    }
                }
                self.tile_maxima(&gathered, text, &mut best);
                for (&v, &b) in chunk.iter().zip(&best) {
                    let x = b + self.bias[v];
                    row[v] = if x > 0.0 { x } else { 0.0 };
                }
            }
        }
        Ok(())
    }

    /// The largest dot product of each entry of one packed tile (`lines`) over a text's tokens
    /// (`text`: its real tokens only).
    fn tile_maxima(&self, lines: &[Line], text: &[f32], best: &mut [f32; TILE]) {
        let (h, len) = (self.hidden, text.len() / self.hidden);
        best.fill(f32::NEG_INFINITY);
        for group in (0..len).step_by(ROWS) {
            // A short last group repeats the last token: a maximum cannot change.
            let rows: [&[f32]; ROWS] = std::array::from_fn(|r| {
                let t = (group + r).min(len - 1);
                &text[t * h..(t + 1) * h]
            });
            self.tile_step(lines, rows, best);
        }
    }

    /// Refuse inputs of other shapes than [`Batch`] describes; its states, padded length and
    /// lengths.
    fn check<'a>(&self, batch: &Batch<'a>, out: &[f32]) -> Result<(&'a [f32], usize, &'a [usize])> {
        let (states, seq, lengths) = (batch.states, batch.seq, batch.lengths);
        let (h, texts) = (self.hidden, lengths.len());
        if states.len() != texts * seq * h {
            return Err(Error::invalid(format!(
                "token states hold {} floats, not {texts} texts x {seq} tokens x {h} hidden units",
                states.len()
            )));
        }
        if out.len() != texts * self.vocab {
            return Err(Error::invalid(format!(
                "the output holds {} floats, not {texts} texts x {} entries",
                out.len(),
                self.vocab
            )));
        }
        if let Some((n, &len)) = lengths
            .iter()
            .enumerate()
            .find(|(_, &len)| len == 0 || len > seq)
        {
            return Err(Error::invalid(format!(
                "text {n} has {len} tokens; a text needs 1 to {seq} (the padded length)"
            )));
        }
        Ok((states, seq, lengths))
    }

    fn tile_step(&self, lines: &[Line], rows: [&[f32]; ROWS], best: &mut [f32; TILE]) {
        match self.kernel {
            Kernel::Portable => tile_step_portable(lines, rows, best),
            // SAFETY: `with_kernel` and `detect` only choose a kernel the CPU supports.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Fma => unsafe { tile_step_avx2(lines, rows, best) },
            // SAFETY: as above; `lines` holds `TILE / 16` lines per row of every `rows[r]`.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => unsafe { tile_step_avx512(lines, rows, best) },
            #[cfg(not(target_arch = "x86_64"))]
            _ => unreachable!(),
        }
    }
}

/// One tile's dot products with `ROWS` tokens (each a fused multiply-add chain over the hidden
/// units in order), folded into `best`.
#[inline(always)]
fn tile_step_portable(lines: &[Line], rows: [&[f32]; ROWS], best: &mut [f32; TILE]) {
    let mut acc = [[0f32; TILE]; ROWS];
    for (k, weights) in lines.chunks_exact(TILE / 16).enumerate() {
        for (r, row) in rows.iter().enumerate() {
            let x = row[k];
            for (line, chunk) in weights.iter().zip(acc[r].chunks_exact_mut(16)) {
                for (a, &w) in chunk.iter_mut().zip(&line.0) {
                    *a = w.mul_add(x, *a);
                }
            }
        }
    }
    for row in &acc {
        for (b, &a) in best.iter_mut().zip(row) {
            *b = b.max(a);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_step_avx2(lines: &[Line], rows: [&[f32]; ROWS], best: &mut [f32; TILE]) {
    tile_step_portable(lines, rows, best)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_step_avx512(lines: &[Line], rows: [&[f32]; ROWS], best: &mut [f32; TILE]) {
    use std::arch::x86_64::*;
    let hidden = rows[0].len();
    debug_assert_eq!(lines.len(), hidden * TILE / 16);
    let w = lines.as_ptr() as *const f32;
    let x: [*const f32; ROWS] = std::array::from_fn(|r| rows[r].as_ptr());
    let mut acc = [[_mm512_setzero_ps(); 4]; ROWS];
    for k in 0..hidden {
        // SAFETY: line `4 k + j` exists (checked above) and is 64-byte aligned; `x[r]` has
        // `hidden` floats.
        let wk = w.add(k * TILE);
        let w0 = _mm512_load_ps(wk);
        let w1 = _mm512_load_ps(wk.add(16));
        let w2 = _mm512_load_ps(wk.add(32));
        let w3 = _mm512_load_ps(wk.add(48));
        for r in 0..ROWS {
            let xr = _mm512_set1_ps(*x[r].add(k));
            acc[r][0] = _mm512_fmadd_ps(w0, xr, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(w1, xr, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(w2, xr, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(w3, xr, acc[r][3]);
        }
    }
    let b = best.as_mut_ptr();
    for j in 0..4 {
        let mut m = _mm512_loadu_ps(b.add(16 * j));
        for row in &acc {
            m = _mm512_max_ps(m, row[j]);
        }
        _mm512_storeu_ps(b.add(16 * j), m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// The plain computation: every token's logits, then the maximum over the real tokens.
    fn reference(
        w: &[f32],
        bias: &[f32],
        states: &[f32],
        seq: usize,
        lengths: &[usize],
    ) -> Vec<f32> {
        let (vocab, h) = (bias.len(), w.len() / bias.len());
        let mut out = vec![f32::NEG_INFINITY; lengths.len() * vocab];
        for (n, &len) in lengths.iter().enumerate() {
            for t in 0..len {
                let x = &states[(n * seq + t) * h..(n * seq + t + 1) * h];
                for v in 0..vocab {
                    let mut dot = 0f32;
                    for k in 0..h {
                        dot = w[v * h + k].mul_add(x[k], dot);
                    }
                    let o = &mut out[n * vocab + v];
                    *o = o.max(dot + bias[v]);
                }
            }
        }
        out
    }

    /// The projection once per kernel this CPU runs.
    fn each_kernel(w: &[f32], bias: &[f32], h: usize) -> Vec<VocabProjection> {
        [Kernel::Portable, Kernel::Avx2Fma, Kernel::Avx512]
            .into_iter()
            .filter(|k| k.is_available())
            .map(|k| {
                let p = VocabProjection::new(w, bias, bias.len(), h).unwrap();
                p.with_kernel(k).unwrap()
            })
            .collect()
    }

    fn assert_same_bits(want: &[f32], got: &[f32], kernel: &str) {
        let same = want
            .iter()
            .zip(got)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{kernel}: differs from the plain maximum");
    }

    fn random(rng: &mut SplitMix64, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.unit() as f32 * 2.0 - 1.0).collect()
    }

    #[test]
    fn every_kernel_equals_the_plain_maximum_clipped_or_not_bit_for_bit() {
        let mut rng = SplitMix64::new(11);
        // A vocabulary that is not a multiple of the tile, hidden units not of the int8 quad,
        // lengths not of the row group, padding holding values that must not reach any maximum,
        // and one token far larger than the rest (a loose int8 bound for its text).
        let (vocab, h, seq) = (TILE * 5 + 7, 37, 23);
        let lengths = [23, 1, 9, 14];
        let w = random(&mut rng, vocab * h);
        let mut states = random(&mut rng, lengths.len() * seq * h);
        for (n, &len) in lengths.iter().enumerate() {
            for x in &mut states[(n * seq + len) * h..(n + 1) * seq * h] {
                *x = 1e6;
            }
        }
        for x in &mut states[..h] {
            *x *= 40.0;
        }
        // Biases that put the first text's maxima within +-0.3 of zero for a third of the
        // entries, far below or above it for the others, so the prefilter keeps and drops some.
        let plain = reference(&w, &vec![0.0; vocab], &states, seq, &lengths);
        let bias: Vec<f32> = (0..vocab)
            .map(|v| {
                let shift = match v % 3 {
                    0 => (rng.unit() as f32 - 0.5) * 0.6,
                    1 => -50.0,
                    _ => 2.0,
                };
                shift - plain[v]
            })
            .collect();
        let want = reference(&w, &bias, &states, seq, &lengths);
        let clipped: Vec<f32> = want
            .iter()
            .map(|&x| if x > 0.0 { x } else { 0.0 })
            .collect();
        assert!(clipped.contains(&0.0) && clipped.iter().any(|&x| x > 0.0));
        for p in each_kernel(&w, &bias, h) {
            let mut got = vec![0f32; lengths.len() * vocab];
            let batch = Batch {
                states: &states,
                seq,
                lengths: &lengths,
            };
            p.max_logits(&batch, &mut got).unwrap();
            assert_same_bits(&want, &got, p.kernel_name());
            p.positive_max_logits(&batch, &mut got).unwrap();
            assert_same_bits(&clipped, &got, p.kernel_name());
        }
    }

    #[test]
    fn bad_shapes_and_lengths_are_refused() {
        assert!(VocabProjection::new(&[0.0; 6], &[0.0; 2], 2, 4).is_err());
        assert!(VocabProjection::new(&[0.0; 8], &[0.0; 3], 2, 4).is_err());
        assert!(VocabProjection::new(&[], &[], 0, 4).is_err());
        let p = VocabProjection::new(&[1.0; 8], &[0.0; 2], 2, 4).unwrap();
        let mut out = vec![0f32; 4];
        let states = vec![0f32; 2 * 3 * 4];
        let run = |states: &[f32], lengths: &[usize], out: &mut [f32]| {
            let batch = Batch {
                states,
                seq: 3,
                lengths,
            };
            p.max_logits(&batch, out)
        };
        let err = run(&states, &[2, 0], &mut out).unwrap_err();
        assert!(err.to_string().contains("text 1 has 0 tokens"), "{err}");
        assert!(run(&states, &[2, 4], &mut out).is_err());
        assert!(run(&states[1..], &[2, 2], &mut out).is_err());
        assert!(run(&states, &[2, 2], &mut out[1..]).is_err());
        run(&states, &[2, 3], &mut out).unwrap();
    }
}
