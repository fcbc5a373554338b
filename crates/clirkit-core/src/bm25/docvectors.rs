//! The optional forward index `docvectors.bin` (`BM25DVEC`): each document's terms (dictionary
//! numbers) and frequencies, what RM3 reads from its feedback documents.
//!
//! Layout: `n u64` · `offsets [u64; n + 1]` (where each document's record starts in the data) ·
//! data. A record is LEB128 varints: the number of distinct terms, then the term numbers as
//! gaps (ascending, the first from 0), then the frequencies.
//!
//! Written after the postings by inverting them once, so the builder's memory bound holds for
//! the inverted index; the inversion itself holds one (term, tf) pair per posting.

use super::format;
use crate::error::{Error, Result};
use crate::io::format::{read_u64, FileWriter, MappedFile};
use crate::postings::termdict::{self, TermEntry, TERM_ENTRY_LEN};
use crate::postings::{BlockMeta, Cursor, PostingScorer};
use std::path::Path;

pub const DOCVECTORS_FILE: &str = "docvectors.bin";
pub const DOCVECTORS_KIND: crate::io::format::Kind = *b"BM25DVEC";

/// Walks postings for their frequencies only.
#[derive(Clone, Copy)]
pub(crate) struct FrequencyOnly;

impl PostingScorer for FrequencyOnly {
    fn score(&self, _doc: u32, _value: u32) -> f32 {
        0.0
    }
    fn block_bound(&self, _meta: &BlockMeta) -> f32 {
        0.0
    }
}

fn push_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint at `*at`, or `None` past the end or for one longer than a u32's five bytes.
fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut v = 0u32;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= ((b & 0x7f) as u32).checked_shl(shift)?;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Invert the postings of the index being written in `dir` (its `terms.bin` and
/// `postings.bin`) into `docvectors.bin`.
pub fn write(dir: &Path, num_docs: usize) -> Result<()> {
    let (terms, postings) = termdict::open_term_files(dir, format::BM25_TERM_FILES, false)?;
    let t = terms.payload();
    let num_terms = read_u64(t, 0) as usize;
    let cursor = |term: usize| {
        let e = TermEntry::decode(t, 8 + term * TERM_ENTRY_LEN);
        e.postings(&postings, num_docs)
            .map(|p| Cursor::new(p, FrequencyOnly))
    };
    // Pass 1 counts each document's terms, pass 2 places them: terms come in dictionary order,
    // so every document's list fills in ascending term order.
    let mut starts = vec![0usize; num_docs + 1];
    for term in 0..num_terms {
        cursor(term)?.drain(|doc, _| starts[doc as usize + 1] += 1);
    }
    for d in 0..num_docs {
        starts[d + 1] += starts[d];
    }
    let mut fill = starts.clone();
    let mut pairs = vec![(0u32, 0u32); starts[num_docs]];
    for term in 0..num_terms {
        cursor(term)?.drain(|doc, tf| {
            let slot = &mut fill[doc as usize];
            pairs[*slot] = (term as u32, tf);
            *slot += 1;
        });
    }
    let mut data = Vec::new();
    let mut offsets = Vec::with_capacity(8 * (num_docs + 2));
    offsets.extend_from_slice(&(num_docs as u64).to_le_bytes());
    for d in 0..num_docs {
        offsets.extend_from_slice(&(data.len() as u64).to_le_bytes());
        let doc = &pairs[starts[d]..starts[d + 1]];
        push_varint(&mut data, doc.len() as u32);
        let mut prev = 0u32;
        for &(term, _) in doc {
            push_varint(&mut data, term - prev);
            prev = term;
        }
        for &(_, tf) in doc {
            push_varint(&mut data, tf);
        }
    }
    offsets.extend_from_slice(&(data.len() as u64).to_le_bytes());
    crate::postings::postings_intact(&postings)?;
    let mut out = FileWriter::create(
        dir.join(DOCVECTORS_FILE),
        DOCVECTORS_KIND,
        format::FILE_VERSION,
    )?;
    out.write(&offsets)?;
    out.write(&data)?;
    out.finish()
}

/// An opened (memory-mapped) `docvectors.bin`.
pub struct DocVectors {
    file: MappedFile,
    num_docs: usize,
}

impl DocVectors {
    pub fn open(dir: &Path, num_docs: usize) -> Result<Self> {
        let file = MappedFile::open(
            dir.join(DOCVECTORS_FILE),
            DOCVECTORS_KIND,
            format::FILE_VERSION,
            true,
        )?;
        let d = file.payload();
        termdict::require_len(file.path(), d, 8 * (num_docs + 2), "document vectors")?;
        if read_u64(d, 0) as usize != num_docs {
            return Err(Error::format(
                file.path(),
                "document count disagrees with meta.json",
            ));
        }
        Ok(DocVectors { file, num_docs })
    }

    /// Document `doc`'s (term number, frequency) pairs, in ascending term order.
    pub fn terms(&self, doc: u32, num_terms: usize) -> Result<Vec<(u32, u32)>> {
        let d = self.file.payload();
        let data_at = 8 * (self.num_docs + 2);
        let start = read_u64(d, 8 + 8 * doc as usize) as usize;
        let end = read_u64(d, 16 + 8 * doc as usize) as usize;
        let corrupt = || {
            Error::format(
                self.file.path(),
                format!("the term vector of document {doc} is corrupt"),
            )
        };
        let record = d
            .get(data_at..)
            .and_then(|data| data.get(start..end))
            .ok_or_else(corrupt)?;
        let mut at = 0;
        let n = read_varint(record, &mut at).ok_or_else(corrupt)? as usize;
        if n > record.len() {
            return Err(corrupt());
        }
        let mut pairs = Vec::with_capacity(n);
        let mut term = 0u32;
        for _ in 0..n {
            let gap = read_varint(record, &mut at).ok_or_else(corrupt)?;
            term = term.checked_add(gap).ok_or_else(corrupt)?;
            if term as usize >= num_terms {
                return Err(corrupt());
            }
            pairs.push((term, 0));
        }
        for pair in &mut pairs {
            pair.1 = read_varint(record, &mut at).ok_or_else(corrupt)?;
        }
        if at != record.len() {
            return Err(corrupt());
        }
        Ok(pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overlong() {
        let mut out = Vec::new();
        for v in [0u32, 1, 127, 128, 300, u32::MAX] {
            push_varint(&mut out, v);
        }
        let mut at = 0;
        for v in [0u32, 1, 127, 128, 300, u32::MAX] {
            assert_eq!(read_varint(&out, &mut at), Some(v));
        }
        assert_eq!(read_varint(&out, &mut at), None);
        let mut at = 0;
        assert_eq!(read_varint(&[0xff; 6], &mut at), None);
    }
}
