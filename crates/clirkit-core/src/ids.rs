//! The string-id table: ids are strings to users and dense `u32` numbers inside every index.
//!
//! File `ids.bin` (checked header, kind `IDTABLE`), payload: `n u64` · `offsets [u64; n+1]` into
//! the blob · `sorted [u32; n]` (internal numbers ordered by id bytes, for lookups by string) ·
//! `blob` (the UTF-8 ids back to back). Memory-mapped on open, so a 10M-id table costs no load
//! time and lives in the page cache.

use crate::error::{Error, Result};
use crate::io::bytes::Bytes;
use crate::io::format::{read_u32, read_u64, write_checked, Kind, MappedFile};
use crate::ranking::{Run, ScoredDoc};
use rayon::prelude::*;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::path::Path;

const KIND: Kind = *b"IDTABLE\0";
const VERSION: u32 = 1;
/// The id table's file name in every index kind.
pub const FILE: &str = "ids.bin";
/// The header kind and version of `ids.bin`.
pub const HEADER: (Kind, u32) = (KIND, VERSION);

/// The header `ids.bin` carries, if `name` is its name.
pub fn header(name: &str) -> Option<(Kind, u32)> {
    (name == FILE).then_some(HEADER)
}

/// The [`crate::io::manifest::Layout`] of an index kind holding an id table (`ids.bin`) and
/// `files` (name, header kind), each of header version `file_version`.
macro_rules! layout_with_ids {
    ($format:expr, $version:expr, $file_version:expr, $files:expr) => {
        $crate::io::manifest::Layout::new(
            $format,
            $version,
            |name| {
                let files: &[(&str, $crate::io::format::Kind)] = &$files;
                $crate::io::format::header_of(name, files, $file_version)
                    .or_else(|| $crate::ids::header(name))
            },
            $crate::ids::check_content,
        )
    };
}
pub(crate) use layout_with_ids;

/// `verify`'s check of an index file's content beyond its checksums (an index kind's
/// [`crate::io::manifest::Layout::content`]): the id table's lookup order, read in full; other
/// files have nothing more to check.
pub fn check_content(path: &Path, name: &str) -> Result<()> {
    if name != FILE {
        return Ok(());
    }
    IdTable::open(path)?
        .check_lookup_order()
        .map_err(|message| Error::format(path, message))
}

/// A read-only id table, memory-mapped from disk or built in memory.
pub struct IdTable {
    bytes: Bytes,
    len: usize,
}

/// The payload for `n` ids, `id(i)` being the id of internal number `i` and `sorted` the
/// internal numbers in id byte order.
fn encode<'a>(n: usize, id: impl Fn(usize) -> &'a [u8], sorted: &[u32]) -> Vec<u8> {
    let blob_len: usize = (0..n).map(|i| id(i).len()).sum();
    let mut out = Vec::with_capacity(8 + 8 * (n + 1) + 4 * n + blob_len);
    out.extend_from_slice(&(n as u64).to_le_bytes());
    let mut offset = 0u64;
    out.extend_from_slice(&offset.to_le_bytes());
    for i in 0..n {
        offset += id(i).len() as u64;
        out.extend_from_slice(&offset.to_le_bytes());
    }
    for s in sorted {
        out.extend_from_slice(&s.to_le_bytes());
    }
    for i in 0..n {
        out.extend_from_slice(id(i));
    }
    out
}

/// Ids in order of arrival, each at most once: one byte arena with each id's end, and a hash
/// table of positions that finds an id by its bytes. Each id is held once (not again as a map
/// key), in about 14 bytes besides its own: what a 10M-document build can afford.
#[derive(Default)]
pub struct UniqueIds {
    bytes: Vec<u8>,
    ends: Vec<u64>,
    positions: hashbrown::HashTable<u32>,
}

impl UniqueIds {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The id at position `i` (panics if out of range).
    pub fn get(&self, i: u32) -> &str {
        id_at(&self.bytes, &self.ends, i)
    }

    /// Add `id` at the next position and return it, or return `Err` with the position it
    /// already has.
    pub fn insert(&mut self, id: &str) -> std::result::Result<u32, u32> {
        let hash = hash_id(id);
        let (bytes, ends) = (&self.bytes, &self.ends);
        if let Some(&at) = self
            .positions
            .find(hash, |&at| id_at(bytes, ends, at) == id)
        {
            return Err(at);
        }
        if self.ends.len() >= u32::MAX as usize {
            // Positions are u32 document numbers; the builder refuses more documents first.
            panic!("more than 2^32 - 1 ids");
        }
        let at = self.ends.len() as u32;
        self.bytes.extend_from_slice(id.as_bytes());
        self.ends.push(self.bytes.len() as u64);
        let (bytes, ends) = (&self.bytes, &self.ends);
        self.positions
            .insert_unique(hash, at, |&at| hash_id(id_at(bytes, ends, at)));
        Ok(at)
    }

    /// Positions in id byte order.
    pub fn sorted_positions(&self) -> Vec<u32> {
        let mut sorted: Vec<u32> = (0..self.len() as u32).collect();
        sorted.par_sort_unstable_by(|&a, &b| self.get(a).cmp(self.get(b)));
        sorted
    }
}

fn id_at<'a>(bytes: &'a [u8], ends: &[u64], i: u32) -> &'a str {
    let i = i as usize;
    let start = if i == 0 { 0 } else { ends[i - 1] as usize };
    // SAFETY: the arena holds only bytes copied from `&str`s, cut at their ends.
    unsafe { std::str::from_utf8_unchecked(&bytes[start..ends[i] as usize]) }
}

fn hash_id(id: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(id.as_bytes())
}

/// Check what [`IdTable::get`] and [`IdTable::find`] rely on, once: the offsets rise, the blob is
/// UTF-8 with every offset on a character boundary, and the sorted numbers are in range. A CRC
/// proves only that the bytes are the ones written, not that a crafted file was written sanely.
fn validate_layout(p: &[u8], len: usize) -> std::result::Result<(), String> {
    let blob_start = 8 + 8 * (len + 1) + 4 * len;
    let blob = std::str::from_utf8(&p[blob_start..]).map_err(|e| {
        format!(
            "id table holds invalid UTF-8 at blob byte {}",
            e.valid_up_to()
        )
    })?;
    let mut previous = 0;
    for i in 0..=len {
        let offset = read_u64(p, 8 + 8 * i) as usize;
        if offset < previous || offset > blob.len() || !blob.is_char_boundary(offset) {
            return Err(format!(
                "id table offset {i} ({offset}) is out of order or splits a character"
            ));
        }
        previous = offset;
    }
    let sorted_start = 8 + 8 * (len + 1);
    if (0..len).any(|j| read_u32(p, sorted_start + 4 * j) as usize >= len) {
        return Err("id table's sorted order names an id out of range".into());
    }
    Ok(())
}

impl IdTable {
    /// Build from ids in internal-number order; ids must be unique.
    pub fn from_ids<S: AsRef<str>>(ids: &[S]) -> Result<Self> {
        let mut seen = HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            let id = id.as_ref();
            if let Some(first) = seen.insert(id, i) {
                return Err(Error::invalid(format!(
                    "duplicate id '{id}' at positions {first} and {i}"
                )));
            }
        }
        if ids.len() > u32::MAX as usize {
            return Err(Error::invalid("more than 2^32 - 1 ids"));
        }
        let mut sorted: Vec<u32> = (0..ids.len() as u32).collect();
        sorted.sort_unstable_by(|&a, &b| ids[a as usize].as_ref().cmp(ids[b as usize].as_ref()));
        Ok(IdTable {
            bytes: Bytes::from(encode(ids.len(), |i| ids[i].as_ref().as_bytes(), &sorted)),
            len: ids.len(),
        })
    }

    /// Write ids (in internal-number order) to `path`, atomically.
    pub fn write(path: impl AsRef<Path>, ids: &[String]) -> Result<()> {
        let table = IdTable::from_ids(ids)?;
        write_checked(path, KIND, VERSION, table.raw())
    }

    /// Write `ids` to `path`, atomically; `sorted` is their [`UniqueIds::sorted_positions`].
    pub fn write_unique(path: impl AsRef<Path>, ids: &UniqueIds, sorted: &[u32]) -> Result<()> {
        let payload = encode(ids.len(), |i| ids.get(i as u32).as_bytes(), sorted);
        write_checked(path, KIND, VERSION, &payload)
    }

    /// Save this table to `path`, atomically.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        write_checked(path, KIND, VERSION, self.raw())
    }

    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let file = MappedFile::open(path.as_ref(), KIND, VERSION, true)?;
        let p = file.payload();
        if p.len() < 16 {
            return Err(Error::format(path, "id table too short"));
        }
        let len = read_u64(p, 0) as usize;
        // Checked first: a crafted count would overflow the size computed from it.
        if len > p.len() / 12 {
            return Err(Error::format(path, "id table is inconsistent"));
        }
        let need = 8 + 8 * (len + 1) + 4 * len;
        if p.len() < need || p.len() - need != read_u64(p, 8 + 8 * len) as usize {
            return Err(Error::format(path, "id table is inconsistent"));
        }
        validate_layout(p, len).map_err(|message| Error::format(path, message))?;
        Ok(IdTable {
            bytes: file.into_payload(),
            len,
        })
    }

    fn raw(&self) -> &[u8] {
        &self.bytes
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The string id of internal number `i` (panics if out of range).
    #[inline]
    pub fn get(&self, i: u32) -> &str {
        let p = self.raw();
        let i = i as usize;
        assert!(
            i < self.len,
            "internal id {i} out of range ({} ids)",
            self.len
        );
        let blob = 8 + 8 * (self.len + 1) + 4 * self.len;
        let start = read_u64(p, 8 + 8 * i) as usize;
        let end = read_u64(p, 8 + 8 * (i + 1)) as usize;
        // SAFETY: `open` checked that the blob is UTF-8 and every offset a character boundary
        // (`validate_layout`); a table built in memory was made from `String`s.
        unsafe { std::str::from_utf8_unchecked(&p[blob + start..blob + end]) }
    }

    /// The internal number of string id `id`, by binary search.
    pub fn find(&self, id: &str) -> Option<u32> {
        let p = self.raw();
        let sorted = 8 + 8 * (self.len + 1);
        let (mut lo, mut hi) = (0usize, self.len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let cand = read_u32(p, sorted + 4 * mid);
            match self.get(cand).as_bytes().cmp(id.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(cand),
            }
        }
        None
    }

    /// Check that the lookup order is the ids' strict byte order, which [`IdTable::find`] and
    /// [`IdTable::iter_sorted`] rely on. Left to `verify` rather than `open`: it reads every id
    /// in lookup order (random access into the blob), and a CRC already rules out accidental
    /// corruption; only a crafted file gets past one with an unsorted order.
    pub fn check_lookup_order(&self) -> std::result::Result<(), String> {
        let sorted = 8 + 8 * (self.len + 1);
        for rank in 1..self.len {
            let before = self.get(read_u32(self.raw(), sorted + 4 * (rank - 1)));
            let after = self.get(read_u32(self.raw(), sorted + 4 * rank));
            if before.as_bytes() >= after.as_bytes() {
                return Err(format!(
                    "id table's lookup order is not the ids' byte order at rank {rank}"
                ));
            }
        }
        Ok(())
    }

    /// The ids in byte order.
    pub fn iter_sorted(&self) -> impl Iterator<Item = &str> + '_ {
        let sorted = 8 + 8 * (self.len + 1);
        (0..self.len).map(move |rank| self.get(read_u32(self.raw(), sorted + 4 * rank)))
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len as u32).map(move |i| self.get(i))
    }

    /// A run from per-query hits `(score, internal id)`; `qids` name the queries in order and must
    /// be unique.
    pub fn run_from_hits(&self, hits: Vec<Vec<(f32, u32)>>, qids: &[String]) -> Result<Run> {
        check_query_ids(qids, hits.len())?;
        let mut run = Run::new();
        for (q, hs) in qids.iter().zip(hits) {
            let docs = hs
                .into_iter()
                .map(|(s, id)| ScoredDoc::new(self.get(id), s as f64))
                .collect();
            run.push(q.clone(), docs);
        }
        Ok(run)
    }
}

/// Exactly one id per query (`nqueries` of them), none repeated.
pub fn check_query_ids(qids: &[String], nqueries: usize) -> Result<()> {
    if qids.len() != nqueries {
        return Err(Error::invalid(format!(
            "{} query ids for {} queries: give exactly one id per query",
            qids.len(),
            nqueries
        )));
    }
    let mut seen = HashMap::with_capacity(qids.len());
    for (i, q) in qids.iter().enumerate() {
        if let Some(first) = seen.insert(q.as_str(), i) {
            return Err(Error::invalid(format!(
                "duplicate query id '{q}' at positions {first} and {i}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::temp_path;

    #[test]
    fn round_trip_and_lookup() {
        let (_dir, p) = temp_path("ids.bin");
        let ids: Vec<String> = ["d3", "α-1", "", "d10"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        IdTable::write(&p, &ids).unwrap();
        let t = IdTable::open(&p).unwrap();
        assert_eq!(t.iter().collect::<Vec<_>>(), ["d3", "α-1", "", "d10"]);
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(t.find(id), Some(i as u32));
        }
        assert_eq!(t.find("nope"), None);
        assert!(IdTable::from_ids(&["a", "a"]).is_err());
    }

    #[test]
    fn a_crafted_table_with_a_valid_crc_is_refused_at_open() {
        let (_dir, p) = temp_path("ids.bin");
        let table = |offsets: [u64; 3], sorted: [u32; 2], blob: &[u8]| {
            let mut payload = 2u64.to_le_bytes().to_vec();
            offsets
                .iter()
                .for_each(|o| payload.extend_from_slice(&o.to_le_bytes()));
            sorted
                .iter()
                .for_each(|s| payload.extend_from_slice(&s.to_le_bytes()));
            payload.extend_from_slice(blob);
            payload
        };
        for (payload, expected) in [
            (table([0, 1, 3], [0, 1], b"a\xff\xfe"), "invalid UTF-8"),
            (
                table([0, 1, 3], [0, 1], "éa".as_bytes()),
                "splits a character",
            ),
            (table([0, 2, 1], [0, 1], b"a"), "out of order"),
            (table([0, 1, 2], [0, 7], b"ab"), "out of range"),
        ] {
            write_checked(&p, KIND, VERSION, &payload).unwrap();
            let e = IdTable::open(&p).err().expect(expected).to_string();
            assert!(e.contains(expected), "{e}");
        }
        write_checked(
            &p,
            KIND,
            VERSION,
            &table([0, 2, 3], [1, 0], "éa".as_bytes()),
        )
        .unwrap();
        assert_eq!(
            IdTable::open(&p).unwrap().iter().collect::<Vec<_>>(),
            ["é", "a"]
        );
        assert!(IdTable::open(&p).unwrap().check_lookup_order().is_ok());
        // A lookup order that opens (numbers in range) but is not the byte order: `find` would
        // miss ids, so `verify` refuses it.
        for sorted in [[0, 1], [1, 1]] {
            write_checked(
                &p,
                KIND,
                VERSION,
                &table([0, 2, 3], sorted, "éa".as_bytes()),
            )
            .unwrap();
            let e = IdTable::open(&p).unwrap().check_lookup_order().unwrap_err();
            assert!(e.contains("lookup order"), "{e}");
        }
    }

    #[test]
    fn unique_ids_find_repeats_and_write_the_same_table() {
        let dir = tempfile::tempdir().unwrap();
        let words = ["d3", "α-1", "", "d10", "d3", "", "x"];
        let mut unique = UniqueIds::default();
        let got: Vec<_> = words.iter().map(|w| unique.insert(w)).collect();
        assert_eq!(got, [Ok(0), Ok(1), Ok(2), Ok(3), Err(0), Err(2), Ok(4)]);
        // Enough ids to make the table grow and rehash several times.
        for i in 0..10_000 {
            assert_eq!(unique.insert(&format!("n{i}")), Ok(5 + i));
        }
        for i in 0..10_000 {
            assert_eq!(unique.insert(&format!("n{i}")), Err(5 + i));
        }
        let strings: Vec<String> = (0..unique.len() as u32)
            .map(|i| unique.get(i).to_string())
            .collect();
        let (a, b) = (dir.path().join("a.bin"), dir.path().join("b.bin"));
        IdTable::write(&a, &strings).unwrap();
        IdTable::write_unique(&b, &unique, &unique.sorted_positions()).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    }
}
