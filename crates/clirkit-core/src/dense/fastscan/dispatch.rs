//! Run-time choice of the fast-scan kernel, and of the level the exact float kernels of
//! [`crate::dense::flat`] are compiled for: the best one this CPU supports, or the one named by
//! the `CLIRKIT_FASTSCAN_ISA` environment variable (`scalar`, `avx2`, `avx512`) for comparisons.

use super::{scalar, Sink, QUERY_GROUP};
use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Scalar,
    Avx2,
    Avx512,
}

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => super::avx2::available(),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => super::avx512::available(),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Whether this CPU can run the exact float kernels of [`crate::dense::flat`] compiled for
    /// this level: they need only AVX2 or AVX-512F, not the byte instructions of fast-scan.
    pub fn is_float_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Kernels this CPU can run, slowest first.
    pub fn available() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|i| i.is_available())
            .collect()
    }

    /// The fast-scan kernel to use: `CLIRKIT_FASTSCAN_ISA` if set, else the fastest available.
    pub fn select() -> Result<Isa> {
        Isa::select_where(Isa::is_available)
    }

    /// The level of the exact float kernels to use, by the same rule and variable as
    /// [`Isa::select`], so one setting reaches flat search and fast-scan alike.
    pub fn select_float() -> Result<Isa> {
        Isa::select_where(Isa::is_float_available)
    }

    fn select_where(supported: fn(Isa) -> bool) -> Result<Isa> {
        match std::env::var("CLIRKIT_FASTSCAN_ISA") {
            Ok(name) if !name.is_empty() => {
                let isa = [Isa::Scalar, Isa::Avx2, Isa::Avx512]
                    .into_iter()
                    .find(|i| i.name() == name)
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "CLIRKIT_FASTSCAN_ISA={name}: expected scalar, avx2 or avx512"
                        ))
                    })?;
                if !supported(isa) {
                    return Err(Error::invalid(format!(
                        "CLIRKIT_FASTSCAN_ISA={name}: this CPU does not support it"
                    )));
                }
                Ok(isa)
            }
            _ => Ok([Isa::Avx512, Isa::Avx2, Isa::Scalar]
                .into_iter()
                .find(|&i| supported(i))
                .expect("scalar is always available")),
        }
    }

    /// Put a query group's quantized tables in the order this kernel reads.
    pub fn arrange_luts(self, luts: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if self == Isa::Avx2 {
            super::avx2::arrange_luts(luts);
        }
        let _ = luts;
    }

    /// Run the kernel (see [`scalar::scan`] for the contract) on tables from
    /// [`Isa::arrange_luts`].
    pub fn scan(
        self,
        codes: &[u8],
        m: usize,
        luts: &[u8],
        thresholds: &mut [i32; QUERY_GROUP],
        sink: &mut Sink<'_>,
    ) {
        assert!(
            self.is_available(),
            "{} kernel not supported here",
            self.name()
        );
        match self {
            Isa::Scalar => scalar::scan(codes, m, luts, thresholds, sink),
            // SAFETY: availability of the CPU features was asserted above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { super::avx2::scan(codes, m, luts, thresholds, sink) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { super::avx512::scan(codes, m, luts, thresholds, sink) },
            #[cfg(not(target_arch = "x86_64"))]
            _ => unreachable!(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{layout, lut, BLOCK};
    use super::*;
    use crate::rng::SplitMix64;

    /// All scores of all vectors for one query group, through `isa`.
    fn all_scores(isa: Isa, codes: &[u8], m: usize, luts: &[u8]) -> Vec<u32> {
        let mut arranged = luts.to_vec();
        isa.arrange_luts(&mut arranged);
        let nblocks = codes.len() / layout::block_bytes(m);
        let mut out = vec![0u32; QUERY_GROUP * nblocks * BLOCK];
        let mut thresholds = [-1i32; QUERY_GROUP];
        isa.scan(
            codes,
            m,
            &arranged,
            &mut thresholds,
            &mut |q, b, mask, s| {
                assert_eq!(mask, u32::MAX);
                out[(q * nblocks + b) * BLOCK..][..BLOCK].copy_from_slice(s);
                -1
            },
        );
        out
    }

    #[test]
    fn simd_kernels_equal_scalar_bit_for_bit() {
        let mut rng = SplitMix64::new(42);
        for m in [1usize, 4, 6, 16, 48, 192, 384] {
            let n = 32 * 5 + 7;
            let raw: Vec<u8> = (0..n * m).map(|_| rng.below(16) as u8).collect();
            let mut codes = Vec::new();
            layout::pack(&raw, m, &mut codes);
            let mut luts = vec![0u8; layout::chunks(m) * QUERY_GROUP * 64];
            for q in 0..QUERY_GROUP {
                let float_lut: Vec<f32> =
                    (0..m * 16).map(|_| rng.unit() as f32 * 4.0 - 2.0).collect();
                lut::quantize_into(&float_lut, m, q, &mut luts);
            }
            let want = all_scores(Isa::Scalar, &codes, m, &luts);
            // The scalar kernel itself against the definition.
            for q in 0..QUERY_GROUP {
                for v in 0..n {
                    let block = &codes[(v / 32) * layout::block_bytes(m)..];
                    let s: u32 = (0..m)
                        .map(|s| {
                            let c = layout::code_at(block, v % 32, s) as usize;
                            luts[((s / 4) * QUERY_GROUP + q) * 64 + (s % 4) * 16 + c] as u32
                        })
                        .sum();
                    assert_eq!(want[(q * (n.div_ceil(32)) + v / 32) * 32 + v % 32], s);
                }
            }
            for isa in Isa::available() {
                assert_eq!(all_scores(isa, &codes, m, &luts), want, "{isa:?} m={m}");
            }
        }
    }

    #[test]
    fn thresholds_filter_and_update() {
        let m = 8;
        let mut rng = SplitMix64::new(5);
        let raw: Vec<u8> = (0..64 * m).map(|_| rng.below(16) as u8).collect();
        let mut codes = Vec::new();
        layout::pack(&raw, m, &mut codes);
        let mut luts = vec![0u8; layout::chunks(m) * QUERY_GROUP * 64];
        for q in 0..QUERY_GROUP {
            let f: Vec<f32> = (0..m * 16).map(|_| rng.unit() as f32).collect();
            lut::quantize_into(&f, m, q, &mut luts);
        }
        for isa in Isa::available() {
            let mut arranged = luts.clone();
            isa.arrange_luts(&mut arranged);
            let mut thresholds = [1000i32; QUERY_GROUP];
            let mut seen = Vec::new();
            isa.scan(
                &codes,
                m,
                &arranged,
                &mut thresholds,
                &mut |q, b, mask, s| {
                    for (v, &score) in s.iter().enumerate() {
                        assert_eq!(mask >> v & 1 == 1, score > 1000, "{isa:?}");
                    }
                    seen.push((q, b));
                    i32::MAX
                },
            );
            let mut qs: Vec<usize> = seen.iter().map(|p| p.0).collect();
            qs.sort_unstable();
            qs.dedup();
            assert_eq!(
                qs.len(),
                seen.len(),
                "a raised threshold must silence a query"
            );
        }
    }
}
