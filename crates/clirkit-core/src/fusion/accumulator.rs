//! Per-query accumulation of fused scores.
//!
//! A query's documents are appended to a dense array in order of first appearance; an
//! open-addressing table of `u32` positions into that array finds a document again. The table
//! is kept at most half full and, like the array, reused by each worker from query to query, so
//! for the few thousand contributions of a typical query both stay in the CPU's caches. Ids of
//! up to 15 bytes are matched as two machine words ([`IdKey`]); longer ids by a hash of their
//! bytes, then the bytes. The finished list is put in canonical order by [`CanonicalOrder`].

use super::id_key::IdKey;
use super::order::CanonicalOrder;
use super::run_lists::{prefault, DocEntry};
use std::hash::BuildHasher;

/// A table position that holds no document.
const EMPTY: u32 = u32::MAX;

/// One document of the query being fused.
#[derive(Clone, Copy)]
struct FusedDoc {
    /// The id's key as found in run `run` (a long id's key points into that run's arena).
    key: IdKey,
    score: f64,
    hits: u32,
    run: u32,
}

/// A worker's scratch space for fusing one query at a time.
pub(crate) struct Accumulator<'a> {
    /// Each input run's id arena (where long ids live).
    arenas: &'a [&'a [u8]],
    /// Positions in `docs`, or [`EMPTY`].
    table: Vec<u32>,
    /// 64 minus the table's size in bits: a hash's top bits are its home position.
    shift: u32,
    docs: Vec<FusedDoc>,
    order: CanonicalOrder,
}

impl<'a> Accumulator<'a> {
    pub(crate) fn new(arenas: &'a [&'a [u8]]) -> Self {
        Accumulator {
            arenas,
            table: Vec::new(),
            shift: 0,
            docs: Vec::new(),
            order: CanonicalOrder::default(),
        }
    }

    /// Start a query that will see at most `entries` (document, run) contributions.
    pub(crate) fn start(&mut self, entries: usize) {
        // At most half full even if every contribution is a different document.
        let size = (2 * entries).next_power_of_two().max(16);
        self.table.clear();
        self.table.resize(size, EMPTY);
        self.shift = 64 - size.trailing_zeros();
        self.docs.clear();
        self.docs.reserve(entries);
    }

    /// The home position of an id of run `run`.
    #[inline(always)]
    fn home(&self, run: usize, key: &IdKey) -> usize {
        let [a, b] = if key.is_inline() {
            key.words()
        } else {
            [
                rustc_hash::FxBuildHasher.hash_one(key.bytes(self.arenas[run])),
                0,
            ]
        };
        let mixed = (a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        (mixed >> self.shift) as usize
    }

    /// Whether `doc` is the long id `key` of run `run`.
    #[inline(never)]
    fn same_long_id(&self, doc: &FusedDoc, run: usize, key: &IdKey) -> bool {
        !doc.key.is_inline()
            && doc.key.bytes(self.arenas[doc.run as usize]) == key.bytes(self.arenas[run])
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
        let mask = self.table.len() - 1;
        for (i, entry) in list.iter().enumerate() {
            let add = value(i, entry.score);
            let key = entry.id;
            let inline = key.is_inline();
            let mut pos = self.home(run, &key);
            loop {
                let at = self.table[pos];
                if at == EMPTY {
                    self.table[pos] = self.docs.len() as u32;
                    self.docs.push(FusedDoc {
                        key,
                        score: add,
                        hits: 1,
                        run: run as u32,
                    });
                    break;
                }
                let doc = &self.docs[at as usize];
                // Inline keys are equal exactly when the ids are; a long key's words hold an
                // arena position, so long ids are compared by their bytes.
                let same = if inline {
                    doc.key.words() == key.words()
                } else {
                    self.same_long_id(doc, run, &key)
                };
                if same {
                    let doc = &mut self.docs[at as usize];
                    doc.score += add;
                    doc.hits += 1;
                    break;
                }
                pos = (pos + 1) & mask;
            }
        }
    }

    /// Replace every document's score by `scale` of its score and its number of retrieving
    /// runs (CombMNZ's last step).
    #[inline]
    pub(crate) fn scale_scores(&mut self, scale: impl Fn(f64, u32) -> f64) {
        for doc in &mut self.docs {
            doc.score = scale(doc.score, doc.hits);
        }
    }

    /// Write the fused list in canonical order, cut to `top`, into `out` (long ids are copied
    /// into `arena`); returns the number of documents written.
    pub(crate) fn finish_into(
        &mut self,
        top: usize,
        out: &mut [DocEntry],
        arena: &mut Vec<u8>,
    ) -> Result<usize, String> {
        let n = self.docs.len();
        let docs = &self.docs;
        let arenas = self.arenas;
        let arena_of = |doc: &FusedDoc| arenas[doc.run as usize];
        self.order.sort(
            n,
            |i| docs[i].score,
            |a, b| {
                let (a, b) = (&docs[a], &docs[b]);
                a.key.cmp_ids(arena_of(a), &b.key, arena_of(b))
            },
        );
        let keep = top.min(n);
        prefault(&mut out[..keep]);
        for (entry, i) in out.iter_mut().zip(self.order.positions().take(keep)) {
            let doc = &self.docs[i];
            let id = if doc.key.is_inline() {
                doc.key
            } else {
                IdKey::encode(doc.key.bytes(arena_of(doc)), arena)?
            };
            *entry = DocEntry {
                id,
                score: doc.score,
            };
        }
        Ok(keep)
    }
}
