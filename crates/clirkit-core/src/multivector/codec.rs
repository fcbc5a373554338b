//! PLAID's residual codec, with buckets per dimension. A token is stored as its nearest centroid and
//! the residual (token minus centroid) quantized per dimension to `nbits` (1, 2 or 4): in dimension
//! `j` the cutoffs are the `i / 2^nbits` quantiles of dimension `j`'s residuals over a sample, and a
//! bucket decodes to its middle quantile `(i + 0.5) / 2^nbits`. PLAID uses one set of buckets for all
//! dimensions; per-dimension buckets cost `dim x (2^(nbits+1) - 1)` floats in all and matter for
//! encoders whose dimensions differ in spread (off-the-shelf sentence encoders have a few dimensions
//! far wider than the rest). Codes are packed `8 / nbits` dimensions per byte, the first dimension in
//! the low bits.

use crate::error::{Error, Result};

/// Quantizes and restores residuals; see the module documentation.
#[derive(Clone, Debug)]
pub struct ResidualCodec {
    nbits: usize,
    dim: usize,
    /// Per dimension, `2^nbits - 1` increasing bucket boundaries.
    cutoffs: Vec<f32>,
    /// Per dimension, `2^nbits` values, one a bucket.
    weights: Vec<f32>,
}

/// The `q` quantile of sorted `values` with linear interpolation (as `torch.quantile`).
fn quantile(sorted: &[f32], q: f64) -> f32 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = (pos - lo as f64) as f32;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

impl ResidualCodec {
    pub fn check_params(dim: usize, nbits: usize) -> Result<()> {
        if !matches!(nbits, 1 | 2 | 4) {
            return Err(Error::invalid(format!(
                "nbits must be 1, 2 or 4 bits per dimension, got {nbits}"
            )));
        }
        if dim == 0 || !(dim * nbits).is_multiple_of(8) {
            return Err(Error::invalid(format!(
                "dimension {dim} at {nbits} bits does not fill whole bytes (dimension x nbits must be a multiple of 8)"
            )));
        }
        Ok(())
    }

    /// Buckets from a sample of residuals (row-major, `dim` columns).
    pub fn train(dim: usize, nbits: usize, residuals: &[f32]) -> Result<Self> {
        Self::check_params(dim, nbits)?;
        if residuals.len() < dim {
            return Err(Error::invalid("no residuals to train the codec on"));
        }
        let buckets = 1usize << nbits;
        let (mut cutoffs, mut weights) = (Vec::new(), Vec::new());
        let mut column = Vec::with_capacity(residuals.len() / dim);
        for j in 0..dim {
            column.clear();
            column.extend(residuals.iter().skip(j).step_by(dim));
            column.sort_unstable_by(f32::total_cmp);
            cutoffs.extend((1..buckets).map(|i| quantile(&column, i as f64 / buckets as f64)));
            weights
                .extend((0..buckets).map(|i| quantile(&column, (i as f64 + 0.5) / buckets as f64)));
        }
        Self::from_parts(dim, nbits, cutoffs, weights)
    }

    /// A codec from stored cutoffs and weights (checked: sizes, finite, cutoffs not decreasing).
    pub fn from_parts(
        dim: usize,
        nbits: usize,
        cutoffs: Vec<f32>,
        weights: Vec<f32>,
    ) -> Result<Self> {
        Self::check_params(dim, nbits)?;
        let buckets = 1usize << nbits;
        if cutoffs.len() != dim * (buckets - 1) || weights.len() != dim * buckets {
            return Err(Error::invalid(format!(
                "a {nbits}-bit codec of dimension {dim} needs {} cutoffs and {} weights, got {} and {}",
                dim * (buckets - 1),
                dim * buckets,
                cutoffs.len(),
                weights.len()
            )));
        }
        if cutoffs.iter().chain(&weights).any(|v| !v.is_finite())
            || cutoffs
                .chunks_exact(buckets - 1)
                .any(|c| c.windows(2).any(|w| w[0] > w[1]))
        {
            return Err(Error::invalid(
                "codec buckets must be finite with non-decreasing cutoffs",
            ));
        }
        Ok(ResidualCodec {
            nbits,
            dim,
            cutoffs,
            weights,
        })
    }

    pub fn nbits(&self) -> usize {
        self.nbits
    }

    pub fn cutoffs(&self) -> &[f32] {
        &self.cutoffs
    }

    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// Bytes of packed residual per token.
    pub fn bytes_per_token(&self) -> usize {
        self.dim * self.nbits / 8
    }

    /// Quantize one residual (`dim` values) into `out` (`bytes_per_token` bytes).
    pub fn encode(&self, residual: &[f32], out: &mut [u8]) {
        let per_byte = 8 / self.nbits;
        let cuts = (1 << self.nbits) - 1;
        out.fill(0);
        for (j, &v) in residual.iter().enumerate() {
            // The bucket is the number of cutoffs below the value (torch.bucketize).
            let code = self.cutoffs[j * cuts..(j + 1) * cuts].partition_point(|&c| c < v) as u8;
            out[j / per_byte] |= code << ((j % per_byte) * self.nbits);
        }
    }

    /// `centroid + decoded residual` into `out` (`dim` values).
    pub fn decode(&self, centroid: &[f32], packed: &[u8], out: &mut [f32]) {
        let per_byte = 8 / self.nbits;
        let buckets = 1 << self.nbits;
        let mask = buckets - 1;
        let groups = out
            .chunks_exact_mut(per_byte)
            .zip(centroid.chunks_exact(per_byte))
            .zip(self.weights.chunks_exact(per_byte * buckets))
            .zip(packed);
        for (((o, c), w), &byte) in groups {
            for t in 0..per_byte {
                let code = (byte as usize >> (t * self.nbits)) & mask;
                o[t] = c[t] + w[t * buckets + code];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn round_trip_error_shrinks_with_more_bits() {
        let dim = 16;
        let mut rng = SplitMix64::new(9);
        let sample: Vec<f32> = (0..4096).map(|_| rng.unit() as f32 - 0.5).collect();
        let residual: Vec<f32> = (0..dim).map(|_| rng.unit() as f32 - 0.5).collect();
        let centroid = vec![1.0f32; dim];
        let mut errors = Vec::new();
        for nbits in [1, 2, 4] {
            let codec = ResidualCodec::train(dim, nbits, &sample).unwrap();
            assert_eq!(codec.bytes_per_token(), dim * nbits / 8);
            let mut packed = vec![0u8; codec.bytes_per_token()];
            codec.encode(&residual, &mut packed);
            let mut out = vec![0f32; dim];
            codec.decode(&centroid, &packed, &mut out);
            let err: f32 = out
                .iter()
                .zip(&residual)
                .map(|(o, r)| (o - 1.0 - r).abs())
                .sum::<f32>()
                / dim as f32;
            errors.push(err);
        }
        assert!(errors[0] > errors[1] && errors[1] > errors[2], "{errors:?}");
        assert!(errors[2] < 0.05, "{errors:?}");
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(ResidualCodec::check_params(6, 2).is_err());
        assert!(ResidualCodec::check_params(8, 3).is_err());
        assert!(ResidualCodec::from_parts(8, 2, vec![0.0; 24], vec![0.0; 24]).is_err());
        let mut nan = vec![0.0; 8];
        nan[3] = f32::NAN;
        assert!(ResidualCodec::from_parts(8, 1, nan, vec![0.0; 16]).is_err());
        assert!(ResidualCodec::from_parts(8, 1, vec![0.0; 8], vec![0.0; 16]).is_ok());
    }
}
