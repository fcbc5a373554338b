//! Float look-up tables of 4-bit codebooks, 16 entries at a time. A query's table entry for
//! centroid `j` of sub-quantizer `s` is the same float
//! [`ProductQuantizer::lut`](crate::dense::codebook::ProductQuantizer::lut) computes: the
//! products (or squared differences) of the sub-vector's components summed in component order
//! from the same starting zero, multiplies and adds kept apart (no fused multiply-add). Here
//! the centroids are stored component-major, so the 16 entries of a sub-quantizer are one
//! vector register and each component adds one broadcast product to all of them.

use super::{sum_identity, Isa};
use crate::dense::codebook::ProductQuantizer;
use crate::dense::Metric;

/// Entries per table (4-bit codes).
const KSUB: usize = 16;

/// A 4-bit codebook laid out for computing whole tables.
pub struct FloatTables {
    m: usize,
    dsub: usize,
    /// `(s * dsub + t) * 16 + j`: component `t` of centroid `j` of sub-quantizer `s`.
    by_component: Vec<f32>,
}

impl FloatTables {
    /// The codebook `pq`, which must have 4-bit codes.
    pub fn new(pq: &ProductQuantizer) -> Self {
        assert_eq!(pq.ksub(), KSUB, "float tables are for 4-bit codebooks");
        let (m, dsub) = (pq.m, pq.dsub());
        let mut by_component = vec![0f32; m * dsub * KSUB];
        for s in 0..m {
            for j in 0..KSUB {
                for t in 0..dsub {
                    by_component[(s * dsub + t) * KSUB + j] =
                        pq.centroids[(s * KSUB + j) * dsub + t];
                }
            }
        }
        FloatTables {
            m,
            dsub,
            by_component,
        }
    }

    /// The table of query `q` (`m * dsub` floats) into `out` (`m * 16`), with the `isa` level.
    pub fn compute(&self, isa: Isa, metric: Metric, q: &[f32], out: &mut [f32]) {
        assert_eq!(q.len(), self.m * self.dsub);
        assert_eq!(out.len(), self.m * KSUB);
        assert!(
            isa.is_float_available(),
            "{} kernel not supported here",
            isa.name()
        );
        let l2 = metric == Metric::L2;
        match isa {
            // SAFETY: the CPU feature was asserted above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { self.avx512(l2, q, out) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { self.avx2(l2, q, out) },
            _ => self.portable(l2, q, out),
        }
    }

    /// Written so that the compiler keeps each table's 16 sums in vector registers at whatever
    /// width the caller's target features allow.
    #[inline(always)]
    fn portable(&self, l2: bool, q: &[f32], out: &mut [f32]) {
        let zero = sum_identity();
        let per_sub = self.dsub * KSUB;
        for ((qs, cols), dst) in q
            .chunks_exact(self.dsub)
            .zip(self.by_component.chunks_exact(per_sub))
            .zip(out.chunks_exact_mut(KSUB))
        {
            let mut acc = [zero; KSUB];
            for (&x, col) in qs.iter().zip(cols.chunks_exact(KSUB)) {
                for (a, &c) in acc.iter_mut().zip(col) {
                    *a += if l2 { (x - c) * (x - c) } else { x * c };
                }
            }
            for (d, a) in dst.iter_mut().zip(acc) {
                *d = if l2 { -a } else { a };
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn avx2(&self, l2: bool, q: &[f32], out: &mut [f32]) {
        self.portable(l2, q, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(&self, l2: bool, q: &[f32], out: &mut [f32]) {
        use std::arch::x86_64::*;
        let zero = _mm512_set1_ps(sum_identity());
        let negate = _mm512_set1_ps(-0.0);
        let (dsub, cols) = (self.dsub, self.by_component.as_ptr());
        for s in 0..self.m {
            let mut acc = zero;
            for t in 0..dsub {
                let x = _mm512_set1_ps(*q.get_unchecked(s * dsub + t));
                let c = _mm512_loadu_ps(cols.add((s * dsub + t) * KSUB));
                let term = if l2 {
                    let diff = _mm512_sub_ps(x, c);
                    _mm512_mul_ps(diff, diff)
                } else {
                    _mm512_mul_ps(x, c)
                };
                acc = _mm512_add_ps(acc, term);
            }
            if l2 {
                acc = _mm512_xor_ps(acc, negate);
            }
            _mm512_storeu_ps(out.as_mut_ptr().add(s * KSUB), acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn every_level_equals_the_quantizers_table_bit_for_bit() {
        let mut rng = SplitMix64::new(17);
        for (d, m) in [(8, 8), (16, 8), (24, 8), (32, 8), (48, 6), (64, 8)] {
            let data: Vec<f32> = (0..300 * d).map(|_| rng.unit() as f32 - 0.5).collect();
            let mut pq = ProductQuantizer::train(&data, d, m, 4, 5).unwrap();
            // Signed zeros and magnitudes far apart, where the order of the adds shows.
            for (i, c) in pq.centroids.iter_mut().enumerate() {
                match i % 11 {
                    0 => *c = -0.0,
                    1 => *c = 0.0,
                    2 => *c *= 1e6,
                    _ => {}
                }
            }
            let tables = FloatTables::new(&pq);
            for qi in 0..5 {
                let mut q = data[qi * d..(qi + 1) * d].to_vec();
                if qi == 1 {
                    q.iter_mut().step_by(3).for_each(|x| *x = -0.0);
                }
                if qi == 2 {
                    q.iter_mut().step_by(2).for_each(|x| *x *= 1e-7);
                }
                for metric in [Metric::InnerProduct, Metric::L2] {
                    let mut want = vec![0f32; m * 16];
                    pq.lut(metric, &q, &mut want);
                    for isa in [Isa::Scalar, Isa::Avx2, Isa::Avx512] {
                        if !isa.is_float_available() {
                            continue;
                        }
                        let mut got = vec![f32::NAN; m * 16];
                        tables.compute(isa, metric, &q, &mut got);
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&want), "{isa:?} {metric:?} d={d} m={m}");
                    }
                }
            }
        }
    }
}
