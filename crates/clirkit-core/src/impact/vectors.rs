//! Term-weight vectors: documents and queries in Anserini's JSONL layout
//! (`{"id"|"_id": ..., "contents": ..., "vector": {"term": weight, ...}}`) and queries as TSV,
//! validated and quantized to integer impacts.
//!
//! A weight must be a finite, non-negative number; a vector must hold at least one term, and a
//! term must be non-empty and at most [`MAX_TERM_BYTES`] long. Each is an error naming the file
//! and line. Weights become impacts as `round(weight × quantize)` (half away from zero, Java's
//! `Math.round` for non-negative weights); terms whose impact rounds to 0 are dropped, since
//! they add nothing to any score.

use crate::error::{Error, Result};
use crate::io::jsonl::{id_from_raw, LineReader};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::path::Path;

/// Lucene's limit on a term's length in bytes (`IndexWriter.MAX_TERM_LENGTH`).
pub const MAX_TERM_BYTES: usize = 32766;

/// The largest impact: scores are summed exactly and reported as f32, which holds every
/// integer up to 2^24.
pub const MAX_IMPACT: u64 = 1 << 24;

/// Anserini's convention for float weights: × 100, rounded.
pub const DEFAULT_QUANTIZE: u32 = 100;

/// One vector as read: its id, its line, and its (term, weight) pairs in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedVector {
    pub id: String,
    pub line: u64,
    pub terms: Vec<(String, f64)>,
}

/// Why a weight is unusable, or `None` when it is fine.
pub fn weight_problem(weight: f64) -> Option<&'static str> {
    if weight.is_nan() {
        Some("is NaN")
    } else if weight.is_infinite() {
        Some("is infinite")
    } else if weight < 0.0 {
        Some("is negative")
    } else {
        None
    }
}

/// Check a vector's terms and weights; `at` names where it came from in the message.
pub fn check_terms(terms: &[(String, f64)], at: impl Fn(String) -> Error) -> Result<()> {
    if terms.is_empty() {
        return Err(at("empty vector: no terms".into()));
    }
    for (term, weight) in terms {
        if term.is_empty() {
            return Err(at("empty term".into()));
        }
        if term.len() > MAX_TERM_BYTES {
            return Err(at(format!(
                "term '{}...' is {} bytes long, over the limit of {MAX_TERM_BYTES}",
                term.chars().take(20).collect::<String>(),
                term.len()
            )));
        }
        if let Some(problem) = weight_problem(*weight) {
            return Err(at(format!("the weight of term '{term}' {problem}")));
        }
    }
    Ok(())
}

/// A weight as an error shows it: in scientific notation when huge (never 300 digits).
fn shown_weight(weight: f64) -> String {
    if weight.abs() >= 1e15 {
        format!("{weight:e}")
    } else {
        weight.to_string()
    }
}

/// The impact of `weight` at `quantize`, or an error when it is beyond [`MAX_IMPACT`].
pub fn quantize(weight: f64, quantize: u32, at: impl Fn(String) -> Error) -> Result<u32> {
    let impact = (weight * quantize as f64).round();
    if impact > MAX_IMPACT as f64 {
        return Err(at(format!(
            "weight {} × quantize {quantize} is beyond the largest impact, {MAX_IMPACT}",
            shown_weight(weight)
        )));
    }
    Ok(impact as u32)
}

/// Quantize a checked vector, summing repeated terms' weights first and dropping zero
/// impacts; terms come out sorted.
pub fn quantize_terms(
    terms: &[(String, f64)],
    factor: u32,
    at: impl Fn(String) -> Error,
) -> Result<Vec<(String, u32)>> {
    let mut summed: Vec<(&str, f64)> = terms.iter().map(|(t, w)| (t.as_str(), *w)).collect();
    summed.sort_by(|a, b| a.0.cmp(b.0));
    summed.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
        }
        same
    });
    let mut out = Vec::with_capacity(summed.len());
    for (term, weight) in summed {
        let impact = quantize(weight, factor, &at)?;
        if impact > 0 {
            out.push((term.to_string(), impact));
        }
    }
    Ok(out)
}

/// A JSON weight: a number, or something else (an error once the term is known).
enum JsonWeight {
    Number(f64),
    Other(&'static str),
}

impl<'de> Deserialize<'de> for JsonWeight {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            // `as_f64` is exact for integers up to 2^53 and the nearest double otherwise.
            Value::Number(n) => JsonWeight::Number(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(_) => JsonWeight::Other("a string"),
            Value::Null => JsonWeight::Other("null"),
            Value::Bool(_) => JsonWeight::Other("a boolean"),
            Value::Array(_) => JsonWeight::Other("an array"),
            Value::Object(_) => JsonWeight::Other("an object"),
        })
    }
}

/// The `vector` object as (term, weight) pairs, in file order, without a map in between.
struct JsonTerms(Vec<(String, JsonWeight)>);

impl<'de> Deserialize<'de> for JsonTerms {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct TermsVisitor;
        impl<'de> Visitor<'de> for TermsVisitor {
            type Value = JsonTerms;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of term: weight")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<JsonTerms, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(64));
                while let Some((term, weight)) = map.next_entry::<Cow<'de, str>, JsonWeight>()? {
                    out.push((term.into_owned(), weight));
                }
                Ok(JsonTerms(out))
            }
        }
        d.deserialize_map(TermsVisitor)
    }
}

#[derive(Deserialize)]
struct JsonVector {
    #[serde(rename = "_id")]
    underscore_id: Option<Box<RawValue>>,
    id: Option<Box<RawValue>>,
    docid: Option<Box<RawValue>>,
    qid: Option<Box<RawValue>>,
    query_id: Option<Box<RawValue>>,
    vector: Option<JsonTerms>,
}

/// Parse and check one JSONL vector line.
pub fn parse_vector_line(path: &Path, line: u64, bytes: &[u8]) -> Result<WeightedVector> {
    let at = |m: String| Error::parse(path, line, m);
    let raw: JsonVector = serde_json::from_slice(bytes)
        .map_err(|e| at(format!("invalid JSON vector record: {e}")))?;
    let id_value = [
        &raw.underscore_id,
        &raw.id,
        &raw.docid,
        &raw.qid,
        &raw.query_id,
    ]
    .into_iter()
    .flatten()
    .next()
    .ok_or_else(|| at("no id (_id, id, docid, qid or query_id)".into()))?;
    // The one id rule (`io::jsonl`): integers exactly as written, floats refused, no white space.
    let id = id_from_raw(id_value).map_err(at)?;
    let json_terms = raw
        .vector
        .ok_or_else(|| at(format!("'{id}': no \"vector\" object of term weights")))?;
    let mut terms: Vec<(String, f64)> = Vec::with_capacity(json_terms.0.len());
    // A key repeated in the object keeps its last weight, at its first place, as JSON readers
    // (Python's json, Jackson in Anserini) do; the weights are never added up.
    let mut place: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (term, weight) in json_terms.0 {
        match weight {
            JsonWeight::Number(w) => match place.get(&term) {
                Some(&i) => terms[i].1 = w,
                None => {
                    place.insert(term.clone(), terms.len());
                    terms.push((term, w));
                }
            },
            JsonWeight::Other(what) => {
                return Err(at(format!(
                    "'{id}': the weight of term '{term}' is {what}, not a number"
                )))
            }
        }
    }
    check_terms(&terms, |m| at(format!("'{id}': {m}")))?;
    Ok(WeightedVector { id, line, terms })
}

/// Parse one TSV query line: `qid<TAB>term term ...` (Anserini's pre-tokenized queries: each
/// occurrence of a term adds 1 to its weight) or `qid<TAB>term<TAB>weight` (one weighted term
/// per line; a query's lines are gathered by [`read_queries`]).
fn parse_tsv_line(path: &Path, line: u64, bytes: &[u8]) -> Result<WeightedVector> {
    let at = |m: String| Error::parse(path, line, m);
    let text = std::str::from_utf8(bytes).map_err(|_| at("not valid UTF-8".into()))?;
    let fields: Vec<&str> = text.split('\t').collect();
    let id = fields[0].trim();
    if id.is_empty() {
        return Err(at("empty query id".into()));
    }
    if let Some(problem) = crate::io::id_text::id_problem(id) {
        return Err(at(problem));
    }
    let terms = match fields[..] {
        [_, tokens] => tokens
            .split_whitespace()
            .map(|t| (t.to_string(), 1.0))
            .collect(),
        [_, term, weight] => {
            let w: f64 = weight.trim().parse().map_err(|_| {
                at(format!(
                    "'{id}': weight '{weight}' of term '{term}' is not a number"
                ))
            })?;
            vec![(term.trim().to_string(), w)]
        }
        _ => {
            return Err(at(
                "expected 'qid<TAB>term term ...' or 'qid<TAB>term<TAB>weight'".into(),
            ))
        }
    };
    check_terms(&terms, |m| at(format!("'{id}': {m}")))?;
    Ok(WeightedVector {
        id: id.to_string(),
        line,
        terms,
    })
}

/// Read query vectors: JSONL in the documents' layout, or TSV (`.tsv`/`.txt`, see
/// [`parse_tsv_line`]). A query id on several lines is an error, except for consecutive
/// `qid<TAB>term<TAB>weight` lines, which together make one query.
pub fn read_queries(path: impl AsRef<Path>) -> Result<Vec<WeightedVector>> {
    let path = path.as_ref();
    let tsv = crate::io::jsonl::is_tsv(path);
    let mut reader = LineReader::open(path)?;
    let mut buf = Vec::new();
    let mut out: Vec<WeightedVector> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    // Whether the last query came from `qid<TAB>term<TAB>weight` rows: only such rows gather.
    let mut last_weighted = false;
    while let Some(line) = reader.next_line(&mut buf)? {
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let query = if tsv {
            let q = parse_tsv_line(path, line, &buf)?;
            let weighted_row = buf.iter().filter(|&&b| b == b'\t').count() == 2;
            let gathers = weighted_row && last_weighted;
            last_weighted = weighted_row;
            match out.last_mut() {
                Some(last) if gathers && last.id == q.id => {
                    last.terms.extend(q.terms);
                    continue;
                }
                _ => q,
            }
        } else {
            parse_vector_line(path, line, &buf)?
        };
        if let Some(first) = seen.insert(query.id.clone(), line) {
            return Err(Error::DuplicateId {
                path: path.to_path_buf(),
                id: query.id,
                line,
                first_line: first,
            });
        }
        out.push(query);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::temp_file;

    fn parse(line: &str) -> Result<WeightedVector> {
        parse_vector_line(Path::new("v.jsonl"), 7, line.as_bytes())
    }

    #[test]
    fn reads_anserini_vectors_and_names_bad_ones() {
        let v = parse(r#"{"id": "d1", "contents": "x", "vector": {"b": 2, "a": 0.5}}"#).unwrap();
        assert_eq!(v.id, "d1");
        assert_eq!(v.terms, vec![("b".into(), 2.0), ("a".into(), 0.5)]);
        assert_eq!(parse(r#"{"_id": 3, "vector": {"a": 1}}"#).unwrap().id, "3");
        for (line, message) in [
            (
                r#"{"id": "d", "vector": {"a": -1}}"#,
                "v.jsonl:7: 'd': the weight of term 'a' is negative",
            ),
            (
                r#"{"id": "d", "vector": {"a": "x"}}"#,
                "'d': the weight of term 'a' is a string, not a number",
            ),
            (r#"{"id": "d", "vector": {}}"#, "'d': empty vector"),
            (r#"{"id": "d"}"#, "'d': no \"vector\" object"),
            (r#"{"vector": {"a": 1}}"#, "no id"),
            (r#"{"id": "d", "vector": {"": 1}}"#, "empty term"),
        ] {
            let e = parse(line).unwrap_err().to_string();
            assert!(e.contains(message), "{e}");
        }
        let long = format!(
            r#"{{"id": "d", "vector": {{"{}": 1}}}}"#,
            "x".repeat(MAX_TERM_BYTES + 1)
        );
        assert!(parse(&long)
            .unwrap_err()
            .to_string()
            .contains("over the limit"));
        // JSON has no NaN literal; a NaN can only come from a computed weight.
        let nan = check_terms(&[("a".into(), f64::NAN)], Error::invalid).unwrap_err();
        assert!(nan.to_string().contains("is NaN"));
    }

    #[test]
    fn ids_follow_the_one_id_rule_and_repeated_keys_keep_the_last_weight() {
        let big = parse(r#"{"id": 123456789012345678901234567890, "vector": {"a": 1}}"#).unwrap();
        assert_eq!(big.id, "123456789012345678901234567890");
        for (line, message) in [
            (
                r#"{"id": 1.5, "vector": {"a": 1}}"#,
                "id 1.5 is not a string or an integer",
            ),
            (
                r#"{"id": 1e3, "vector": {"a": 1}}"#,
                "id 1e3 is not a string",
            ),
            (r#"{"id": "a b", "vector": {"a": 1}}"#, "white space"),
            (r#"{"id": "", "vector": {"a": 1}}"#, "empty"),
            (r#"{"id": "a\tb", "vector": {"a": 1}}"#, "white space"),
            (r#"{"id": "a\u0000b", "vector": {"a": 1}}"#, "control"),
            (
                r#"{"id": true, "vector": {"a": 1}}"#,
                "not a string or an integer",
            ),
        ] {
            let e = parse(line).unwrap_err().to_string();
            assert!(
                e.contains("v.jsonl:7:") && e.contains(message),
                "{line}: {e}"
            );
        }
        let v = parse(r#"{"id": "d", "vector": {"apple": 1, "pear": 4, "apple": 2}}"#).unwrap();
        assert_eq!(v.terms, vec![("apple".into(), 2.0), ("pear".into(), 4.0)]);
        let e = quantize(1e300, 100, Error::invalid)
            .unwrap_err()
            .to_string();
        assert!(e.contains("weight 1e300 × quantize 100"), "{e}");
    }

    #[test]
    fn tsv_queries_check_ids_and_gather_only_weighted_rows() {
        let (_d, p) = temp_file("q.tsv", b"q1\tapple\nq1\tbanana\t5\n");
        let e = read_queries(&p).unwrap_err().to_string();
        assert!(e.contains("duplicate id 'q1'"), "{e}");
        let (_d, p) = temp_file("q.tsv", b"q1\tbanana\t5\nq1\tapple\n");
        assert!(read_queries(&p)
            .unwrap_err()
            .to_string()
            .contains("duplicate id 'q1'"));
        let (_d, p) = temp_file("q.tsv", b"q1\tbanana\t5\nq1\tapple\t2\n");
        assert_eq!(read_queries(&p).unwrap()[0].terms.len(), 2);
        let (_d, p) = temp_file("q.tsv", b"q 1\tapple\n");
        let e = read_queries(&p).unwrap_err().to_string();
        assert!(e.contains("q.tsv:1:") && e.contains("white space"), "{e}");
    }

    #[test]
    fn quantizes_summing_repeats_and_dropping_zeros() {
        let terms = vec![
            ("b".into(), 0.126),
            ("a".into(), 1.0),
            ("b".into(), 0.3),
            ("z".into(), 0.004),
        ];
        let q = quantize_terms(&terms, 100, Error::invalid).unwrap();
        assert_eq!(q, vec![("a".into(), 100), ("b".into(), 43)]);
        assert!(quantize_terms(&[("a".into(), 1e9)], 100, Error::invalid).is_err());
    }

    #[test]
    fn reads_both_tsv_query_forms() {
        let (_d, p) = temp_file("q.tsv", "q1\ta b a\nq2\tx\t0.5\nq2\ty\t2\n");
        let q = read_queries(&p).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(
            q[0].terms,
            vec![("a".into(), 1.0), ("b".into(), 1.0), ("a".into(), 1.0)]
        );
        assert_eq!(q[1].terms, vec![("x".into(), 0.5), ("y".into(), 2.0)]);
        let (_d, p) = temp_file("q.tsv", "q1\ta\nq1\tb\n");
        assert!(matches!(read_queries(&p), Err(Error::DuplicateId { .. })));
        let (_d, p) = temp_file("q.tsv", "q1\ta\tlots\n");
        let e = read_queries(&p).unwrap_err().to_string();
        assert!(
            e.contains("q.tsv:1: 'q1': weight 'lots' of term 'a' is not a number"),
            "{e}"
        );
    }
}
