//! Lines of an input file, the layer every record reader stands on: read one at a time (or in
//! blocks of numbered lines in one buffer) so memory stays bounded whatever the file size, through
//! [`crate::io::input`] (gzip and zstd decompressed, a byte-order mark skipped), each under a
//! record-length cap ([`max_record_bytes`]) with errors naming the file and line; and a plain
//! file cut into ranges of whole lines for sharded builds ([`split_lines`]).

use crate::error::{Error, IoContext, Result};
use crate::io::input::{open_input_counted, Compression, BOM};
use crate::progress::{CountedRead, Progress};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The longest record (line, without its line break) any reader accepts by default: 64 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 << 20;
/// The environment variable setting the limit for a process (a number of bytes).
pub const MAX_RECORD_ENV: &str = "CLIRKIT_MAX_RECORD_BYTES";
static MAX_RECORD_BYTES: AtomicUsize = AtomicUsize::new(0); // 0: not yet read from the environment

/// The record-length limit of every [`LineReader`]: [`set_max_record_bytes`]'s value, else
/// `CLIRKIT_MAX_RECORD_BYTES`, else [`DEFAULT_MAX_RECORD_BYTES`]. A compressed input can expand
/// a thousandfold, so without a limit one line of a small file could take all memory.
pub fn max_record_bytes() -> usize {
    match MAX_RECORD_BYTES.load(Ordering::Relaxed) {
        0 => {
            let limit = std::env::var(MAX_RECORD_ENV)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&n| n > 0)
                .unwrap_or(DEFAULT_MAX_RECORD_BYTES);
            MAX_RECORD_BYTES.store(limit, Ordering::Relaxed);
            limit
        }
        n => n,
    }
}

/// Set the record-length limit for the whole process (at least 1 byte).
pub fn set_max_record_bytes(limit: usize) -> Result<()> {
    if limit == 0 {
        return Err(Error::invalid(
            "the record-length limit must be at least 1 byte",
        ));
    }
    MAX_RECORD_BYTES.store(limit, Ordering::Relaxed);
    Ok(())
}

/// Append the next line of `reader` (its `\n` included) to `buf`; `Ok(None)` when its record (the
/// line without `\n` or `\r\n`, as [`LineReader::next_line`] gives it) is longer than `limit` bytes,
/// read no further than `limit + 1` bytes of it (plus one buffer's worth); else the number of bytes
/// appended (0 at end of input).
fn read_line_capped(
    reader: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Option<usize>> {
    let start = buf.len();
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            // The last line, without a line break: all of it is the record.
            let total = buf.len() - start;
            return Ok((total <= limit).then_some(total));
        }
        let (used, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        // Without its line break yet, the record is at least all but a final '\r'.
        if !done && buf.len() - start + used > limit.saturating_add(1) {
            return Ok(None);
        }
        buf.extend_from_slice(&available[..used]);
        reader.consume(used);
        if done {
            let total = buf.len() - start;
            let carriage = total >= 2 && buf[buf.len() - 2] == b'\r';
            let record = total - 1 - usize::from(carriage);
            return Ok((record <= limit).then_some(total));
        }
    }
}

/// Reads a file line by line, keeping the 1-based line number; gzip and zstd files are
/// decompressed and a byte-order mark skipped ([`crate::io::input`]). A line longer than
/// [`max_record_bytes`] is an error naming the file and line, read no further.
pub struct LineReader {
    path: PathBuf,
    reader: Box<dyn BufRead + Send>,
    line_no: u64,
    max_record: usize,
}

impl LineReader {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_counted(path, None, &Progress::default())
    }

    /// Open only the lines of `path` in `range` (a part of a plain corpus cut by
    /// [`split_lines`]), numbered as in the whole file, so errors name the true line.
    pub fn open_range(path: impl AsRef<Path>, range: &LineRange) -> Result<Self> {
        Self::open_counted(path, Some(range), &Progress::default())
    }

    /// The lines of `path` (only those in `range` when given), adding the bytes read from disk
    /// to `progress`: a build's input read, counted against [`LineReader::disk_bytes`].
    pub fn open_counted(
        path: impl AsRef<Path>,
        range: Option<&LineRange>,
        progress: &Progress,
    ) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let Some(range) = range else {
            return Ok(LineReader {
                reader: open_input_counted(&path, progress)?,
                path,
                line_no: 0,
                max_record: max_record_bytes(),
            });
        };
        let mut file = open_plain(&path)?;
        file.seek(SeekFrom::Start(range.start)).at(&path)?;
        let counted = CountedRead::new(file.take(range.end - range.start), progress);
        let mut reader = BufReader::with_capacity(1 << 20, counted);
        if range.start == 0 && reader.fill_buf().at(&path)?.starts_with(BOM) {
            reader.consume(BOM.len());
        }
        Ok(LineReader {
            reader: Box::new(reader),
            path,
            line_no: range.first_line - 1,
            max_record: max_record_bytes(),
        })
    }

    /// The bytes [`LineReader::open_counted`] reads from disk for `path` (and `range`): the
    /// total its count reaches.
    pub fn disk_bytes(path: &Path, range: Option<&LineRange>) -> Result<u64> {
        match range {
            Some(range) => Ok(range.end - range.start),
            None => Ok(std::fs::metadata(path).at(path)?.len()),
        }
    }

    /// This reader with another record-length limit.
    pub fn with_max_record(mut self, limit: usize) -> Self {
        self.max_record = limit;
        self
    }

    /// One line appended to `buf` under the record-length limit: the bytes appended, 0 at the end.
    fn read_line(&mut self, buf: &mut Vec<u8>) -> Result<usize> {
        match read_line_capped(&mut self.reader, buf, self.max_record).at(&self.path)? {
            Some(n) => Ok(n),
            None => {
                let record_bytes = record_limit_text(self.max_record);
                Err(Error::parse(
                    &self.path,
                    self.line_no + 1,
                    format!(
                        "record longer than {record_bytes} (the limit; set {MAX_RECORD_ENV} to raise it)"
                    ),
                ))
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read the next line (without its `\n` / `\r\n`) into `buf`; returns its line number, or
    /// `None` at end of file.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        buf.clear();
        let n = self.read_line(buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.line_no += 1;
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        }
        Ok(Some(self.line_no))
    }

    /// Read up to `max_lines` non-blank lines as `(line number, bytes)`; empty at end of file.
    /// Batches like this let callers parse and analyze in parallel with bounded memory.
    pub fn next_chunk(&mut self, max_lines: usize) -> Result<Vec<(u64, Vec<u8>)>> {
        let mut out = Vec::with_capacity(max_lines);
        let mut buf = Vec::new();
        while out.len() < max_lines {
            match self.next_line(&mut buf)? {
                None => break,
                Some(line) => {
                    if !is_blank(&buf) {
                        out.push((line, std::mem::take(&mut buf)));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Read up to `max_lines` non-blank lines into `block` (replacing its contents), all in one
    /// buffer: no allocation per line. `block` is empty at end of file.
    pub fn next_block(&mut self, max_lines: usize, block: &mut LineBlock) -> Result<()> {
        block.bytes.clear();
        block.lines.clear();
        while block.lines.len() < max_lines {
            let start = block.bytes.len();
            let n = self.read_line(&mut block.bytes)?;
            if n == 0 {
                break;
            }
            self.line_no += 1;
            let mut end = block.bytes.len();
            if block.bytes[end - 1] == b'\n' {
                end -= 1;
                if end > start && block.bytes[end - 1] == b'\r' {
                    end -= 1;
                }
            }
            if is_blank(&block.bytes[start..end]) {
                block.bytes.truncate(start);
            } else {
                block.lines.push((self.line_no, start, end));
            }
        }
        Ok(())
    }
}

/// `limit` bytes in words: "64 MiB" when whole mebibytes, else "N bytes".
fn record_limit_text(limit: usize) -> String {
    if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{limit} bytes")
    }
}

/// A run of whole lines of a file: bytes `start..end`, the first of them line `first_line`
/// (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LineRange {
    pub start: u64,
    pub end: u64,
    pub first_line: u64,
}

/// `path` opened for reading by byte offset: a compressed file has no byte offsets to cut at.
fn open_plain(path: &Path) -> Result<File> {
    let mut file = File::open(path).at(path)?;
    let mut head = [0u8; 4];
    let n = file.read(&mut head).at(path)?;
    if Compression::of(&head[..n]) != Compression::Plain {
        return Err(Error::invalid(format!(
            "{}: a compressed corpus cannot be cut into shards by byte range; decompress it first",
            path.display()
        )));
    }
    file.seek(SeekFrom::Start(0)).at(path)?;
    Ok(file)
}

/// Cut the plain text file at `path` into `parts` ranges of whole lines of about equal size
/// (some empty when the file has fewer lines than parts), in one pass that counts lines.
pub fn split_lines(path: &Path, parts: usize) -> Result<Vec<LineRange>> {
    if parts == 0 {
        return Err(Error::invalid("cannot cut a file into 0 parts"));
    }
    let mut file = open_plain(path)?;
    let size = file.metadata().at(path)?.len();
    let targets: Vec<u64> = (1..parts as u64).map(|i| size * i / parts as u64).collect();
    // (byte, line number) where each part starts: the first line starting at or after its target.
    let mut starts = vec![(0u64, 1u64)];
    let (mut pos, mut line) = (0u64, 1u64);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).at(path)?;
        if n == 0 {
            break;
        }
        for at in memchr::memchr_iter(b'\n', &buf[..n]) {
            line += 1;
            let line_start = pos + at as u64 + 1;
            while starts.len() <= targets.len() && line_start >= targets[starts.len() - 1] {
                starts.push((line_start, line));
            }
        }
        pos += n as u64;
    }
    while starts.len() < parts {
        starts.push((size, line));
    }
    Ok((0..parts)
        .map(|i| LineRange {
            start: starts[i].0,
            end: starts.get(i + 1).map_or(size, |s| s.0),
            first_line: starts[i].1,
        })
        .collect())
}

/// A batch of lines read by [`LineReader::next_block`], stored back to back in one buffer.
#[derive(Debug, Default)]
pub struct LineBlock {
    bytes: Vec<u8>,
    /// (line number, start, end) of each line in `bytes`, without its line break.
    lines: Vec<(u64, usize, usize)>,
}

impl LineBlock {
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The `i`-th line: its number and its bytes.
    pub fn line(&self, i: usize) -> (u64, &[u8]) {
        let (line, start, end) = self.lines[i];
        (line, &self.bytes[start..end])
    }
}

/// A line of ASCII white space only, skipped as Python's `bytes.strip()` skips it (which, unlike
/// `u8::is_ascii_whitespace`, counts the vertical tab).
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|&b| b.is_ascii_whitespace() || b == 0x0b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::temp_file;

    #[test]
    fn blocks_hold_numbered_non_blank_lines() {
        let (_d, p) = temp_file("c.jsonl", b"a\r\n\n  \nb\nc");
        let mut reader = LineReader::open(&p).unwrap();
        let mut block = LineBlock::default();
        reader.next_block(2, &mut block).unwrap();
        assert_eq!(block.len(), 2);
        assert_eq!(block.line(0), (1, &b"a"[..]));
        assert_eq!(block.line(1), (4, &b"b"[..]));
        reader.next_block(2, &mut block).unwrap();
        assert_eq!(block.len(), 1);
        assert_eq!(block.line(0), (5, &b"c"[..]));
        reader.next_block(2, &mut block).unwrap();
        assert!(block.is_empty());
    }

    #[test]
    fn record_length_cap_stops_at_the_long_line_in_any_compression() {
        use crate::io::input::tests::{gzip, zstd};
        let long = format!(
            "{{\"_id\": \"b\", \"text\": \"{}\"}}\n",
            "a".repeat(3 << 20)
        );
        let plain = format!("{{\"_id\": \"a\"}}\r\n{long}{{\"_id\": \"c\"}}\n");
        for (name, bytes) in [
            ("c.jsonl", plain.as_bytes().to_vec()),
            ("c.jsonl.gz", gzip(plain.as_bytes())),
            ("c.jsonl.zst", zstd(plain.as_bytes())),
        ] {
            let (_d, p) = temp_file(name, &bytes);
            let mut reader = LineReader::open(&p).unwrap().with_max_record(1000);
            let mut buf = Vec::new();
            assert_eq!(reader.next_line(&mut buf).unwrap(), Some(1));
            let e = reader.next_line(&mut buf).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{name}:2: record longer than 1000 bytes")),
                "{e}"
            );
            // What was read of the long line: at most the limit and one read buffer (1 MiB).
            assert!(
                buf.len() <= 1002 + (1 << 20),
                "read {} bytes of it",
                buf.len()
            );
            // next_block stops the same way; a record of exactly the limit passes, "\r\n" after it too
            let mut block = LineBlock::default();
            let mut reader = LineReader::open(&p).unwrap().with_max_record(1000);
            assert!(reader.next_block(10, &mut block).is_err());
            let exact = long.len() - 1;
            let mut reader = LineReader::open(&p).unwrap().with_max_record(exact);
            reader.next_block(10, &mut block).unwrap();
            assert_eq!(block.len(), 3, "{name}");
        }
        assert_eq!(record_limit_text(DEFAULT_MAX_RECORD_BYTES), "64 MiB");
        assert!(set_max_record_bytes(0).is_err());
    }
}
