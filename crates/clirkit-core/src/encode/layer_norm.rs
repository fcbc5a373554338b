//! Layer normalization of a residual sum, with the arithmetic of onnxruntime's CPU
//! `SkipLayerNormalization` kernel: the float operations it performs, in its order, so the outputs are
//! its outputs bit for bit.
//!
//! That kernel is what onnxruntime runs for a transformer's `Add` + `LayerNormalization` pairs at its
//! default optimization level, so a dynamically quantized encoder's vectors (whose int8 requantization
//! amplifies any change of rounding) depend on its exact arithmetic. In onnxruntime 1.32 it is Welford's
//! running mean and sum of squared deviations, one value at a time along each row (`delta = x - mean;
//! mean += delta / i; m2 += (x - mean) * delta`), the deviation `sqrt(m2 / n + epsilon)`, then
//! `(x - mean) / deviation * gamma + beta` (read off its machine code: its published source is older).
//! Each step waits on a division, so onnxruntime's one-row-at-a-time loop is slow; here a block of rows
//! is stepped together, a row to a vector lane, which leaves every rounding as it was.

use crate::error::{Error, Result};

/// Rows stepped together by the portable kernel (independent chains of divisions).
const LANES: usize = 16;

/// The operands of one call: `rows × hidden` values.
pub struct SkipLayerNorm<'a> {
    /// `rows × hidden` values.
    pub input: &'a [f32],
    /// Added to `input`: as many values, or fewer that repeat (row `r` reads from `r × hidden` modulo
    /// its length, as onnxruntime's kernel does).
    pub skip: &'a [f32],
    pub gamma: &'a [f32],
    pub beta: Option<&'a [f32]>,
    /// Added after `skip`.
    pub bias: Option<&'a [f32]>,
    pub epsilon: f32,
}

impl SkipLayerNorm<'_> {
    /// Normalizes each row of `input + skip (+ bias)` into `output`; `sum`, when given, receives
    /// `input + skip (+ bias)` itself.
    pub fn run(&self, output: &mut [f32], sum: Option<&mut [f32]>) -> Result<()> {
        let hidden = self.gamma.len();
        self.check(hidden, output.len(), sum.as_deref().map(<[f32]>::len))?;
        if hidden == 0 || output.is_empty() {
            return Ok(());
        }
        let rows = self.input.len() / hidden;
        for (row, values) in output.chunks_exact_mut(hidden).enumerate() {
            let at = row * hidden;
            let skip = &self.skip[at % self.skip.len()..][..hidden];
            for ((value, &x), &s) in values
                .iter_mut()
                .zip(&self.input[at..at + hidden])
                .zip(skip)
            {
                *value = x + s;
            }
            if let Some(bias) = self.bias {
                for (value, &b) in values.iter_mut().zip(bias) {
                    *value += b;
                }
            }
        }
        if let Some(sum) = sum {
            sum.copy_from_slice(output);
        }
        let (mut means, mut squares) = (vec![0f32; rows], vec![0f32; rows]);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") && i32::try_from(output.len()).is_ok() {
            // SAFETY: the CPU has AVX-512F; every row offset fits the gathers' 32-bit indices.
            unsafe {
                avx512::statistics(output, hidden, &mut means, &mut squares);
                for (row, values) in output.chunks_exact_mut(hidden).enumerate() {
                    let deviation = self.deviation(squares[row], hidden);
                    avx512::normalize(values, means[row], deviation, self.gamma, self.beta);
                }
            }
            return Ok(());
        }
        statistics(output, hidden, &mut means, &mut squares);
        for (row, values) in output.chunks_exact_mut(hidden).enumerate() {
            let deviation = self.deviation(squares[row], hidden);
            normalize(values, means[row], deviation, self.gamma, self.beta);
        }
        Ok(())
    }

    fn deviation(&self, squares: f32, hidden: usize) -> f32 {
        (squares / hidden as f32 + self.epsilon).sqrt()
    }

    fn check(&self, hidden: usize, output: usize, sum: Option<usize>) -> Result<()> {
        let invalid = |what: String| {
            Err(Error::InvalidInput(format!(
                "skip layer normalization: {what}"
            )))
        };
        if hidden == 0 {
            return if self.input.is_empty() {
                Ok(())
            } else {
                invalid("gamma is empty".into())
            };
        }
        if !self.input.len().is_multiple_of(hidden) {
            return invalid(format!(
                "{} input values are not rows of {hidden}",
                self.input.len()
            ));
        }
        if self.skip.is_empty()
            || !self.skip.len().is_multiple_of(hidden)
            || !self.input.len().is_multiple_of(self.skip.len())
        {
            return invalid(format!(
                "{} skip values do not tile {} input values in rows of {hidden}",
                self.skip.len(),
                self.input.len()
            ));
        }
        for (name, values) in [("beta", self.beta), ("bias", self.bias)] {
            if values.is_some_and(|v| v.len() != hidden) {
                return invalid(format!(
                    "{name} holds {} values, not {hidden}",
                    values.map_or(0, <[f32]>::len)
                ));
            }
        }
        if output != self.input.len() || sum.is_some_and(|s| s != self.input.len()) {
            return invalid(format!(
                "the outputs do not hold {} values",
                self.input.len()
            ));
        }
        Ok(())
    }
}

/// Each row's mean and sum of squared deviations (Welford's recurrence, in value order, as onnxruntime
/// steps one row), `LANES` rows at a time.
fn statistics(values: &[f32], hidden: usize, means: &mut [f32], squares: &mut [f32]) {
    for (block, (means, squares)) in means
        .chunks_mut(LANES)
        .zip(squares.chunks_mut(LANES))
        .enumerate()
    {
        let rows = &values[block * LANES * hidden..][..means.len() * hidden];
        for h in 0..hidden {
            let count = (h + 1) as f32;
            for (lane, (mean, square)) in means.iter_mut().zip(squares.iter_mut()).enumerate() {
                let value = rows[lane * hidden + h];
                let delta = value - *mean;
                *mean += delta / count;
                *square += (value - *mean) * delta;
            }
        }
    }
}

/// `(x - mean) / deviation * gamma (+ beta)` for each value of a row.
fn normalize(row: &mut [f32], mean: f32, deviation: f32, gamma: &[f32], beta: Option<&[f32]>) {
    for (h, (x, g)) in row.iter_mut().zip(gamma).enumerate() {
        let scaled = (*x - mean) / deviation * g;
        *x = match beta {
            Some(beta) => scaled + beta[h],
            None => scaled,
        };
    }
}

/// The same operations on sixteen rows (or values) a vector, four vectors of rows stepped together.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    const GROUPS: usize = 4;
    const WIDTH: usize = 16;

    /// As the portable `statistics`, the rows' values gathered from `values` (row-major).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn statistics(
        values: &[f32],
        hidden: usize,
        means: &mut [f32],
        squares: &mut [f32],
    ) {
        let rows = means.len();
        let mut first = 0;
        while first < rows {
            let count = (rows - first).min(GROUPS * WIDTH);
            // Lanes past the last row read the last row again; their results are not kept.
            let offsets: [[i32; WIDTH]; GROUPS] = std::array::from_fn(|g| {
                std::array::from_fn(|lane| {
                    ((first + (g * WIDTH + lane).min(count - 1)) * hidden) as i32
                })
            });
            let index: [__m512i; GROUPS] =
                std::array::from_fn(|g| _mm512_loadu_si512(offsets[g].as_ptr().cast()));
            let mut mean = [_mm512_setzero_ps(); GROUPS];
            let mut square = [_mm512_setzero_ps(); GROUPS];
            for h in 0..hidden {
                let n = _mm512_set1_ps((h + 1) as f32);
                let column = values.as_ptr().add(h);
                for g in 0..GROUPS {
                    let value = _mm512_i32gather_ps::<4>(index[g], column.cast());
                    let delta = _mm512_sub_ps(value, mean[g]);
                    mean[g] = _mm512_add_ps(mean[g], _mm512_div_ps(delta, n));
                    square[g] = _mm512_add_ps(
                        square[g],
                        _mm512_mul_ps(_mm512_sub_ps(value, mean[g]), delta),
                    );
                }
            }
            let mut lanes = [[0f32; WIDTH]; 2];
            for g in 0..GROUPS {
                _mm512_storeu_ps(lanes[0].as_mut_ptr(), mean[g]);
                _mm512_storeu_ps(lanes[1].as_mut_ptr(), square[g]);
                for lane in 0..WIDTH.min(count.saturating_sub(g * WIDTH)) {
                    means[first + g * WIDTH + lane] = lanes[0][lane];
                    squares[first + g * WIDTH + lane] = lanes[1][lane];
                }
            }
            first += count;
        }
    }

    /// As the portable `normalize`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn normalize(
        row: &mut [f32],
        mean: f32,
        deviation: f32,
        gamma: &[f32],
        beta: Option<&[f32]>,
    ) {
        let whole = row.len() / WIDTH * WIDTH;
        let (m, d) = (_mm512_set1_ps(mean), _mm512_set1_ps(deviation));
        for at in (0..whole).step_by(WIDTH) {
            let x = _mm512_loadu_ps(row.as_ptr().add(at));
            let mut y = _mm512_mul_ps(
                _mm512_div_ps(_mm512_sub_ps(x, m), d),
                _mm512_loadu_ps(gamma.as_ptr().add(at)),
            );
            if let Some(beta) = beta {
                y = _mm512_add_ps(y, _mm512_loadu_ps(beta.as_ptr().add(at)));
            }
            _mm512_storeu_ps(row.as_mut_ptr().add(at), y);
        }
        super::normalize(
            &mut row[whole..],
            mean,
            deviation,
            &gamma[whole..],
            beta.map(|b| &b[whole..]),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::test_values as values;

    /// onnxruntime 1.32's kernel as its machine code runs: one row, one value at a time.
    fn reference(op: &SkipLayerNorm, output: &mut [f32]) {
        let hidden = op.gamma.len();
        for (row, out) in output.chunks_mut(hidden).enumerate() {
            let at = row * hidden;
            let (mut mean, mut m2) = (0f32, 0f32);
            for h in 0..hidden {
                let mut v = op.input[at + h] + op.skip[at % op.skip.len() + h];
                if let Some(b) = op.bias {
                    v += b[h];
                }
                out[h] = v;
                let delta = v - mean;
                mean += delta / (h + 1) as f32;
                m2 += (v - mean) * delta;
            }
            let deviation = (m2 / hidden as f32 + op.epsilon).sqrt();
            for h in 0..hidden {
                let scaled = (out[h] - mean) / deviation * op.gamma[h];
                out[h] = match op.beta {
                    Some(b) => scaled + b[h],
                    None => scaled,
                };
            }
        }
    }

    #[test]
    fn rows_stepped_together_equal_one_row_at_a_time_bit_for_bit() {
        for (rows, hidden, skip_rows) in [(1, 384, 1), (13, 384, 13), (130, 64, 1), (9, 7, 3)] {
            let input = values(rows * hidden, 1);
            let skip = values(skip_rows * hidden, 2);
            let (gamma, beta, bias) = (values(hidden, 3), values(hidden, 4), values(hidden, 5));
            for with_bias in [false, true] {
                let op = SkipLayerNorm {
                    input: &input,
                    skip: &skip,
                    gamma: &gamma,
                    beta: Some(&beta),
                    bias: with_bias.then_some(&bias[..]),
                    epsilon: 1e-12,
                };
                let (mut want, mut got, mut sum) = (
                    vec![0f32; input.len()],
                    vec![0f32; input.len()],
                    vec![0f32; input.len()],
                );
                reference(&op, &mut want);
                op.run(&mut got, Some(&mut sum)).unwrap();
                assert!(
                    want.iter()
                        .zip(&got)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{rows}x{hidden}"
                );
                let added: Vec<f32> = (0..input.len())
                    .map(|i| {
                        input[i]
                            + skip[i % skip.len()]
                            + if with_bias { bias[i % hidden] } else { 0.0 }
                    })
                    .collect();
                assert!(added
                    .iter()
                    .zip(&sum)
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
            }
        }
    }

    #[test]
    fn the_portable_statistics_are_the_vector_ones() {
        let (rows, hidden) = (70, 33);
        let values = values(rows * hidden, 9);
        let (mut means, mut squares) = (vec![0f32; rows], vec![0f32; rows]);
        statistics(&values, hidden, &mut means, &mut squares);
        let mut row = values[..hidden].to_vec();
        let (gamma, beta) = (self::values(hidden, 1), self::values(hidden, 2));
        normalize(&mut row, means[0], 1.5, &gamma, Some(&beta));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            let (mut vector_means, mut vector_squares) = (vec![0f32; rows], vec![0f32; rows]);
            let mut vector_row = values[..hidden].to_vec();
            // SAFETY: the CPU has AVX-512F.
            unsafe {
                avx512::statistics(&values, hidden, &mut vector_means, &mut vector_squares);
                avx512::normalize(&mut vector_row, means[0], 1.5, &gamma, Some(&beta));
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&means), bits(&vector_means));
            assert_eq!(bits(&squares), bits(&vector_squares));
            assert_eq!(bits(&row), bits(&vector_row));
        }
    }

    #[test]
    fn mismatched_operands_are_errors() {
        let (input, gamma, beta) = (values(10, 1), values(5, 2), values(4, 3));
        let op = |skip, beta| SkipLayerNorm {
            input: &input,
            skip,
            gamma: &gamma,
            beta,
            bias: None,
            epsilon: 0.0,
        };
        let mut out = vec![0f32; 10];
        assert!(op(&input[..3], None).run(&mut out, None).is_err());
        assert!(op(&input, Some(&beta)).run(&mut out, None).is_err());
        assert!(op(&input[..5], None).run(&mut out[..9], None).is_err());
        assert!(op(&input[..5], None).run(&mut out, None).is_ok());
    }
}
