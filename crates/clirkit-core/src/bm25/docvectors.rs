//! The optional forward index `docvectors.bin` (`BM25DVEC`): each document's terms (dictionary
//! numbers) and frequencies, what RM3 reads from its feedback documents.
//!
//! Layout: `n u64` · `offsets [u64; n + 1]` (where each document's record starts in the data) ·
//! data. A record is LEB128 varints: the number of distinct terms, then the term numbers as
//! gaps (ascending, the first from 0), then the frequencies.
//!
//! Written after the postings by inverting them a slice of documents at a time, so the inversion
//! holds at most the build's memory budget of (term, tf) pairs, whatever the collection size.

use super::format;
use crate::error::{Error, IoContext, Result};
use crate::io::format::{read_u64, FileWriter, MappedFile};
use crate::postings::termdict::{self, TermEntry, TERM_ENTRY_LEN};
use crate::postings::{BlockMeta, Cursor, PostingScorer};
use std::io::{Read, Write};
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
/// `postings.bin`) into `docvectors.bin`, holding about `budget` bytes of (term, tf) pairs at a
/// time: documents are inverted a slice at a time, each slice a pass over every term's postings
/// from its first document on, and past one slice the records go to a temporary file until the
/// offsets before them are known. The file does not depend on the budget (tested byte for byte).
pub fn write(dir: &Path, num_docs: usize, budget: usize) -> Result<()> {
    let (terms, postings) = termdict::open_term_files(dir, format::BM25_TERM_FILES, false)?;
    let t = terms.payload();
    let num_terms = read_u64(t, 0) as usize;
    let cursor = |term: usize| {
        let e = TermEntry::decode(t, 8 + term * TERM_ENTRY_LEN);
        e.postings(&postings, num_docs)
            .map(|p| Cursor::new(p, FrequencyOnly))
    };
    // Each document's number of terms, then where its pairs start.
    let mut starts = vec![0usize; num_docs + 1];
    for term in 0..num_terms {
        cursor(term)?.drain(|doc, _| starts[doc as usize + 1] += 1);
    }
    for d in 0..num_docs {
        starts[d + 1] += starts[d];
    }
    let pair_bytes = std::mem::size_of::<(u32, u32)>();
    let mut slices = Vec::new();
    let mut first = 0;
    while first < num_docs {
        let mut end = first + 1;
        while end < num_docs && (starts[end + 1] - starts[first]) * pair_bytes <= budget {
            end += 1;
        }
        slices.push(first..end);
        first = end;
    }
    let spill = dir.join("docvectors.data.tmp");
    let mut spilled = None;
    let mut data = Vec::new();
    let mut written = 0u64; // bytes of records already in the temporary file
    let mut offsets = Vec::with_capacity(8 * (num_docs + 2));
    offsets.extend_from_slice(&(num_docs as u64).to_le_bytes());
    let mut pairs = Vec::new();
    for slice in &slices {
        let base = starts[slice.start];
        // Terms come in dictionary order, so every document's list fills in ascending term order.
        let mut fill: Vec<usize> = starts[slice.start..slice.end]
            .iter()
            .map(|s| s - base)
            .collect();
        pairs.clear();
        pairs.resize(starts[slice.end] - base, (0u32, 0u32));
        for term in 0..num_terms {
            let mut c = cursor(term)?;
            c.advance(slice.start as u32);
            c.drain_until(slice.end as u32, |doc, tf| {
                let slot = &mut fill[doc as usize - slice.start];
                pairs[*slot] = (term as u32, tf);
                *slot += 1;
            });
        }
        for d in slice.clone() {
            offsets.extend_from_slice(&(written + data.len() as u64).to_le_bytes());
            let doc = &pairs[starts[d] - base..starts[d + 1] - base];
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
        if slices.len() > 1 {
            let file = match &mut spilled {
                Some(file) => file,
                None => spilled.insert(std::fs::File::create(&spill).at(&spill)?),
            };
            file.write_all(&data).at(&spill)?;
            written += data.len() as u64;
            data.clear();
        }
    }
    drop(pairs);
    offsets.extend_from_slice(&(written + data.len() as u64).to_le_bytes());
    crate::postings::postings_intact(&postings)?;
    let mut out = FileWriter::create(
        dir.join(DOCVECTORS_FILE),
        DOCVECTORS_KIND,
        format::FILE_VERSION,
    )?;
    out.write(&offsets)?;
    if let Some(file) = spilled {
        drop(file);
        let mut file = std::fs::File::open(&spill).at(&spill)?;
        let mut buffer = vec![0u8; 8 << 20];
        loop {
            let n = file.read(&mut buffer).at(&spill)?;
            if n == 0 {
                break;
            }
            out.write(&buffer[..n])?;
        }
        drop(file);
        std::fs::remove_file(&spill).at(&spill)?;
    }
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
