//! The in-memory inverted index one build worker fills.
//!
//! Inverting by appending each posting to its term's list touches a different list for nearly
//! every posting, and on a large vocabulary each touch is a cache miss or two. Here a token costs
//! one probe of the term dictionary, and postings are only appended, in doc order, to one flat
//! buffer of packed (term, doc, tf) entries; they are grouped by term once, when the index is
//! written out, by a radix sort on the terms' ranks in byte order: a few sequential passes.
//!
//! The dictionary is an open-addressing table of 16-byte slots holding a term's first 11 bytes
//! and its length inline, so finding a term reads one slot (and, for longer terms, the rest of
//! its bytes in the arena that keeps every term back to back).

use super::sorted_run::{SortedRun, TF_ESCAPE};
use crate::text::Analyzer;
use rayon::prelude::*;

/// FxHash (rustc's hasher) with MurmurHash3's finalizer: terms are not attacker-chosen, and
/// the finalizer spreads every input bit into the low bits the table indexes with (without it,
/// terms sharing their first bytes collide).
#[derive(Default, Clone, Copy)]
pub(super) struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }
    #[inline]
    fn write_u8(&mut self, b: u8) {
        self.add(b as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A term as the two words of a dictionary slot (without the term number): its first 8 bytes,
/// then its next 3 bytes and its length (capped at 255) in the low 32 bits of the second word.
#[inline]
fn slot_key(term: &[u8]) -> (u64, u64) {
    let mut head = [0u8; 8];
    let mut tail = [0u8; 8];
    let n = term.len().min(8);
    head[..n].copy_from_slice(&term[..n]);
    if term.len() > 8 {
        let m = (term.len() - 8).min(3);
        tail[..m].copy_from_slice(&term[8..8 + m]);
    }
    tail[3] = term.len().min(255) as u8;
    (u64::from_le_bytes(head), u64::from_le_bytes(tail))
}

/// Bytes of a term held in its slot; longer terms are compared in the arena as well.
const INLINE_BYTES: usize = 11;

#[inline]
fn hash_key(key: (u64, u64), term: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.add(key.0);
    h.add(key.1);
    if term.len() > INLINE_BYTES {
        use std::hash::Hasher;
        h.write(&term[INLINE_BYTES..]);
    }
    std::hash::Hasher::finish(&h)
}

const INITIAL_SLOTS: usize = 1 << 12;
/// Bytes charged per term besides its text: its arena offset, its rank and (at most 8/5 of) a
/// 16-byte slot.
const TERM_OVERHEAD: usize = 8 + 4 + 26;
/// Bytes charged per posting: its entry, and its share of the sort's second buffer.
const POSTING_BYTES: usize = 16;

/// An entry packs (term, doc - base, tf) as `term << 32 | (doc - base) << 8 | min(tf, 255)`.
const DOC_BITS: u32 = 24;
/// Documents an index holds numbers for: past this many since its first, it must be written out.
pub(super) const MAX_DOC_SPAN: u32 = 1 << DOC_BITS;

/// The document being added: its terms back to back (ending at `ends`), their hashes and their
/// numbers.
#[derive(Default)]
struct DocumentScratch {
    text: Vec<u8>,
    ends: Vec<usize>,
    hashes: Vec<u64>,
    terms: Vec<u32>,
}

/// Asks the CPU to start loading `slot` into the cache (a hint: no effect on results).
#[inline]
fn prefetch(slot: &[u64; 2]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86-64; a prefetch never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(slot.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

/// One worker's inverted index (see the module documentation).
pub(super) struct MemoryIndex {
    /// Power-of-two open-addressing table with linear probing; a slot is empty when its second
    /// word is 0, else that word's high half is the term's number + 1.
    slots: Vec<[u64; 2]>,
    /// Terms back to back; term `t` is `text[starts[t]..starts[t + 1]]`.
    text: Vec<u8>,
    starts: Vec<usize>,
    /// Packed postings in the order they were added (doc order).
    entries: Vec<u64>,
    /// (term, doc, tf) of postings whose tf did not fit their entry.
    large_tfs: Vec<(u32, u32, u32)>,
    /// The first document this index may hold.
    base: u32,
    scratch: DocumentScratch,
    /// Estimated heap bytes held, for the build's memory budget.
    bytes: usize,
}

impl MemoryIndex {
    /// An empty index for documents numbered from `base`.
    pub fn new(base: u32) -> Self {
        MemoryIndex {
            slots: vec![[0; 2]; INITIAL_SLOTS],
            text: Vec::new(),
            starts: vec![0],
            entries: Vec::new(),
            large_tfs: Vec::new(),
            base,
            scratch: DocumentScratch::default(),
            bytes: 16 * INITIAL_SLOTS,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn base(&self) -> u32 {
        self.base
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn num_terms(&self) -> usize {
        self.starts.len() - 1
    }

    /// The bytes of term number `t`.
    #[inline]
    pub fn term(&self, t: usize) -> &[u8] {
        &self.text[self.starts[t]..self.starts[t + 1]]
    }

    /// The number of `term`, whose [`hash_key`] is `hash`, added to the dictionary if new.
    #[inline]
    fn intern(&mut self, term: &[u8], hash: u64) -> u32 {
        let key = slot_key(term);
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let [head, rest] = self.slots[i];
            if rest == 0 {
                break;
            }
            if head == key.0 && rest as u32 as u64 == key.1 {
                let t = (rest >> 32) as u32 - 1;
                if term.len() <= INLINE_BYTES || self.term(t as usize) == term {
                    return t;
                }
            }
            i = (i + 1) & mask;
        }
        let t = self.num_terms() as u32;
        self.slots[i] = [key.0, key.1 | (t as u64 + 1) << 32];
        self.text.extend_from_slice(term);
        self.starts.push(self.text.len());
        self.bytes += term.len() + TERM_OVERHEAD;
        if 8 * self.num_terms() > 5 * self.slots.len() {
            self.grow();
        }
        t
    }

    /// Doubles the table (kept at most 5/8 full, so probes stay short). The old slots are
    /// visited in order, and an entry's new place is near its old one or one old table size
    /// further, so the writes stream instead of landing anywhere.
    #[cold]
    fn grow(&mut self) {
        let size = 2 * self.slots.len();
        let mut slots = vec![[0u64; 2]; size];
        let mask = size - 1;
        for &slot in &self.slots {
            if slot[1] == 0 {
                continue;
            }
            let key = (slot[0], slot[1] as u32 as u64);
            let t = (slot[1] >> 32) as usize - 1;
            let long = (slot[1] as u32 >> 24) as usize > INLINE_BYTES;
            let term = if long { self.term(t) } else { &[] };
            let mut i = hash_key(key, term) as usize & mask;
            while slots[i][1] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = slot;
        }
        self.slots = slots;
    }

    /// Analyzes `text` as document `doc` (greater than any document added before, less than
    /// `base + MAX_DOC_SPAN`) and adds its postings; returns its length in tokens.
    pub fn add_document(&mut self, doc: u32, analyzer: &Analyzer, text: &str) -> u32 {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.text.clear();
        scratch.ends.clear();
        analyzer.analyze_each(text, |term| {
            scratch.text.extend_from_slice(term.as_bytes());
            scratch.ends.push(scratch.text.len());
        });
        // Look the whole document's terms up at once: their slots are fetched from memory
        // together instead of one cache miss after another.
        scratch.hashes.clear();
        let mask = self.slots.len() - 1;
        let mut start = 0;
        for &end in &scratch.ends {
            let term = &scratch.text[start..end];
            let hash = hash_key(slot_key(term), term);
            prefetch(&self.slots[hash as usize & mask]);
            scratch.hashes.push(hash);
            start = end;
        }
        let mut doc_terms = std::mem::take(&mut scratch.terms);
        doc_terms.clear();
        let mut start = 0;
        for (&end, &hash) in scratch.ends.iter().zip(&scratch.hashes) {
            doc_terms.push(self.intern(&scratch.text[start..end], hash));
            start = end;
        }
        let length = doc_terms.len() as u32;
        doc_terms.sort_unstable();
        let local = ((doc - self.base) as u64) << 8;
        let before = self.entries.len();
        let mut i = 0;
        while i < doc_terms.len() {
            let t = doc_terms[i];
            let mut tf = 1;
            while i + tf < doc_terms.len() && doc_terms[i + tf] == t {
                tf += 1;
            }
            i += tf;
            let tf = tf as u32;
            if tf >= TF_ESCAPE {
                self.large_tfs.push((t, doc, tf));
            }
            self.entries
                .push((t as u64) << 32 | local | tf.min(TF_ESCAPE) as u64);
        }
        self.bytes += POSTING_BYTES * (self.entries.len() - before);
        scratch.terms = doc_terms;
        self.scratch = scratch;
        length
    }

    /// Sorts the postings by their terms' byte order into a run, emptying the index.
    pub fn into_sorted(mut self) -> SortedRun {
        let n = self.num_terms();
        // Ranks of the terms in byte order; compare the first 8 bytes as one big-endian
        // number, so only equal prefixes need the rest.
        let prefix = |t: usize| {
            let term = self.term(t);
            let mut head = [0u8; 8];
            let k = term.len().min(8);
            head[..k].copy_from_slice(&term[..k]);
            u64::from_be_bytes(head)
        };
        let mut keyed: Vec<(u64, u32)> = (0..n).map(|t| (prefix(t), t as u32)).collect();
        keyed.par_sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| self.term(a.1 as usize).cmp(self.term(b.1 as usize)))
        });
        let order: Vec<u32> = keyed.into_iter().map(|(_, t)| t).collect();
        let mut rank = vec![0u32; n];
        for (r, &t) in order.iter().enumerate() {
            rank[t as usize] = r as u32;
        }
        self.slots = Vec::new();
        let low = (1u64 << 32) - 1;
        for e in self.entries.iter_mut() {
            *e = (rank[(*e >> 32) as usize] as u64) << 32 | (*e & low);
        }
        for large in self.large_tfs.iter_mut() {
            large.0 = rank[large.0 as usize];
        }
        self.large_tfs.sort_unstable();
        drop(rank);
        radix_sort_by_high_half(&mut self.entries, n);
        // Every term has a posting, so each rank's entries end where the next rank's begin.
        let mut entry_ends = Vec::with_capacity(n);
        for (i, pair) in self.entries.windows(2).enumerate() {
            if pair[0] >> 32 != pair[1] >> 32 {
                entry_ends.push(i + 1);
            }
        }
        entry_ends.push(self.entries.len());
        debug_assert_eq!(entry_ends.len(), n);
        let terms = order
            .iter()
            .zip(entry_ends)
            .map(|(&t, end)| (self.term(t as usize), end));
        SortedRun::build(self.base, terms, &self.entries, &self.large_tfs)
    }
}

/// Stable LSD radix sort of `entries` by their high 32 bits, which are below `limit`.
fn radix_sort_by_high_half(entries: &mut Vec<u64>, limit: usize) {
    let bits = usize::BITS - limit.saturating_sub(1).leading_zeros();
    if bits == 0 || entries.len() < 2 {
        return;
    }
    let passes = bits.div_ceil(11);
    let digit = bits.div_ceil(passes);
    let mut other = vec![0u64; entries.len()];
    let mut counts = vec![0usize; 1 << digit];
    for pass in 0..passes {
        let shift = 32 + pass * digit;
        let mask = (1u64 << digit) - 1;
        counts.fill(0);
        for &e in entries.iter() {
            counts[((e >> shift) & mask) as usize] += 1;
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            let here = *c;
            *c = sum;
            sum += here;
        }
        for &e in entries.iter() {
            let slot = &mut counts[((e >> shift) & mask) as usize];
            other[*slot] = e;
            *slot += 1;
        }
        std::mem::swap(entries, &mut other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_terms(run: SortedRun) -> Vec<(String, Vec<u32>)> {
        run.read_range(0, run.num_terms())
            .into_iter()
            .map(|(term, list)| (String::from_utf8(term).unwrap(), list))
            .collect()
    }

    #[test]
    fn groups_postings_by_term_in_byte_order() {
        let en = Analyzer::for_lang("en").unwrap();
        let mut index = MemoryIndex::new(10);
        assert_eq!(index.add_document(10, &en, "cats chase cats"), 3);
        assert_eq!(index.add_document(13, &en, "the cat sleeps"), 2);
        // Enough distinct terms to grow the table several times, some longer than a slot holds.
        let many: String = (0..20_000)
            .map(|i| format!("w{i}x pneumonoultramicroscopic{}x ", i % 100))
            .collect();
        assert_eq!(index.add_document(14, &en, &many), 40_000);
        let large = "zorp ".repeat(300);
        index.add_document(MAX_DOC_SPAN + 9, &en, &format!("{large} cat"));
        let terms = all_terms(index.into_sorted());
        assert_eq!(terms.len(), 3 + 20_000 + 100 + 1);
        assert!(terms.windows(2).all(|w| w[0].0 < w[1].0));
        let find = |t: &str| &terms.iter().find(|(term, _)| term == t).unwrap().1;
        assert_eq!(find("cat"), &[10, 2, 13, 1, MAX_DOC_SPAN + 9, 1]);
        assert_eq!(find("w17x"), &[14, 1]);
        assert_eq!(find("pneumonoultramicroscopic7x"), &[14, 200]);
        assert_eq!(find("zorp"), &[MAX_DOC_SPAN + 9, 300]);
    }

    #[test]
    fn radix_sort_is_stable_by_high_half() {
        let mut state = 7u64;
        let entries: Vec<u64> = (0..10_000u64)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((state >> 40) % 5000) << 32 | i
            })
            .collect();
        let mut sorted = entries.clone();
        radix_sort_by_high_half(&mut sorted, 5000);
        let mut expect = entries;
        expect.sort_by_key(|e| e >> 32);
        assert_eq!(sorted, expect);
    }
}
