//! TREC run files (`qid Q0 docid rank score tag`) and qrels, TREC (`qid 0 docid rel`) or BEIR
//! TSV (`query-id<TAB>corpus-id<TAB>score` with a header line).

use crate::error::{Error, Result};
use crate::io::atomic::{write_file_with, AtomicFile};
use crate::io::id_text::{check_run_line, write_error};
use crate::io::trec_lines::{duplicate_message, read_text, QrelsLine, QrelsLines, RunLine};
use crate::ranking::{Run, ScoredDoc};
use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;
use std::path::Path;

/// Groups (qid, doc) lines by query in first-appearance order, refusing a repeated pair.
struct ByQuery<'a, T> {
    path: &'a Path,
    index: HashMap<&'a str, usize>,
    queries: Vec<(String, Vec<T>, HashMap<&'a str, u64>)>,
}

impl<'a, T> ByQuery<'a, T> {
    fn new(path: &'a Path) -> Self {
        ByQuery {
            path,
            index: HashMap::new(),
            queries: Vec::new(),
        }
    }

    /// Add `item` for (qid, doc) found on `line`; `what` names the item in the error message.
    fn push(&mut self, qid: &'a str, doc: &'a str, line: u64, item: T, what: &str) -> Result<()> {
        let queries = &mut self.queries;
        let slot = *self.index.entry(qid).or_insert_with(|| {
            queries.push((qid.to_string(), Vec::new(), HashMap::new()));
            queries.len() - 1
        });
        let entry = &mut self.queries[slot];
        if let Some(first) = entry.2.insert(doc, line) {
            return Err(Error::parse(
                self.path,
                line,
                duplicate_message(what, doc, qid, first),
            ));
        }
        entry.1.push(item);
        Ok(())
    }

    fn finish(self) -> Vec<(String, Vec<T>)> {
        self.queries
            .into_iter()
            .map(|(q, items, _)| (q, items))
            .collect()
    }
}

/// Read a run file. Queries keep their first-appearance order; each query's documents are put in
/// canonical order (the file's rank column is ignored, as trec_eval ignores it). A repeated
/// (qid, docid) pair is an error naming both lines.
pub fn read_run(path: impl AsRef<Path>) -> Result<Run> {
    let path = path.as_ref();
    let text = read_text(path)?;
    let mut groups = ByQuery::new(path);
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let parsed = RunLine::parse(line).map_err(|m| Error::parse(path, line_no, m))?;
        let Some(RunLine { qid, doc, score }) = parsed else {
            continue;
        };
        groups.push(qid, doc, line_no, ScoredDoc::new(doc, score), "document")?;
    }
    let mut run = Run::new();
    for (qid, docs) in groups.finish() {
        run.push(qid, docs);
    }
    Ok(run)
}

/// Write a run in canonical order with 1-based ranks, atomically.
pub fn write_run(path: impl AsRef<Path>, run: &Run, tag: &str) -> Result<()> {
    write_file_with(path, |file| write_run_to(file, run, tag))
}

/// Queries searched together when a run is written window by window: enough to keep every
/// thread busy, few enough that one window's results stay small whatever the query count.
pub const RUN_WINDOW: usize = 4096;

/// Write the run of `nqueries` queries atomically, `window` queries at a time: `search` gives
/// the run of the queries in a range (in query order), whose lines are written before the next
/// range is searched, so at most one window of results is held. With no queries `search` still
/// sees the empty range once, so it checks its input as a whole run would.
pub fn write_run_windowed(
    path: impl AsRef<Path>,
    tag: &str,
    nqueries: usize,
    window: usize,
    mut search: impl FnMut(Range<usize>) -> Result<Run>,
) -> Result<()> {
    let path = path.as_ref();
    let mut out = AtomicFile::create(path)?;
    let mut start = 0;
    loop {
        let end = nqueries.min(start + window.max(1));
        let run = search(start..end)?;
        write_run_to(&mut out, &run, tag).map_err(|e| write_error(path, e))?;
        start = end;
        if start >= nqueries {
            break;
        }
    }
    out.commit()
}

/// Write a run to any writer (e.g. stdout). Documents must already be in canonical order, as
/// [`Run::push`] keeps them. An id a run cannot hold (empty, white space) or a non-finite score
/// is an error naming it, never written.
pub fn write_run_to(w: &mut impl Write, run: &Run, tag: &str) -> std::io::Result<()> {
    for (qid, docs) in &run.queries {
        for (rank, d) in docs.iter().enumerate() {
            check_run_line(qid, &d.doc_id, d.score)?;
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
    let mut groups = ByQuery::new(path);
    for parsed in qrels_judgements(path, &text) {
        let (line_no, judgement) = parsed?;
        let (qid, doc) = (judgement.qid, judgement.doc);
        groups.push(
            qid,
            doc,
            line_no,
            (doc.to_string(), judgement.label),
            "judgement of",
        )?;
    }
    Ok(Qrels {
        queries: groups.finish(),
    })
}

/// The judgements of qrels `text` (read from `path`) with their 1-based line numbers, in file
/// order, blank lines and the BEIR header skipped; a malformed line is an error naming its line.
pub(crate) fn qrels_judgements<'a>(
    path: &'a Path,
    text: &'a str,
) -> impl Iterator<Item = Result<(u64, QrelsLine<'a>)>> + 'a {
    let mut lines = QrelsLines::default();
    text.lines().enumerate().filter_map(move |(i, line)| {
        let line_no = i as u64 + 1;
        let parsed = lines
            .parse(line)
            .map_err(|m| Error::parse(path, line_no, m));
        parsed
            .transpose()
            .map(|judgement| Ok((line_no, judgement?)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::temp_file;

    #[test]
    fn run_round_trip_in_canonical_order() {
        let (dir, p) = temp_file(
            "r.trec",
            "q1 Q0 a 1 1.5 x\nq1 Q0 b 2 1.5 x\nq2 Q0 c 1 -0.25 x\nq1 Q0 c 3 2 x\n",
        );
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
        let (_dir, p) = temp_file("r.trec", "q1 Q0 a 1 1 x\nq1 Q0 a 2 0.5 x\n");
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
    fn runs_refuse_ids_and_scores_they_cannot_hold() {
        let (_dir, out) = temp_file("o.trec", "");
        std::fs::remove_file(&out).unwrap();
        let refused = [
            ("q 1", "d", 1.0, "query id \"q 1\" contains white space"),
            ("q", "d\nq Q0 forged 1 9 x", 1.0, "document id"),
            ("q", "", 1.0, "document id is empty"),
            (
                "q",
                "d",
                f64::NAN,
                "score NaN of document 'd' for query 'q' is not finite",
            ),
            ("q", "d", f64::INFINITY, "score inf of document 'd'"),
        ];
        for (qid, doc, score, expected) in refused {
            let mut run = Run::new();
            run.push(qid.to_string(), vec![ScoredDoc::new(doc, score)]);
            let e = write_run(&out, &run, "t").unwrap_err().to_string();
            assert!(e.contains("o.trec") && e.contains(expected), "{e}");
            assert!(!out.exists());
        }
        let (_dir, p) = temp_file("bom.trec", "\u{feff}q1 Q0 a 1 1 x\n");
        assert_eq!(read_run(&p).unwrap().queries[0].0, "q1");
        let (_dir, p) = temp_file("bom.qrels", "\u{feff}q1 0 a 1\n");
        assert_eq!(read_qrels(&p).unwrap().queries[0].0, "q1");
    }

    #[test]
    fn qrels_trec_and_beir() {
        for (name, contents, qid, judgements) in [
            (
                "q.tsv",
                "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n",
                "q1",
                [("d1", 2), ("d2", 0)],
            ),
            (
                "q.trec",
                "1 0 184 3\n1 0 29 -1\n",
                "1",
                [("184", 3), ("29", -1)],
            ),
        ] {
            let (_dir, p) = temp_file(name, contents);
            let expected = judgements.map(|(doc, label)| (doc.to_string(), label));
            assert_eq!(
                read_qrels(&p).unwrap().queries,
                [(qid.to_string(), expected.to_vec())]
            );
        }
    }
}
