//! Streaming JSONL corpora and queries (BEIR: `_id`/`title`/`text`; NeuCLIR: `id`/`title`/`text`)
//! and TSV topics. Lines are read one at a time so memory stays bounded whatever the corpus
//! size; every error names the file and line.

use crate::error::{Error, IoContext, Result};
use serde_json::{Map, Value};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Reads a file line by line, keeping the 1-based line number.
pub struct LineReader {
    path: PathBuf,
    reader: BufReader<File>,
    line_no: u64,
}

impl LineReader {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).at(&path)?;
        Ok(LineReader {
            reader: BufReader::with_capacity(1 << 20, file),
            path,
            line_no: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read the next line (without its `\n` / `\r\n`) into `buf`; returns its line number, or
    /// `None` at end of file.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        buf.clear();
        let n = self.reader.read_until(b'\n', buf).at(&self.path)?;
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
                    if !buf.iter().all(u8::is_ascii_whitespace) {
                        out.push((line, std::mem::take(&mut buf)));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Which JSON fields hold the id, the text (joined with a space, in order) and the language.
#[derive(Debug, Clone)]
pub struct FieldSpec {
    pub id_fields: Vec<String>,
    pub text_fields: Vec<String>,
    pub lang_field: Option<String>,
}

impl FieldSpec {
    /// Corpus documents: BEIR's `_id` or NeuCLIR's `id`/`docid`; `title` then `text`.
    pub fn corpus() -> Self {
        FieldSpec {
            id_fields: ["_id", "id", "docid", "doc_id"].map(String::from).to_vec(),
            text_fields: ["title", "text"].map(String::from).to_vec(),
            lang_field: None,
        }
    }

    /// Queries: `_id`/`id`/`qid`/`query_id`; text from `text`, else `query`, else `title`.
    pub fn queries() -> Self {
        FieldSpec {
            id_fields: ["_id", "id", "qid", "query_id"].map(String::from).to_vec(),
            text_fields: vec!["text".into()],
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
}

/// A parsed record: a corpus document or a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub id: String,
    pub text: String,
    pub lang: Option<String>,
    pub line: u64,
}

fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
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
pub fn parse_record(path: &Path, line: u64, bytes: &[u8], spec: &FieldSpec) -> Result<Record> {
    let text = utf8_line(path, line, bytes)?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::parse(path, line, format!("malformed JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(Error::parse(path, line, "expected a JSON object"));
    };
    record_from_object(path, line, &obj, spec)
}

fn record_from_object(
    path: &Path,
    line: u64,
    obj: &Map<String, Value>,
    spec: &FieldSpec,
) -> Result<Record> {
    let id = spec
        .id_fields
        .iter()
        .find_map(|f| obj.get(f))
        .ok_or_else(|| {
            Error::parse(
                path,
                line,
                format!("no id field (looked for {})", spec.id_fields.join(", ")),
            )
        })?;
    let id = scalar_string(id)
        .ok_or_else(|| Error::parse(path, line, "the id must be a string or a number"))?;
    if id.is_empty() || id.chars().any(char::is_whitespace) {
        return Err(Error::parse(
            path,
            line,
            format!("id {id:?} is empty or contains white space (TREC files cannot hold it)"),
        ));
    }
    let mut text = String::new();
    for field in &spec.text_fields {
        match obj.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
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
    let tsv = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("tsv") | Some("txt")
    );
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

fn parse_tsv_record(path: &Path, line: u64, bytes: &[u8]) -> Result<Record> {
    let text = utf8_line(path, line, bytes)?;
    let (id, body) = text
        .split_once('\t')
        .ok_or_else(|| Error::parse(path, line, "expected 'id<TAB>text'"))?;
    let id = id.trim();
    if id.is_empty() {
        return Err(Error::parse(path, line, "empty id"));
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
        let (_d, p) = file(
            b"{\"_id\": \"a\", \"text\": \"x\"}\n{\"_id\": \"b\", \"text\": \n",
            "c.jsonl",
        );
        let e = read_records(&p, &FieldSpec::corpus())
            .unwrap_err()
            .to_string();
        assert!(e.contains("c.jsonl:2: malformed JSON"), "{e}");

        let (_d, p) = file(b"{\"_id\": \"a\", \"text\": \"\xff\"}\n", "c.jsonl");
        let e = read_records(&p, &FieldSpec::corpus())
            .unwrap_err()
            .to_string();
        assert!(e.contains(":1: not valid UTF-8"), "{e}");

        let (_d, p) = file(b"{\"title\": \"x\"}\n", "c.jsonl");
        let e = read_records(&p, &FieldSpec::corpus())
            .unwrap_err()
            .to_string();
        assert!(e.contains(":1: no id field"), "{e}");

        let (_d, p) = file(b"{\"_id\": \"a\"}\n{\"_id\": \"a\"}\n", "c.jsonl");
        let e = read_records(&p, &FieldSpec::corpus())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("duplicate id 'a' at line 2 (first seen at line 1)"),
            "{e}"
        );
    }

    #[test]
    fn tsv_topics() {
        let (_d, p) = file(b"q1\thello world\nq2\tsecond\n", "topics.tsv");
        let recs = read_records(&p, &FieldSpec::queries()).unwrap();
        assert_eq!(recs[1].text, "second");
    }
}
