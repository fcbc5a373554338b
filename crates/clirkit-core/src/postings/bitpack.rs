//! Bit packing for the codec, packer and unpacker together (as tantivy's `bitpacker`): values
//! packed with a given width in little-endian bit order; unpacking is one dispatcher over the
//! width, a kernel per width for full blocks, and the scalar reference every kernel must equal.
//!
//! Full blocks are nearly every block a query decodes. With the width a constant, eight values
//! span exactly `bits` bytes, so each value's byte offset and shift within a group of eight are
//! constants: the kernel is straight-line loads, shifts and masks, with no dependency from one
//! value to the next.

/// Postings in a full block.
pub const BLOCK_LEN: usize = 128;

pub(super) fn bits_needed(max: u32) -> u8 {
    (32 - max.leading_zeros()) as u8
}

/// Append `values` bit-packed with `bits` bits each (little endian bit order).
pub(super) fn pack(values: &[u32], bits: u8, out: &mut Vec<u8>) {
    if bits == 0 {
        return;
    }
    let mut acc: u64 = 0;
    let mut filled = 0u32;
    for &v in values {
        acc |= (v as u64) << filled;
        filled += bits as u32;
        while filled >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            filled -= 8;
        }
    }
    if filled > 0 {
        out.push(acc as u8);
    }
}

pub(super) fn packed_len(count: usize, bits: u8) -> usize {
    (count * bits as usize).div_ceil(8)
}

/// The scalar reference: unpack `out.len()` values of `bits` bits each from `bytes`, which must
/// extend at least 8 bytes past the packed data.
#[inline]
pub(super) fn unpack_reference(bytes: &[u8], bits: u8, out: &mut [u32]) {
    if bits == 0 {
        out.fill(0);
        return;
    }
    let mask = (1u64 << bits) - 1;
    let need = (out.len() * bits as usize).div_ceil(8) + 8;
    let bytes = &bytes[..need];
    let mut bit = 0usize;
    for slot in out.iter_mut() {
        let byte = bit >> 3;
        let word = u64::from_le_bytes(bytes[byte..byte + 8].try_into().unwrap());
        *slot = ((word >> (bit & 7)) & mask) as u32;
        bit += bits as usize;
    }
}

/// One full block at the constant width `BITS` (1..=32).
#[inline(always)]
fn unpack_full<const BITS: usize>(bytes: &[u8], out: &mut [u32; BLOCK_LEN]) {
    let bytes = &bytes[..BLOCK_LEN / 8 * BITS + 8];
    let mask = (1u64 << BITS) - 1;
    for (group, values) in out.chunks_exact_mut(8).enumerate() {
        let base = group * BITS;
        for (j, slot) in values.iter_mut().enumerate() {
            let bit = j * BITS;
            let at = base + (bit >> 3);
            let word = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
            *slot = ((word >> (bit & 7)) & mask) as u32;
        }
    }
}

/// Unpack `out.len()` values of `bits` bits each from `bytes` (which must extend at least 8
/// bytes past the packed data): full blocks through their width's kernel, others through the
/// reference.
#[inline]
pub(super) fn unpack(bytes: &[u8], bits: u8, out: &mut [u32]) {
    let Ok(full) = <&mut [u32; BLOCK_LEN]>::try_from(&mut *out) else {
        unpack_reference(bytes, bits, out);
        return;
    };
    macro_rules! by_width {
        ($($w:literal)*) => {
            match bits {
                $($w => unpack_full::<$w>(bytes, full),)*
                _ => unpack_reference(bytes, bits, full),
            }
        };
    }
    by_width!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);
}

/// Documents from a full block's doc-id gaps packed at `bits`: `out[i]` is `prev_last` plus
/// each `gap + 1` up to `i`, in wrapping u32 arithmetic, eight values a step with AVX2. Whether
/// it ran: not for widths above 24 (at most 24 bits, the 128 steps sum below 2^31, which the
/// caller's check of the last document relies on), nor where the CPU lacks AVX2 or `bytes` ends
/// before its reads do; `out` is then untouched.
#[inline]
pub(super) fn unpack_docs_simd(
    bytes: &[u8],
    bits: u8,
    prev_last: u32,
    out: &mut [u32; BLOCK_LEN],
) -> bool {
    simd_by_width::<true>(bytes, bits, prev_last, out)
}

/// A full block's values packed at `bits`, each plus one (the codec stores `value - 1`), eight
/// at a time with AVX2; whether it ran, as [`unpack_docs_simd`] says.
#[inline]
pub(super) fn unpack_values_simd(bytes: &[u8], bits: u8, out: &mut [u32; BLOCK_LEN]) -> bool {
    simd_by_width::<false>(bytes, bits, 0, out)
}

#[inline]
fn simd_by_width<const DOCS: bool>(
    bytes: &[u8],
    bits: u8,
    prev_last: u32,
    out: &mut [u32; BLOCK_LEN],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return false;
        }
        macro_rules! by_width {
            ($($w:literal)*) => {
                match bits {
                    // SAFETY: AVX2 was just detected.
                    $($w => unsafe { x86::unpack_avx2::<$w, DOCS>(bytes, prev_last, out) },)*
                    _ => false,
                }
            };
        }
        by_width!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (bytes, bits, prev_last, out);
        false
    }
}

/// The AVX2 kernel. Eight values of a group span `BITS` bytes from the group's first byte; each
/// half of a 256-bit register takes four of them from its own 16-byte load (the second from
/// byte `4 * BITS / 8`), a byte shuffle puts each value's four bytes in its lane, and a shift
/// and mask per lane finish it. A value fits its four bytes for widths up to 25 bits.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::BLOCK_LEN;
    use std::arch::x86_64::*;

    /// Where value `j` (0..8) of a group starts, in bits from its half's load.
    const fn start_bit(bits: usize, j: usize) -> usize {
        if j < 4 {
            j * bits
        } else {
            4 * bits % 8 + (j - 4) * bits
        }
    }

    struct Width<const BITS: usize>;

    impl<const BITS: usize> Width<BITS> {
        /// Lane `j`'s bytes: its value's four bytes within its half's load.
        const SHUFFLE: [u8; 32] = {
            let mut out = [0u8; 32];
            let mut j = 0;
            while j < 8 {
                let byte = start_bit(BITS, j) / 8;
                let mut i = 0;
                while i < 4 {
                    out[j / 4 * 16 + j % 4 * 4 + i] = (byte + i) as u8;
                    i += 1;
                }
                j += 1;
            }
            out
        };
        /// Lane `j`'s shift: where its value starts within its first byte.
        const SHIFTS: [u32; 8] = {
            let mut out = [0u32; 8];
            let mut j = 0;
            while j < 8 {
                out[j] = (start_bit(BITS, j) % 8) as u32;
                j += 1;
            }
            out
        };
        /// Bytes read: up to the end of the last group's second load.
        const READ: usize = (BLOCK_LEN / 8 - 1) * BITS + 4 * BITS / 8 + 16;
    }

    /// [`super::unpack_docs_simd`] (`DOCS`) or [`super::unpack_values_simd`] at width `BITS`
    /// (1..=24).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn unpack_avx2<const BITS: usize, const DOCS: bool>(
        bytes: &[u8],
        prev_last: u32,
        out: &mut [u32; BLOCK_LEN],
    ) -> bool {
        let Some(bytes) = bytes.get(..Width::<BITS>::READ) else {
            return false;
        };
        let p = bytes.as_ptr();
        let o = out.as_mut_ptr() as *mut __m256i;
        let shuffle = _mm256_loadu_si256(Width::<BITS>::SHUFFLE.as_ptr() as *const __m256i);
        let shifts = _mm256_loadu_si256(Width::<BITS>::SHIFTS.as_ptr() as *const __m256i);
        let mask = _mm256_set1_epi32(((1u64 << BITS) - 1) as i32);
        let one = _mm256_set1_epi32(1);
        let seventh = _mm256_set1_epi32(7);
        let mut carry = _mm256_set1_epi32(prev_last as i32);
        for g in 0..BLOCK_LEN / 8 {
            // Both loads end within `bytes` (READ is the last group's end), the store within `out`.
            let at = p.add(g * BITS);
            let low = _mm_loadu_si128(at as *const __m128i);
            let high = _mm_loadu_si128(at.add(4 * BITS / 8) as *const __m128i);
            let v = _mm256_shuffle_epi8(_mm256_set_m128i(high, low), shuffle);
            let v = _mm256_add_epi32(_mm256_and_si256(_mm256_srlv_epi32(v, shifts), mask), one);
            let v = if DOCS {
                // Running sums within each half, then the low half's total onto the high half,
                // then the documents before the group.
                let v = _mm256_add_epi32(v, _mm256_slli_si256::<4>(v));
                let v = _mm256_add_epi32(v, _mm256_slli_si256::<8>(v));
                let totals = _mm256_shuffle_epi32::<0xFF>(v);
                let v = _mm256_add_epi32(v, _mm256_permute2x128_si256::<0x08>(totals, totals));
                let v = _mm256_add_epi32(v, carry);
                carry = _mm256_permutevar8x32_epi32(v, seventh);
                v
            } else {
                v
            };
            _mm256_storeu_si256(o.add(g), v);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test values of a width, from a xorshift generator.
    struct ValuesOf(u64);

    impl ValuesOf {
        fn next(&mut self) -> u32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 as u32
        }

        /// `len` values of `bits` bits: all bits set (pattern 0), a multiplicative sequence
        /// (1) or random ones.
        fn pattern(&mut self, pattern: u8, bits: u8, len: usize) -> Vec<u32> {
            let mask = u32::MAX.checked_shr(32 - bits as u32).unwrap_or(0);
            (0..len)
                .map(|i| match pattern {
                    0 => mask,
                    1 => (i as u32).wrapping_mul(2_654_435_761) & mask,
                    _ => self.next() & mask,
                })
                .collect()
        }
    }

    /// Every width and length, against the reference, on values that use every bit of the
    /// width and on random ones.
    #[test]
    fn kernels_equal_the_reference() {
        let mut values_of = ValuesOf(0x2545_f491_4f6c_dd1d);
        for bits in 0..=32u8 {
            for len in [1, 7, 8, 9, 127, BLOCK_LEN] {
                for pattern in 0..3 {
                    let values = values_of.pattern(pattern, bits, len);
                    let mut packed = Vec::new();
                    pack(&values, bits, &mut packed);
                    packed.extend_from_slice(&[0xa5; 8]);
                    let (mut fast, mut slow) = (vec![1u32; len], vec![2u32; len]);
                    unpack(&packed, bits, &mut fast);
                    unpack_reference(&packed, bits, &mut slow);
                    assert_eq!(fast, slow, "bits {bits} len {len}");
                    assert_eq!(fast, values, "bits {bits} len {len}");
                }
            }
        }
    }

    /// The SIMD kernels, at every width they take, equal the reference plus the codec's steps
    /// (documents as running sums of `gap + 1` from the previous block's last, values plus
    /// one), from the shortest input they accept; they refuse other widths and shorter input.
    #[test]
    fn simd_kernels_equal_the_reference() {
        let mut values_of = ValuesOf(0x9e37_79b9_7f4a_7c15);
        #[cfg(target_arch = "x86_64")]
        let simd = std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let simd = false;
        for bits in 0..=32u8 {
            for pattern in 0..3 {
                let values = values_of.pattern(pattern, bits, BLOCK_LEN);
                let mut packed = Vec::new();
                pack(&values, bits, &mut packed);
                let read = (BLOCK_LEN / 8 - 1) * bits as usize + 4 * bits as usize / 8 + 16;
                packed.resize(read.max(packed.len()), 0xa5);
                for prev_last in [u32::MAX, 0, 1_000_000, u32::MAX - 1000, values_of.next()] {
                    let mut docs = [7u32; BLOCK_LEN];
                    let ran = unpack_docs_simd(&packed, bits, prev_last, &mut docs);
                    assert_eq!(ran, simd && (1..=24).contains(&bits), "bits {bits}");
                    if ran {
                        let mut doc = prev_last;
                        for (i, &gap) in values.iter().enumerate() {
                            doc = doc.wrapping_add(gap).wrapping_add(1);
                            assert_eq!(docs[i], doc, "bits {bits} at {i} from {prev_last}");
                        }
                    } else {
                        assert_eq!(docs, [7u32; BLOCK_LEN], "untouched when refused");
                    }
                }
                let mut out = [0u32; BLOCK_LEN];
                if unpack_values_simd(&packed, bits, &mut out) {
                    let plus_one: Vec<u32> = values.iter().map(|v| v + 1).collect();
                    assert_eq!(&out[..], &plus_one[..], "bits {bits}");
                }
                if (1..=24).contains(&bits) {
                    let short = &packed[..read - 1];
                    assert!(!unpack_values_simd(short, bits, &mut out), "bits {bits}");
                }
            }
        }
    }
}
