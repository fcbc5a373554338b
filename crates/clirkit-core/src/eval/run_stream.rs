//! Evaluation of a large plain run file piece by piece, without holding the file: each thread
//! reads a piece (about a megabyte, cut at line starts) by position into a buffer it reuses,
//! parses it and measures every query that lies wholly inside it at once. A query that may
//! continue into the next piece (a piece's first and last) is kept as text and measured once
//! its pieces are stitched together. No file-sized buffer is filled (and faulted in, and freed),
//! and the bytes are parsed while they are still in cache.
//!
//! Anything out of the ordinary (a line that does not parse, a repeated document, a query whose
//! lines are not together in the file, a file that changes while it is read) gives `None`: the
//! caller then evaluates the whole file as [`crate::eval::RunFile`] reads it, which words the
//! error or handles the layout. The numbers are the same either way.

use crate::error::{IoContext, Result};
use crate::eval::evaluator::{Evaluation, Evaluator};
use crate::eval::ranked::{ranked_labels_checked, sort_for_eval, IdHashes, ScoredRef};
use crate::eval::run_file::RunFile;
use crate::io::run_line_kernels::{for_each_run_line, score_f32};
use crate::io::trec_lines;
use rayon::prelude::*;
use rustc_hash::FxHashSet;
use std::path::Path;

/// Files from this size on are evaluated piece by piece.
const STREAM_MIN_BYTES: u64 = 8 << 20;

/// One query's consecutive lines within a piece.
enum Group {
    /// Wholly inside its piece, parsed and measured there (values `None`: no judgements).
    Measured {
        qid: String,
        values: Option<Vec<f64>>,
    },
    /// At a piece's edge, so it may go on in the next piece: its lines, to be stitched.
    Edge { qid: String, lines: Vec<u8> },
}

impl Group {
    fn qid(&self) -> &str {
        match self {
            Group::Measured { qid, .. } | Group::Edge { qid, .. } => qid,
        }
    }
}

impl Evaluator {
    /// Evaluate a TREC run file: a large plain one piece by piece as it is read
    /// ([`evaluate_streamed`]), any other whole ([`RunFile`]); the same numbers either way.
    pub fn evaluate_file(&self, path: impl AsRef<Path>) -> Result<Evaluation> {
        let path = path.as_ref();
        if let Some(evaluation) = evaluate_streamed(self, path)? {
            return Ok(evaluation);
        }
        Ok(self.evaluate(RunFile::open(path)?.queries()?))
    }
}

/// Evaluate the run file at `path` piece by piece; `None` when the file is small, compressed or
/// out of the ordinary (see the module documentation).
pub fn evaluate_streamed(evaluator: &Evaluator, path: &Path) -> Result<Option<Evaluation>> {
    evaluate_in_pieces(evaluator, path, STREAM_MIN_BYTES, trec_lines::PIECE_BYTES)
}

fn evaluate_in_pieces(
    evaluator: &Evaluator,
    path: &Path,
    min_bytes: u64,
    piece_bytes: usize,
) -> Result<Option<Evaluation>> {
    let Some((file, len)) = trec_lines::open_large_plain(path, min_bytes)? else {
        return Ok(None);
    };
    let pieces: Vec<Option<Vec<Group>>> = (0..len.div_ceil(piece_bytes))
        .into_par_iter()
        .map_init(
            || (Vec::new(), Scratch::default()),
            |(buffer, scratch), i| {
                let nominal = i * piece_bytes..((i + 1) * piece_bytes).min(len);
                let own = trec_lines::read_line_piece(&file, len, nominal, buffer).at(path)?;
                Ok(own.and_then(|own| piece_groups(evaluator, &buffer[own], scratch)))
            },
        )
        .collect::<Result<_>>()?;
    if trec_lines::grew(&file, len).at(path)? {
        return Ok(None);
    }
    let Some(pieces) = pieces.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let Some(groups) = stitch(pieces) else {
        return Ok(None);
    };
    let run_queries = groups.len();
    let measured: Option<Vec<(String, Option<Vec<f64>>)>> = groups
        .into_par_iter()
        .map_init(Scratch::default, |scratch, group| match group {
            Group::Measured { qid, values } => Some((qid, values)),
            Group::Edge { qid, lines } => {
                let values = match piece_groups_parsed(&lines)?.as_mut_slice() {
                    [(_, docs)] => measure(evaluator, &qid, docs, scratch)?,
                    _ => return None,
                };
                Some((qid, values))
            }
        })
        .collect();
    let Some(measured) = measured else {
        return Ok(None);
    };
    let measured = measured
        .into_iter()
        .filter_map(|(qid, values)| values.map(|v| (qid, v)))
        .collect();
    Ok(Some(evaluator.assemble(measured, run_queries)))
}

/// Parse a piece's lines into groups of consecutive lines of one query, in file order; `None`
/// if a line does not parse.
fn piece_groups_parsed(lines: &[u8]) -> Option<Vec<(&str, Vec<ScoredRef<'_>>)>> {
    // Validated once here; fields are cut at ASCII whitespace, so each is valid UTF-8 too.
    let text = std::str::from_utf8(lines).ok()?;
    let mut groups: Vec<(&str, Vec<ScoredRef>)> = Vec::new();
    let mut capacity_hint = 16;
    for_each_run_line(lines, |line| {
        if !(5..=6).contains(&line.count) {
            return Err(());
        }
        let field = |(start, end): (usize, usize)| &lines[start..end];
        let score = score_f32(field(line.score)).ok_or(())?;
        let doc = ScoredRef {
            score,
            id: field(line.doc),
        };
        let qid = field(line.qid);
        match groups.last_mut() {
            Some((last, docs)) if last.as_bytes() == qid => docs.push(doc),
            last => {
                if let Some((_, docs)) = last {
                    capacity_hint = docs.len().max(16);
                }
                let mut docs = Vec::with_capacity(capacity_hint);
                docs.push(doc);
                groups.push((&text[line.qid.0..line.qid.1], docs));
            }
        }
        Ok(())
    })
    .ok()?;
    Some(groups)
}

/// A piece's groups: the first and last kept as text, the others measured.
fn piece_groups(evaluator: &Evaluator, lines: &[u8], scratch: &mut Scratch) -> Option<Vec<Group>> {
    let mut parsed = piece_groups_parsed(lines)?;
    let last = parsed.len().saturating_sub(1);
    let mut groups = Vec::with_capacity(parsed.len());
    for (i, (qid, docs)) in parsed.iter_mut().enumerate() {
        let qid = qid.to_string();
        groups.push(if i == 0 || i == last {
            let start = docs[0].id.as_ptr() as usize - lines.as_ptr() as usize;
            let end =
                docs.last().map_or(start, |d| d.id.as_ptr() as usize) - lines.as_ptr() as usize;
            Group::Edge {
                lines: lines[line_start(lines, start)..line_end(lines, end)].to_vec(),
                qid,
            }
        } else {
            let values = measure(evaluator, &qid, docs, scratch)?;
            Group::Measured { qid, values }
        });
    }
    Some(groups)
}

/// The start of the line holding byte `at`.
fn line_start(lines: &[u8], at: usize) -> usize {
    memchr::memrchr(b'\n', &lines[..at]).map_or(0, |i| i + 1)
}

/// The end (past its newline) of the line holding byte `at`.
fn line_end(lines: &[u8], at: usize) -> usize {
    memchr::memchr(b'\n', &lines[at..]).map_or(lines.len(), |i| at + i + 1)
}

/// Measure one query (`None` inside when it has no judgements); `None` when a document repeats.
#[allow(clippy::option_option)]
fn measure(
    evaluator: &Evaluator,
    qid: &str,
    docs: &mut [ScoredRef],
    scratch: &mut Scratch,
) -> Option<Option<Vec<f64>>> {
    let judgements = evaluator.qrels().get(qid);
    if judgements.is_some() {
        sort_for_eval(docs);
    }
    let judged_only = evaluator.options().judged_docs_only;
    let (seen, labels, judged) = (&mut scratch.seen, &mut scratch.labels, &mut scratch.docs);
    let out_docs = evaluator.needs_docs().then_some(&mut *judged);
    if !ranked_labels_checked(docs, judgements, judged_only, seen, labels, out_docs) {
        return None;
    }
    Some(judgements.map(|j| evaluator.measure_labels(j, labels, judged)))
}

/// A thread's scratch space for [`measure`], reused from query to query.
#[derive(Default)]
struct Scratch {
    seen: IdHashes,
    labels: Vec<i32>,
    docs: Vec<u32>,
}

/// All pieces' groups in file order, a query cut by piece boundaries joined into one; `None`
/// when a query's lines are not together in the file.
fn stitch(pieces: Vec<Vec<Group>>) -> Option<Vec<Group>> {
    let mut groups: Vec<Group> = Vec::new();
    for group in pieces.into_iter().flatten() {
        match (groups.last_mut(), group) {
            (
                Some(Group::Edge { qid, lines }),
                Group::Edge {
                    qid: next,
                    lines: more,
                },
            ) if *qid == next => {
                lines.extend_from_slice(&more);
            }
            (_, group) => groups.push(group),
        }
    }
    let mut qids: FxHashSet<&str> = FxHashSet::default();
    qids.reserve(groups.len());
    groups
        .iter()
        .all(|g| qids.insert(g.qid()))
        .then_some(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{EvalOptions, QrelsIndex, RunFile};

    fn evaluator(complete: bool) -> Evaluator {
        let ids: Vec<String> = (0..40).map(|d| format!("doc{d}")).collect();
        let judged = (0..9).map(|q| {
            let docs = (0..40)
                .step_by(3)
                .map(|d: usize| (ids[d].as_bytes(), (d % 3) as i32))
                .collect();
            (format!("q{q}"), docs)
        });
        let options = EvalOptions {
            complete,
            ..EvalOptions::default()
        };
        let specs = [
            "ndcg_cut.5",
            "map",
            "recall.20",
            "P.5",
            "judged.10",
            "num_ret",
        ];
        Evaluator::with_specs(QrelsIndex::from_pairs(judged), &specs, options).unwrap()
    }

    /// A run with queries q1..q7 together, varied widths and separators, some ties, blank lines,
    /// a CRLF line and no final newline.
    fn run_text() -> String {
        let mut text = String::new();
        for q in 1..8 {
            for d in 0..(q * 7) {
                let sep = ["\t", " ", "  "][(q + d) % 3];
                let pad = "x".repeat((d * 13) % 50);
                text.push_str(&format!(
                    "q{q}{sep}Q0{sep}doc{d}{sep}{d}{sep}{}.25{sep}tag{pad}\n",
                    (d * 5) % 11
                ));
                if d % 17 == 0 {
                    text.push('\n');
                }
            }
        }
        text.push_str("q0 Q0 doc3 1 2.5 t\r\nq0 Q0 doc6 2 1");
        text
    }

    fn compare(text: &str, complete: bool) -> Vec<Option<Evaluation>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.trec");
        std::fs::write(&path, text).unwrap();
        let ev = evaluator(complete);
        let whole = RunFile::open(&path)
            .unwrap()
            .queries()
            .map(|q| ev.evaluate(q));
        [1, 7, 64, 100, 333, 4096, 1 << 20]
            .into_iter()
            .map(|piece| {
                let streamed = evaluate_in_pieces(&ev, &path, 0, piece).unwrap();
                if let Some(e) = &streamed {
                    assert_eq!(Some(e), whole.as_ref().ok(), "piece {piece}");
                }
                streamed
            })
            .collect()
    }

    #[test]
    fn same_numbers_as_the_whole_file_for_any_piece_size() {
        for complete in [false, true] {
            let all = compare(&run_text(), complete);
            assert!(all.iter().all(Option::is_some));
        }
    }

    #[test]
    fn out_of_the_ordinary_files_are_left_to_the_whole_file_reader() {
        let text = run_text();
        let interleaved = format!("{text}\nq1 Q0 other 1 1 t\n");
        let repeated = format!("{text}\nq0 Q0 doc3 1 1 t\n");
        let q5 = text.find("q5").unwrap();
        let bad_score = format!("{}q4 Q0 zz 1 high t\n{}", &text[..q5], &text[q5..]);
        for broken in [interleaved, repeated, bad_score] {
            let all = compare(&broken, false);
            assert!(all.iter().all(Option::is_none));
        }
        let long_line = format!("q9 Q0 d 1 1 {}\n{text}", "t".repeat(5000));
        assert!(compare(&long_line, false).iter().all(Option::is_some));
    }
}
