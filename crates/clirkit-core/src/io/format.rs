//! The header every clirkit binary file starts with, and memory-mapped reading that checks it.
//!
//! Layout (little endian): a 64-byte header, so the payload that follows is 64-byte aligned in a
//! mapping: `magic "CLIRKIT\0"` · `kind [u8; 8]` · `version u32` · `reserved u32` ·
//! `payload_len u64` · `payload_crc32 u32` · `chunk_len u32` · zero padding; then the payload;
//! then a trailer of one CRC32 per `chunk_len` bytes of payload (the last chunk may be shorter).
//!
//! The payload CRC is what `verify` checks in full (and what the index manifest records per file,
//! [`crate::io::checksum`]). The chunk CRCs are the read path's check: a reader that decodes part
//! of a large file (one term's postings) checks just the chunks it touches, once per opened file
//! ([`MappedFile::check_range`]), so corruption is caught where it is read without a full scan.

use crate::error::{Error, IoContext, Result};
use crate::io::atomic::AtomicFile;
use crate::io::bytes::Bytes;
use std::io::{Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub const MAGIC: &[u8; 8] = b"CLIRKIT\0";
pub const HEADER_LEN: usize = 64;
/// Payload bytes per chunk CRC: small enough that checking a short postings list reads little.
pub const CHUNK_LEN: u32 = 1 << 16;

/// Which kind of file this is, e.g. `*b"IDTABLE\0"`.
pub type Kind = [u8; 8];

fn kind_name(kind: &Kind) -> String {
    String::from_utf8_lossy(kind)
        .trim_end_matches('\0')
        .to_string()
}

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub version: u32,
    pub payload_len: u64,
    pub payload_crc: u32,
    pub chunk_len: u32,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(MAGIC);
        h[8..16].copy_from_slice(&self.kind);
        h[16..20].copy_from_slice(&self.version.to_le_bytes());
        h[24..32].copy_from_slice(&self.payload_len.to_le_bytes());
        h[32..36].copy_from_slice(&self.payload_crc.to_le_bytes());
        h[36..40].copy_from_slice(&self.chunk_len.to_le_bytes());
        h
    }

    /// The header at the start of `bytes`, if they start with the magic bytes.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        if bytes.len() < HEADER_LEN || &bytes[0..8] != MAGIC {
            return None;
        }
        Some(Header {
            kind: bytes[8..16].try_into().ok()?,
            version: read_u32(bytes, 16),
            payload_len: read_u64(bytes, 24),
            payload_crc: read_u32(bytes, 32),
            chunk_len: read_u32(bytes, 36),
        })
    }

    /// How many chunk CRCs follow the payload (`None` for a chunk length this format never
    /// writes: a corrupt header).
    pub fn chunks(&self) -> Option<u64> {
        (self.chunk_len == CHUNK_LEN).then(|| self.payload_len.div_ceil(self.chunk_len as u64))
    }

    /// The whole file's size this header implies.
    pub fn file_len(&self) -> Option<u64> {
        (HEADER_LEN as u64)
            .checked_add(self.payload_len)?
            .checked_add(self.chunks()?.checked_mul(4)?)
    }

    /// Whether the bytes the format leaves unused are zero (checked by `verify`).
    pub fn unused_bytes_are_zero(bytes: &[u8]) -> bool {
        bytes[20..24]
            .iter()
            .chain(&bytes[40..HEADER_LEN])
            .all(|&b| b == 0)
    }
}

/// The header kind and version of the file `name` among `files` (name, kind), all of `version`:
/// how an index kind tells `verify` what each of its files must carry.
pub fn header_of(name: &str, files: &[(&str, Kind)], version: u32) -> Option<(Kind, u32)> {
    let (_, kind) = files.iter().find(|(file, _)| *file == name)?;
    Some((*kind, version))
}

/// The CRC of each `chunk_len` bytes of `payload`, as the trailer stores them.
pub fn chunk_crcs(payload: &[u8], chunk_len: u32) -> impl Iterator<Item = u32> + '_ {
    payload.chunks(chunk_len as usize).map(crc32fast::hash)
}

/// Streams a payload into an atomically written file, computing its checksums on the way.
pub struct FileWriter {
    file: AtomicFile,
    path: PathBuf,
    kind: Kind,
    version: u32,
    len: u64,
    crc: crc32fast::Hasher,
    chunk: crc32fast::Hasher,
    chunk_crcs: Vec<u32>,
}

impl FileWriter {
    pub fn create(path: impl AsRef<Path>, kind: Kind, version: u32) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mut file = AtomicFile::create(&path)?;
        file.write_all(&[0u8; HEADER_LEN]).at(&path)?;
        Ok(FileWriter {
            file,
            path,
            kind,
            version,
            len: 0,
            crc: crc32fast::Hasher::new(),
            chunk: crc32fast::Hasher::new(),
            chunk_crcs: Vec::new(),
        })
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.crc.update(bytes);
        let mut rest = bytes;
        while !rest.is_empty() {
            let room = CHUNK_LEN as u64 - self.len % CHUNK_LEN as u64;
            let (now, later) = rest.split_at(rest.len().min(room as usize));
            self.chunk.update(now);
            self.len += now.len() as u64;
            if self.len.is_multiple_of(CHUNK_LEN as u64) {
                let done = std::mem::replace(&mut self.chunk, crc32fast::Hasher::new());
                self.chunk_crcs.push(done.finalize());
            }
            rest = later;
        }
        self.file.write_all(bytes).at(&self.path)
    }

    /// Bytes of payload written so far (the next write's offset within the payload).
    pub fn position(&self) -> u64 {
        self.len
    }

    /// Pad the payload with zeros to a multiple of `align` bytes.
    pub fn align(&mut self, align: u64) -> Result<()> {
        let pad = (align - self.len % align) % align;
        self.write(&vec![0u8; pad as usize])
    }

    pub fn finish(mut self) -> Result<()> {
        if !self.len.is_multiple_of(CHUNK_LEN as u64) {
            self.chunk_crcs.push(self.chunk.clone().finalize());
        }
        let trailer: Vec<u8> = self
            .chunk_crcs
            .iter()
            .flat_map(|c| c.to_le_bytes())
            .collect();
        self.file.write_all(&trailer).at(&self.path)?;
        let header = Header {
            kind: self.kind,
            version: self.version,
            payload_len: self.len,
            payload_crc: self.crc.clone().finalize(),
            chunk_len: CHUNK_LEN,
        };
        let w = self.file.writer();
        w.flush().at(&self.path)?;
        w.seek(SeekFrom::Start(0)).at(&self.path)?;
        w.write_all(&header.encode()).at(&self.path)?;
        self.file.commit()
    }
}

/// Write a whole payload as one checked file.
pub fn write_checked(
    path: impl AsRef<Path>,
    kind: Kind,
    version: u32,
    payload: &[u8],
) -> Result<()> {
    let mut w = FileWriter::create(path, kind, version)?;
    w.write(payload)?;
    w.finish()
}

/// Check a checked file's header (`head`: at least its first [`HEADER_LEN`] bytes) against the
/// expected kind and version and the file's length `file_len`.
pub fn check_header(
    path: &Path,
    head: &[u8],
    file_len: u64,
    kind: Kind,
    version: u32,
) -> Result<Header> {
    let Some(header) = Header::parse(head) else {
        return Err(Error::format(path, "not a clirkit file (bad magic bytes)"));
    };
    if header.kind != kind {
        return Err(Error::format(
            path,
            format!(
                "is a '{}' file, expected '{}'",
                kind_name(&header.kind),
                kind_name(&kind)
            ),
        ));
    }
    let found = header.version;
    if found != version {
        return Err(Error::format(
            path,
            format!("format version {found}, but this clirkit reads version {version}; rebuild it"),
        ));
    }
    let len = header.payload_len;
    if header.file_len() != Some(file_len) {
        return Err(Error::format(
                path,
                format!(
                    "truncated or padded: header says {len} payload bytes in chunks of {}, file has {} bytes",
                    header.chunk_len,
                    file_len
                ),
            ));
    }
    Ok(header)
}

/// A mapped payload's chunk CRCs, and which chunks have been found intact so far.
pub struct ChunkChecks {
    crcs: Bytes,
    chunk_len: usize,
    /// One bit per chunk already checked.
    checked: Vec<AtomicU64>,
    /// Set when a reader decoded bytes that passed their CRCs but break the format (a crafted
    /// file): a reader that cannot return an error where it decodes (a postings cursor) marks it
    /// and goes on with safe values, and its caller reports it ([`ChunkChecks::decoded_intact`]).
    malformed: AtomicBool,
    path: PathBuf,
}

impl ChunkChecks {
    /// Check the chunk CRCs of the bytes of `payload` (the file's) in `range`, clamped to the
    /// payload, each chunk once for the life of the mapping: the read path's corruption check.
    pub fn check(&self, payload: &[u8], range: Range<usize>) -> Result<()> {
        self.check_each(payload, range, |_| {})
    }

    /// [`ChunkChecks::check`], handing `checked` the byte range of each chunk found intact now
    /// (not those checked before).
    pub fn check_each(
        &self,
        payload: &[u8],
        range: Range<usize>,
        mut checked: impl FnMut(Range<usize>),
    ) -> Result<()> {
        let end = range.end.min(payload.len());
        if range.start >= end {
            return Ok(());
        }
        for chunk in range.start / self.chunk_len..=(end - 1) / self.chunk_len {
            let (word, bit) = (&self.checked[chunk / 64], 1u64 << (chunk % 64));
            if word.load(Ordering::Relaxed) & bit != 0 {
                continue;
            }
            let start = chunk * self.chunk_len;
            let bytes = &payload[start..(start + self.chunk_len).min(payload.len())];
            if crc32fast::hash(bytes) != read_u32(&self.crcs, 4 * chunk) {
                return Err(Error::format(
                    &self.path,
                    format!("checksum mismatch in bytes {start}..: the file is corrupt"),
                ));
            }
            word.fetch_or(bit, Ordering::Relaxed);
            checked(start..start + bytes.len());
        }
        Ok(())
    }

    /// Record that decoded bytes of this file break its format.
    pub fn mark_malformed(&self) {
        self.malformed.store(true, Ordering::Relaxed);
    }

    /// An error naming the file once any reader marked it malformed (what it decoded then is
    /// not to be trusted); `what` says what was found.
    pub fn decoded_intact(&self, what: &str) -> Result<()> {
        if self.malformed.load(Ordering::Relaxed) {
            return Err(Error::format(
                &self.path,
                format!("{what}: the index is corrupt"),
            ));
        }
        Ok(())
    }
}

/// A memory-mapped checked file; [`MappedFile::payload`] is what followed the header.
pub struct MappedFile {
    payload: Bytes,
    checks: ChunkChecks,
}

impl MappedFile {
    /// Map `path` and check magic, kind, version and sizes; with `verify`, also the payload
    /// checksum (reading all of it).
    pub fn open(path: impl AsRef<Path>, kind: Kind, version: u32, verify: bool) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mmap = Bytes::map(&path, false)?;
        let header = check_header(&path, &mmap, mmap.len() as u64, kind, version)?;
        let len = header.payload_len;
        let payload_end = HEADER_LEN + len as usize;
        if verify && header.payload_crc != crc32fast::hash(&mmap[HEADER_LEN..payload_end]) {
            return Err(Error::format(
                &path,
                "checksum mismatch: the file is corrupt",
            ));
        }
        let chunks = header.chunks().unwrap_or(0) as usize;
        let trailer = Bytes::map(&path, false)?.skip(payload_end);
        Ok(MappedFile {
            payload: mmap.skip(HEADER_LEN).truncate(len as usize),
            checks: ChunkChecks {
                crcs: trailer,
                chunk_len: header.chunk_len as usize,
                checked: (0..chunks.div_ceil(64))
                    .map(|_| AtomicU64::new(0))
                    .collect(),
                malformed: AtomicBool::new(false),
                path,
            },
        })
    }

    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The payload, for a reader that keeps only the bytes.
    pub fn into_payload(self) -> Bytes {
        self.payload
    }

    /// The payload and its chunk checks, for a reader that keeps the bytes and checks them
    /// where it reads them.
    pub fn into_checked_payload(self) -> (Bytes, ChunkChecks) {
        (self.payload, self.checks)
    }

    pub fn path(&self) -> &Path {
        &self.checks.path
    }

    /// Check the chunk CRCs of the payload bytes in `range` ([`ChunkChecks::check`]).
    pub fn check_range(&self, range: Range<usize>) -> Result<()> {
        self.checks.check(&self.payload, range)
    }

    pub fn checks(&self) -> &ChunkChecks {
        &self.checks
    }
}

/// Little-endian readers over byte slices (mapped payloads need not be typed-aligned).
#[inline]
pub fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

#[inline]
pub fn read_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: Kind = *b"TESTFILE";

    #[test]
    fn chunk_checks_find_the_corrupt_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.bin");
        let payload: Vec<u8> = (0..3 * CHUNK_LEN + 5).map(|i| (i % 251) as u8).collect();
        let mut w = FileWriter::create(&p, KIND, 1).unwrap();
        for piece in payload.chunks(7000) {
            w.write(piece).unwrap();
        }
        w.finish().unwrap();
        let f = MappedFile::open(&p, KIND, 1, true).unwrap();
        assert_eq!(f.payload(), &payload[..]);
        f.check_range(0..payload.len()).unwrap();
        drop(f);
        let mut bytes = std::fs::read(&p).unwrap();
        let at = 2 * CHUNK_LEN as usize + 9;
        bytes[HEADER_LEN + at] ^= 0x10;
        std::fs::write(&p, &bytes).unwrap();
        let f = MappedFile::open(&p, KIND, 1, false).unwrap();
        f.check_range(0..at - 9).unwrap();
        f.check_range(at + CHUNK_LEN as usize..payload.len())
            .unwrap();
        let e = f.check_range(at..at + 1).unwrap_err().to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.bin");
        write_checked(&p, KIND, 3, b"hello payload").unwrap();
        assert_eq!(
            MappedFile::open(&p, KIND, 3, true).unwrap().payload(),
            b"hello payload"
        );
        let open_error = |kind: Kind, version| {
            MappedFile::open(&p, kind, version, true)
                .err()
                .unwrap()
                .to_string()
        };
        let v = open_error(KIND, 4);
        assert!(v.contains("version 3"), "{v}");
        let k = open_error(*b"OTHERKND", 3);
        assert!(k.contains("TESTFILE"), "{k}");

        let mut bytes = std::fs::read(&p).unwrap();
        bytes[HEADER_LEN + 3] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        let c = open_error(KIND, 3);
        assert!(c.contains("checksum"), "{c}");
        bytes.truncate(bytes.len() - 5);
        std::fs::write(&p, &bytes).unwrap();
        let t = open_error(KIND, 3);
        assert!(t.contains("truncated"), "{t}");
    }
}
