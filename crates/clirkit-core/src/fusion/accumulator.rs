//! Per-query accumulation of fused scores, and the canonical ordering of the fused list.
//!
//! Documents are found in a small open-addressing table keyed by their 16-byte [`IdKey`]s
//! (reused across queries by each worker), so ids of up to 15 bytes are never hashed or
//! compared as byte strings. The fused list is sorted on integer keys (the score's leading bits
//! and the candidate's position); only candidates sharing those leading bits — in practice exact
//! score ties, frequent with RRF — are then ordered by the full score and the doc id.

use super::id_key::IdKey;
use super::{combmnz, DocEntry, Method};
use std::hash::BuildHasher;

const EMPTY: u32 = u32::MAX;

/// One distinct document of the query being fused.
struct Candidate {
    /// Identity: the key's words for an inline id; (hash of the bytes, `u64::MAX`) for a long
    /// id, whose bytes are then compared on a match.
    words: [u64; 2],
    key: IdKey,
    /// The run whose arena holds the bytes of a long id.
    run: u32,
    score: f64,
    hits: u32,
}

/// A worker's scratch space for fusing one query at a time.
pub(crate) struct Accumulator<'a> {
    /// Each input run's id arena (where long ids live).
    arenas: &'a [&'a [u8]],
    table: Vec<u32>,
    shift: u32,
    candidates: Vec<Candidate>,
    order: Vec<u64>,
}

impl<'a> Accumulator<'a> {
    pub(crate) fn new(arenas: &'a [&'a [u8]]) -> Self {
        Accumulator {
            arenas,
            table: Vec::new(),
            shift: 0,
            candidates: Vec::new(),
            order: Vec::new(),
        }
    }

    /// Start a query that will see at most `entries` (document, run) contributions.
    pub(crate) fn start(&mut self, entries: usize) {
        let size = (2 * entries).next_power_of_two().max(16);
        if self.table.len() < size {
            self.table.resize(size, EMPTY);
        }
        self.table[..size].fill(EMPTY);
        self.shift = 64 - size.trailing_zeros();
        self.candidates.clear();
    }

    /// Add `value` to the document's fused score and count one more run retrieving it.
    #[inline]
    pub(crate) fn add(&mut self, run: usize, key: IdKey, value: f64) {
        let inline = key.is_inline();
        let words = if inline {
            key.words()
        } else {
            [
                rustc_hash::FxBuildHasher.hash_one(key.bytes(self.arenas[run])),
                u64::MAX,
            ]
        };
        let mask = (1usize << (64 - self.shift)) - 1;
        let mixed = (words[0].wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ words[1])
            .wrapping_mul(0xD6E8_FEB8_6659_FD93);
        let mut pos = (mixed >> self.shift) as usize;
        loop {
            let slot = self.table[pos];
            if slot == EMPTY {
                self.table[pos] = self.candidates.len() as u32;
                self.candidates.push(Candidate {
                    words,
                    key,
                    run: run as u32,
                    score: value,
                    hits: 1,
                });
                return;
            }
            let found = &mut self.candidates[slot as usize];
            if found.words == words
                && (inline
                    || key.bytes(self.arenas[run])
                        == found.key.bytes(self.arenas[found.run as usize]))
            {
                found.score += value;
                found.hits += 1;
                return;
            }
            pos = (pos + 1) & mask;
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
            for c in &mut self.candidates {
                c.score = combmnz::scale(c.score, c.hits);
            }
        }
        let n = self.candidates.len();
        // Sort keys: the leading bits of the score's order key, then the candidate's position.
        let index_bits = usize::BITS - (n.max(2) - 1).leading_zeros();
        let index_mask = (1u64 << index_bits) - 1;
        self.order.clear();
        self.order.extend(
            self.candidates
                .iter()
                .enumerate()
                .map(|(i, c)| (descending_key(c.score) & !index_mask) | i as u64),
        );
        self.order.sort_unstable();
        let (candidates, arenas) = (&self.candidates, self.arenas);
        let full_cmp = |a: &u64, b: &u64| {
            let (a, b) = (
                &candidates[(a & index_mask) as usize],
                &candidates[(b & index_mask) as usize],
            );
            descending_key(a.score)
                .cmp(&descending_key(b.score))
                .then_with(|| {
                    b.key
                        .cmp_ids(arenas[b.run as usize], &a.key, arenas[a.run as usize])
                })
        };
        let mut begin = 0;
        while begin < n {
            let lead = self.order[begin] & !index_mask;
            let mut end = begin + 1;
            while end < n && self.order[end] & !index_mask == lead {
                end += 1;
            }
            if end - begin > 1 {
                self.order[begin..end].sort_unstable_by(full_cmp);
            }
            begin = end;
        }
        let keep = top.min(n);
        for (slot, &o) in out.iter_mut().zip(&self.order[..keep]) {
            let c = &candidates[(o & index_mask) as usize];
            let id = if c.key.is_inline() {
                c.key
            } else {
                IdKey::encode(c.key.bytes(arenas[c.run as usize]), arena)?
            };
            *slot = DocEntry { id, score: c.score };
        }
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
