//! A fast TREC run reader for evaluation: the file is memory-mapped and parsed in parallel
//! chunks without copying ids (documents borrow their ids from the mapping). The line grammar is
//! [`crate::io::trec_lines::RunLine`], as for [`crate::io::trec::read_run`]
//! (fields are split on ASCII whitespace, found 8 bytes at a time by
//! [`trec_lines::for_each_line`]):
//! `qid Q0 docid rank score [tag]`, blank lines skipped, a repeated (qid, docid) is an error
//! naming both lines.

use crate::error::{Error, Result};
use crate::eval::ranked::{RunQuery, ScoredRef};
use crate::io::bytes::Bytes;
use crate::io::trec_lines::{self, check_utf8, duplicate_message, line_of, LineError, RunLine};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use std::path::{Path, PathBuf};

/// An opened run file; [`RunFile::queries`] parses it.
pub struct RunFile {
    bytes: Bytes,
    path: PathBuf,
}

impl RunFile {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let bytes = trec_lines::read_bytes(&path)?;
        Ok(RunFile { bytes, path })
    }

    fn data(&self) -> &[u8] {
        &self.bytes
    }

    fn error(&self, e: LineError) -> Error {
        e.locate(&self.path, self.data())
    }

    /// Parse into queries (first-appearance order; documents in file order).
    pub fn queries(&self) -> Result<Vec<RunQuery<'_>>> {
        let data = self.data();
        let chunks = trec_lines::chunks(data, rayon::current_num_threads() * 4);
        let parsed: Vec<std::result::Result<Vec<RunQuery>, LineError>> = chunks
            .into_par_iter()
            .map(|r| parse_chunk(data, r.start, r.end))
            .collect();
        let mut queries: Vec<RunQuery> = Vec::new();
        let mut index: FxHashMap<&str, usize> = FxHashMap::default();
        for segments in parsed {
            for seg in segments.map_err(|e| self.error(e))? {
                match index.get(seg.qid) {
                    Some(&i) => queries[i].docs.extend(seg.docs),
                    None => {
                        index.insert(seg.qid, queries.len());
                        queries.push(seg);
                    }
                }
            }
        }
        // Duplicates: report the one whose second line comes first in the file.
        let first_dup = queries
            .par_iter()
            .map_init(FxHashSet::default, |seen, q| find_duplicate(data, q, seen))
            .flatten()
            .min_by_key(|d| d.offset);
        if let Some(d) = first_dup {
            return Err(self.error(d));
        }
        Ok(queries)
    }
}

fn parse_chunk(
    data: &[u8],
    start: usize,
    end: usize,
) -> std::result::Result<Vec<RunQuery<'_>>, LineError> {
    let bytes = &data[start..end];
    // Validated once here; fields are cut at ASCII whitespace, so each is valid UTF-8 too.
    let text = check_utf8(bytes, start)?;
    let mut segments: Vec<RunQuery> = Vec::new();
    let mut capacity_hint = 16;
    trec_lines::for_each_line::<6, LineError>(bytes, |line_start, line| {
        let field = |i: usize| line.ranges[i].0..line.ranges[i].1;
        let score =
            RunLine::checked_score(line.count, &text[field(4)]).map_err(|message| LineError {
                offset: start + line_start,
                message,
            })?;
        let qid = &text[field(0)];
        let doc = ScoredRef::new(score, &bytes[field(2)]);
        match segments.last_mut() {
            Some(seg) if seg.qid == qid => seg.docs.push(doc),
            last => {
                // Most files hold each query's lines together, with similar counts per query.
                if let Some(seg) = last {
                    capacity_hint = seg.docs.len().max(16);
                }
                let mut docs = Vec::with_capacity(capacity_hint);
                docs.push(doc);
                segments.push(RunQuery { qid, docs });
            }
        }
        Ok(())
    })?;
    Ok(segments)
}

fn find_duplicate<'a>(
    data: &[u8],
    q: &RunQuery<'a>,
    seen: &mut FxHashSet<&'a [u8]>,
) -> Option<LineError> {
    seen.clear();
    let mut first_dup: Option<LineError> = None;
    for d in &q.docs {
        if let Some(first) = seen.get(d.id) {
            let offset = d.id.as_ptr() as usize - data.as_ptr() as usize;
            let first_offset = first.as_ptr() as usize - data.as_ptr() as usize;
            let doc = String::from_utf8_lossy(d.id);
            first_dup = Some(LineError {
                offset,
                message: duplicate_message("document", &doc, q.qid, line_of(data, first_offset)),
            });
            break;
        }
        seen.insert(d.id);
    }
    first_dup
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, text: &str) -> PathBuf {
        let p = dir.path().join("run.trec");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn parses_like_the_generic_reader() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            &dir,
            "q1 Q0 a 1 1.5 x\n\nq2 Q0 c 1 -0.25 x\r\nq1\tQ0\tb 2 2e0\n",
        );
        let f = RunFile::open(&p).unwrap();
        let qs = f.queries().unwrap();
        assert_eq!(qs.len(), 2);
        assert_eq!(qs[0].qid, "q1");
        assert_eq!(
            qs[0].docs.iter().map(|d| d.id).collect::<Vec<_>>(),
            [&b"a"[..], b"b"]
        );
        assert_eq!(qs[0].docs[1].score, 2.0);
        assert_eq!(qs[1].docs[0].score, -0.25);
        let empty = write(&dir, "");
        assert!(RunFile::open(&empty).unwrap().queries().unwrap().is_empty());
    }

    #[test]
    fn errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let error_of = |contents: &[u8]| {
            let p = dir.path().join("run.trec");
            std::fs::write(&p, contents).unwrap();
            let file = RunFile::open(&p).unwrap();
            let message = file.queries().unwrap_err().to_string();
            message
        };
        let e = error_of(b"q1 Q0 a 1 1 x\nq2 Q0 a 1 1 x\nq1 Q0 b 2 0.5 x\nq1 Q0 a 2 0.5 x\n");
        assert!(
            e.ends_with("run.trec:4: duplicate document 'a' for query 'q1' (first at line 1)"),
            "{e}"
        );
        let e = error_of(b"q1 Q0 a 1 1 x\nq1 Q0 b 1 high x\n");
        assert!(e.ends_with(":2: score 'high' is not a number"), "{e}");
        let e = error_of(b"q1 Q0 a 1 nan x\n");
        assert!(e.contains(":1: score 'nan'"), "{e}");
        let e = error_of(b"q1 Q0 a 1\n");
        assert!(e.contains(":1: expected 6 columns"), "{e}");
        let e = error_of(b"q1 Q0 a 1 1 x\nq1 Q0 \xff 1 1 x\n");
        assert!(e.contains(":2: not valid UTF-8"), "{e}");
    }

    #[test]
    fn lines_across_word_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for i in 0..200 {
            // varying field widths and separators so lines and fields straddle 8-byte words
            let sep = ["\t", " ", "  ", " \t "][i % 4];
            text.push_str(&format!(
                "q{}{sep}Q0{sep}doc{}{sep}{}{sep}{}.5{sep}tag{}\n",
                i % 7,
                i,
                i,
                i,
                "x".repeat(i % 9)
            ));
        }
        text.push_str("q0 Q0 last 1 7"); // no final newline, 5 columns
        let p = write(&dir, &text);
        let f = RunFile::open(&p).unwrap();
        let qs = f.queries().unwrap();
        assert_eq!(qs.len(), 7);
        let total: usize = qs.iter().map(|q| q.docs.len()).sum();
        assert_eq!(total, 201);
        let q0 = qs.iter().find(|q| q.qid == "q0").unwrap();
        assert_eq!(q0.docs.last().unwrap().id, b"last");
        assert_eq!(q0.docs.last().unwrap().score, 7.0);
        assert_eq!(q0.docs[1].id, b"doc7");
        assert_eq!(q0.docs[1].score, 7.5);
    }
}
