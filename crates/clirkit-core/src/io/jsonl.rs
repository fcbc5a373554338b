//! Streaming JSONL corpora and queries (BEIR: `_id`/`title`/`text`; NeuCLIR: `id`/`title`/`text`)
//! and TSV topics. Lines are read one at a time so memory stays bounded whatever the corpus
//! size; every error names the file and line.

use crate::error::{Error, IoContext, Result};
use crate::io::id_text::id_problem;
use crate::io::input::{content_extension, open_input, Compression, BOM};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
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
        let path = path.as_ref().to_path_buf();
        Ok(LineReader {
            reader: open_input(&path)?,
            path,
            line_no: 0,
            max_record: max_record_bytes(),
        })
    }

    /// Open only the lines of `path` in `range` (a part of a plain corpus cut by
    /// [`split_lines`]), numbered as in the whole file, so errors name the true line.
    pub fn open_range(path: impl AsRef<Path>, range: &LineRange) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mut file = open_plain(&path)?;
        file.seek(SeekFrom::Start(range.start)).at(&path)?;
        let mut reader = BufReader::with_capacity(1 << 20, file.take(range.end - range.start));
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

/// How a record's text comes from its text fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRule {
    /// Documents: the present fields joined with a space, in order; none present is an empty
    /// document.
    JoinPresent,
    /// Queries: the first field present (query files name their text differently); none
    /// present is an error, not a silently empty query.
    FirstPresent,
}

/// Which JSON fields hold the id, the text and the language.
#[derive(Debug, Clone)]
pub struct FieldSpec {
    pub id_fields: Vec<String>,
    pub text_fields: Vec<String>,
    pub text_rule: TextRule,
    pub lang_field: Option<String>,
}

impl FieldSpec {
    /// Corpus documents: BEIR's `_id` or NeuCLIR's `id`/`docid`; `title` then `text`.
    pub fn corpus() -> Self {
        FieldSpec {
            id_fields: ["_id", "id", "docid", "doc_id"].map(String::from).to_vec(),
            text_fields: ["title", "text"].map(String::from).to_vec(),
            text_rule: TextRule::JoinPresent,
            lang_field: None,
        }
    }

    /// Queries: `_id`/`id`/`qid`/`query_id`; text from `text`, else `query`, else `title`.
    pub fn queries() -> Self {
        FieldSpec {
            id_fields: ["_id", "id", "qid", "query_id"].map(String::from).to_vec(),
            text_fields: ["text", "query", "title"].map(String::from).to_vec(),
            text_rule: TextRule::FirstPresent,
            lang_field: None,
        }
    }

    pub fn with_text_fields(mut self, fields: &[&str]) -> Self {
        self.text_fields = fields.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn with_lang_field(mut self, field: Option<&str>) -> Self {
        self.lang_field = field.map(String::from);
        self
    }

    /// Every field name the spec reads: id fields, text fields, then the language field.
    fn slots(&self) -> Vec<&str> {
        let ids = self.id_fields.iter().chain(&self.text_fields);
        ids.chain(&self.lang_field).map(String::as_str).collect()
    }
}

/// A parsed record: a corpus document or a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub id: String,
    pub text: String,
    pub lang: Option<String>,
    pub line: u64,
}

/// Whether `literal` (a JSON number as written) is an integer: no fraction, no exponent.
fn is_integer_literal(literal: &str) -> bool {
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The value of an id field, read from its raw JSON: a string, or an integer kept exactly as
/// written (`99999999999999999999` stays so, never `1e+20`); a float is not an id.
fn id_value(raw: &RawValue) -> FieldValue<'_> {
    let text = raw.get().trim();
    match text.as_bytes().first() {
        Some(b'"') if !text.contains('\\') => {
            FieldValue::Str(Cow::Borrowed(&text[1..text.len() - 1]))
        }
        Some(b'"') => serde_json::from_str::<String>(text)
            .map_or(FieldValue::Other, |s| FieldValue::Str(Cow::Owned(s))),
        Some(b'n') => FieldValue::Null,
        _ if is_integer_literal(text) => FieldValue::Number(text.to_string()),
        _ => FieldValue::Other,
    }
}

/// An id read from its raw JSON by the one id rule: a string, or an integer kept exactly as
/// written; a float or any other value is refused, and so is an id [`id_problem`] refuses. The
/// error is the message alone (callers add file and line). For readers of other record shapes
/// (impact vectors) that take their id fields raw.
pub fn id_from_raw(raw: &RawValue) -> std::result::Result<String, String> {
    let id = match id_value(raw) {
        FieldValue::Str(s) => s.into_owned(),
        FieldValue::Number(n) => n,
        FieldValue::Null => return Err("the id is null".into()),
        FieldValue::Other => {
            return Err(format!(
                "id {} is not a string or an integer",
                raw.get().trim()
            ))
        }
    };
    match id_problem(&id) {
        Some(problem) => Err(problem),
        None => Ok(id),
    }
}

/// A line as UTF-8, or an error naming the file, line and column of the first bad byte.
fn utf8_line<'a>(path: &Path, line: u64, bytes: &'a [u8]) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|e| {
        Error::parse(
            path,
            line,
            format!(
                "not valid UTF-8 (bad byte at column {})",
                e.valid_up_to() + 1
            ),
        )
    })
}

/// Parse one JSONL line into a record, with errors naming `path:line`.
///
/// The fields named by `spec` are picked out while the JSON is read (everything else is skipped,
/// no `serde_json::Value` is built); a line this fast path does not accept is parsed again the
/// general way, so errors and results are always those of the general parser.
pub fn parse_record(path: &Path, line: u64, bytes: &[u8], spec: &FieldSpec) -> Result<Record> {
    let text = utf8_line(path, line, bytes)?;
    match fast_record(text, line, spec) {
        Some(record) => Ok(record),
        None => parse_record_value(path, line, text, spec),
    }
}

/// A JSON value of a field the spec names, as far as a record needs to know it.
#[derive(Clone)]
enum FieldValue<'a> {
    Str(Cow<'a, str>),
    /// An integer id as written in the file (other numbers are [`FieldValue::Other`] for ids;
    /// in text fields any number is refused anyway).
    Number(String),
    Null,
    Other,
}

impl<'de> serde::Deserialize<'de> for FieldValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FieldValue<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
                Ok(FieldValue::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
                Ok(FieldValue::Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
                Ok(FieldValue::Str(Cow::Owned(v)))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<Self::Value, E> {
                Ok(FieldValue::Number(serde_json::Number::from(v).to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<Self::Value, E> {
                Ok(FieldValue::Number(serde_json::Number::from(v).to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<Self::Value, E> {
                Ok(serde_json::Number::from_f64(v)
                    .map_or(FieldValue::Null, |n| FieldValue::Number(n.to_string())))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
                Ok(FieldValue::Other)
            }
            fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
                Ok(FieldValue::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(FieldValue::Other)
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(FieldValue::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// The values of a record's fields, in the order of [`FieldSpec::slots`]; the first `ids` slots
/// are id fields, read raw (see [`id_value`]).
struct SpecFields<'s> {
    slots: &'s [&'s str],
    ids: usize,
}

/// Which slot a key fills, if any.
struct SlotKey<'s>(&'s [&'s str]);

impl<'de> DeserializeSeed<'de> for SlotKey<'_> {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        struct V<'s>(&'s [&'s str]);
        impl<'de> Visitor<'de> for V<'_> {
            type Value = Option<usize>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, key: &str) -> std::result::Result<Self::Value, E> {
                Ok(self.0.iter().position(|&slot| slot == key))
            }
        }
        d.deserialize_str(V(self.0))
    }
}

impl<'de> DeserializeSeed<'de> for SpecFields<'_> {
    type Value = Vec<Option<FieldValue<'de>>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        struct V<'s>(&'s [&'s str], usize);
        impl<'de> Visitor<'de> for V<'_> {
            type Value = Vec<Option<FieldValue<'de>>>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut values: Vec<Option<FieldValue<'de>>> =
                    std::iter::repeat_with(|| None).take(self.0.len()).collect();
                while let Some(slot) = map.next_key_seed(SlotKey(self.0))? {
                    match slot {
                        // A repeated key keeps its last value, as `serde_json::Value` does.
                        Some(i) => {
                            let value: FieldValue = if i < self.1 {
                                id_value(map.next_value::<&RawValue>()?)
                            } else {
                                map.next_value()?
                            };
                            // A name the spec reads twice (say, as id and text) fills both.
                            let name = self.0[i];
                            for (slot, other) in values.iter_mut().zip(self.0).skip(i + 1) {
                                if *other == name {
                                    *slot = Some(value.clone());
                                }
                            }
                            values[i] = Some(value);
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(values)
            }
        }
        d.deserialize_map(V(self.slots, self.ids))
    }
}

/// A line of ASCII white space only, skipped as Python's `bytes.strip()` skips it (which, unlike
/// `u8::is_ascii_whitespace`, counts the vertical tab).
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|&b| b.is_ascii_whitespace() || b == 0x0b)
}

/// A text field without the white space around it, by Python's `str.strip()` rule (Unicode
/// white space and the four information separators U+001C..U+001F), which the Python reader
/// applies: both readers make the same text of a record (`tests/data/reader_cases.json`).
pub fn trim_text(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// [`trim_text`] keeping a borrowed field borrowed.
fn trimmed(s: Cow<'_, str>) -> Cow<'_, str> {
    match s {
        Cow::Borrowed(b) => Cow::Borrowed(trim_text(b)),
        Cow::Owned(o) if trim_text(&o).len() == o.len() => Cow::Owned(o),
        Cow::Owned(o) => Cow::Owned(trim_text(&o).to_string()),
    }
}

/// The record of `text` when it is a well-formed object with a usable id, string (or null)
/// text fields and, if asked for, a string language; `None` sends the line to the general parser.
fn fast_record(text: &str, line: u64, spec: &FieldSpec) -> Option<Record> {
    let slots = spec.slots();
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = SpecFields {
        slots: &slots,
        ids: spec.id_fields.len(),
    };
    let mut values = fields.deserialize(&mut de).ok()?;
    de.end().ok()?;
    let (ids, rest) = values.split_at_mut(spec.id_fields.len());
    let (texts, lang) = rest.split_at_mut(spec.text_fields.len());
    let id = match ids.iter_mut().find_map(Option::take)? {
        FieldValue::Str(s) => s,
        FieldValue::Number(n) => Cow::Owned(n),
        FieldValue::Null | FieldValue::Other => return None,
    };
    if id_problem(&id).is_some() {
        return None;
    }
    let mut parts: Vec<Cow<str>> = Vec::with_capacity(texts.len());
    let mut present = false;
    for value in texts.iter_mut() {
        match value.take() {
            None | Some(FieldValue::Null) => continue,
            Some(FieldValue::Str(s)) => {
                let text = trimmed(s);
                if !text.is_empty() {
                    parts.push(text);
                }
            }
            Some(_) => return None,
        }
        present = true;
        if spec.text_rule == TextRule::FirstPresent {
            break;
        }
    }
    if !present && spec.text_rule == TextRule::FirstPresent {
        return None;
    }
    let lang = match lang.first_mut() {
        None => None,
        Some(value) => match value.take()? {
            FieldValue::Str(s) => Some(s),
            _ => return None,
        },
    };
    Some(Record {
        id: id.into_owned(),
        text: parts.join(" "),
        lang: lang.map(Cow::into_owned),
        line,
    })
}

/// The general parser: the line as a `serde_json::Value`, then the record's checks.
fn parse_record_value(path: &Path, line: u64, text: &str, spec: &FieldSpec) -> Result<Record> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::parse(path, line, format!("malformed JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(Error::parse(path, line, "expected a JSON object"));
    };
    record_from_object(path, line, text, &obj, spec)
}

/// The id of a record, or why it has none: the first id field present decides (a null there is
/// an error, not a reason to look further); a string, or an integer as written in `line_text`.
fn record_id(
    line_text: &str,
    obj: &Map<String, Value>,
    spec: &FieldSpec,
) -> std::result::Result<String, String> {
    let (field, value) = spec
        .id_fields
        .iter()
        .find_map(|f| obj.get(f).map(|v| (f, v)))
        .ok_or_else(|| format!("no id field (looked for {})", spec.id_fields.join(", ")))?;
    let id = match value {
        Value::String(s) => s.clone(),
        Value::Null => return Err(format!("id field '{field}' is null")),
        Value::Number(_) => {
            // `Value` has rounded big integers to floats: take the literal from the line.
            let raws: std::collections::HashMap<String, &RawValue> =
                serde_json::from_str(line_text).map_err(|e| format!("malformed JSON: {e}"))?;
            let literal = raws[field.as_str()].get().trim();
            if !is_integer_literal(literal) {
                return Err(format!("id {literal} is not a string or an integer"));
            }
            literal.to_string()
        }
        other => return Err(format!("id {other} is not a string or an integer")),
    };
    match id_problem(&id) {
        Some(problem) => Err(problem),
        None => Ok(id),
    }
}

fn record_from_object(
    path: &Path,
    line: u64,
    line_text: &str,
    obj: &Map<String, Value>,
    spec: &FieldSpec,
) -> Result<Record> {
    let id = record_id(line_text, obj, spec).map_err(|m| Error::parse(path, line, m))?;
    let mut text = String::new();
    let mut present = false;
    for field in &spec.text_fields {
        match obj.get(field) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => {
                let s = trim_text(s);
                if !s.is_empty() {
                    if !text.is_empty() {
                        text.push(' ');
                    }
                    text.push_str(s);
                }
            }
            Some(_) => {
                return Err(Error::parse(
                    path,
                    line,
                    format!("field '{field}' of id '{id}' is not a string"),
                ))
            }
        }
        present = true;
        if spec.text_rule == TextRule::FirstPresent {
            break;
        }
    }
    if !present && spec.text_rule == TextRule::FirstPresent {
        return Err(Error::parse(
            path,
            line,
            format!(
                "'{id}' has no text field (looked for {})",
                spec.text_fields.join(", ")
            ),
        ));
    }
    let lang = match &spec.lang_field {
        None => None,
        Some(f) => Some(
            obj.get(f)
                .and_then(Value::as_str)
                .map(String::from)
                .ok_or_else(|| {
                    Error::parse(
                        path,
                        line,
                        format!("document '{id}' has no string language field '{f}'"),
                    )
                })?,
        ),
    };
    Ok(Record {
        id,
        text,
        lang,
        line,
    })
}

/// Read a whole (small) file of records: queries, or a corpus that fits in memory. `.tsv` and
/// `.txt` files are read as `id<TAB>text` lines; anything else as JSONL. Duplicate ids are an
/// error naming both lines.
pub fn read_records(path: impl AsRef<Path>, spec: &FieldSpec) -> Result<Vec<Record>> {
    let path = path.as_ref();
    let tsv = is_tsv(path);
    let mut reader = LineReader::open(path)?;
    let mut out = Vec::new();
    let mut seen = std::collections::HashMap::new();
    loop {
        let chunk = reader.next_chunk(4096)?;
        if chunk.is_empty() {
            break;
        }
        for (line, bytes) in chunk {
            let rec = if tsv {
                parse_tsv_record(path, line, &bytes)?
            } else {
                parse_record(path, line, &bytes, spec)?
            };
            if let Some(first) = seen.insert(rec.id.clone(), line) {
                return Err(Error::DuplicateId {
                    path: path.to_path_buf(),
                    id: rec.id,
                    line,
                    first_line: first,
                });
            }
            out.push(rec);
        }
    }
    Ok(out)
}

/// Whether records at `path` are `id<TAB>text` lines (`.tsv`, `.txt`, also compressed) rather
/// than JSONL.
pub fn is_tsv(path: &Path) -> bool {
    matches!(content_extension(path), Some("tsv" | "txt"))
}

fn parse_tsv_record(path: &Path, line: u64, bytes: &[u8]) -> Result<Record> {
    let text = utf8_line(path, line, bytes)?;
    let (id, body) = text
        .split_once('\t')
        .ok_or_else(|| Error::parse(path, line, "expected 'id<TAB>text'"))?;
    let id = id.trim();
    if let Some(problem) = id_problem(id) {
        return Err(Error::parse(path, line, problem));
    }
    Ok(Record {
        id: id.to_string(),
        text: body.to_string(),
        lang: None,
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(content: &[u8], name: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::File::create(&p)
            .unwrap()
            .write_all(content)
            .unwrap();
        (dir, p)
    }

    #[test]
    fn reads_beir_and_neuclir_records() {
        let (_d, p) = file(
            b"{\"_id\": \"d1\", \"title\": \"T\", \"text\": \"body\"}\n\n{\"id\": 7, \"text\": \"x\", \"lang\": \"fa\"}\r\n",
            "c.jsonl",
        );
        let recs = read_records(&p, &FieldSpec::corpus().with_lang_field(None)).unwrap();
        assert_eq!(recs[0].text, "T body");
        assert_eq!(recs[1].id, "7");
        assert_eq!(recs[1].line, 3);
    }

    #[test]
    fn errors_name_file_and_line() {
        let cases: [(&[u8], &str); 4] = [
            (
                b"{\"_id\": \"a\", \"text\": \"x\"}\n{\"_id\": \"b\", \"text\": \n",
                "c.jsonl:2: malformed JSON",
            ),
            (
                b"{\"_id\": \"a\", \"text\": \"\xff\"}\n",
                ":1: not valid UTF-8",
            ),
            (b"{\"title\": \"x\"}\n", ":1: no id field"),
            (
                b"{\"_id\": \"a\"}\n{\"_id\": \"a\"}\n",
                "duplicate id 'a' at line 2 (first seen at line 1)",
            ),
        ];
        for (contents, expected) in cases {
            let (_d, p) = file(contents, "c.jsonl");
            let e = read_records(&p, &FieldSpec::corpus())
                .unwrap_err()
                .to_string();
            assert!(e.contains(expected), "{e}");
        }
    }

    #[test]
    fn fast_path_equals_general_parser() {
        let path = Path::new("c.jsonl");
        let spec = FieldSpec::corpus().with_lang_field(Some("lang"));
        let title_as_id = FieldSpec::corpus().with_text_fields(&["_id", "text"]);
        let lines = [
            r#"{"_id": "d1", "title": "T", "text": "body", "lang": "en"}"#,
            r#"{"text": "esc\"aped \u00e9", "_id": "d\u0031", "lang": "fr", "x": [1, {"a": null}]}"#,
            r#"{"id": 7, "docid": "later", "text": null, "title": "", "lang": "de"}"#,
            r#"{"_id": -3.5e2, "text": "x", "lang": "en"}"#,
            r#"{"_id": 99999999999999999999, "text": "x", "lang": "en"}"#,
            r#"{"_id": null, "id": "b", "text": "x", "lang": "en"}"#,
            r#"{"_id": "a", "_id": "b", "text": "dup keys", "lang": "en"}"#,
            r#"{"_id": "a", "text": "no lang"}"#,
            r#"{"_id": "a", "text": 5, "lang": "en"}"#,
            r#"{"_id": "a b", "text": "x", "lang": "en"}"#,
            r#"{"_id": null, "text": "x", "lang": "en"}"#,
            r#"{"_id": "a", "text": "x", "lang": "en"} trailing"#,
            r#"[1, 2]"#,
            r#"{"_id": "a", "text": "#,
        ];
        for spec in [&spec, &title_as_id] {
            for (i, line) in lines.iter().enumerate() {
                let line_no = i as u64 + 1;
                let general = parse_record_value(path, line_no, line, spec);
                match fast_record(line, line_no, spec) {
                    Some(fast) => assert_eq!(Ok(&fast), general.as_ref().map_err(|_| ()), "{line}"),
                    None => assert!(general.is_err(), "fast path refused a good line: {line}"),
                }
                let parsed = parse_record(path, line_no, line.as_bytes(), spec);
                assert_eq!(
                    format!("{parsed:?}"),
                    format!("{:?}", parse_record_value(path, line_no, line, spec)),
                );
            }
        }
        let r = parse_record(path, 1, lines[1].as_bytes(), &spec).unwrap();
        assert_eq!((r.id.as_str(), r.text.as_str()), ("d1", "esc\"aped \u{e9}"));
        let r = parse_record(path, 1, lines[0].as_bytes(), &title_as_id).unwrap();
        assert_eq!(r.text, "d1 body");
    }

    #[test]
    fn blocks_hold_numbered_non_blank_lines() {
        let (_d, p) = file(b"a\r\n\n  \nb\nc", "c.jsonl");
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
    fn query_text_is_the_first_field_present() {
        let (_d, p) = file(
            b"{\"_id\":\"a\",\"text\":\"from text\",\"title\":\"t\"}\n\
              {\"qid\":\"b\",\"query\":\"from query\"}\n\
              {\"id\":\"c\",\"title\":\"from title\"}\n\
              {\"id\":\"d\",\"text\":\"\",\"title\":\"ignored\"}\n",
            "q.jsonl",
        );
        let recs = read_records(&p, &FieldSpec::queries()).unwrap();
        let got: Vec<(&str, &str)> = recs
            .iter()
            .map(|r| (r.id.as_str(), r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("a", "from text"),
                ("b", "from query"),
                ("c", "from title"),
                ("d", "")
            ]
        );
        let (_d, p) = file(
            b"{\"_id\":\"a\",\"text\":\"x\"}\n{\"_id\":\"b\",\"question\":\"y\"}\n",
            "q.jsonl",
        );
        let e = read_records(&p, &FieldSpec::queries())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("q.jsonl:2")
                && e.contains("'b' has no text field (looked for text, query, title)"),
            "{e}"
        );
    }

    /// The cases shared with the Python reader: both must read every line alike.
    #[test]
    fn shared_reader_cases() {
        let table: Value =
            serde_json::from_str(include_str!("../../../../tests/data/reader_cases.json")).unwrap();
        for case in table["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let spec = match case["kind"].as_str().unwrap() {
                "queries" => FieldSpec::queries(),
                _ => FieldSpec::corpus(),
            };
            let line = case["line"].as_str().unwrap();
            let got = parse_record(Path::new("c.jsonl"), 3, line.as_bytes(), &spec);
            match case.get("error").and_then(Value::as_str) {
                Some(expected) => {
                    let e = got.unwrap_err().to_string();
                    assert!(
                        e.starts_with("c.jsonl:3: ") && e.contains(expected),
                        "{name}: {e}"
                    );
                }
                None => {
                    let record = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert_eq!(record.id, case["id"].as_str().unwrap(), "{name}");
                    if let Some(text) = case.get("text").and_then(Value::as_str) {
                        assert_eq!(record.text, text, "{name}");
                    }
                }
            }
        }
    }

    #[test]
    fn byte_order_marks_and_compressed_files() {
        use crate::io::input::tests::{gzip, zstd};
        let plain = "\u{feff}{\"_id\": \"d1\", \"text\": \"x\"}\n{\"_id\": 5}\n".as_bytes();
        for (name, bytes) in [
            ("c.jsonl", plain.to_vec()),
            ("c.jsonl.gz", gzip(plain)),
            ("c.jsonl.zst", zstd(plain)),
        ] {
            let (_d, p) = file(&bytes, name);
            let recs = read_records(&p, &FieldSpec::corpus()).unwrap();
            let ids: Vec<&str> = recs.iter().map(|r| r.id.as_str()).collect();
            assert_eq!(ids, ["d1", "5"], "{name}");
        }
        let (_d, p) = file(&gzip(b"\xef\xbb\xbfq1\thello\nq 2\tx\n"), "topics.tsv.gz");
        let e = read_records(&p, &FieldSpec::queries())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("topics.tsv.gz:2: id \"q 2\" contains white space"),
            "{e}"
        );
        let (_d, p) = file(&zstd(b"{\"_id\": \"a\"}\n{\"_id\": 1.5}\n"), "c.jsonl.zst");
        let e = read_records(&p, &FieldSpec::corpus())
            .unwrap_err()
            .to_string();
        assert!(e.contains("c.jsonl.zst:2: id 1.5 is not a string"), "{e}");
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
            let (_d, p) = file(&bytes, name);
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

    #[test]
    fn tsv_topics() {
        let (_d, p) = file(b"q1\thello world\nq2\tsecond\n", "topics.tsv");
        let recs = read_records(&p, &FieldSpec::queries()).unwrap();
        assert_eq!(recs[1].text, "second");
    }
}
