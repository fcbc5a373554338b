//! Records of JSONL corpora and queries (BEIR: `_id`/`title`/`text`; NeuCLIR: `id`/`title`/`text`)
//! and TSV topics, one line each as [`super::lines`] reads them: the one record rule
//! ([`FieldSpec`]), the one id rule for raw JSON ids ([`id_from_raw`]), every error naming the
//! file and line.

use super::lines::LineReader;
use crate::error::{Error, Result};
use crate::io::id_text::id_problem;
use crate::io::input::content_extension;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::path::Path;

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
    /// A record without the language field (or with null there) has no language (`None`)
    /// instead of being an error: its reader supplies one.
    pub lang_optional: bool,
}

impl FieldSpec {
    /// Corpus documents: BEIR's `_id` or NeuCLIR's `id`/`docid`; `title` then `text`.
    pub fn corpus() -> Self {
        FieldSpec {
            id_fields: ["_id", "id", "docid", "doc_id"].map(String::from).to_vec(),
            text_fields: ["title", "text"].map(String::from).to_vec(),
            text_rule: TextRule::JoinPresent,
            lang_field: None,
            lang_optional: false,
        }
    }

    /// Queries: `_id`/`id`/`qid`/`query_id`; text from `text`, else `query`, else `title`.
    pub fn queries() -> Self {
        FieldSpec {
            id_fields: ["_id", "id", "qid", "query_id"].map(String::from).to_vec(),
            text_fields: ["text", "query", "title"].map(String::from).to_vec(),
            text_rule: TextRule::FirstPresent,
            lang_field: None,
            lang_optional: false,
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

    /// The same spec with the language field optional (see [`FieldSpec::lang_optional`]).
    pub fn with_optional_lang(mut self, optional: bool) -> Self {
        self.lang_optional = optional;
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
        Some(value) => match value.take() {
            Some(FieldValue::Str(s)) => Some(s),
            None | Some(FieldValue::Null) if spec.lang_optional => None,
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
        Some(f) => match obj.get(f) {
            Some(Value::String(s)) => Some(s.clone()),
            None | Some(Value::Null) if spec.lang_optional => None,
            _ => {
                return Err(Error::parse(
                    path,
                    line,
                    format!("document '{id}' has no string language field '{f}'"),
                ))
            }
        },
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
                return Err(Error::duplicate_id(path, rec.id, line, first));
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
    use crate::io::temp_file;

    #[test]
    fn tsv_topics() {
        let (_d, p) = temp_file("topics.tsv", b"q1\thello world\nq2\tsecond\n");
        let recs = read_records(&p, &FieldSpec::queries()).unwrap();
        let got: Vec<(&str, &str, u64)> = recs
            .iter()
            .map(|r| (r.id.as_str(), r.text.as_str(), r.line))
            .collect();
        assert_eq!(got, [("q1", "hello world", 1), ("q2", "second", 2)]);
    }

    #[test]
    fn reads_beir_and_neuclir_records() {
        let (_d, p) = temp_file("c.jsonl", b"{\"_id\": \"d1\", \"title\": \"T\", \"text\": \"body\"}\n\n{\"id\": 7, \"text\": \"x\", \"lang\": \"fa\"}\r\n");
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
            let (_d, p) = temp_file("c.jsonl", contents);
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
    fn query_text_is_the_first_field_present() {
        let (_d, p) = temp_file(
            "q.jsonl",
            b"{\"_id\":\"a\",\"text\":\"from text\",\"title\":\"t\"}\n\
              {\"qid\":\"b\",\"query\":\"from query\"}\n\
              {\"id\":\"c\",\"title\":\"from title\"}\n\
              {\"id\":\"d\",\"text\":\"\",\"title\":\"ignored\"}\n",
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
        let (_d, p) = temp_file(
            "q.jsonl",
            b"{\"_id\":\"a\",\"text\":\"x\"}\n{\"_id\":\"b\",\"question\":\"y\"}\n",
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
            serde_json::from_str(include_str!("../../../../../tests/data/reader_cases.json"))
                .unwrap();
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
            let (_d, p) = temp_file(name, &bytes);
            let recs = read_records(&p, &FieldSpec::corpus()).unwrap();
            let ids: Vec<&str> = recs.iter().map(|r| r.id.as_str()).collect();
            assert_eq!(ids, ["d1", "5"], "{name}");
        }
        let (_d, p) = temp_file("topics.tsv.gz", gzip(b"\xef\xbb\xbfq1\thello\nq 2\tx\n"));
        let e = read_records(&p, &FieldSpec::queries())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("topics.tsv.gz:2: id \"q 2\" contains white space"),
            "{e}"
        );
        let (_d, p) = temp_file("c.jsonl.zst", zstd(b"{\"_id\": \"a\"}\n{\"_id\": 1.5}\n"));
        let e = read_records(&p, &FieldSpec::corpus())
            .unwrap_err()
            .to_string();
        assert!(e.contains("c.jsonl.zst:2: id 1.5 is not a string"), "{e}");
    }
}
