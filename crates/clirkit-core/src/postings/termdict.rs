//! The term dictionary and file names of an inverted index directory, whatever its scorer (BM25
//! and the impact index share them; each kind names its own header kinds and version):
//! - `terms.bin`: `n u64` · `entries [TermEntry; n]` (sorted by term bytes, so the dictionary is
//!   binary-searchable in place) · the term strings back to back.
//! - `postings.bin`: per term, its block-max postings ([`super::codec`]: block metadata then the
//!   blocks' data); 8 zero bytes at the end let the decoder read whole little-endian words
//!   without bounds checks.
//! - `docs.bin`: the kind's per-document data, ending with each document's rank in id byte
//!   order ([`super::doc_ranks`]).
//! - `ids.bin`: the [`crate::ids::IdTable`].

use super::codec::{BlockMeta, BLOCK_META_LEN, MAX_BLOCK_DATA_LEN};
use super::cursor::TermPostings;
use crate::error::{Error, Result};
use crate::io::format::{read_u32, read_u64, Kind, MappedFile};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub const TERMS_FILE: &str = "terms.bin";
pub const POSTINGS_FILE: &str = "postings.bin";
pub const DOCS_FILE: &str = "docs.bin";
pub const IDS_FILE: &str = "ids.bin";

pub const TERM_ENTRY_LEN: usize = 32;

/// The header kinds and version of an inverted index's dictionary and postings files, so BM25 and
/// the impact index open and verify them the same way.
#[derive(Clone, Copy)]
pub struct TermFileKinds {
    pub terms: Kind,
    pub postings: Kind,
    pub version: u32,
}

/// Open `terms.bin` and `postings.bin` in `dir`, checking the dictionary's checksum when
/// `check_terms`; the postings' checksum is left to `verify`, which reads the whole file, so
/// opening stays near-instant.
pub fn open_term_files(
    dir: &Path,
    kinds: TermFileKinds,
    check_terms: bool,
) -> Result<(MappedFile, MappedFile)> {
    let terms = MappedFile::open(
        dir.join(TERMS_FILE),
        kinds.terms,
        kinds.version,
        check_terms,
    )?;
    let postings = MappedFile::open(
        dir.join(POSTINGS_FILE),
        kinds.postings,
        kinds.version,
        false,
    )?;
    Ok((terms, postings))
}

/// A term's dictionary entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermEntry {
    /// Where the term's bytes start in the string blob, and their length.
    pub text_offset: u64,
    pub text_len: u32,
    pub doc_freq: u32,
    /// Where the term's block metadata starts in the postings payload.
    pub postings_offset: u64,
    pub blocks: u32,
}

impl TermEntry {
    /// This term's block metadata and packed blocks in the postings file, once the chunk CRCs
    /// of the bytes they span check out: corruption is an error where it is first read. The
    /// blocks' last documents must rise and stay below `num_docs`; a block whose documents do
    /// not decode to its last document is found by the cursor that decodes it (see
    /// [`TermPostings`]).
    pub fn postings<'a>(&self, file: &'a MappedFile, num_docs: usize) -> Result<TermPostings<'a>> {
        self.postings_walked(file, num_docs, true)
    }

    /// [`TermEntry::postings`] for term `term` of the dictionary, walking its blocks' metadata
    /// only the first time `checked` meets it: a well-formed term is marked there, and its later
    /// views check only the chunk CRCs (each chunk once anyway) and the last block.
    pub fn postings_once<'a>(
        &self,
        file: &'a MappedFile,
        num_docs: usize,
        checked: &CheckedTerms,
        term: usize,
    ) -> Result<TermPostings<'a>> {
        let walked = !checked.contains(term);
        let postings = self.postings_walked(file, num_docs, walked)?;
        if walked {
            checked.insert(term);
        }
        Ok(postings)
    }

    fn postings_walked<'a>(
        &self,
        file: &'a MappedFile,
        num_docs: usize,
        walk: bool,
    ) -> Result<TermPostings<'a>> {
        let payload = file.payload();
        let metas_at = self.postings_offset as usize;
        let data_at = metas_at.saturating_add(self.blocks as usize * BLOCK_META_LEN);
        if self.blocks == 0 || data_at > payload.len() {
            return Err(Error::format(
                file.path(),
                "a term's postings lie outside the file: the index is corrupt",
            ));
        }
        file.check_range(metas_at..data_at)?;
        let metas = &payload[metas_at..data_at];
        let last = BlockMeta::decode(metas, self.blocks as usize - 1);
        let data = &payload[data_at..];
        // Blocks are written in order, so every block lies in the range checked below.
        let fits = |b| {
            let meta = BlockMeta::decode(metas, b);
            let rises = b == 0 || BlockMeta::decode(metas, b - 1).last_doc < meta.last_doc;
            rises && meta.offset <= last.offset && meta.fits(data.len())
        };
        if walk && !(0..self.blocks as usize).all(fits) {
            return Err(Error::format(
                file.path(),
                "a term's postings block is malformed: the index is corrupt",
            ));
        }
        if last.last_doc as usize >= num_docs {
            return Err(Error::format(
                file.path(),
                format!(
                    "a term's postings name document {} of {num_docs}: the index is corrupt",
                    last.last_doc
                ),
            ));
        }
        file.check_range(data_at..data_at + last.offset as usize + MAX_BLOCK_DATA_LEN)?;
        Ok(TermPostings {
            metas,
            data,
            blocks: self.blocks as usize,
            checks: file.checks(),
            block_maxima: None,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.text_offset.to_le_bytes());
        out.extend_from_slice(&self.text_len.to_le_bytes());
        out.extend_from_slice(&self.doc_freq.to_le_bytes());
        out.extend_from_slice(&self.postings_offset.to_le_bytes());
        out.extend_from_slice(&self.blocks.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
    }

    #[inline]
    pub fn decode(bytes: &[u8], at: usize) -> Self {
        TermEntry {
            text_offset: read_u64(bytes, at),
            text_len: read_u32(bytes, at + 8),
            doc_freq: read_u32(bytes, at + 12),
            postings_offset: read_u64(bytes, at + 16),
            blocks: read_u32(bytes, at + 24),
        }
    }
}

/// The terms of an opened index whose postings [`TermEntry::postings_once`] found well formed,
/// a bit per term: a frequent term's thousands of blocks are walked once per opened index
/// rather than once per query.
pub struct CheckedTerms(Vec<AtomicU64>);

impl CheckedTerms {
    pub fn new(num_terms: usize) -> Self {
        CheckedTerms(
            (0..num_terms.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        )
    }

    #[inline]
    fn contains(&self, term: usize) -> bool {
        self.0
            .get(term / 64)
            .is_some_and(|w| w.load(Ordering::Relaxed) >> (term % 64) & 1 != 0)
    }

    #[inline]
    fn insert(&self, term: usize) {
        if let Some(w) = self.0.get(term / 64) {
            w.fetch_or(1 << (term % 64), Ordering::Relaxed);
        }
    }
}

/// Where the postings of `term` (a single block) start in the postings payload of the index at
/// `index`: its block metadata, and that block's data (for tests that craft a block).
#[cfg(test)]
pub(crate) fn single_block_at(index: &Path, kinds: TermFileKinds, term: &str) -> (usize, usize) {
    let terms = MappedFile::open(index.join(TERMS_FILE), kinds.terms, kinds.version, true).unwrap();
    let num_terms = read_u64(terms.payload(), 0) as usize;
    let entry = lookup_term(terms.payload(), num_terms, term.as_bytes()).unwrap();
    assert_eq!(entry.blocks, 1);
    let metas_at = entry.postings_offset as usize;
    (metas_at, metas_at + BLOCK_META_LEN)
}

/// The entry of `term` in a mapped dictionary (`n u64` · entries · strings), by binary search.
pub fn lookup_term(dictionary: &[u8], num_terms: usize, term: &[u8]) -> Option<TermEntry> {
    find_term(dictionary, num_terms, term).map(|(_, entry)| entry)
}

/// The position of `term` in a mapped dictionary and its entry, by binary search.
pub fn find_term(dictionary: &[u8], num_terms: usize, term: &[u8]) -> Option<(usize, TermEntry)> {
    let blob = 8 + num_terms * TERM_ENTRY_LEN;
    let (mut lo, mut hi) = (0usize, num_terms);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let e = TermEntry::decode(dictionary, 8 + mid * TERM_ENTRY_LEN);
        let start = blob + e.text_offset as usize;
        match dictionary[start..start + e.text_len as usize].cmp(term) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some((mid, e)),
        }
    }
    None
}

/// Check a mapped term dictionary against the manifest's term count.
pub fn check_dictionary(terms: &MappedFile, num_terms: usize) -> Result<()> {
    let t = terms.payload();
    require_len(
        terms.path(),
        t,
        8 + num_terms * TERM_ENTRY_LEN,
        "term dictionary",
    )?;
    if read_u64(t, 0) as usize != num_terms {
        return Err(Error::format(
            terms.path(),
            "term count disagrees with meta.json",
        ));
    }
    Ok(())
}

/// Check that a mapped payload is at least `len` bytes.
pub fn require_len(path: &Path, payload: &[u8], len: usize, what: &str) -> Result<()> {
    if payload.len() < len {
        return Err(Error::format(
            path,
            format!(
                "{what} is inconsistent: needs {len} bytes, has {}",
                payload.len()
            ),
        ));
    }
    Ok(())
}
