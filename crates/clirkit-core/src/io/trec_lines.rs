//! The one TREC line layer under every run and qrels reader: cutting a file into chunks at
//! newlines (for parallel parsers), errors located by byte offset and reported with file and
//! line, and the grammar of a run line ([`RunLine`]) and a qrels line ([`QrelsLines`]). Each
//! reader keeps its own representation; none re-implements the grammar. Its fast kernels for
//! run lines (a 64-byte-mask tokenizer, a division-free score parser) sit beside it in
//! [`super::run_line_kernels`], tested equal to it and falling back to it.
//!
//! Fields are separated by ASCII whitespace; a blank line is skipped.

use crate::error::{Error, IoContext, Result};
use crate::io::bytes::Bytes;
use crate::io::input::{read_input, Compression, BOM};
use rayon::prelude::*;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The bytes of a run or qrels file: decompressed, without a byte-order mark, and read rather
/// than mapped, so a file truncated meanwhile cannot kill the reader ([`crate::io::input`]).
/// A large plain file is read by all threads at once ([`read_plain_in_parallel`]).
pub fn read_bytes(path: &Path) -> Result<Bytes> {
    match read_plain_in_parallel(path)? {
        Some(bytes) => Ok(Bytes::from(bytes)),
        None => read_input(path).map(Bytes::from),
    }
}

/// Files from this size on are read in parallel pieces.
const PARALLEL_READ_BYTES: u64 = 8 << 20;

/// A large uncompressed file without a byte-order mark, read with positioned reads of disjoint
/// pieces on every thread: copying out of the page cache (and faulting in the buffer's pages)
/// is most of a sequential read's time, and it divides between cores. `None` when the file is
/// small, compressed or starts with a byte-order mark, or when its length changes while it is
/// read: then the one sequential reader ([`read_input`]) reads it, and sees what is there.
fn read_plain_in_parallel(path: &Path) -> Result<Option<Vec<u8>>> {
    let threads = rayon::current_num_threads();
    if threads < 2 {
        return Ok(None);
    }
    let Some((file, len)) = open_large_plain(path, PARALLEL_READ_BYTES)? else {
        return Ok(None);
    };
    // Zeroed by the allocator's fresh mapping, not by a pass over the bytes.
    let mut bytes = vec![0u8; len];
    let piece = len.div_ceil(threads * 4).max(1 << 20);
    let read = bytes
        .par_chunks_mut(piece)
        .enumerate()
        .try_for_each(|(i, out)| file.read_exact_at(out, (i * piece) as u64));
    match read {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e).at(path),
    }
    if grew(&file, len).at(path)? {
        return Ok(None);
    }
    Ok(Some(bytes))
}

/// `path` opened with its length, when it holds at least `min_len` bytes of plain text (not
/// compressed, no byte-order mark): a file the parallel readers may read in pieces by position.
pub fn open_large_plain(path: &Path, min_len: u64) -> Result<Option<(File, usize)>> {
    let file = File::open(path).at(path)?;
    let len = file.metadata().at(path)?.len();
    if len < min_len.max(4) {
        return Ok(None);
    }
    let mut head = [0u8; 4];
    file.read_exact_at(&mut head, 0).at(path)?;
    if Compression::of(&head) != Compression::Plain || head.starts_with(BOM) {
        return Ok(None);
    }
    Ok(usize::try_from(len).ok().map(|len| (file, len)))
}

/// Whether `file`, `len` bytes long when opened, has grown since (it has more to read).
pub fn grew(file: &File, len: usize) -> std::io::Result<bool> {
    Ok(file.read_at(&mut [0u8; 1], len as u64)? != 0)
}

/// Read a whole file as UTF-8 text (as [`read_bytes`]); invalid UTF-8 is a parse error naming
/// its line.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = read_input(path)?;
    String::from_utf8(bytes).map_err(|e| {
        let line = line_of(e.as_bytes(), e.utf8_error().valid_up_to());
        Error::parse(path, line, "not valid UTF-8")
    })
}

/// The size of a piece for the piece-by-piece readers: small enough to stay in cache between
/// reading and parsing.
pub const PIECE_BYTES: usize = 1 << 20;
/// How far past its end a piece is read at first, to find the end of its last line.
const LINE_MARGIN: usize = 4 << 10;

/// Read the lines of `file` (`len` bytes long) that start in the byte range `nominal`, and the
/// rest of the last one, into `buffer` (which then starts at file offset
/// `nominal.start.saturating_sub(1)`): the range of `buffer` they fill, empty when no line
/// starts there, or `None` when the file turns out shorter than `len`. Cutting a file into
/// consecutive ranges gives every line to exactly one of them: the piece-by-piece readers.
pub fn read_line_piece(
    file: &File,
    len: usize,
    nominal: Range<usize>,
    buffer: &mut Vec<u8>,
) -> std::io::Result<Option<Range<usize>>> {
    // One byte before the piece tells whether a line starts at its first byte.
    let from = nominal.start.saturating_sub(1);
    let mut to = (nominal.end + LINE_MARGIN).min(len);
    loop {
        buffer.resize(to - from, 0);
        if !read_fully(file, buffer, from)? {
            return Ok(None);
        }
        let start = if nominal.start == 0 {
            0
        } else {
            match memchr::memchr(b'\n', buffer) {
                Some(i) if from + i + 1 < nominal.end => i + 1,
                // No line starts in this piece: one long line began before it.
                _ => return Ok(Some(0..0)),
            }
        };
        // The last line starting before the piece's end ends at the first newline from
        // `nominal.end - 1` on.
        let last = nominal.end - 1 - from;
        match memchr::memchr(b'\n', &buffer[last..]) {
            Some(i) => return Ok(Some(start..last + i + 1)),
            None if to == len => return Ok(Some(start..buffer.len())),
            None => to = (to + (to - from)).min(len),
        }
    }
}

/// Fill `buffer` from `offset`; false when the file ends first.
fn read_fully(file: &File, buffer: &mut [u8], offset: usize) -> std::io::Result<bool> {
    match file.read_exact_at(buffer, offset as u64) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// Cut `bytes` into about `pieces` ranges of at least 64 KiB, each ending just after a newline
/// (or at the end), so each can be parsed on its own.
pub fn chunks(bytes: &[u8], pieces: usize) -> Vec<Range<usize>> {
    let step = (bytes.len() / pieces.max(1)).max(1 << 16);
    let mut out = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let target = start + step;
        let end = if target >= bytes.len() {
            bytes.len()
        } else {
            memchr::memchr(b'\n', &bytes[target - 1..]).map_or(bytes.len(), |i| target + i)
        };
        out.push(start..end);
        start = end;
    }
    out
}

/// The 1-based line holding byte `offset`.
pub fn line_of(bytes: &[u8], offset: usize) -> u64 {
    memchr::memchr_iter(b'\n', &bytes[..offset.min(bytes.len())]).count() as u64 + 1
}

/// A problem on a line, located by byte offset: counting lines is left until one is reported.
#[derive(Debug)]
pub struct LineError {
    pub offset: usize,
    pub message: String,
}

impl LineError {
    /// The crate error naming `path` and the line of `bytes` (the whole file) at fault.
    pub fn locate(self, path: &Path, bytes: &[u8]) -> Error {
        Error::parse(path, line_of(bytes, self.offset), self.message)
    }
}

/// `chunk` (starting at byte `base` of its file) as text.
pub fn check_utf8(chunk: &[u8], base: usize) -> std::result::Result<&str, LineError> {
    std::str::from_utf8(chunk).map_err(|e| LineError {
        offset: base + e.valid_up_to(),
        message: "not valid UTF-8".into(),
    })
}

/// The message for a (query, document) pair seen twice; `what` is "document" for runs and
/// "judgement of" for qrels.
pub fn duplicate_message(what: &str, doc: &str, qid: &str, first_line: u64) -> String {
    format!("duplicate {what} '{doc}' for query '{qid}' (first at line {first_line})")
}

/// The 1-based numbers of the first `limit` lines whose fields satisfy `matches` (used to word
/// an error, so it may take its time).
pub fn find_lines(bytes: &[u8], limit: usize, matches: impl Fn(&[&[u8]]) -> bool) -> Vec<u64> {
    let mut found = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let fields: Vec<&[u8]> = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty())
            .collect();
        if matches(&fields) {
            found.push(i as u64 + 1);
            if found.len() == limit {
                break;
            }
        }
    }
    found
}

/// Where a line's fields are, for [`for_each_line`]: the byte ranges (in the chunk) of its first
/// `N` fields, and how many fields it has in all.
pub struct LineFields<const N: usize> {
    pub ranges: [(usize, usize); N],
    pub count: usize,
}

/// The state of [`for_each_line`] between separators.
struct FieldCursor<const N: usize> {
    line: LineFields<N>,
    field_start: usize,
    line_start: usize,
}

impl<const N: usize> FieldCursor<N> {
    /// A byte below 0x21 at `at`: a field ends there if it is ASCII whitespace (other control
    /// bytes belong to their field, as in `split_ascii_whitespace`), and a line if it is `\n`.
    #[inline]
    fn low_byte<E>(
        &mut self,
        chunk: &[u8],
        at: usize,
        on_line: &mut impl FnMut(usize, &LineFields<N>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let byte = chunk[at];
        if !byte.is_ascii_whitespace() {
            return Ok(());
        }
        self.end_field(at);
        self.field_start = at + 1;
        if byte == b'\n' {
            self.end_line(at + 1, on_line)?;
        }
        Ok(())
    }

    /// The field (if any) from `field_start` ends at `at`.
    #[inline]
    fn end_field(&mut self, at: usize) {
        if at > self.field_start {
            if self.line.count < N {
                self.line.ranges[self.line.count] = (self.field_start, at);
            }
            self.line.count += 1;
        }
    }

    #[inline]
    fn end_line<E>(
        &mut self,
        next_line: usize,
        on_line: &mut impl FnMut(usize, &LineFields<N>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let line_start = std::mem::replace(&mut self.line_start, next_line);
        if self.line.count > 0 {
            on_line(line_start, &self.line)?;
        }
        self.line.count = 0;
        Ok(())
    }
}

/// Bytes below 0x21 (ASCII whitespace among them), found 8 at a time.
const LOW: u64 = 0x7F7F_7F7F_7F7F_7F7F;
const HIGH: u64 = 0x8080_8080_8080_8080;
/// Adding 0x5F to a byte's low 7 bits sets its high bit iff those bits are >= 0x21 (no carry out
/// of the byte: 0x7F + 0x5F < 0x100).
const ADD: u64 = 0x5F5F_5F5F_5F5F_5F5F;

/// The high bit of every byte of `word` that is below 0x21.
#[inline]
fn low_byte_mask(word: u64) -> u64 {
    !(((word & LOW) + ADD) | word) & HIGH
}

/// Call `on_line(line start, fields)` for every non-blank line of `chunk` (offsets within the
/// chunk), the fields split on ASCII whitespace exactly as `str::split_ascii_whitespace` does,
/// but finding the separators 8 bytes at a time: the tokenizer of the big-file run readers.
pub fn for_each_line<const N: usize, E>(
    chunk: &[u8],
    mut on_line: impl FnMut(usize, &LineFields<N>) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let mut cursor = FieldCursor {
        line: LineFields {
            ranges: [(0, 0); N],
            count: 0,
        },
        field_start: 0,
        line_start: 0,
    };
    let words = chunk.len() / 8;
    for w in 0..words {
        let at = w * 8;
        let word = u64::from_le_bytes(chunk[at..at + 8].try_into().expect("8 bytes"));
        let mut mask = low_byte_mask(word);
        while mask != 0 {
            cursor.low_byte(
                chunk,
                at + (mask.trailing_zeros() / 8) as usize,
                &mut on_line,
            )?;
            mask &= mask - 1;
        }
    }
    for at in words * 8..chunk.len() {
        if chunk[at] < 0x21 {
            cursor.low_byte(chunk, at, &mut on_line)?;
        }
    }
    cursor.end_field(chunk.len());
    cursor.end_line(chunk.len(), &mut on_line)
}

/// Upper bound on the non-blank lines of `chunk`: its newlines, plus one for a last line
/// without one.
pub fn max_lines(chunk: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', chunk).count()
        + usize::from(chunk.last().is_some_and(|&b| b != b'\n'))
}

/// The first `N` fields of `line` and how many it has in all.
#[inline]
fn split_fields<const N: usize>(line: &str) -> ([&str; N], usize) {
    let mut fields = [""; N];
    let mut count = 0;
    for field in line.split_ascii_whitespace() {
        if count < N {
            fields[count] = field;
        }
        count += 1;
    }
    (fields, count)
}

/// One line of a run file: `qid Q0 docid rank score [tag]` (the rank is ignored, as trec_eval
/// ignores it; the tag may be missing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunLine<'a> {
    pub qid: &'a str,
    pub doc: &'a str,
    pub score: f64,
}

impl<'a> RunLine<'a> {
    /// The checks of a non-blank line with `count` fields, the fifth being `score_text`: the
    /// score, for parsers that find the fields themselves (the qid and docid are the first and
    /// third fields).
    #[inline]
    pub fn checked_score(count: usize, score_text: &str) -> std::result::Result<f64, String> {
        if !(5..=6).contains(&count) {
            return Err(format!(
                "expected 6 columns 'qid Q0 docid rank score tag', found {count}"
            ));
        }
        let score = parse_score(score_text)
            .ok_or_else(|| format!("score '{score_text}' is not a number"))?;
        if !score.is_finite() {
            return Err(format!("score '{score_text}' is not finite"));
        }
        Ok(score)
    }

    /// Parse one line; `None` for a blank line.
    #[inline]
    pub fn parse(line: &'a str) -> std::result::Result<Option<Self>, String> {
        let (fields, count) = split_fields::<6>(line);
        if count == 0 {
            return Ok(None);
        }
        let score = Self::checked_score(count, fields[4])?;
        Ok(Some(RunLine {
            qid: fields[0],
            doc: fields[2],
            score,
        }))
    }
}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Parse a score as C's `atof` would (correctly rounded double). Plain decimals with at most 15
/// significant digits take an exact fast path (mantissa and power of ten are exact doubles, so
/// one division rounds correctly); everything else goes to the standard parser.
#[inline]
pub fn parse_score(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let mut mantissa: u64 = 0;
    let mut n_digits = 0;
    let mut frac_digits = 0;
    let mut seen_dot = false;
    let mut plain = !digits.is_empty();
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                mantissa = mantissa.wrapping_mul(10).wrapping_add((c - b'0') as u64);
                n_digits += 1;
                if seen_dot {
                    frac_digits += 1;
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => {
                plain = false;
                break;
            }
        }
    }
    if plain && n_digits > 0 && n_digits <= 15 {
        let v = mantissa as f64 / POW10[frac_digits];
        return Some(if neg { -v } else { v });
    }
    s.parse::<f64>().ok()
}

/// One judgement of a qrels file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QrelsLine<'a> {
    pub qid: &'a str,
    /// TREC's second column (ndeval's subtopic); empty on BEIR lines.
    pub subtopic: &'a str,
    pub doc: &'a str,
    pub label: i32,
}

/// Parses the lines of a qrels file in order: TREC `qid iter docid rel` or BEIR TSV `query-id
/// corpus-id score`, whose header is recognised as a first non-blank line of three columns with
/// a non-numeric label. Labels are integers (or floats without a fraction, within `i32`).
#[derive(Debug, Default)]
pub struct QrelsLines {
    seen_content: bool,
}

impl QrelsLines {
    /// A parser for the lines after a file's first non-blank one, where no header is looked
    /// for: for readers that parse a file in chunks.
    pub fn past_first_line() -> Self {
        QrelsLines { seen_content: true }
    }

    /// The judgement on `line`; `None` for a blank line or the BEIR header.
    pub fn parse<'a>(
        &mut self,
        line: &'a str,
    ) -> std::result::Result<Option<QrelsLine<'a>>, String> {
        let (f, count) = split_fields::<4>(line);
        let (qid, subtopic, doc, rel) = match count {
            0 => return Ok(None),
            3 => (f[0], "", f[1], f[2]),
            4 => (f[0], f[1], f[2], f[3]),
            n => {
                return Err(format!(
                    "expected 'qid 0 docid rel' or 'query-id corpus-id score', found {n} columns"
                ))
            }
        };
        let is_first = !std::mem::replace(&mut self.seen_content, true);
        match parse_label(rel) {
            Some(label) => Ok(Some(QrelsLine {
                qid,
                subtopic,
                doc,
                label,
            })),
            None if is_first && count == 3 && rel.parse::<f64>().is_err() => Ok(None),
            None => Err(format!("relevance '{rel}' is not an integer")),
        }
    }
}

fn parse_label(text: &str) -> Option<i32> {
    text.parse::<i32>()
        .ok()
        .or_else(|| match text.parse::<f64>() {
            Ok(r) if r.fract() == 0.0 && r.abs() <= i32::MAX as f64 => Some(r as i32),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_end_after_newlines_and_cover_everything() {
        let mut text = Vec::new();
        for i in 0..20_000 {
            text.extend_from_slice(format!("q{i} Q0 d{i} 1 0.5 t\n").as_bytes());
        }
        text.extend_from_slice(b"last line without newline");
        let ranges = chunks(&text, 8);
        assert!(ranges.len() > 1);
        assert_eq!(ranges[0].start, 0);
        assert_eq!(ranges.last().unwrap().end, text.len());
        for w in ranges.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_eq!(text[w[0].end - 1], b'\n');
        }
        assert!(chunks(b"", 4).is_empty());
    }

    #[test]
    fn low_byte_mask_flags_exactly_the_low_bytes() {
        for b in 0..=255u8 {
            for pos in 0..7 {
                let mut bytes = [b'x'; 8];
                bytes[pos] = b;
                // a low byte next to a high byte must not leak into it
                bytes[pos + 1] = 0xFF;
                let want = if b < 0x21 { 0x80u64 << (8 * pos) } else { 0 };
                assert_eq!(
                    low_byte_mask(u64::from_le_bytes(bytes)),
                    want,
                    "{b:#x} at {pos}"
                );
            }
        }
    }

    #[test]
    fn for_each_line_splits_as_split_ascii_whitespace() {
        let alphabet: &[u8] = b"ab \t\n\r\x0b\x0c\x01Q\xff";
        let mut x: u64 = 7;
        for len in 0..400 {
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    alphabet[(x >> 33) as usize % alphabet.len()]
                })
                .collect();
            let mut expected = Vec::new();
            let mut start = 0;
            for line in text.split(|&b| b == b'\n') {
                let fields: Vec<&[u8]> = line
                    .split(|b| b.is_ascii_whitespace())
                    .filter(|f| !f.is_empty())
                    .collect();
                if !fields.is_empty() {
                    expected.push((
                        start,
                        fields.len(),
                        fields.into_iter().take(3).collect::<Vec<_>>(),
                    ));
                }
                start += line.len() + 1;
            }
            let mut found = Vec::new();
            for_each_line::<3, ()>(&text, |line_start, line| {
                let shown = line.count.min(3);
                let fields = line.ranges[..shown]
                    .iter()
                    .map(|&(a, b)| &text[a..b])
                    .collect::<Vec<_>>();
                found.push((line_start, line.count, fields));
                Ok(())
            })
            .unwrap();
            assert_eq!(found, expected, "{text:?}");
        }
        assert_eq!(max_lines(b""), 0);
        assert_eq!(max_lines(b"a\n\nb"), 3);
        assert_eq!(max_lines(b"a\n"), 1);
    }

    #[test]
    fn run_lines() {
        assert_eq!(
            RunLine::parse("q1\tQ0 d7  3 -0.25").unwrap(),
            Some(RunLine {
                qid: "q1",
                doc: "d7",
                score: -0.25
            })
        );
        assert_eq!(RunLine::parse(" \r").unwrap(), None);
        let e = RunLine::parse("q Q0 d 1").unwrap_err();
        assert_eq!(
            e,
            "expected 6 columns 'qid Q0 docid rank score tag', found 4"
        );
        assert_eq!(
            RunLine::parse("q Q0 d 1 high x").unwrap_err(),
            "score 'high' is not a number"
        );
        assert_eq!(
            RunLine::parse("q Q0 d 1 inf x").unwrap_err(),
            "score 'inf' is not finite"
        );
    }

    #[test]
    fn qrels_lines_and_the_beir_header() {
        let mut lines = QrelsLines::default();
        assert_eq!(lines.parse("").unwrap(), None);
        assert_eq!(lines.parse("query-id\tcorpus-id\tscore").unwrap(), None);
        let j = lines.parse("q1\td1\t2.0").unwrap().unwrap();
        assert_eq!((j.qid, j.doc, j.label), ("q1", "d1", 2));
        assert!(lines.parse("query-id corpus-id score").is_err());
        let mut lines = QrelsLines::default();
        assert_eq!(lines.parse("1 0 184 -1").unwrap().unwrap().label, -1);
        assert!(lines
            .parse("1 0 184 1.5")
            .unwrap_err()
            .contains("not an integer"));
        assert!(lines.parse("1 0 184 1e10").is_err());
        assert!(lines
            .parse("1 0 1 2 3")
            .unwrap_err()
            .contains("found 5 columns"));
    }

    #[test]
    fn fast_score_path_is_exact() {
        for s in [
            "0",
            "1.5",
            "-0.25",
            "12.345678",
            "0.1",
            "123456789012345",
            "3.14159265358979",
            "+7",
            "1e-3",
            "1.",
            ".5",
        ] {
            assert_eq!(parse_score(s), s.parse::<f64>().ok(), "{s}");
        }
        assert_eq!(parse_score("1.2.3"), None);
        assert_eq!(parse_score("-"), None);
        let mut x: u64 = 12345;
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (x >> 11) as f64 / (1u64 << 53) as f64 * 100.0;
            let s = format!("{v:.6}");
            assert_eq!(parse_score(&s), s.parse::<f64>().ok(), "{s}");
        }
    }
}
