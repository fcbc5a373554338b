//! A run: one worker's postings grouped by term, terms in byte order, in one flat buffer that is
//! the same in memory and on disk. A build spills a run by writing the buffer as a checked file
//! (in the temporary index directory); the final merge reads in-memory and spilled runs alike
//! through [`RunCursor`]s, each streaming one range of a run's terms through small buffers with
//! `pread`, so the merge can cut the term space into ranges and merge them in parallel while
//! spilled runs stay in the page cache, not in the process's memory.
//!
//! Payload (little endian): `n_terms u64 · n_entries u64 · n_large u64 · base u64 ·
//! term_ends [u64; n_terms] · entry_ends [u64; n_terms] · large [(rank u32, doc u32, tf u32);
//! n_large] · entries [u32; n_entries] · terms` where an entry is `(doc - base) << 8 | min(tf,
//! 255)`, the tfs of 255 and more are in `large` (sorted by rank then doc), and term `r`'s
//! entries (in doc order) and bytes end at `entry_ends[r]` and `term_ends[r]`.

use crate::error::{Error, IoContext, Result};
use crate::io::format::{check_header, read_u32, read_u64, write_checked, Kind, HEADER_LEN};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const RUN_KIND: Kind = *b"BM25RUN\0";
const RUN_VERSION: u32 = 1;
const HEADER: usize = 32;
/// An entry's tf field when the real tf is in `large`.
pub(super) const TF_ESCAPE: u32 = 255;

/// Where a run's payload is: built in memory, or spilled to a checked file.
enum Source {
    Memory(Vec<u8>),
    File { file: File, path: PathBuf },
}

impl Source {
    /// Fill `out` with the payload bytes at `at`; bytes past the payload are a corrupt run.
    fn read_at(&self, at: usize, out: &mut [u8]) -> Result<()> {
        match self {
            Source::Memory(bytes) => match bytes.get(at..at + out.len()) {
                Some(b) => out.copy_from_slice(b),
                None => return Err(self.corrupt("a section runs past the end")),
            },
            Source::File { file, path } => {
                file.read_exact_at(out, (HEADER_LEN + at) as u64).at(path)?
            }
        }
        Ok(())
    }

    fn read_u64_at(&self, at: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read_at(at, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn read_u32_at(&self, at: usize) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read_at(at, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn corrupt(&self, what: &str) -> Error {
        let path = match self {
            Source::Memory(_) => Path::new("(sorted run in memory)"),
            Source::File { path, .. } => path,
        };
        Error::format(path, format!("corrupt sorted run: {what}"))
    }
}

/// A sorted run (see the module documentation).
pub(super) struct SortedRun {
    source: Source,
    num_terms: usize,
    base: u32,
    entry_ends_at: usize,
    large_at: usize,
    num_large: usize,
    entries_at: usize,
    terms_at: usize,
    len: usize,
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
        let head: [u8; HEADER] = bytes[..HEADER].try_into().unwrap();
        let len = bytes.len();
        Self::laid_out(Source::Memory(bytes), &head, len).expect("a run laid out here is whole")
    }

    /// The run of `source` from its payload header `head` and payload length `len`, checking
    /// that the sections fit the payload.
    fn laid_out(source: Source, head: &[u8; HEADER], len: usize) -> Result<Self> {
        let num_terms = read_u64(head, 0) as usize;
        let num_entries = read_u64(head, 8) as usize;
        let num_large = read_u64(head, 16) as usize;
        let base = read_u64(head, 24) as u32;
        let sections = [(num_terms, 16), (num_large, 12), (num_entries, 4)];
        let terms_at = sections.iter().try_fold(HEADER, |at, &(count, width)| {
            count.checked_mul(width).and_then(|b| b.checked_add(at))
        });
        let Some(terms_at) = terms_at.filter(|&at| at <= len) else {
            return Err(source.corrupt("its sections do not fit the file"));
        };
        let entry_ends_at = HEADER + 8 * num_terms;
        let large_at = entry_ends_at + 8 * num_terms;
        Ok(SortedRun {
            source,
            num_terms,
            base,
            entry_ends_at,
            large_at,
            num_large,
            entries_at: large_at + 12 * num_large,
            terms_at,
            len,
        })
    }

    /// Writes the run to `path` and opens it for reading, so its memory goes to the page cache.
    pub fn spill(self, path: &Path) -> Result<Self> {
        if let Source::Memory(bytes) = &self.source {
            write_checked(path, RUN_KIND, RUN_VERSION, bytes)?;
        }
        drop(self);
        Self::open(path)
    }

    /// A spilled run. Written just now by this build: its header and layout are checked, its
    /// checksum is not read back.
    fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).at(path)?;
        let file_len = file.metadata().at(path)?.len();
        let mut head = [0u8; HEADER_LEN + HEADER];
        if file_len < head.len() as u64 {
            return Err(Error::format(
                path,
                "corrupt sorted run: shorter than its headers",
            ));
        }
        file.read_exact_at(&mut head, 0).at(path)?;
        let header = check_header(path, &head, file_len, RUN_KIND, RUN_VERSION)?;
        let run_head: [u8; HEADER] = head[HEADER_LEN..].try_into().unwrap();
        let source = Source::File {
            file,
            path: path.to_path_buf(),
        };
        Self::laid_out(source, &run_head, header.payload_len as usize)
    }

    pub fn num_terms(&self) -> usize {
        self.num_terms
    }

    /// The payload's size in bytes.
    pub fn payload_len(&self) -> usize {
        self.len
    }

    /// Where the bytes of the terms before rank `r` end (and the term of rank `r` starts).
    fn text_start(&self, r: usize) -> Result<usize> {
        match r {
            0 => Ok(0),
            _ => Ok(self.source.read_u64_at(HEADER + 8 * (r - 1))? as usize),
        }
    }

    /// The bytes of the term of rank `r`.
    pub fn term(&self, r: usize) -> Result<Vec<u8>> {
        let start = self.text_start(r)?;
        let end = self.source.read_u64_at(HEADER + 8 * r)? as usize;
        let Some(len) = end
            .checked_sub(start)
            .filter(|_| end <= self.len - self.terms_at)
        else {
            return Err(self.source.corrupt("a term's bytes are out of place"));
        };
        let mut text = vec![0u8; len];
        self.source.read_at(self.terms_at + start, &mut text)?;
        Ok(text)
    }

    /// The first rank whose term is not below `term`.
    pub fn lower_bound(&self, term: &[u8]) -> Result<usize> {
        let (mut lo, mut hi) = (0, self.num_terms);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.term(mid)?.as_slice() < term {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// A cursor over the terms of ranks `[from, to)`, reading each section through a buffer of
    /// about `buffer_len` bytes.
    pub fn cursor(&self, from: usize, to: usize, buffer_len: usize) -> Result<RunCursor<'_>> {
        let entry_end = |r: usize| match r {
            0 => Ok(0),
            _ => Ok(self.source.read_u64_at(self.entry_ends_at + 8 * (r - 1))? as usize),
        };
        // The range's entries and bytes: what its cursor reads, and no more.
        let (entry_start, entry_stop) = (entry_end(from)?, entry_end(to)?);
        let (text_start, text_stop) = (self.text_start(from)?, self.text_start(to)?);
        let entries_section = |entry: usize| {
            entry
                .checked_mul(4)
                .and_then(|b| b.checked_add(self.entries_at))
                .unwrap_or(usize::MAX)
        };
        // The first large tf of rank `from` or later.
        let (mut lo, mut hi) = (0, self.num_large);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if (self.source.read_u32_at(self.large_at + 12 * mid)? as usize) < from {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let section = |start: usize, end: usize| Section {
            source: &self.source,
            at: start,
            end,
            buf: Vec::new(),
            pos: 0,
            buffer_len,
        };
        let mut cursor = RunCursor {
            run: self,
            rank: from,
            to,
            term_ends: section(HEADER + 8 * from, HEADER + 8 * to),
            entry_ends: section(self.entry_ends_at + 8 * from, self.entry_ends_at + 8 * to),
            large: section(self.large_at + 12 * lo, self.entries_at),
            entries: section(
                entries_section(entry_start),
                entries_section(entry_stop).min(self.terms_at),
            ),
            texts: section(
                self.terms_at.saturating_add(text_start),
                self.terms_at.saturating_add(text_stop).min(self.len),
            ),
            text_end: text_start,
            entry_end: entry_start,
            term: Vec::new(),
        };
        cursor.load_term()?;
        Ok(cursor)
    }
    /// Every term of ranks `[from, to)` with its postings, read through 3-byte buffers.
    #[cfg(test)]
    pub fn read_range(&self, from: usize, to: usize) -> Vec<(Vec<u8>, Vec<u32>)> {
        let mut cursor = self.cursor(from, to, 3).unwrap();
        let mut out = Vec::new();
        while let Some(term) = cursor.term() {
            let term = term.to_vec();
            let mut list = Vec::new();
            cursor.postings(&mut list).unwrap();
            out.push((term, list));
        }
        out
    }
}

/// One section of a run, read front to back through a bounded buffer.
struct Section<'a> {
    source: &'a Source,
    /// Payload offset of the first byte not yet in `buf`, and of the section's end.
    at: usize,
    end: usize,
    buf: Vec<u8>,
    pos: usize,
    buffer_len: usize,
}

impl Section<'_> {
    /// The next `n` bytes of the section.
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.buf.len() - self.pos < n {
            self.buf.drain(..self.pos);
            self.pos = 0;
            let want = self.buffer_len.max(n) - self.buf.len();
            let read = want.min(self.end.saturating_sub(self.at));
            if self.buf.len() + read < n {
                return Err(self.source.corrupt("a section ends early"));
            }
            let filled = self.buf.len();
            self.buf.resize(filled + read, 0);
            self.source.read_at(self.at, &mut self.buf[filled..])?;
            self.at += read;
        }
        self.pos += n;
        Ok(&self.buf[self.pos - n..self.pos])
    }

    fn next_u64(&mut self) -> Result<usize> {
        Ok(read_u64(self.take(8)?, 0) as usize)
    }

    fn next_u32(&mut self) -> Result<u32> {
        Ok(read_u32(self.take(4)?, 0))
    }
}

/// Reads a range of a run's terms in rank order, each term with its postings.
pub(super) struct RunCursor<'a> {
    run: &'a SortedRun,
    /// The rank of the current term, and the end of the range.
    rank: usize,
    to: usize,
    term_ends: Section<'a>,
    entry_ends: Section<'a>,
    large: Section<'a>,
    entries: Section<'a>,
    texts: Section<'a>,
    /// Where the current term's bytes and entries end.
    text_end: usize,
    entry_end: usize,
    term: Vec<u8>,
}

impl RunCursor<'_> {
    /// The current term, or `None` past the end of the range.
    pub fn term(&self) -> Option<&[u8]> {
        (self.rank < self.to).then_some(self.term.as_slice())
    }

    fn load_term(&mut self) -> Result<()> {
        if self.rank >= self.to {
            return Ok(());
        }
        let text_start = self.text_end;
        self.text_end = self.term_ends.next_u64()?;
        let Some(len) = self.text_end.checked_sub(text_start) else {
            return Err(self.run.source.corrupt("term ends out of order"));
        };
        self.term.clear();
        self.term.extend_from_slice(self.texts.take(len)?);
        Ok(())
    }

    /// Appends the postings of the current term to `out` as (doc, tf) pairs, in doc order, and
    /// moves to the next term.
    pub fn postings(&mut self, out: &mut Vec<u32>) -> Result<()> {
        let start = self.entry_end;
        self.entry_end = self.entry_ends.next_u64()?;
        let Some(count) = self.entry_end.checked_sub(start) else {
            return Err(self.run.source.corrupt("entry ends out of order"));
        };
        for _ in 0..count {
            let e = self.entries.next_u32()?;
            let Some(doc) = self.run.base.checked_add(e >> 8) else {
                return Err(self.run.source.corrupt("a doc number overflows"));
            };
            let tf = match e & TF_ESCAPE {
                TF_ESCAPE => self.large_tf(doc)?,
                tf => tf,
            };
            out.push(doc);
            out.push(tf);
        }
        self.rank += 1;
        self.load_term()
    }

    /// The next large tf, which must be the one recorded for (current rank, doc).
    fn large_tf(&mut self, doc: u32) -> Result<u32> {
        let record = self.large.take(12)?;
        let (rank, large_doc) = (read_u32(record, 0), read_u32(record, 4));
        if (rank as usize, large_doc) != (self.rank, doc) {
            return Err(self.run.source.corrupt("a large tf is out of place"));
        }
        Ok(read_u32(record, 8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SortedRun {
        let terms: [(&[u8], usize); 3] = [(b"apple", 2), (b"kiwi", 3), (b"zebra", 5)];
        let entries: [u64; 5] = [1, 4 << 8 | 2, 1 << 8 | 255, 2 << 8 | 3, 9 << 8 | 1];
        SortedRun::build(100, terms.into_iter(), &entries, &[(1, 101, 300)])
    }

    #[test]
    fn spilled_run_reads_like_the_one_in_memory() {
        let run = sample();
        let dir = tempfile::tempdir().unwrap();
        let spilled = sample().spill(&dir.path().join("run")).unwrap();
        for r in [&run, &spilled] {
            assert_eq!(r.num_terms(), 3);
            assert_eq!(r.term(1).unwrap(), b"kiwi");
            assert_eq!(
                (
                    r.lower_bound(b"b").unwrap(),
                    r.lower_bound(b"kiwi").unwrap()
                ),
                (1, 1)
            );
            assert_eq!(r.lower_bound(b"zz").unwrap(), 3);
            let all = r.read_range(0, 3);
            assert_eq!(
                all,
                [
                    (b"apple".to_vec(), vec![100, 1, 104, 2]),
                    (b"kiwi".to_vec(), vec![101, 300]),
                    (b"zebra".to_vec(), vec![102, 3, 109, 1]),
                ]
            );
            assert_eq!(r.read_range(1, 2), all[1..2]);
            assert_eq!(r.read_range(2, 3), all[2..]);
            assert!(r.read_range(3, 3).is_empty());
        }
    }

    #[test]
    fn a_corrupt_spilled_run_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run");
        drop(sample().spill(&path).unwrap());
        let clean = std::fs::read(&path).unwrap();
        // A term count far beyond the file; then term ends out of order.
        let mut bad = clean.clone();
        bad[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&path, &bad).unwrap();
        let err = SortedRun::open(&path).err().unwrap().to_string();
        assert!(err.contains("corrupt sorted run"), "{err}");
        let mut bad = clean.clone();
        bad[HEADER_LEN + HEADER..HEADER_LEN + HEADER + 8].copy_from_slice(&99u64.to_le_bytes());
        std::fs::write(&path, &bad).unwrap();
        let run = SortedRun::open(&path).unwrap();
        let err = run.cursor(0, 3, 8).err().unwrap().to_string();
        assert!(err.contains("corrupt sorted run"), "{err}");
        // Truncated: the header no longer matches the file.
        std::fs::write(&path, &clean[..clean.len() - 1]).unwrap();
        assert!(SortedRun::open(&path).is_err());
    }
}
