//! TREC run files (`qid Q0 docid rank score tag`) and qrels, TREC (`qid 0 docid rel`) or BEIR
//! TSV (`query-id<TAB>corpus-id<TAB>score` with a header line).

use crate::error::{Error, IoContext, Result};
use crate::io::atomic::AtomicFile;
use crate::ranking::{Run, ScoredDoc};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).at(path)?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        Error::parse(path, line, "not valid UTF-8")
    })
}

/// Read a run file. Queries keep their first-appearance order; each query's documents are put in
/// canonical order (the file's rank column is ignored, as trec_eval ignores it). A repeated
/// (qid, docid) pair is an error naming both lines.
pub fn read_run(path: impl AsRef<Path>) -> Result<Run> {
    let path = path.as_ref();
    let text = read_text(path)?;
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut queries: Vec<(String, Vec<ScoredDoc>, HashMap<&str, u64>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let mut fields = line.split_ascii_whitespace();
        let Some(qid) = fields.next() else { continue };
        let rest: Vec<&str> = fields.collect();
        if rest.len() < 4 || rest.len() > 5 {
            return Err(Error::parse(
                path,
                line_no,
                format!(
                    "expected 6 columns 'qid Q0 docid rank score tag', found {}",
                    rest.len() + 1
                ),
            ));
        }
        let doc = rest[1];
        let score: f64 = rest[3].parse().map_err(|_| {
            Error::parse(
                path,
                line_no,
                format!("score '{}' is not a number", rest[3]),
            )
        })?;
        if !score.is_finite() {
            return Err(Error::parse(
                path,
                line_no,
                format!("score '{}' is not finite", rest[3]),
            ));
        }
        let slot = *index.entry(qid).or_insert_with(|| {
            queries.push((qid.to_string(), Vec::new(), HashMap::new()));
            queries.len() - 1
        });
        let entry = &mut queries[slot];
        if let Some(first) = entry.2.insert(doc, line_no) {
            return Err(Error::parse(
                path,
                line_no,
                format!("duplicate document '{doc}' for query '{qid}' (first at line {first})"),
            ));
        }
        entry.1.push(ScoredDoc::new(doc, score));
    }
    let mut run = Run::new();
    for (qid, docs, _) in queries {
        run.push(qid, docs);
    }
    Ok(run)
}

/// Write a run in canonical order with 1-based ranks, atomically.
pub fn write_run(path: impl AsRef<Path>, run: &Run, tag: &str) -> Result<()> {
    let path = path.as_ref();
    let mut file = AtomicFile::create(path)?;
    write_run_to(&mut file, run, tag).at(path)?;
    file.commit()
}

/// Write a run to any writer (e.g. stdout). Documents must already be in canonical order, as
/// [`Run::push`] keeps them.
pub fn write_run_to(w: &mut impl Write, run: &Run, tag: &str) -> std::io::Result<()> {
    for (qid, docs) in &run.queries {
        for (rank, d) in docs.iter().enumerate() {
            writeln!(w, "{qid} Q0 {} {} {} {tag}", d.doc_id, rank + 1, d.score)?;
        }
    }
    w.flush()
}

/// Relevance judgements: per query, doc id -> graded label. Queries keep file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Qrels {
    pub queries: Vec<(String, Vec<(String, i32)>)>,
}

/// Read qrels: TREC 4-column (`qid iter docid rel`) or BEIR 3-column TSV, whose header line
/// (`query-id corpus-id score`) is skipped. A repeated (qid, docid) pair is an error.
pub fn read_qrels(path: impl AsRef<Path>) -> Result<Qrels> {
    let path = path.as_ref();
    let text = read_text(path)?;
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut queries: Vec<(String, Vec<(String, i32)>, HashMap<&str, u64>)> = Vec::new();
    let mut first_content_line = true;
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        let is_first = std::mem::replace(&mut first_content_line, false);
        let (qid, doc, rel) = match fields.len() {
            3 | 4 => (
                fields[0],
                fields[fields.len() - 2],
                fields[fields.len() - 1],
            ),
            n => {
                return Err(Error::parse(
                    path,
                    line_no,
                    format!(
                    "expected 'qid 0 docid rel' or 'query-id corpus-id score', found {n} columns"
                ),
                ))
            }
        };
        let rel: i32 = match rel.parse::<i32>() {
            Ok(r) => r,
            Err(_) if is_first && fields.len() == 3 => continue, // BEIR header
            Err(_) => match rel.parse::<f64>() {
                Ok(r) if r.fract() == 0.0 => r as i32,
                _ => {
                    return Err(Error::parse(
                        path,
                        line_no,
                        format!("relevance '{rel}' is not an integer"),
                    ))
                }
            },
        };
        let slot = *index.entry(qid).or_insert_with(|| {
            queries.push((qid.to_string(), Vec::new(), HashMap::new()));
            queries.len() - 1
        });
        let entry = &mut queries[slot];
        if let Some(first) = entry.2.insert(doc, line_no) {
            return Err(Error::parse(
                path,
                line_no,
                format!("duplicate judgement of '{doc}' for query '{qid}' (first at line {first})"),
            ));
        }
        entry.1.push((doc.to_string(), rel));
    }
    Ok(Qrels {
        queries: queries.into_iter().map(|(q, d, _)| (q, d)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_round_trip_in_canonical_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.trec");
        std::fs::write(
            &p,
            "q1 Q0 a 1 1.5 x\nq1 Q0 b 2 1.5 x\nq2 Q0 c 1 -0.25 x\nq1 Q0 c 3 2 x\n",
        )
        .unwrap();
        let run = read_run(&p).unwrap();
        let ids: Vec<&str> = run.queries[0].1.iter().map(|d| d.doc_id.as_str()).collect();
        assert_eq!(ids, ["c", "b", "a"]);
        let out = dir.path().join("o.trec");
        write_run(&out, &run, "t").unwrap();
        assert_eq!(read_run(&out).unwrap(), run);
        assert!(std::fs::read_to_string(&out)
            .unwrap()
            .starts_with("q1 Q0 c 1 2 t\n"));
    }

    #[test]
    fn run_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.trec");
        std::fs::write(&p, "q1 Q0 a 1 1 x\nq1 Q0 a 2 0.5 x\n").unwrap();
        let e = read_run(&p).unwrap_err().to_string();
        assert!(
            e.contains("r.trec:2: duplicate document 'a' for query 'q1' (first at line 1)"),
            "{e}"
        );
        std::fs::write(&p, "q1 Q0 a 1 high x\n").unwrap();
        assert!(read_run(&p)
            .unwrap_err()
            .to_string()
            .contains(":1: score 'high'"));
    }

    #[test]
    fn qrels_trec_and_beir() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.tsv");
        std::fs::write(&p, "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n").unwrap();
        let q = read_qrels(&p).unwrap();
        assert_eq!(
            q.queries[0].1,
            vec![("d1".to_string(), 2), ("d2".to_string(), 0)]
        );
        let p = dir.path().join("q.trec");
        std::fs::write(&p, "1 0 184 3\n1 0 29 -1\n").unwrap();
        assert_eq!(read_qrels(&p).unwrap().queries[0].1[1].1, -1);
    }
}
