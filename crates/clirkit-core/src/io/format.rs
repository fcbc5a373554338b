//! The header every clirkit binary file starts with, and memory-mapped reading that checks it.
//!
//! Layout (little endian), 64 bytes, so the payload that follows is 64-byte aligned in a mapping:
//! `magic "CLIRKIT\0"` · `kind [u8; 8]` · `version u32` · `reserved u32` · `payload_len u64` ·
//! `payload_crc32 u32` · zero padding. The CRC covers the payload, so truncation and corruption
//! are caught on open.

use crate::error::{Error, IoContext, Result};
use crate::io::atomic::AtomicFile;
use crate::io::bytes::Bytes;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 8] = b"CLIRKIT\0";
pub const HEADER_LEN: usize = 64;

/// Which kind of file this is, e.g. `*b"IDTABLE\0"`.
pub type Kind = [u8; 8];

fn kind_name(kind: &Kind) -> String {
    String::from_utf8_lossy(kind)
        .trim_end_matches('\0')
        .to_string()
}

fn header(kind: &Kind, version: u32, payload_len: u64, crc: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(MAGIC);
    h[8..16].copy_from_slice(kind);
    h[16..20].copy_from_slice(&version.to_le_bytes());
    h[24..32].copy_from_slice(&payload_len.to_le_bytes());
    h[32..36].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Streams a payload into an atomically written file, computing its checksum on the way.
pub struct FileWriter {
    file: AtomicFile,
    path: PathBuf,
    kind: Kind,
    version: u32,
    len: u64,
    crc: crc32fast::Hasher,
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
        })
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.crc.update(bytes);
        self.len += bytes.len() as u64;
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
        let h = header(
            &self.kind,
            self.version,
            self.len,
            self.crc.clone().finalize(),
        );
        let w = self.file.writer();
        w.flush().at(&self.path)?;
        w.seek(SeekFrom::Start(0)).at(&self.path)?;
        w.write_all(&h).at(&self.path)?;
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

/// A memory-mapped checked file; [`MappedFile::payload`] is what followed the header.
pub struct MappedFile {
    payload: Bytes,
    path: PathBuf,
}

impl MappedFile {
    /// Map `path` and check magic, kind and version; with `verify`, also the payload checksum.
    pub fn open(path: impl AsRef<Path>, kind: Kind, version: u32, verify: bool) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mmap = Bytes::map(&path, false)?;
        if mmap.len() < HEADER_LEN || &mmap[0..8] != MAGIC {
            return Err(Error::format(&path, "not a clirkit file (bad magic bytes)"));
        }
        if mmap[8..16] != kind {
            return Err(Error::format(
                &path,
                format!(
                    "is a '{}' file, expected '{}'",
                    kind_name(mmap[8..16].try_into().unwrap()),
                    kind_name(&kind)
                ),
            ));
        }
        let found = u32::from_le_bytes(mmap[16..20].try_into().unwrap());
        if found != version {
            return Err(Error::format(
                &path,
                format!(
                    "format version {found}, but this clirkit reads version {version}; rebuild it"
                ),
            ));
        }
        let len = u64::from_le_bytes(mmap[24..32].try_into().unwrap());
        if (mmap.len() - HEADER_LEN) as u64 != len {
            return Err(Error::format(
                &path,
                format!(
                    "truncated or padded: header says {len} payload bytes, file has {}",
                    mmap.len() - HEADER_LEN
                ),
            ));
        }
        if verify {
            let want = u32::from_le_bytes(mmap[32..36].try_into().unwrap());
            let got = crc32fast::hash(&mmap[HEADER_LEN..]);
            if want != got {
                return Err(Error::format(
                    &path,
                    "checksum mismatch: the file is corrupt",
                ));
            }
        }
        Ok(MappedFile {
            payload: mmap.skip(HEADER_LEN),
            path,
        })
    }

    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The payload, for a reader that keeps only the bytes.
    pub fn into_payload(self) -> Bytes {
        self.payload
    }

    pub fn path(&self) -> &Path {
        &self.path
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
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        let c = open_error(KIND, 3);
        assert!(c.contains("checksum"), "{c}");
        bytes.pop();
        std::fs::write(&p, &bytes).unwrap();
        let t = open_error(KIND, 3);
        assert!(t.contains("truncated"), "{t}");
    }
}
