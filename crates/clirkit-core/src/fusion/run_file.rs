//! A fast TREC run reader and writer for [`RunLists`].
//!
//! Same format and checks as [`crate::io::trec::read_run`] (5 or 6 whitespace-separated columns,
//! finite scores, UTF-8, no repeated (query, document) pair, the rank column ignored), but built
//! for runs of millions of lines: the file is memory-mapped, cut into chunks at line boundaries
//! that are parsed in parallel into id keys and small arenas, then stitched together; queries
//! may be interleaved in the file. Errors name the file and line.

use super::id_key::IdKey;
use super::{first_duplicate, sort_entries, zeroed_entries, DocEntry, QueryEntry, RunLists, Span};
use crate::error::{Error, Result};
use crate::io::atomic::write_file_with;
use crate::io::id_text::check_run_line;
use crate::io::trec_lines::{self, check_utf8, duplicate_message, find_lines, LineError, RunLine};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::io::Write;
use std::path::Path;

/// The parse of one chunk: its own arena (query ids, long doc ids), its entries, and runs of
/// consecutive lines with the same query as (query id span, end index into `docs`).
#[derive(Default)]
struct Chunk {
    arena: Vec<u8>,
    docs: Vec<DocEntry>,
    groups: Vec<(Span, usize)>,
}

impl Chunk {
    fn push_query_id(&mut self, bytes: &[u8]) -> Span {
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(bytes);
        Span {
            start,
            len: bytes.len() as u32,
        }
    }
}

/// Read a TREC run file into [`RunLists`]: queries in first-appearance order, documents in
/// canonical order.
pub fn read_run_lists(path: impl AsRef<Path>) -> Result<RunLists> {
    let path = path.as_ref();
    let bytes = trec_lines::read_bytes(path)?;
    if bytes.is_empty() {
        return Ok(RunLists::default());
    }
    parse_run_bytes(path, &bytes)
}

/// Parse the bytes of a run file (`path` is used in error messages).
pub fn parse_run_bytes(path: &Path, bytes: &[u8]) -> Result<RunLists> {
    let ranges = trec_lines::chunks(bytes, rayon::current_num_threads() * 4);
    let chunks: Vec<std::result::Result<Chunk, LineError>> = ranges
        .into_par_iter()
        .map(|r| parse_chunk(&bytes[r.clone()], r.start))
        .collect();
    let mut parsed = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        parsed.push(chunk.map_err(|e| e.locate(path, bytes))?);
    }
    let lists = stitch(parsed)?;
    check_duplicates(path, bytes, lists)
}

fn parse_chunk(bytes: &[u8], base: usize) -> std::result::Result<Chunk, LineError> {
    let text = check_utf8(bytes, base)?;
    let mut chunk = Chunk::default();
    let mut current_qid: &[u8] = &[];
    let mut line_start = 0;
    for line in text.split('\n') {
        let offset = base + line_start;
        line_start += line.len() + 1;
        let parsed = RunLine::parse(line).map_err(|message| LineError { offset, message })?;
        let Some(RunLine { qid, doc, score }) = parsed else {
            continue;
        };
        let qid = qid.as_bytes();
        if chunk.groups.is_empty() || qid != current_qid {
            if let Some(last) = chunk.groups.last_mut() {
                last.1 = chunk.docs.len();
            }
            let span = chunk.push_query_id(qid);
            chunk.groups.push((span, 0));
            current_qid = qid;
        }
        let id = IdKey::encode(doc.as_bytes(), &mut chunk.arena)
            .map_err(|message| LineError { offset, message })?;
        chunk.docs.push(DocEntry { id, score });
    }
    if let Some(last) = chunk.groups.last_mut() {
        last.1 = chunk.docs.len();
    }
    Ok(chunk)
}

/// Join chunk parses into one [`RunLists`]: one arena, queries in first-appearance order, each
/// query's entries contiguous and canonically sorted (duplicates are checked afterwards).
fn stitch(chunks: Vec<Chunk>) -> Result<RunLists> {
    let total_arena: usize = chunks.iter().map(|c| c.arena.len()).sum();
    if total_arena > u32::MAX as usize {
        return Err(Error::invalid(
            "run too large: more than 4 GiB of query and long document ids",
        ));
    }
    // Blocks of consecutive lines: (query index, chunk, entry range in that chunk).
    let mut query_of: FxHashMap<&[u8], usize> = FxHashMap::default();
    let mut qid_of_query: Vec<(usize, Span)> = Vec::new();
    let mut blocks: Vec<(usize, usize, std::ops::Range<usize>)> = Vec::new();
    for (c, chunk) in chunks.iter().enumerate() {
        let mut begin = 0;
        for &(qid, end) in &chunk.groups {
            let bytes = &chunk.arena[qid.start as usize..(qid.start + qid.len) as usize];
            let q = *query_of.entry(bytes).or_insert_with(|| {
                qid_of_query.push((c, qid));
                qid_of_query.len() - 1
            });
            blocks.push((q, c, begin..end));
            begin = end;
        }
    }
    let mut arena_base = Vec::with_capacity(chunks.len());
    let mut arena = Vec::with_capacity(total_arena);
    for chunk in &chunks {
        arena_base.push(arena.len() as u32);
        arena.extend_from_slice(&chunk.arena);
    }
    let shift = |c: usize, s: Span| Span {
        start: s.start + arena_base[c],
        len: s.len,
    };

    // Counting sort of blocks by query keeps each query's lines in file order.
    let num_queries = qid_of_query.len();
    let mut count = vec![0usize; num_queries + 1];
    for (q, _, range) in &blocks {
        count[q + 1] += range.len();
    }
    for q in 0..num_queries {
        count[q + 1] += count[q];
    }
    let queries: Vec<QueryEntry> = (0..num_queries)
        .map(|q| QueryEntry {
            qid: shift(qid_of_query[q].0, qid_of_query[q].1),
            docs: count[q]..count[q + 1],
        })
        .collect();
    let total_docs = count[num_queries];
    let mut docs = zeroed_entries(total_docs);
    let mut fill = count;
    for (q, c, range) in blocks {
        let base = arena_base[c];
        for d in &chunks[c].docs[range] {
            docs[fill[q]] = DocEntry {
                id: d.id.shifted(base),
                score: d.score,
            };
            fill[q] += 1;
        }
    }
    drop(chunks);

    let mut slices: Vec<&mut [DocEntry]> = Vec::with_capacity(num_queries);
    let mut rest: &mut [DocEntry] = &mut docs;
    for q in &queries {
        let (head, tail) = rest.split_at_mut(q.docs.len());
        slices.push(head);
        rest = tail;
    }
    slices
        .into_par_iter()
        .for_each(|list| sort_entries(&arena, list));
    Ok(RunLists::from_parts(arena, queries, docs))
}

/// Reject a repeated (query, document) pair, naming both lines as `read_run` does.
fn check_duplicates(path: &Path, bytes: &[u8], lists: RunLists) -> Result<RunLists> {
    let found = (0..lists.num_queries())
        .into_par_iter()
        .find_first(|&q| first_duplicate(&lists.arena, lists.doc_entries(q)).is_some());
    let Some(q) = found else { return Ok(lists) };
    let doc = first_duplicate(&lists.arena, lists.doc_entries(q)).unwrap_or_default();
    let qid = lists.bytes(lists.queries[q].qid);
    let lines = find_lines(bytes, 2, |f| f.len() > 2 && f[0] == qid && f[2] == doc);
    let (first, second) = (
        lines.first().copied().unwrap_or(0),
        lines.get(1).copied().unwrap_or(0),
    );
    Err(Error::parse(
        path,
        second,
        duplicate_message(
            "document",
            &String::from_utf8_lossy(doc),
            &String::from_utf8_lossy(qid),
            first,
        ),
    ))
}

/// Write `lists` as a TREC run (`qid Q0 docid rank score tag`, ranks from 1), atomically.
pub fn write_run_lists(path: impl AsRef<Path>, lists: &RunLists, tag: &str) -> Result<()> {
    write_file_with(path, |file| write_run_lists_to(file, lists, tag))
}

/// Write `lists` as a TREC run to any writer; queries are formatted in parallel in batches. An
/// id a run cannot hold or a non-finite score (a CombSUM overflow) is an error, never written.
pub fn write_run_lists_to(w: &mut impl Write, lists: &RunLists, tag: &str) -> std::io::Result<()> {
    const BATCH: usize = 512;
    let queries: Vec<usize> = (0..lists.num_queries()).collect();
    for batch in queries.chunks(BATCH) {
        let texts: std::io::Result<Vec<Vec<u8>>> = batch
            .par_chunks(16)
            .map(|qs| {
                let mut out = Vec::new();
                let mut ints = itoa::Buffer::new();
                let mut floats = zmij::Buffer::new();
                for &q in qs {
                    let qid = lists.bytes(lists.queries[q].qid);
                    for (rank, d) in lists.doc_entries(q).iter().enumerate() {
                        check_run_line(
                            &String::from_utf8_lossy(qid),
                            &String::from_utf8_lossy(lists.doc_bytes(d)),
                            d.score,
                        )?;
                        out.extend_from_slice(qid);
                        out.extend_from_slice(b" Q0 ");
                        out.extend_from_slice(lists.doc_bytes(d));
                        out.push(b' ');
                        out.extend_from_slice(ints.format(rank + 1).as_bytes());
                        out.push(b' ');
                        out.extend_from_slice(floats.format_finite(d.score).as_bytes());
                        out.push(b' ');
                        out.extend_from_slice(tag.as_bytes());
                        out.push(b'\n');
                    }
                }
                Ok(out)
            })
            .collect();
        for text in texts? {
            w.write_all(&text)?;
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::temp_file;
    use crate::io::trec::read_run;

    #[test]
    fn same_result_as_generic_reader_on_interleaved_queries() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.trec");
        let mut text = String::new();
        for i in 0..3000 {
            // Queries interleave; scores tie often so the doc-id tie-break matters.
            text.push_str(&format!(
                "q{} Q0 d{} {} {} run\n",
                i % 7,
                i,
                i,
                (i % 5) as f64 * 0.5
            ));
        }
        text.push_str("q9\tQ0\tlast\t1\t-1e3\n");
        std::fs::write(&p, &text).unwrap();
        let fast = read_run_lists(&p).unwrap();
        assert_eq!(fast.to_run(), read_run(&p).unwrap());
        // Also with many chunks.
        let many = parse_chunked(&p, text.as_bytes(), 64);
        assert_eq!(many.to_run(), read_run(&p).unwrap());

        let out = dir.path().join("o.trec");
        write_run_lists(&out, &fast, "t").unwrap();
        assert_eq!(read_run(&out).unwrap(), read_run(&p).unwrap());
        assert!(std::fs::read_to_string(&out)
            .unwrap()
            .starts_with("q0 Q0 d994 1 2.0 t\n"));
    }

    fn parse_chunked(path: &Path, bytes: &[u8], step: usize) -> RunLists {
        let mut bounds = vec![0];
        let mut at = 0;
        while at < bytes.len() {
            let end = match memchr::memchr(b'\n', &bytes[(at + step).min(bytes.len() - 1)..]) {
                Some(i) => (at + step).min(bytes.len() - 1) + i + 1,
                None => bytes.len(),
            };
            bounds.push(end);
            at = end;
        }
        let chunks = bounds
            .windows(2)
            .map(|w| parse_chunk(&bytes[w[0]..w[1]], w[0]).ok().unwrap())
            .collect();
        check_duplicates(path, bytes, stitch(chunks).unwrap()).unwrap()
    }

    #[test]
    fn errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.trec");
        let cases: [(&[u8], &str); 5] = [
            (
                b"q Q0 a 1 1 x\nq Q0 b 2 oops x\n",
                "bad.trec:2: score 'oops' is not a number",
            ),
            (
                b"q Q0 a 1 1 x\nq Q0 b 2\n",
                "bad.trec:2: expected 6 columns",
            ),
            (b"q Q0 a 1 inf x\n", "bad.trec:1: score 'inf' is not finite"),
            (
                b"q Q0 a 1 1 x\n\nq Q0 \xff 1 1 x\n",
                "bad.trec:3: not valid UTF-8",
            ),
            (
                b"q Q0 a 1 1 x\nr Q0 a 1 1 x\nq Q0 a 2 0.5 x\n",
                "bad.trec:3: duplicate document 'a' for query 'q' (first at line 1)",
            ),
        ];
        for (bytes, expected) in cases {
            std::fs::write(&p, bytes).unwrap();
            let e = read_run_lists(&p).unwrap_err().to_string();
            assert!(e.contains(expected), "{e} lacks {expected}");
        }
    }

    #[test]
    fn empty_file_is_an_empty_run() {
        let (_dir, p) = temp_file("e.trec", "");
        assert_eq!(read_run_lists(&p).unwrap().num_queries(), 0);
    }
}
