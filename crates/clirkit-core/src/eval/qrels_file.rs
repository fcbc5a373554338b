//! A fast qrels reader for evaluation: straight into per-query hash maps, without the generic
//! reader's intermediate strings. Same grammar and errors as [`crate::io::trec::read_qrels`]:
//! TREC `qid iter docid rel` or BEIR TSV `query-id corpus-id score` (its header line skipped),
//! integer labels (or floats without a fraction), a repeated (qid, docid) is an error naming both
//! lines.

use crate::error::{Error, IoContext, Result};
use crate::eval::qrels::{Judgements, QrelsIndex};
use rustc_hash::FxHashMap;
use std::path::Path;

/// The fields of a qrels line: (qid, docid, label text), or the column count when malformed.
fn fields(line: &str) -> std::result::Result<Option<(&str, &str, &str)>, usize> {
    let mut f: [&str; 4] = [""; 4];
    let mut n = 0;
    for field in line.split_ascii_whitespace() {
        if n < 4 {
            f[n] = field;
        }
        n += 1;
    }
    match n {
        0 => Ok(None),
        3 => Ok(Some((f[0], f[1], f[2]))),
        4 => Ok(Some((f[0], f[2], f[3]))),
        n => Err(n),
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

type DocLabels = FxHashMap<Box<[u8]>, i32>;

/// Read a qrels file into a [`QrelsIndex`].
pub fn read_qrels_index(path: impl AsRef<Path>) -> Result<QrelsIndex> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).at(path)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64
            + 1;
        Error::parse(path, line, "not valid UTF-8")
    })?;
    let mut queries: Vec<(&str, DocLabels)> = Vec::new();
    let mut index: FxHashMap<&str, usize> = FxHashMap::default();
    let mut first_content_line = true;
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let (qid, doc, rel) = match fields(line) {
            Ok(None) => continue,
            Ok(Some(f)) => f,
            Err(n) => {
                return Err(Error::parse(
                    path,
                    line_no,
                    format!(
                    "expected 'qid 0 docid rel' or 'query-id corpus-id score', found {n} columns"
                ),
                ))
            }
        };
        let is_first = std::mem::replace(&mut first_content_line, false);
        let label = match parse_label(rel) {
            Some(l) => l,
            None if is_first
                && rel.parse::<f64>().is_err()
                && line.split_ascii_whitespace().count() == 3 =>
            {
                continue; // BEIR header
            }
            None => {
                return Err(Error::parse(
                    path,
                    line_no,
                    format!("relevance '{rel}' is not an integer"),
                ))
            }
        };
        let slot = match queries.last() {
            Some((last, _)) if *last == qid => queries.len() - 1,
            _ => *index.entry(qid).or_insert_with(|| {
                queries.push((qid, FxHashMap::default()));
                queries.len() - 1
            }),
        };
        if queries[slot]
            .1
            .insert(Box::from(doc.as_bytes()), label)
            .is_some()
        {
            let first = first_line_of(text, qid, doc);
            return Err(Error::parse(
                path,
                line_no,
                format!("duplicate judgement of '{doc}' for query '{qid}' (first at line {first})"),
            ));
        }
    }
    Ok(QrelsIndex::from_judgements(
        queries
            .into_iter()
            .map(|(q, labels)| (q.to_string(), Judgements::from_labels(labels)))
            .collect(),
    ))
}

/// The first line judging `doc` for `qid` (only called to word an error).
fn first_line_of(text: &str, qid: &str, doc: &str) -> u64 {
    text.lines()
        .position(|l| matches!(fields(l), Ok(Some((q, d, _))) if q == qid && d == doc))
        .map_or(0, |i| i as u64 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_grammar_as_the_generic_reader() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.tsv");
        std::fs::write(
            &p,
            "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td1\t1.0\n",
        )
        .unwrap();
        let q = read_qrels_index(&p).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q.get("q1").unwrap().label(b"d1"), Some(2));
        assert_eq!(q.get("q2").unwrap().label(b"d1"), Some(1));
        let p = dir.path().join("q.trec");
        std::fs::write(&p, "1 0 184 3\n\n1 0 29 -1\n2 0 5 1\n1 0 30 0\n").unwrap();
        let q = read_qrels_index(&p).unwrap();
        assert_eq!(q.get("1").unwrap().label(b"29"), Some(-1));
        assert_eq!(q.get("1").unwrap().len(), 3);
    }

    #[test]
    fn errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.trec");
        std::fs::write(&p, "1 0 a 1\n2 0 a 1\n1 0 a 0\n").unwrap();
        let e = read_qrels_index(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("q.trec:3: duplicate judgement of 'a' for query '1' (first at line 1)"),
            "{e}"
        );
        std::fs::write(&p, "1 0 a 1\n1 0 b high\n").unwrap();
        assert!(read_qrels_index(&p)
            .unwrap_err()
            .to_string()
            .contains(":2: relevance 'high'"));
        std::fs::write(&p, "1 0 a 1 extra\n").unwrap();
        assert!(read_qrels_index(&p)
            .unwrap_err()
            .to_string()
            .contains(":1: expected"));
        std::fs::write(&p, "query-id corpus-id score\n").unwrap();
        assert!(read_qrels_index(&p).unwrap().is_empty());
    }
}
