//! Product quantization: `m` sub-quantizers over `d / m` consecutive dimensions each, with
//! `2^nbits` centroids (nbits 4 for fast-scan, 8 for the slower, finer option), trained by
//! [`KMeans`] per sub-space in parallel.

use super::kmeans::KMeans;
use super::Metric;
use crate::error::{Error, Result};
use rayon::prelude::*;

#[derive(Clone, Debug)]
pub struct ProductQuantizer {
    pub d: usize,
    pub m: usize,
    pub nbits: usize,
    /// `m * ksub * dsub` floats: sub-quantizer, centroid, component.
    pub centroids: Vec<f32>,
}

impl ProductQuantizer {
    pub fn dsub(&self) -> usize {
        self.d / self.m
    }

    pub fn ksub(&self) -> usize {
        1 << self.nbits
    }

    /// Check the shape parameters with user-facing messages.
    pub fn check_params(d: usize, m: usize, nbits: usize) -> Result<()> {
        if m == 0 || !d.is_multiple_of(m) {
            return Err(Error::invalid(format!(
                "PQ: M={m} does not divide the dimension {d} (each sub-quantizer needs d/M dimensions)"
            )));
        }
        if nbits != 4 && nbits != 8 {
            return Err(Error::invalid(format!(
                "PQ: nbits={nbits} is not supported (4 for fast-scan, 8 for the finer scan)"
            )));
        }
        Ok(())
    }

    /// Train on `data` (row-major, `d` columns).
    pub fn train(data: &[f32], d: usize, m: usize, nbits: usize, seed: u64) -> Result<Self> {
        Self::check_params(d, m, nbits)?;
        let n = data.len() / d;
        let ksub = 1usize << nbits;
        if n < ksub {
            return Err(Error::invalid(format!(
                "too few training vectors: {n} for a PQ codebook with {ksub} centroids per \
                 sub-quantizer (need at least {ksub})"
            )));
        }
        let dsub = d / m;
        let per_sub: Vec<Result<Vec<f32>>> = (0..m)
            .into_par_iter()
            .map(|s| {
                let sub: Vec<f32> = data
                    .chunks_exact(d)
                    .flat_map(|row| row[s * dsub..(s + 1) * dsub].iter().copied())
                    .collect();
                let mut km = KMeans::new(ksub, seed.wrapping_add(s as u64));
                // 4-bit codebooks are tiny to train: use 4x FAISS's sample for steadier ones.
                km.max_points_per_centroid = if ksub == 16 { 1024 } else { 256 };
                km.train(&sub, dsub)
            })
            .collect();
        let mut centroids = Vec::with_capacity(m * ksub * dsub);
        for c in per_sub {
            centroids.extend(c?);
        }
        Ok(ProductQuantizer {
            d,
            m,
            nbits,
            centroids,
        })
    }

    fn centroid(&self, s: usize, c: usize) -> &[f32] {
        let dsub = self.dsub();
        let at = (s * self.ksub() + c) * dsub;
        &self.centroids[at..at + dsub]
    }

    /// Codes of `data` rows: `m` bytes per row (one code per sub-quantizer), nearest centroid
    /// in L2, ties to the lower code.
    pub fn encode(&self, data: &[f32]) -> Vec<u8> {
        let (d, m, dsub, ksub) = (self.d, self.m, self.dsub(), self.ksub());
        // Centroids transposed per sub-quantizer (component-major), so the distances to all
        // `ksub` centroids are computed together in vector registers.
        let mut by_component = vec![0f32; self.centroids.len()];
        for s in 0..m {
            for j in 0..ksub {
                for t in 0..dsub {
                    by_component[(s * dsub + t) * ksub + j] = self.centroid(s, j)[t];
                }
            }
        }
        let mut codes = vec![0u8; data.len() / d * m];
        codes
            .par_chunks_mut(m * 256)
            .zip(data.par_chunks(d * 256))
            .for_each(|(out, rows)| {
                let mut dist = vec![0f32; ksub];
                for (code, x) in out.chunks_exact_mut(m).zip(rows.chunks_exact(d)) {
                    for (s, c) in code.iter_mut().enumerate() {
                        dist.fill(0.0);
                        for t in 0..dsub {
                            let xt = x[s * dsub + t];
                            let row = &by_component[(s * dsub + t) * ksub..][..ksub];
                            for (acc, &ct) in dist.iter_mut().zip(row) {
                                *acc += (xt - ct) * (xt - ct);
                            }
                        }
                        let mut best = 0;
                        for j in 1..ksub {
                            if dist[j] < dist[best] {
                                best = j;
                            }
                        }
                        *c = best as u8;
                    }
                }
            });
        codes
    }

    /// Float look-up table of one query: `m * ksub` higher-is-better contributions, so a
    /// vector's approximate score is the sum of its codes' entries.
    pub fn lut(&self, metric: Metric, q: &[f32], out: &mut [f32]) {
        let (dsub, ksub) = (self.dsub(), self.ksub());
        for s in 0..self.m {
            let qs = &q[s * dsub..(s + 1) * dsub];
            for j in 0..ksub {
                let c = self.centroid(s, j);
                out[s * ksub + j] = match metric {
                    Metric::InnerProduct => qs.iter().zip(c).map(|(a, b)| a * b).sum(),
                    Metric::L2 => -qs
                        .iter()
                        .zip(c)
                        .map(|(a, b)| (a - b) * (a - b))
                        .sum::<f32>(),
                };
            }
        }
    }

    /// Approximate score of one vector from its `m` codes and a float LUT.
    #[inline]
    pub fn adc_score(&self, lut: &[f32], codes: impl Iterator<Item = u8>) -> f32 {
        let ksub = self.ksub();
        codes
            .enumerate()
            .map(|(s, c)| lut[s * ksub + c as usize])
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn encode_reconstructs_closely_and_lut_matches_decoding() {
        let mut rng = SplitMix64::new(9);
        let (d, m) = (8, 4);
        let data: Vec<f32> = (0..2000 * d).map(|_| rng.unit() as f32).collect();
        let pq = ProductQuantizer::train(&data, d, m, 4, 1).unwrap();
        let codes = pq.encode(&data[..d]);
        let decoded: Vec<f32> = (0..m)
            .flat_map(|s| pq.centroid(s, codes[s] as usize).to_vec())
            .collect();
        let err: f32 = decoded
            .iter()
            .zip(&data[..d])
            .map(|(a, b)| (a - b) * (a - b))
            .sum();
        assert!(err < 0.1, "reconstruction error {err}");
        let q = &data[d..2 * d];
        let mut lut = vec![0f32; m * 16];
        pq.lut(Metric::InnerProduct, q, &mut lut);
        let adc = pq.adc_score(&lut, codes.iter().copied());
        let exact: f32 = q.iter().zip(&decoded).map(|(a, b)| a * b).sum();
        assert!((adc - exact).abs() < 1e-5);
    }

    #[test]
    fn bad_parameters() {
        let e = ProductQuantizer::train(&[0.0; 60], 6, 4, 4, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("M=4 does not divide the dimension 6"), "{e}");
        let e = ProductQuantizer::train(&[0.0; 60], 6, 3, 4, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("too few training vectors: 10"), "{e}");
    }
}
