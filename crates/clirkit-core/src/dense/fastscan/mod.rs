//! 4-bit PQ fast-scan: codes of 32 vectors packed together ([`layout`]), per-query look-up
//! tables quantized to 8 bits ([`lut`]), and SIMD kernels that look the tables up in registers
//! and accumulate integer scores ([`scalar`], [`avx2`], [`avx512`], chosen by [`dispatch`]);
//! [`rescore`] computes the float scores of the slots a scan kept (in `crate::topk`'s
//! reservoir).
//!
//! Every kernel computes the same integers: the sum over sub-quantizers of the quantized table
//! entries of each vector's codes. The quantization keeps that sum <= 65535, so 16-bit
//! accumulation (AVX2) and 32-bit accumulation (AVX-512 VNNI) agree exactly.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod dispatch;
pub mod layout;
pub mod lut;
pub mod rescore;
pub mod scalar;
pub mod tables;

pub use dispatch::Isa;

pub use layout::{Sink, BLOCK, QUERY_GROUP};

/// The identity `f32`'s `Sum` starts from (`-0.0`, or `0.0` on older toolchains): starting SIMD
/// lanes from it keeps their sums equal to `Iterator::sum` bit for bit.
pub(crate) fn sum_identity() -> f32 {
    std::iter::empty::<f32>().sum()
}
