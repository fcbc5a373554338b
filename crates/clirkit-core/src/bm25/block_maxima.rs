//! Per-block maximum BM25 scores stored at build time (`blockmax.bin`, PISA's block-max
//! bounds): for the index's own (k1, b) and avgdl, each block's largest
//! [`saturation`](super::scoring::saturation) `tf * normInverse`. A term's score rises with it
//! whatever the query weight, so the bound a cursor derives from it is the block's largest
//! score itself, where the block's max tf with its min norm (the bound for any parameters)
//! may pair a frequency and a length of two different documents. A search with other
//! parameters, or an index without the file, falls back to that bound.
//!
//! Layout (a checked `io::format` file, `BM25BMAX`): `k1 u32` · `b u32` · `avgdl u32` (f32
//! bits) · `0 u32` · `num_terms u64` · `first_block [u64; num_terms + 1]` (term i's blocks are
//! `first_block[i]..first_block[i + 1]`, terms in dictionary order) · `maxima [f32; blocks]`.

use super::format;
use super::scoring::{saturation, NormCache, ScoringKey};
use crate::error::{Error, Result};
use crate::io::format::{read_u32, read_u64, FileWriter, Kind, MappedFile};
use crate::postings::codec::{decode_docs, decode_values};
use crate::postings::termdict::{self, TermEntry, TERM_ENTRY_LEN};
use crate::postings::{BlockMeta, BLOCK_LEN};
use rayon::prelude::*;
use std::path::Path;

pub const BLOCK_MAXIMA_FILE: &str = "blockmax.bin";
pub const BLOCK_MAXIMA_KIND: Kind = *b"BM25BMAX";
const HEADER_LEN: usize = 24;

/// Terms handed to one parallel task at a time while computing maxima.
const TERMS_PER_TASK: usize = 4096;

/// Write `blockmax.bin` in `dir`, next to the `terms.bin` and `postings.bin` just written
/// there, for scoring with `k1`, `b` and `avgdl` over documents of `norms`.
pub(super) fn write(dir: &Path, norms: &[u8], k1: f32, b: f32, avgdl: f32) -> Result<()> {
    let (terms, postings) = termdict::open_term_files(dir, format::BM25_TERM_FILES, false)?;
    let num_terms = read_u64(terms.payload(), 0) as usize;
    let cache = NormCache::new(k1, b, avgdl);
    let starts: Vec<usize> = (0..num_terms).step_by(TERMS_PER_TASK).collect();
    let parts: Vec<Vec<u8>> = starts
        .par_iter()
        .map(|&start| {
            let mut out = Vec::new();
            for i in start..(start + TERMS_PER_TASK).min(num_terms) {
                let entry = TermEntry::decode(terms.payload(), 8 + i * TERM_ENTRY_LEN);
                term_maxima(&entry, &postings, norms, &cache, &mut out)?;
            }
            Ok(out)
        })
        .collect::<Result<_>>()?;

    let mut w = FileWriter::create(
        dir.join(BLOCK_MAXIMA_FILE),
        BLOCK_MAXIMA_KIND,
        format::FILE_VERSION,
    )?;
    let key = cache.key;
    for word in [key.k1_bits, key.b_bits, key.avgdl_bits, 0] {
        w.write(&word.to_le_bytes())?;
    }
    w.write(&(num_terms as u64).to_le_bytes())?;
    let mut first_block = Vec::with_capacity((num_terms + 1) * 8);
    let mut blocks = 0u64;
    first_block.extend_from_slice(&blocks.to_le_bytes());
    for i in 0..num_terms {
        blocks += TermEntry::decode(terms.payload(), 8 + i * TERM_ENTRY_LEN).blocks as u64;
        first_block.extend_from_slice(&blocks.to_le_bytes());
    }
    w.write(&first_block)?;
    for part in &parts {
        w.write(part)?;
    }
    w.finish()
}

/// Append the largest saturation of each of `entry`'s blocks to `out`.
fn term_maxima(
    entry: &TermEntry,
    postings: &MappedFile,
    norms: &[u8],
    cache: &NormCache,
    out: &mut Vec<u8>,
) -> Result<()> {
    let term = entry.postings(postings, norms.len())?;
    let (mut docs, mut values) = ([0u32; BLOCK_LEN], [0u32; BLOCK_LEN]);
    let mut prev_last = u32::MAX;
    for b in 0..term.blocks {
        let meta = BlockMeta::decode(term.metas, b);
        if !decode_docs(term.data, &meta, prev_last, &mut docs) {
            return Err(Error::format(
                postings.path(),
                "a postings block decodes to documents other than its metadata states",
            ));
        }
        decode_values(term.data, &meta, &mut values);
        let n = meta.len as usize;
        let most = docs[..n]
            .iter()
            .zip(&values[..n])
            .map(|(&doc, &tf)| saturation(tf, cache.inverse[norms[doc as usize] as usize]))
            .fold(0f32, f32::max);
        out.extend_from_slice(&most.to_bits().to_le_bytes());
        prev_last = meta.last_doc;
    }
    Ok(())
}

/// An index's stored block maxima, mapped; its chunks are checked where they are read.
pub struct BlockMaxima {
    file: MappedFile,
    key: ScoringKey,
    num_terms: usize,
}

impl BlockMaxima {
    /// Open `blockmax.bin` in `dir`, or `None` for an index built without it.
    pub fn open(dir: &Path, num_terms: usize) -> Result<Option<Self>> {
        let path = dir.join(BLOCK_MAXIMA_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let file = MappedFile::open(&path, BLOCK_MAXIMA_KIND, format::FILE_VERSION, false)?;
        termdict::require_len(
            &path,
            file.payload(),
            HEADER_LEN + (num_terms + 1) * 8,
            "block maxima",
        )?;
        file.check_range(0..HEADER_LEN)?;
        let p = file.payload();
        if read_u64(p, 16) as usize != num_terms {
            return Err(Error::format(&path, "term count disagrees with meta.json"));
        }
        let key = ScoringKey {
            k1_bits: read_u32(p, 0),
            b_bits: read_u32(p, 4),
            avgdl_bits: read_u32(p, 8),
        };
        Ok(Some(BlockMaxima {
            file,
            key,
            num_terms,
        }))
    }

    /// Whether the maxima were computed for the norm table of `cache`.
    pub fn fits(&self, cache: &NormCache) -> bool {
        self.key == cache.key
    }

    /// Term `index`'s maxima (one f32 per block; `entry` is its dictionary entry), once their
    /// checksums hold.
    pub fn of_term(&self, index: usize, entry: &TermEntry) -> Result<&[u8]> {
        let at = HEADER_LEN + index * 8;
        self.file.check_range(at..at + 16)?;
        let p = self.file.payload();
        let (first, end) = (read_u64(p, at), read_u64(p, at + 8));
        let maxima_at = HEADER_LEN + (self.num_terms + 1) * 8;
        let range = first
            .checked_mul(4)
            .zip(end.checked_mul(4))
            .and_then(|(start, end)| {
                let start = maxima_at.checked_add(usize::try_from(start).ok()?)?;
                let end = maxima_at.checked_add(usize::try_from(end).ok()?)?;
                Some(start..end)
            })
            .filter(|r| r.end <= p.len() && r.len() == entry.blocks as usize * 4);
        let Some(range) = range else {
            return Err(Error::format(
                self.file.path(),
                "a term's block maxima disagree with its postings: the index is corrupt",
            ));
        };
        self.file.check_range(range.clone())?;
        Ok(&p[range])
    }
}
