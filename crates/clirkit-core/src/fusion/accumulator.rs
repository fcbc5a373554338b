//! Per-query accumulation of fused scores, and the canonical ordering of the fused list.
//!
//! Documents are found in a small open-addressing table keyed by their 16-byte [`IdKey`]s
//! (reused across queries by each worker): one slot holds a document's key, fused score and
//! hit count, so an addition touches one cache line, and ids of up to 15 bytes are never hashed
//! or compared as byte strings. The fused list is sorted on integer keys (the score's leading
//! bits and the document's position); only documents sharing those leading bits — in practice
//! exact score ties, frequent with RRF — are then ordered by the full score and the doc id.

use super::id_key::IdKey;
use super::{combmnz, DocEntry, Method};
use std::hash::BuildHasher;

/// One document of the query being fused (`hits == 0`: an empty slot).
#[derive(Clone, Copy, Default)]
struct Slot {
    /// Identity: the key's words for an inline id; (hash of the bytes, `u64::MAX`) for a long
    /// id, whose bytes are then compared on a match.
    words: [u64; 2],
    score: f64,
    hits: u32,
    /// For a long id, its index in `Accumulator::long_ids`.
    long: u32,
}

/// A worker's scratch space for fusing one query at a time.
pub(crate) struct Accumulator<'a> {
    /// Each input run's id arena (where long ids live).
    arenas: &'a [&'a [u8]],
    table: Vec<Slot>,
    shift: u32,
    /// Occupied table positions, in order of first appearance.
    used: Vec<u32>,
    /// Long ids seen in this query: key and the run whose arena holds the bytes.
    long_ids: Vec<(IdKey, u32)>,
    order: Vec<u64>,
}

impl<'a> Accumulator<'a> {
    pub(crate) fn new(arenas: &'a [&'a [u8]]) -> Self {
        Accumulator {
            arenas,
            table: Vec::new(),
            shift: 0,
            used: Vec::new(),
            long_ids: Vec::new(),
            order: Vec::new(),
        }
    }

    /// Start a query that will see at most `entries` (document, run) contributions.
    pub(crate) fn start(&mut self, entries: usize) {
        for &pos in &self.used {
            self.table[pos as usize].hits = 0;
        }
        self.used.clear();
        self.long_ids.clear();
        // At most 80 % full even if every contribution is a different document.
        let size = (entries + entries / 4 + 1).next_power_of_two().max(16);
        if self.table.len() < size {
            self.table.resize(size, Slot::default());
        }
        self.shift = 64 - size.trailing_zeros();
    }

    fn long_bytes(&self, long: u32) -> &[u8] {
        let (key, run) = &self.long_ids[long as usize];
        key.bytes(self.arenas[*run as usize])
    }

    /// The identity words of a key and its home position in the table.
    #[inline(always)]
    fn locate(&self, run: usize, key: &IdKey) -> ([u64; 2], usize) {
        let words = if key.is_inline() {
            key.words()
        } else {
            [
                rustc_hash::FxBuildHasher.hash_one(key.bytes(self.arenas[run])),
                u64::MAX,
            ]
        };
        let mixed = (words[0].wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ words[1])
            .wrapping_mul(0xD6E8_FEB8_6659_FD93);
        (words, (mixed >> self.shift) as usize)
    }

    /// Add the contributions of one run's list for this query: `value(i, score)` for the
    /// document at 0-based position `i`, added to its fused score (one more hit).
    #[inline(always)]
    pub(crate) fn add_list(
        &mut self,
        run: usize,
        list: &[DocEntry],
        value: impl Fn(usize, f64) -> f64,
    ) {
        let mask = (1usize << (64 - self.shift)) - 1;
        for (i, doc) in list.iter().enumerate() {
            let add = value(i, doc.score);
            let (words, mut pos) = self.locate(run, &doc.id);
            let inline = doc.id.is_inline();
            loop {
                let slot = self.table[pos];
                if slot.hits == 0 {
                    self.insert(pos, words, run, doc.id, add);
                    break;
                }
                if slot.words == words
                    && (inline || doc.id.bytes(self.arenas[run]) == self.long_bytes(slot.long))
                {
                    let slot = &mut self.table[pos];
                    slot.score += add;
                    slot.hits += 1;
                    break;
                }
                pos = (pos + 1) & mask;
            }
        }
    }

    #[inline(always)]
    fn insert(&mut self, pos: usize, words: [u64; 2], run: usize, key: IdKey, score: f64) {
        let long = if key.is_inline() {
            0
        } else {
            self.long_ids.push((key, run as u32));
            self.long_ids.len() as u32 - 1
        };
        self.table[pos] = Slot {
            words,
            score,
            hits: 1,
            long,
        };
        self.used.push(pos as u32);
    }

    /// The key and arena of an occupied slot's id.
    fn id_of(&self, slot: &Slot) -> (IdKey, &'a [u8]) {
        if slot.words[1] == u64::MAX {
            let (key, run) = self.long_ids[slot.long as usize];
            (key, self.arenas[run as usize])
        } else {
            (IdKey::from_words(slot.words), &[])
        }
    }

    /// Write the fused list in canonical order, cut to `top`, into `out` (long ids are copied
    /// into `arena`); returns the number of documents written.
    pub(crate) fn finish_into(
        &mut self,
        method: Method,
        top: usize,
        out: &mut [DocEntry],
        arena: &mut Vec<u8>,
    ) -> Result<usize, String> {
        if let Method::CombMnz { .. } = method {
            for &pos in &self.used {
                let slot = &mut self.table[pos as usize];
                slot.score = combmnz::scale(slot.score, slot.hits);
            }
        }
        let n = self.used.len();
        // Sort keys: the leading bits of the score's order key, then the document's position.
        let index_bits = usize::BITS - (n.max(2) - 1).leading_zeros();
        let index_mask = (1u64 << index_bits) - 1;
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend(self.used.iter().enumerate().map(|(i, &pos)| {
            (descending_key(self.table[pos as usize].score) & !index_mask) | i as u64
        }));
        order.sort_unstable();
        let slot_of = |o: u64| &self.table[self.used[(o & index_mask) as usize] as usize];
        let full_cmp = |a: &u64, b: &u64| {
            let (a, b) = (slot_of(*a), slot_of(*b));
            descending_key(a.score)
                .cmp(&descending_key(b.score))
                .then_with(|| {
                    let ((a, a_arena), (b, b_arena)) = (self.id_of(a), self.id_of(b));
                    b.cmp_ids(b_arena, &a, a_arena)
                })
        };
        let mut begin = 0;
        while begin < n {
            let lead = order[begin] & !index_mask;
            let mut end = begin + 1;
            while end < n && order[end] & !index_mask == lead {
                end += 1;
            }
            if end - begin > 1 {
                order[begin..end].sort_unstable_by(full_cmp);
            }
            begin = end;
        }
        let keep = top.min(n);
        for (entry, &o) in out.iter_mut().zip(&order[..keep]) {
            let slot = slot_of(o);
            let (key, key_arena) = self.id_of(slot);
            let id = if key.is_inline() {
                key
            } else {
                IdKey::encode(key.bytes(key_arena), arena)?
            };
            *entry = DocEntry {
                id,
                score: slot.score,
            };
        }
        self.order = order;
        Ok(keep)
    }
}

/// An integer whose ascending order is `f64::total_cmp`'s descending order.
#[inline]
fn descending_key(score: f64) -> u64 {
    let bits = score.to_bits() as i64;
    let ordered = (bits ^ (((bits >> 63) as u64) >> 1) as i64) as u64 ^ (1 << 63);
    !ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descending_key_orders_as_total_cmp_reversed() {
        let xs = [
            -f64::MAX,
            -1.5,
            -0.0,
            0.0,
            1e-300,
            0.5,
            0.5000000000000001,
            3.0,
        ];
        for a in xs {
            for b in xs {
                assert_eq!(
                    descending_key(a).cmp(&descending_key(b)),
                    b.total_cmp(&a),
                    "{a} {b}"
                );
            }
        }
    }
}
