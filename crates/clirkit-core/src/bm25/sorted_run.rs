//! A run: one worker's postings grouped by term, terms in byte order, in one flat buffer that is
//! the same in memory and on disk. A build spills a run by writing the buffer as a checked file
//! (in the temporary index directory) and maps it back for the final merge, so the merge reads
//! in-memory and spilled runs alike, at any term: that lets it cut the term space into ranges
//! and merge them in parallel.
//!
//! Payload (little endian): `n_terms u64 · n_entries u64 · n_large u64 · base u64 ·
//! term_ends [u64; n_terms] · entry_ends [u64; n_terms] · large [(rank u32, doc u32, tf u32);
//! n_large] · entries [u32; n_entries] · terms` where an entry is `(doc - base) << 8 | min(tf,
//! 255)`, the tfs of 255 and more are in `large` (sorted by rank then doc), and term `r`'s
//! entries (in doc order) and bytes end at `entry_ends[r]` and `term_ends[r]`.

use crate::error::Result;
use crate::io::bytes::Bytes;
use crate::io::format::{read_u32, read_u64, write_checked, Kind, MappedFile};
use std::path::Path;

const RUN_KIND: Kind = *b"BM25RUN\0";
const RUN_VERSION: u32 = 1;
const HEADER: usize = 32;
/// An entry's tf field when the real tf is in `large`.
pub(super) const TF_ESCAPE: u32 = 255;

/// A sorted run (see the module documentation).
pub(super) struct SortedRun {
    bytes: Bytes,
    num_terms: usize,
    base: u32,
    entry_ends_at: usize,
    large_at: usize,
    num_large: usize,
    entries_at: usize,
    terms_at: usize,
}

impl SortedRun {
    /// Lays out a run from its terms in byte order (each with the end of its entries), its
    /// entries grouped in that order (an entry in the low half of each `u64`) and its large tfs.
    pub fn build<'t>(
        base: u32,
        terms: impl ExactSizeIterator<Item = (&'t [u8], usize)>,
        entries: &[u64],
        large: &[(u32, u32, u32)],
    ) -> Self {
        let n = terms.len();
        let mut ends = Vec::with_capacity(8 * n);
        let mut entry_ends = Vec::with_capacity(8 * n);
        let mut text = Vec::new();
        for (term, entry_end) in terms {
            text.extend_from_slice(term);
            ends.extend_from_slice(&(text.len() as u64).to_le_bytes());
            entry_ends.extend_from_slice(&(entry_end as u64).to_le_bytes());
        }
        let len = HEADER + 16 * n + 12 * large.len() + 4 * entries.len() + text.len();
        let mut bytes = Vec::with_capacity(len);
        for v in [n, entries.len(), large.len(), base as usize] {
            bytes.extend_from_slice(&(v as u64).to_le_bytes());
        }
        bytes.extend_from_slice(&ends);
        bytes.extend_from_slice(&entry_ends);
        for &(rank, doc, tf) in large {
            for v in [rank, doc, tf] {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        for &e in entries {
            bytes.extend_from_slice(&(e as u32).to_le_bytes());
        }
        bytes.extend_from_slice(&text);
        Self::from_bytes(Bytes::from(bytes))
    }

    fn from_bytes(bytes: Bytes) -> Self {
        let b = &bytes;
        let num_terms = read_u64(b, 0) as usize;
        let num_entries = read_u64(b, 8) as usize;
        let num_large = read_u64(b, 16) as usize;
        let base = read_u64(b, 24) as u32;
        let entry_ends_at = HEADER + 8 * num_terms;
        let large_at = entry_ends_at + 8 * num_terms;
        let entries_at = large_at + 12 * num_large;
        SortedRun {
            bytes,
            num_terms,
            base,
            entry_ends_at,
            large_at,
            num_large,
            entries_at,
            terms_at: entries_at + 4 * num_entries,
        }
    }

    /// Writes the run to `path` and maps it back, so its memory goes to the page cache.
    pub fn spill(self, path: &Path) -> Result<Self> {
        if !self.bytes.is_mapped() {
            write_checked(path, RUN_KIND, RUN_VERSION, &self.bytes)?;
        }
        drop(self);
        // Written just now by this build: the checksum is not read back.
        let mapped = MappedFile::open(path, RUN_KIND, RUN_VERSION, false)?;
        Ok(Self::from_bytes(mapped.into_payload()))
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn num_terms(&self) -> usize {
        self.num_terms
    }

    /// The bytes of the term of rank `r`.
    #[inline]
    pub fn term(&self, r: usize) -> &[u8] {
        let b = self.bytes();
        let start = if r == 0 {
            0
        } else {
            read_u64(b, HEADER + 8 * (r - 1)) as usize
        };
        let end = read_u64(b, HEADER + 8 * r) as usize;
        &b[self.terms_at + start..self.terms_at + end]
    }

    /// The first rank whose term is not below `term`.
    pub fn lower_bound(&self, term: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.num_terms);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.term(mid) < term {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Appends the postings of the term of rank `r` to `out` as (doc, tf) pairs, in doc order.
    pub fn postings(&self, r: usize, out: &mut Vec<u32>) {
        let b = self.bytes();
        let end_of = |r: usize| read_u64(b, self.entry_ends_at + 8 * r) as usize;
        let start = if r == 0 { 0 } else { end_of(r - 1) };
        for i in start..end_of(r) {
            let e = read_u32(b, self.entries_at + 4 * i);
            let doc = self.base + (e >> 8);
            let tf = match e & TF_ESCAPE {
                TF_ESCAPE => self.large_tf(r as u32, doc),
                tf => tf,
            };
            out.push(doc);
            out.push(tf);
        }
    }

    /// The tf recorded in `large` for (rank, doc).
    fn large_tf(&self, rank: u32, doc: u32) -> u32 {
        let b = self.bytes();
        let at = |i: usize| self.large_at + 12 * i;
        let key = |i: usize| (read_u32(b, at(i)), read_u32(b, at(i) + 4));
        let (mut lo, mut hi) = (0, self.num_large);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if key(mid) < (rank, doc) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        debug_assert_eq!(key(lo), (rank, doc), "large tf recorded");
        read_u32(b, at(lo) + 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spilled_run_reads_like_the_one_in_memory() {
        let terms: [(&[u8], usize); 3] = [(b"apple", 2), (b"kiwi", 3), (b"zebra", 5)];
        let entries: [u64; 5] = [1, 4 << 8 | 2, 1 << 8 | 255, 2 << 8 | 3, 9 << 8 | 1];
        let run = SortedRun::build(100, terms.into_iter(), &entries, &[(1, 101, 300)]);
        let dir = tempfile::tempdir().unwrap();
        let spilled = SortedRun::build(100, terms.into_iter(), &entries, &[(1, 101, 300)])
            .spill(&dir.path().join("run"))
            .unwrap();
        for r in [&run, &spilled] {
            assert_eq!(r.num_terms(), 3);
            assert_eq!(r.term(1), b"kiwi");
            assert_eq!((r.lower_bound(b"b"), r.lower_bound(b"kiwi")), (1, 1));
            assert_eq!(r.lower_bound(b"zz"), 3);
            let mut out = Vec::new();
            r.postings(0, &mut out);
            r.postings(1, &mut out);
            assert_eq!(out, [100, 1, 104, 2, 101, 300]);
            out.clear();
            r.postings(2, &mut out);
            assert_eq!(out, [102, 3, 109, 1]);
        }
    }
}
