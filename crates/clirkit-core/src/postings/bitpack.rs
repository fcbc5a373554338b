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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every width and length, against the reference, on values that use every bit of the
    /// width and on random ones.
    #[test]
    fn kernels_equal_the_reference() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for bits in 0..=32u8 {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX >> (32 - bits)
            };
            for len in [1, 7, 8, 9, 127, BLOCK_LEN] {
                for pattern in 0..3 {
                    let values: Vec<u32> = (0..len)
                        .map(|i| match pattern {
                            0 => mask,
                            1 => (i as u32).wrapping_mul(2_654_435_761) & mask,
                            _ => random() as u32 & mask,
                        })
                        .collect();
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
}
