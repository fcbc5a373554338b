//! Document ids as fixed 16-byte keys, so that fusion hashes, compares and copies ids without
//! touching an id arena.
//!
//! An id of up to 15 bytes is held inline: its bytes, zero-padded to 15, then its length. As a
//! big-endian integer this key orders exactly as the bytes do (a proper prefix, being shorter,
//! comes first), and equal keys are equal ids. A longer id lives in its run's arena; its key holds
//! its first 8 bytes (which still order correctly against any other key's first 8 bytes), its
//! arena position and length, and the marker byte 0xFF where an inline key has its length.

use std::cmp::Ordering;

/// Longest id held inline.
pub(crate) const INLINE_MAX: usize = 15;
const LONG_MARKER: u8 = 0xFF;
/// Longest id accepted (its length must fit the key's 3 length bytes).
pub(crate) const ID_MAX: usize = (1 << 24) - 1;

/// The 16 key bytes, held as two native-endian machine words (what hashing and equality use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct IdKey([u64; 2]);

impl IdKey {
    /// The key of `bytes`, appending them to `arena` when they are too long to be inline.
    /// Fails when the id is longer than [`ID_MAX`] or the arena would pass 4 GiB.
    #[inline]
    pub(crate) fn encode(bytes: &[u8], arena: &mut Vec<u8>) -> Result<IdKey, String> {
        let mut key = [0u8; 16];
        if bytes.len() <= INLINE_MAX {
            key[..bytes.len()].copy_from_slice(bytes);
            key[15] = bytes.len() as u8;
            return Ok(IdKey::from_bytes(key));
        }
        if bytes.len() > ID_MAX {
            return Err(format!(
                "document id of {} bytes is longer than the limit of {ID_MAX}",
                bytes.len()
            ));
        }
        let start = arena.len();
        if start + bytes.len() > u32::MAX as usize {
            return Err("run too large: more than 4 GiB of query and long document ids".into());
        }
        arena.extend_from_slice(bytes);
        Ok(IdKey::long(&bytes[..8], start as u32, bytes.len()))
    }

    #[inline]
    fn from_bytes(key: [u8; 16]) -> IdKey {
        let (a, b) = key.split_at(8);
        IdKey([
            u64::from_ne_bytes(a.try_into().unwrap()),
            u64::from_ne_bytes(b.try_into().unwrap()),
        ])
    }

    #[inline]
    fn to_bytes(self) -> [u8; 16] {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&self.0[0].to_ne_bytes());
        key[8..].copy_from_slice(&self.0[1].to_ne_bytes());
        key
    }

    fn long(prefix: &[u8], start: u32, len: usize) -> IdKey {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(prefix);
        key[8..12].copy_from_slice(&start.to_le_bytes());
        key[12..15].copy_from_slice(&(len as u32).to_le_bytes()[..3]);
        key[15] = LONG_MARKER;
        IdKey::from_bytes(key)
    }

    /// Byte 15: the length of an inline id, [`LONG_MARKER`] otherwise.
    #[inline]
    fn last_byte(&self) -> u8 {
        self.0[1].to_ne_bytes()[7]
    }

    #[inline]
    pub(crate) fn is_inline(&self) -> bool {
        self.last_byte() as usize <= INLINE_MAX
    }

    /// Arena position and length of a long id.
    #[inline]
    fn span(&self) -> (usize, usize) {
        let k = self.to_bytes();
        let start = u32::from_le_bytes([k[8], k[9], k[10], k[11]]) as usize;
        let len = u32::from_le_bytes([k[12], k[13], k[14], 0]) as usize;
        (start, len)
    }

    /// The id's bytes; `arena` is the arena of the run the key belongs to.
    #[inline]
    pub(crate) fn bytes<'a>(&'a self, arena: &'a [u8]) -> &'a [u8] {
        if self.is_inline() {
            // SAFETY: the two words are 16 initialized bytes, borrowed as long as `self`.
            let key: &[u8; 16] = unsafe { &*self.0.as_ptr().cast::<[u8; 16]>() };
            &key[..self.last_byte() as usize]
        } else {
            let (start, len) = self.span();
            &arena[start..start + len]
        }
    }

    /// The same long id moved `by` bytes further into an arena (inline keys are unchanged).
    #[inline]
    pub(crate) fn shifted(self, by: u32) -> IdKey {
        if self.is_inline() {
            return self;
        }
        let (start, len) = self.span();
        IdKey::long(&self.to_bytes()[..8], start as u32 + by, len)
    }

    /// The key as two machine words: equal words mean equal ids for inline keys.
    #[inline]
    pub(crate) fn words(&self) -> [u64; 2] {
        self.0
    }

    /// The key bytes as two big-endian integers: their order is the order of the bytes.
    #[inline]
    fn ordered_words(&self) -> (u64, u64) {
        (
            u64::from_be_bytes(self.0[0].to_ne_bytes()),
            u64::from_be_bytes(self.0[1].to_ne_bytes()),
        )
    }

    /// Byte order of two ids, each given with the arena of its run; arena bytes are read only
    /// when a long id shares its first 8 bytes with the other id.
    #[inline]
    pub(crate) fn cmp_ids(&self, arena: &[u8], other: &IdKey, other_arena: &[u8]) -> Ordering {
        let (a, b) = (self.ordered_words(), other.ordered_words());
        match a.0.cmp(&b.0) {
            Ordering::Equal if self.is_inline() && other.is_inline() => a.1.cmp(&b.1),
            Ordering::Equal => self.bytes(arena).cmp(other.bytes(other_arena)),
            unequal => unequal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_is_byte_order() {
        let ids: Vec<&[u8]> = vec![
            b"",
            b"a",
            b"a\0",
            b"a\0\0",
            b"ab",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghijklmno",
            b"abcdefghijklmno\0",
            b"abcdefghijklmnop",
            b"abcdefghijklmnoq",
            b"abcdefghz",
            b"abcdefgh\xff\xff\xff\xff\xff\xff\xff\xff\xff",
            b"\xff",
            "d\u{4e2d}".as_bytes(),
        ];
        let mut arena = Vec::new();
        let keys: Vec<IdKey> = ids
            .iter()
            .map(|id| IdKey::encode(id, &mut arena).unwrap())
            .collect();
        for (a, ka) in ids.iter().zip(&keys) {
            assert_eq!(ka.bytes(&arena), *a);
            assert_eq!(ka.is_inline(), a.len() <= INLINE_MAX);
            for (b, kb) in ids.iter().zip(&keys) {
                assert_eq!(ka.cmp_ids(&arena, kb, &arena), a.cmp(b), "{a:?} vs {b:?}");
                if ka.is_inline() && kb.is_inline() {
                    assert_eq!(ka.words() == kb.words(), a == b);
                }
            }
        }
        let moved = keys[9].shifted(7);
        let mut longer = vec![0u8; 7];
        longer.extend_from_slice(&arena);
        assert_eq!(moved.bytes(&longer), ids[9]);
    }
}
