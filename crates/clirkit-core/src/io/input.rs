//! The one way clirkit opens an input file it did not write (corpora, queries, topics, runs,
//! qrels, id lists): gzip and zstd streams are decompressed, recognised by their magic bytes
//! (a `.gz`/`.zst` name is not required, and no UTF-8 text can start with either magic), and a
//! UTF-8 byte-order mark at the start is skipped, so it never becomes part of the first id.
//!
//! Inputs are read with `read()`, never memory-mapped: a mapping of a file that another process
//! truncates kills the reader with SIGBUS, while a read just sees the shorter file (and its
//! parse reports what is missing). Index files, which clirkit writes and replaces only by
//! rename, are mapped elsewhere ([`crate::io::bytes`]).

use crate::error::{IoContext, Result};
use crate::progress::{CountedRead, Progress};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The UTF-8 byte-order mark some editors put at the start of a text file.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
const BUFFER_BYTES: usize = 1 << 20;

/// How an input file's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Plain,
    Gzip,
    Zstd,
}

impl Compression {
    pub(crate) fn of(head: &[u8]) -> Self {
        if head.starts_with(GZIP_MAGIC) {
            Compression::Gzip
        } else if head.starts_with(ZSTD_MAGIC) {
            Compression::Zstd
        } else {
            Compression::Plain
        }
    }
}

/// `path`'s extension, looking through a compression suffix (`topics.tsv.gz` -> `tsv`).
pub fn content_extension(path: &Path) -> Option<&str> {
    let ext = path.extension().and_then(|e| e.to_str());
    match ext {
        Some("gz" | "zst" | "zstd") => Path::new(path.file_stem()?)
            .extension()
            .and_then(|e| e.to_str()),
        other => other,
    }
}

/// Open `path` for reading as text: decompressed, its byte-order mark skipped.
pub fn open_input(path: &Path) -> Result<Box<dyn BufRead + Send>> {
    open_input_counted(path, &Progress::default())
}

/// [`open_input`], adding the bytes read from disk (compressed or not) to `progress`, whose total
/// is the file's size.
pub fn open_input_counted(path: &Path, progress: &Progress) -> Result<Box<dyn BufRead + Send>> {
    let file = CountedRead::new(File::open(path).at(path)?, progress);
    let mut raw = BufReader::with_capacity(BUFFER_BYTES, file);
    let compression = Compression::of(raw.fill_buf().at(path)?);
    let reader: Box<dyn BufRead + Send> = match compression {
        Compression::Plain => Box::new(raw),
        // Multi-member: `pigz`, `bgzip` and `cat a.gz b.gz` write several gzip members.
        Compression::Gzip => Box::new(BufReader::with_capacity(
            BUFFER_BYTES,
            flate2::bufread::MultiGzDecoder::new(raw),
        )),
        Compression::Zstd => Box::new(BufReader::with_capacity(
            BUFFER_BYTES,
            zstd::stream::read::Decoder::with_buffer(raw).at(path)?,
        )),
    };
    skip_bom(reader).at(path)
}

/// The whole (decompressed) content of `path`, its byte-order mark removed.
pub fn read_input(path: &Path) -> Result<Vec<u8>> {
    let mut reader = open_input(path)?;
    let mut bytes = Vec::new();
    if let Ok(meta) = std::fs::metadata(path) {
        bytes.reserve(meta.len() as usize);
    }
    reader.read_to_end(&mut bytes).at(path)?;
    Ok(bytes)
}

/// `reader` without a byte-order mark at its start. The first bytes are read out whole (a
/// decoder may hand out fewer than three at a time) and put back unless they are the mark.
fn skip_bom(mut reader: Box<dyn BufRead + Send>) -> std::io::Result<Box<dyn BufRead + Send>> {
    let mut head = Vec::with_capacity(BOM.len());
    (&mut reader)
        .take(BOM.len() as u64)
        .read_to_end(&mut head)?;
    if head == BOM {
        return Ok(reader);
    }
    Ok(Box::new(std::io::Cursor::new(head).chain(reader)))
}

/// Strip a byte-order mark from the start of `bytes`.
pub fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    pub(crate) fn zstd(bytes: &[u8]) -> Vec<u8> {
        zstd::stream::encode_all(bytes, 3).unwrap()
    }

    #[test]
    fn decompresses_by_magic_and_skips_the_bom() {
        let text = "\u{feff}a\tb\nc\td\n".as_bytes();
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [
            ("plain.tsv", text.to_vec()),
            ("any.tsv.gz", gzip(text)),
            ("any.zst", zstd(text)),
            (
                "two-members.gz",
                [gzip(&text[..5]), gzip(&text[5..])].concat(),
            ),
            // Concatenated frames, as parallel compressors (pzstd, benches' corpus generator) write.
            (
                "two-frames.zst",
                [zstd(&text[..5]), zstd(&text[5..])].concat(),
            ),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(read_input(&path).unwrap(), b"a\tb\nc\td\n", "{name}");
        }
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert!(read_input(&empty).unwrap().is_empty());
        let short = dir.path().join("short");
        std::fs::write(&short, b"\xEF\xBB").unwrap();
        assert_eq!(read_input(&short).unwrap(), b"\xEF\xBB");
    }

    #[test]
    fn a_corrupt_stream_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl.gz");
        let mut bytes = gzip(b"{\"_id\": \"a\"}\n");
        bytes.truncate(bytes.len() - 6);
        std::fs::write(&path, bytes).unwrap();
        let e = read_input(&path).unwrap_err().to_string();
        assert!(e.contains("bad.jsonl.gz"), "{e}");
    }

    #[test]
    fn content_extension_looks_through_compression() {
        for (name, ext) in [
            ("t.tsv.gz", Some("tsv")),
            ("t.tsv", Some("tsv")),
            ("q.jsonl.zst", Some("jsonl")),
            ("x.gz", None),
        ] {
            assert_eq!(content_extension(Path::new(name)), ext, "{name}");
        }
    }
}
