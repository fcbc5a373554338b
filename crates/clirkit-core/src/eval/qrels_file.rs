//! A fast qrels reader for evaluation: straight into per-query tables, without the generic
//! reader's intermediate strings. The grammar is [`crate::io::trec_lines::QrelsLines`], as for
//! [`crate::io::trec::read_qrels`]. TREC's second column is read as ndeval reads it, as a
//! subtopic: a query whose lines name several subtopics judges a document once per subtopic
//! (its label for the other measures is its largest, its subtopics are α-nDCG's aspects, see
//! [`Judgements::with_subtopics`]); a repeated (qid, subtopic, docid) is an error naming both
//! lines.

use crate::error::{Error, Result};
use crate::eval::qrels::{JudgedDocs, Judgements, QrelsIndex, SubtopicJudgements};
use crate::io::trec::qrels_judgements;
use crate::io::trec_lines::{
    chunks, duplicate_message, find_lines, read_text, QrelsLine, QrelsLines,
};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::path::Path;

/// Read a qrels file into a [`QrelsIndex`]: the lines are parsed in chunks (in parallel), then
/// each query's table is built (in parallel). The error is the one a line-by-line read meets
/// first: a repeated judgement before the first line that does not parse, else that line.
pub fn read_qrels_index(path: impl AsRef<Path>) -> Result<QrelsIndex> {
    let path = path.as_ref();
    let text = read_text(path)?;
    let (chunks, parse_error) = parse_in_chunks(path, &text);
    let mut queries: Vec<(&str, SubtopicJudgements)> = Vec::new();
    let mut index: FxHashMap<&str, usize> = FxHashMap::default();
    for judgement in chunks.iter().flatten() {
        let qid = judgement.qid;
        let slot = match queries.last() {
            Some((last, _)) if *last == qid => queries.len() - 1,
            _ => *index.entry(qid).or_insert_with(|| {
                queries.push((qid, Vec::new()));
                queries.len() - 1
            }),
        };
        queries[slot].1.push((
            judgement.doc.as_bytes(),
            judgement.subtopic,
            judgement.label,
        ));
    }
    let built: Vec<(String, std::result::Result<Judgements, usize>)> = queries
        .par_iter()
        .map(|(qid, judged)| (qid.to_string(), build_judgements(judged)))
        .collect();
    let repeats: FxHashMap<&str, usize> = built
        .iter()
        .filter_map(|(qid, j)| j.as_ref().err().map(|&i| (qid.as_str(), i)))
        .collect();
    if !repeats.is_empty() {
        return Err(repeat_error(path, &text, &repeats));
    }
    if let Some(e) = parse_error {
        return Err(e);
    }
    Ok(QrelsIndex::from_judgements(
        built
            .into_iter()
            .filter_map(|(qid, j)| j.ok().map(|j| (qid, j)))
            .collect(),
    ))
}

/// A query's table: one label per document, or, when its lines name several subtopics, one
/// document per id with its subtopics as aspects. `Err(i)`: `judged[i]` repeats a judgement.
fn build_judgements(judged: &[(&[u8], &str, i32)]) -> std::result::Result<Judgements, usize> {
    let first = judged.first().map_or("", |j| j.1);
    if judged.iter().all(|j| j.1 == first) {
        let plain: JudgedDocs = judged.iter().map(|&(d, _, l)| (d, l)).collect();
        Judgements::unique(&plain)
    } else {
        Judgements::with_subtopics(judged)
    }
}

/// A chunk's judgements, its first line that does not parse (index in the chunk, message) and
/// how many lines it has.
type ParsedChunk<'a> = (Vec<QrelsLine<'a>>, Option<(usize, String)>, usize);

/// The judgements of `text`, chunk by chunk in file order, up to the first line that does not
/// parse, and that line's error. The chunks are parsed in parallel, the ones after the first
/// without looking for a header; when the first chunk is blank, the text is one chunk.
fn parse_in_chunks<'a>(path: &Path, text: &'a str) -> (Vec<Vec<QrelsLine<'a>>>, Option<Error>) {
    let mut ranges = chunks(text.as_bytes(), rayon::current_num_threads() * 4);
    if ranges
        .first()
        .is_some_and(|r| text[r.clone()].trim_ascii().is_empty())
    {
        ranges.clear();
        ranges.push(0..text.len());
    }
    let parsed: Vec<ParsedChunk> = ranges
        .into_par_iter()
        .enumerate()
        .map(|(i, range)| {
            let chunk = &text[range];
            let mut parser = match i {
                0 => QrelsLines::default(),
                _ => QrelsLines::past_first_line(),
            };
            let mut judged = Vec::with_capacity(chunk.len() / 16);
            let mut error = None;
            for (n, line) in chunk.lines().enumerate() {
                match parser.parse(line) {
                    Ok(Some(judgement)) => judged.push(judgement),
                    Ok(None) => {}
                    Err(message) => {
                        error = Some((n, message));
                        break;
                    }
                }
            }
            let lines = memchr::memchr_iter(b'\n', chunk.as_bytes()).count();
            (judged, error, lines)
        })
        .collect();
    let mut chunks = Vec::with_capacity(parsed.len());
    let mut lines_before = 0;
    for (judged, error, lines) in parsed {
        chunks.push(judged);
        if let Some((n, message)) = error {
            let line_no = (lines_before + n + 1) as u64;
            return (chunks, Some(Error::parse(path, line_no, message)));
        }
        lines_before += lines;
    }
    (chunks, None)
}

/// The error for the first line (in file order) that repeats a judgement: `repeats` holds, per
/// query with a repeat, the index of its first repeating judgement among the query's.
fn repeat_error(path: &Path, text: &str, repeats: &FxHashMap<&str, usize>) -> Error {
    let mut seen: FxHashMap<&str, usize> = FxHashMap::default();
    for (line_no, judgement) in qrels_judgements(path, text).map_while(Result::ok) {
        let (qid, doc) = (judgement.qid, judgement.doc);
        let count = seen.entry(qid).or_default();
        if repeats.get(qid) == Some(count) {
            let first = first_line_of(text, qid, judgement.subtopic, doc);
            return Error::parse(
                path,
                line_no,
                duplicate_message("judgement of", doc, qid, first),
            );
        }
        *count += 1;
    }
    Error::parse(path, 0, "repeated judgement")
}

/// The first line judging `doc` for `qid` and `subtopic` (only called to word an error).
fn first_line_of(text: &str, qid: &str, subtopic: &str, doc: &str) -> u64 {
    let found = find_lines(text.as_bytes(), 1, |f| {
        matches!(f.len(), 3 | 4)
            && f[0] == qid.as_bytes()
            && f[f.len() - 2] == doc.as_bytes()
            && (f.len() == 3 || f[1] == subtopic.as_bytes())
    });
    found.first().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::temp_file;
    use crate::io::trec::read_qrels;

    /// Reads `contents` with this reader and with [`read_qrels`], asserts that both give the same
    /// judgements or the same error, and returns that error's message.
    fn read_as_the_generic_reader_does(name: &str, contents: &str) -> Option<String> {
        let (_dir, p) = temp_file(name, contents);
        match (read_qrels_index(&p), read_qrels(&p)) {
            (Ok(index), Ok(generic)) => {
                assert_eq!(index.len(), generic.queries.len(), "{contents:?}");
                for (qid, docs) in &generic.queries {
                    let judgements = index.get(qid).unwrap();
                    assert_eq!(judgements.len(), docs.len(), "{contents:?}");
                    for (doc, label) in docs {
                        assert_eq!(
                            judgements.label(doc.as_bytes()),
                            Some(*label),
                            "{contents:?}"
                        );
                    }
                }
                None
            }
            (Err(fast), Err(generic)) => {
                assert_eq!(fast.to_string(), generic.to_string());
                Some(fast.to_string())
            }
            (fast, generic) => panic!("{contents:?}: {:?} but {:?}", fast.err(), generic.err()),
        }
    }

    #[test]
    fn same_judgements_as_the_generic_reader() {
        for (name, contents) in [
            (
                "q.tsv",
                "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td1\t1.0\n",
            ),
            ("q.trec", "1 0 184 3\n\n1 0 29 -1\n2 0 5 1\n1 0 30 0\n"),
            ("q.tsv", "query-id corpus-id score\n"),
        ] {
            assert_eq!(read_as_the_generic_reader_does(name, contents), None);
        }
        let (_dir, p) = temp_file("q.trec", "1 0 184 3\n\n1 0 29 -1\n2 0 5 1\n1 0 30 0\n");
        let q = read_qrels_index(&p).unwrap();
        assert_eq!(q.get("1").unwrap().label(b"29"), Some(-1));
        assert_eq!(q.get("1").unwrap().len(), 3);
    }

    #[test]
    fn same_errors_as_the_generic_reader_naming_file_and_line() {
        for (contents, expected) in [
            (
                "1 0 a 1\n2 0 a 1\n1 0 a 0\n",
                "q.trec:3: duplicate judgement of 'a' for query '1' (first at line 1)",
            ),
            ("1 0 a 1\n1 0 b high\n", ":2: relevance 'high'"),
            (
                "1 0 a 1\n2 0 b 1\n2 0 b 0\n1 0 a 2\n1 0 c high\n",
                "q.trec:3: duplicate judgement of 'b' for query '2' (first at line 2)",
            ),
            ("1 0 c high\n1 0 a 1\n1 0 a 2\n", ":1: relevance 'high'"),
            ("1 0 a 1 extra\n", ":1: expected"),
        ] {
            let e = read_as_the_generic_reader_does("q.trec", contents).unwrap();
            assert!(e.contains(expected), "{e}");
        }
    }

    #[test]
    fn chunks_keep_line_numbers_and_the_header_rule() {
        let mut text = String::from("query-id\tcorpus-id\tscore\n");
        for i in 0..30_000 {
            text.push_str(&format!("q{}\td{i}\t{}\n", i / 7, i % 3));
        }
        assert_eq!(read_as_the_generic_reader_does("q.tsv", &text), None);
        // A later chunk's line of three columns with a word for a label is no header.
        let e = read_as_the_generic_reader_does("q.tsv", &format!("{text}q1\td-x\thigh\n"));
        assert!(e.unwrap().contains(":30002: relevance 'high'"));
        let e = read_as_the_generic_reader_does("q.tsv", &format!("{text}q0\td1\t1\n"));
        let e = e.unwrap();
        assert!(
            e.contains(":30002: duplicate judgement of 'd1' for query 'q0' (first at line 3)"),
            "{e}"
        );
        let blank_start = format!("{}{text}", "\n".repeat(70_000));
        assert_eq!(read_as_the_generic_reader_does("q.tsv", &blank_start), None);
    }
}
