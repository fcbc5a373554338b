//! PLAID's residual codec. A token is stored as its nearest centroid and the residual (token minus
//! centroid) quantized per dimension to `nbits` (1, 2 or 4) by one global set of buckets: the cutoffs
//! are the `i / 2^nbits` quantiles of residual values over a sample, and a bucket decodes to its
//! middle quantile `(i + 0.5) / 2^nbits`. Codes are packed `8 / nbits` dimensions per byte, the first
//! dimension in the low bits; decoding goes through a table of the weights of every byte value.

use crate::error::{Error, Result};

/// Quantizes and restores residuals; see the module documentation.
#[derive(Clone, Debug)]
pub struct ResidualCodec {
    nbits: usize,
    dim: usize,
    /// `2^nbits - 1` increasing bucket boundaries.
    cutoffs: Vec<f32>,
    /// `2^nbits` values, one a bucket.
    weights: Vec<f32>,
    /// For each byte value, the weights of the dimensions it packs.
    table: Vec<f32>,
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

    /// Buckets from a sample of residual values (any order; sorted here).
    pub fn train(dim: usize, nbits: usize, mut residuals: Vec<f32>) -> Result<Self> {
        Self::check_params(dim, nbits)?;
        if residuals.is_empty() {
            return Err(Error::invalid("no residuals to train the codec on"));
        }
        residuals.sort_unstable_by(f32::total_cmp);
        let buckets = 1usize << nbits;
        let cutoffs = (1..buckets)
            .map(|i| quantile(&residuals, i as f64 / buckets as f64))
            .collect();
        let weights = (0..buckets)
            .map(|i| quantile(&residuals, (i as f64 + 0.5) / buckets as f64))
            .collect();
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
        if cutoffs.len() != buckets - 1 || weights.len() != buckets {
            return Err(Error::invalid(format!(
                "{nbits}-bit codec needs {} cutoffs and {buckets} weights, got {} and {}",
                buckets - 1,
                cutoffs.len(),
                weights.len()
            )));
        }
        if cutoffs.iter().chain(&weights).any(|v| !v.is_finite())
            || cutoffs.windows(2).any(|w| w[0] > w[1])
        {
            return Err(Error::invalid(
                "codec buckets must be finite with non-decreasing cutoffs",
            ));
        }
        let per_byte = 8 / nbits;
        let mask = (1usize << nbits) - 1;
        let table = (0..256usize)
            .flat_map(|byte| (0..per_byte).map(move |t| (byte >> (t * nbits)) & mask))
            .map(|code| weights[code])
            .collect();
        Ok(ResidualCodec {
            nbits,
            dim,
            cutoffs,
            weights,
            table,
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
        for (byte, values) in out.iter_mut().zip(residual.chunks_exact(per_byte)) {
            let mut packed = 0u8;
            for (t, &v) in values.iter().enumerate() {
                // The bucket is the number of cutoffs below the value (torch.bucketize).
                let code = self.cutoffs.partition_point(|&c| c < v) as u8;
                packed |= code << (t * self.nbits);
            }
            *byte = packed;
        }
    }

    /// `centroid + decoded residual` into `out` (`dim` values).
    pub fn decode(&self, centroid: &[f32], packed: &[u8], out: &mut [f32]) {
        let per_byte = 8 / self.nbits;
        for ((o, c), &byte) in out
            .chunks_exact_mut(per_byte)
            .zip(centroid.chunks_exact(per_byte))
            .zip(packed)
        {
            let w = &self.table[byte as usize * per_byte..(byte as usize + 1) * per_byte];
            for t in 0..per_byte {
                o[t] = c[t] + w[t];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pq::SplitMix64;

    #[test]
    fn round_trip_error_shrinks_with_more_bits() {
        let dim = 16;
        let mut rng = SplitMix64::new(9);
        let sample: Vec<f32> = (0..4096).map(|_| rng.unit() as f32 - 0.5).collect();
        let residual: Vec<f32> = (0..dim).map(|_| rng.unit() as f32 - 0.5).collect();
        let centroid = vec![1.0f32; dim];
        let mut errors = Vec::new();
        for nbits in [1, 2, 4] {
            let codec = ResidualCodec::train(dim, nbits, sample.clone()).unwrap();
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
        assert!(ResidualCodec::from_parts(8, 2, vec![0.0; 3], vec![0.0; 3]).is_err());
        assert!(ResidualCodec::from_parts(8, 1, vec![f32::NAN], vec![0.0; 2]).is_err());
    }
}
