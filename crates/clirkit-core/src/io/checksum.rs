//! The one checksum of clirkit's index files: CRC32 (`crc32fast`), recorded per file in the
//! index manifest as a [`FileDigest`] (size and CRC) and checked in full by [`verify_file`].
//!
//! A checked file (one with the [`crate::io::format`] header) already carries its payload's CRC in
//! its header, so its digest is read from the header (no second pass over a large file at
//! build time, and a cheap comparison at open); any other file's digest is the CRC of all of it.

use crate::error::{Error, IoContext, Result};
use crate::io::bytes::Bytes;
use crate::io::format::{check_header, chunk_crcs, read_u32, Header, Kind, HEADER_LEN};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// A file's size and checksum, as recorded in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    pub bytes: u64,
    pub crc32: u32,
}

/// CRC32 of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The header of a checked file of `size` bytes, if `bytes` start with a consistent one.
fn checked_header(bytes: &[u8], size: u64) -> Option<Header> {
    Header::parse(bytes).filter(|h| h.file_len() == Some(size))
}

fn read_header(file: &mut File, path: &Path) -> Result<Vec<u8>> {
    let mut header = Vec::with_capacity(HEADER_LEN);
    file.take(HEADER_LEN as u64)
        .read_to_end(&mut header)
        .at(path)?;
    Ok(header)
}

/// CRC32 of `already` followed by everything `file` has left to read.
fn crc_of_rest(already: &[u8], file: &mut File, path: &Path) -> Result<u32> {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(already);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).at(path)?;
        if n == 0 {
            return Ok(hasher.finalize());
        }
        hasher.update(&buf[..n]);
    }
}

/// The digest to record for `path`: a checked file's header CRC, else the CRC of the whole file.
pub fn digest_file(path: &Path) -> Result<FileDigest> {
    let mut file = File::open(path).at(path)?;
    let bytes = file.metadata().at(path)?.len();
    let header = read_header(&mut file, path)?;
    let crc32 = match checked_header(&header, bytes) {
        Some(h) => h.payload_crc,
        None => crc_of_rest(&header, &mut file, path)?,
    };
    Ok(FileDigest { bytes, crc32 })
}

/// The cheap check done at open: `path`'s size and (for a checked file) its header's CRC agree
/// with the manifest's record. One small read; the payload is not read.
pub fn check_recorded(path: &Path, want: &FileDigest) -> Result<()> {
    let mut file = File::open(path).at(path)?;
    let bytes = file.metadata().at(path)?.len();
    if bytes != want.bytes {
        return Err(Error::format(
            path,
            format!(
                "has {bytes} bytes, the manifest records {}: the file is corrupt or from another build",
                want.bytes
            ),
        ));
    }
    let header = read_header(&mut file, path)?;
    if let Some(h) = checked_header(&header, bytes) {
        if h.payload_crc != want.crc32 {
            return Err(Error::format(
                path,
                "its checksum disagrees with the manifest's: the file is corrupt or from another build",
            ));
        }
    }
    Ok(())
}

/// The full check (`verify`): every byte of the checked file `path` against the manifest's
/// record and against what its kind expects: its header (magic, `kind`, `version`, lengths, chunk
/// length; unused bytes zero), its payload's CRC and its chunk CRCs.
pub fn verify_file(path: &Path, want: &FileDigest, kind: Kind, version: u32) -> Result<()> {
    check_recorded(path, want)?;
    let bytes = Bytes::map(path, true)?;
    let corrupt = |what: &str| Error::format(path, format!("{what}: the file is corrupt"));
    let h = check_header(path, &bytes, want.bytes, kind, version)?;
    if !Header::unused_bytes_are_zero(&bytes) {
        return Err(corrupt("header has non-zero unused bytes"));
    }
    let payload_end = HEADER_LEN + h.payload_len as usize;
    let (payload, trailer) = (&bytes[HEADER_LEN..payload_end], &bytes[payload_end..]);
    for (i, crc) in chunk_crcs(payload, h.chunk_len).enumerate() {
        if crc != read_u32(trailer, 4 * i) {
            return Err(corrupt(&format!("checksum mismatch in chunk {i}")));
        }
    }
    if crc32(payload) != want.crc32 {
        return Err(corrupt("checksum mismatch"));
    }
    Ok(())
}
