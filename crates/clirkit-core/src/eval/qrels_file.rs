//! A fast qrels reader for evaluation: straight into per-query hash maps, without the generic
//! reader's intermediate strings. The grammar is [`crate::io::trec_lines::QrelsLines`], as for
//! [`crate::io::trec::read_qrels`]; a repeated (qid, docid) is an error naming both lines.

use crate::error::{Error, Result};
use crate::eval::qrels::{Judgements, QrelsIndex};
use crate::io::trec_lines::{duplicate_message, find_lines, read_text, QrelsLines};
use rustc_hash::FxHashMap;
use std::path::Path;

type DocLabels = FxHashMap<Box<[u8]>, i32>;

/// Read a qrels file into a [`QrelsIndex`].
pub fn read_qrels_index(path: impl AsRef<Path>) -> Result<QrelsIndex> {
    let path = path.as_ref();
    let text = read_text(path)?;
    let mut queries: Vec<(&str, DocLabels)> = Vec::new();
    let mut index: FxHashMap<&str, usize> = FxHashMap::default();
    let mut lines = QrelsLines::default();
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let parsed = lines
            .parse(line)
            .map_err(|m| Error::parse(path, line_no, m))?;
        let Some(judgement) = parsed else { continue };
        let (qid, doc) = (judgement.qid, judgement.doc);
        let slot = match queries.last() {
            Some((last, _)) if *last == qid => queries.len() - 1,
            _ => *index.entry(qid).or_insert_with(|| {
                queries.push((qid, FxHashMap::default()));
                queries.len() - 1
            }),
        };
        if queries[slot]
            .1
            .insert(Box::from(doc.as_bytes()), judgement.label)
            .is_some()
        {
            let first = first_line_of(&text, qid, doc);
            return Err(Error::parse(
                path,
                line_no,
                duplicate_message("judgement of", doc, qid, first),
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
    let found = find_lines(text.as_bytes(), 1, |f| {
        matches!(f.len(), 3 | 4) && f[0] == qid.as_bytes() && f[f.len() - 2] == doc.as_bytes()
    });
    found.first().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::temp_file;

    #[test]
    fn same_grammar_as_the_generic_reader() {
        let (dir, p) = temp_file(
            "q.tsv",
            "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td1\t1.0\n",
        );
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
        let (_dir, p) = temp_file("q.trec", "1 0 a 1\n2 0 a 1\n1 0 a 0\n");
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
