//! The string-id table: ids are strings to users and dense `u32` numbers inside every index.
//!
//! File `ids.bin` (checked header, kind `IDTABLE`), payload: `n u64` · `offsets [u64; n+1]` into
//! the blob · `sorted [u32; n]` (internal numbers ordered by id bytes, for lookups by string) ·
//! `blob` (the UTF-8 ids back to back). Memory-mapped on open, so a 10M-id table costs no load
//! time and lives in the page cache.

use crate::error::{Error, Result};
use crate::io::format::{read_u32, read_u64, write_checked, Kind, MappedFile};
use std::collections::HashMap;
use std::path::Path;

const KIND: Kind = *b"IDTABLE\0";
const VERSION: u32 = 1;

enum Bytes {
    Mapped(MappedFile),
    Owned(Vec<u8>),
}

/// A read-only id table, memory-mapped from disk or built in memory.
pub struct IdTable {
    bytes: Bytes,
    len: usize,
}

fn encode(ids: &[String]) -> Vec<u8> {
    let n = ids.len();
    let blob_len: usize = ids.iter().map(String::len).sum();
    let mut out = Vec::with_capacity(8 + 8 * (n + 1) + 4 * n + blob_len);
    out.extend_from_slice(&(n as u64).to_le_bytes());
    let mut offset = 0u64;
    out.extend_from_slice(&offset.to_le_bytes());
    for id in ids {
        offset += id.len() as u64;
        out.extend_from_slice(&offset.to_le_bytes());
    }
    let mut sorted: Vec<u32> = (0..n as u32).collect();
    sorted.sort_unstable_by(|&a, &b| ids[a as usize].as_bytes().cmp(ids[b as usize].as_bytes()));
    for s in sorted {
        out.extend_from_slice(&s.to_le_bytes());
    }
    for id in ids {
        out.extend_from_slice(id.as_bytes());
    }
    out
}

impl IdTable {
    /// Build from ids in internal-number order; ids must be unique.
    pub fn from_ids(ids: &[String]) -> Result<Self> {
        let mut seen = HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            if let Some(first) = seen.insert(id.as_str(), i) {
                return Err(Error::invalid(format!(
                    "duplicate id '{id}' at positions {first} and {i}"
                )));
            }
        }
        if ids.len() > u32::MAX as usize {
            return Err(Error::invalid("more than 2^32 - 1 ids"));
        }
        Ok(IdTable {
            bytes: Bytes::Owned(encode(ids)),
            len: ids.len(),
        })
    }

    /// Write ids (in internal-number order) to `path`, atomically.
    pub fn write(path: impl AsRef<Path>, ids: &[String]) -> Result<()> {
        let table = IdTable::from_ids(ids)?;
        write_checked(path, KIND, VERSION, table.raw())
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
        let need = 8 + 8 * (len + 1) + 4 * len;
        if p.len() < need || p.len() - need != read_u64(p, 8 + 8 * len) as usize {
            return Err(Error::format(path, "id table is inconsistent"));
        }
        Ok(IdTable {
            bytes: Bytes::Mapped(file),
            len,
        })
    }

    fn raw(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(f) => f.payload(),
            Bytes::Owned(v) => v,
        }
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
        // SAFETY: the blob was written from `String`s and checked by CRC on open.
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

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len as u32).map(move |i| self.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ids.bin");
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
        assert!(IdTable::from_ids(&["a".into(), "a".into()]).is_err());
    }
}
