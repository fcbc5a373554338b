//! A fast TREC run reader and writer for [`RunLists`].
//!
//! Same format and checks as [`crate::io::trec::read_run`] (5 or 6 whitespace-separated columns,
//! finite scores, UTF-8, no repeated (query, document) pair, the rank column ignored), but built
//! for runs of millions of lines: the file is memory-mapped, cut into chunks at line boundaries
//! that are parsed in parallel into id keys and small arenas, then stitched together; queries
//! may be interleaved in the file. Errors name the file and line.

use super::id_key::IdKey;
use super::{first_duplicate, sort_entries, zeroed_entries, DocEntry, QueryEntry, RunLists, Span};
use crate::error::{Error, IoContext, Result};
use crate::io::batch_writer::write_batches_atomically;
use crate::io::id_text::check_run_line;
use crate::io::trec_lines::{self, check_utf8, duplicate_message, find_lines, LineError, RunLine};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use std::io::Write;
use std::ops::Range;
use std::path::Path;

/// The parse of one chunk, whose entries went straight into its own slice of the run's entry
/// array: its arena (query ids, long doc ids), how many entries it filled, and runs of
/// consecutive lines with the same query as (query id span, end index into its slice).
#[derive(Default)]
struct Chunk {
    arena: Vec<u8>,
    filled: usize,
    groups: Vec<(Span, usize)>,
    long_ids: bool,
}

/// Read a TREC run file into [`RunLists`]: queries in first-appearance order, documents in
/// canonical order.
pub fn read_run_lists(path: impl AsRef<Path>) -> Result<RunLists> {
    let path = path.as_ref();
    if let Some(lists) = read_in_pieces(path, PIECES_MIN_BYTES, trec_lines::PIECE_BYTES)? {
        return Ok(lists);
    }
    let bytes = trec_lines::read_bytes(path)?;
    if bytes.is_empty() {
        return Ok(RunLists::default());
    }
    let lists = parse_run_bytes(path, &bytes);
    crate::parallel::drop_in_background(bytes);
    lists
}

/// Files from this size on are read piece by piece.
const PIECES_MIN_BYTES: u64 = 8 << 20;

/// Read a large plain run file piece by piece ([`trec_lines::read_line_piece`]), each thread
/// reusing one buffer: a first pass counts each piece's lines, a second parses each piece into
/// its slice of the entry array. No file-sized buffer is filled, faulted in and freed, and each
/// piece is parsed while it is in cache. `None` (the caller then reads the whole file, which
/// words any error) when the file is small or compressed, when a line does not parse or a
/// document repeats, or when the file changes between the passes.
fn read_in_pieces(path: &Path, min_bytes: u64, piece_bytes: usize) -> Result<Option<RunLists>> {
    let Some((file, len)) = trec_lines::open_large_plain(path, min_bytes)? else {
        return Ok(None);
    };
    let nominal = |i: usize| i * piece_bytes..((i + 1) * piece_bytes).min(len);
    let pieces = len.div_ceil(piece_bytes);
    let capacities: Vec<Option<usize>> = (0..pieces)
        .into_par_iter()
        .map_init(Vec::new, |buffer, i| {
            let own = trec_lines::read_line_piece(&file, len, nominal(i), buffer).at(path)?;
            Ok(own.map(|own| trec_lines::max_lines(&buffer[own])))
        })
        .collect::<Result<_>>()?;
    let Some(capacities) = capacities.into_iter().collect::<Option<Vec<usize>>>() else {
        return Ok(None);
    };
    let mut entries = zeroed_entries(capacities.iter().sum());
    let mut slices: Vec<&mut [DocEntry]> = Vec::with_capacity(pieces);
    let mut rest: &mut [DocEntry] = &mut entries;
    for &n in &capacities {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
        slices.push(head);
        rest = tail;
    }
    let chunks: Vec<Option<Chunk>> = (0..pieces)
        .into_par_iter()
        .zip(slices)
        .map_init(Vec::new, |buffer, (i, out)| {
            let piece = nominal(i);
            let Some(own) =
                trec_lines::read_line_piece(&file, len, piece.clone(), buffer).at(path)?
            else {
                return Ok(None);
            };
            let lines = &buffer[own.clone()];
            // A file changed since the first pass could overrun the slice.
            if trec_lines::max_lines(lines) != out.len() {
                return Ok(None);
            }
            let base = piece.start.saturating_sub(1) + own.start;
            Ok(parse_chunk(lines, base, out).ok())
        })
        .collect::<Result<_>>()?;
    if trec_lines::grew(&file, len).at(path)? {
        return Ok(None);
    }
    let Some(chunks) = chunks.into_iter().collect::<Option<Vec<Chunk>>>() else {
        return Ok(None);
    };
    let lists = stitch(chunks, &capacities, entries)?;
    Ok(duplicate_query(&lists).is_none().then_some(lists))
}

/// Parse the bytes of a run file (`path` is used in error messages).
pub fn parse_run_bytes(path: &Path, bytes: &[u8]) -> Result<RunLists> {
    let ranges = trec_lines::chunks(bytes, rayon::current_num_threads() * 4);
    parse_ranges(path, bytes, &ranges)
}

/// Parse `bytes` cut at `ranges` (each ending after a newline): each chunk parses in parallel
/// into its own slice of one entry array, sized by the chunks' line counts, so that a file
/// holding each query's lines together needs no regrouping copy.
fn parse_ranges(path: &Path, bytes: &[u8], ranges: &[Range<usize>]) -> Result<RunLists> {
    let capacities: Vec<usize> = ranges
        .par_iter()
        .map(|r| trec_lines::max_lines(&bytes[r.clone()]))
        .collect();
    let mut entries = zeroed_entries(capacities.iter().sum());
    let mut slices: Vec<&mut [DocEntry]> = Vec::with_capacity(ranges.len());
    let mut rest: &mut [DocEntry] = &mut entries;
    for &n in &capacities {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
        slices.push(head);
        rest = tail;
    }
    let chunks: Vec<std::result::Result<Chunk, LineError>> = ranges
        .par_iter()
        .zip(slices)
        .map(|(r, out)| parse_chunk(&bytes[r.clone()], r.start, out))
        .collect();
    let mut parsed = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        parsed.push(chunk.map_err(|e| e.locate(path, bytes))?);
    }
    let lists = stitch(parsed, &capacities, entries)?;
    check_duplicates(path, bytes, lists)
}

fn parse_chunk(
    bytes: &[u8],
    base: usize,
    out: &mut [DocEntry],
) -> std::result::Result<Chunk, LineError> {
    // Validated once here; fields are cut at ASCII whitespace, so each is valid UTF-8 too.
    let text = check_utf8(bytes, base)?;
    let mut chunk = Chunk::default();
    let mut current_qid: &[u8] = &[];
    trec_lines::for_each_line::<6, LineError>(bytes, |line_start, line| {
        let error = |message| LineError {
            offset: base + line_start,
            message,
        };
        let field = |i: usize| line.ranges[i].0..line.ranges[i].1;
        let score = RunLine::checked_score(line.count, &text[field(4)]).map_err(error)?;
        let qid = &bytes[field(0)];
        if chunk.groups.is_empty() || qid != current_qid {
            if let Some(last) = chunk.groups.last_mut() {
                last.1 = chunk.filled;
            }
            let span = chunk.push_query_id(qid);
            chunk.groups.push((span, 0));
            current_qid = qid;
        }
        let arena_len = chunk.arena.len();
        let id = IdKey::encode(&bytes[field(2)], &mut chunk.arena).map_err(error)?;
        chunk.long_ids |= chunk.arena.len() > arena_len;
        out[chunk.filled] = DocEntry { id, score };
        chunk.filled += 1;
        Ok(())
    })?;
    if let Some(last) = chunk.groups.last_mut() {
        last.1 = chunk.filled;
    }
    Ok(chunk)
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

/// Join chunk parses into one [`RunLists`]: one arena, queries in first-appearance order, each
/// query's entries contiguous and canonically sorted (duplicates are checked afterwards).
/// `entries` holds chunk `c`'s entries from the sum of the `capacities` before it. When the
/// file holds each query's lines together, with no blank lines between, that is already the
/// final layout; otherwise the entries are regrouped by query into a new array.
fn stitch(
    chunks: Vec<Chunk>,
    capacities: &[usize],
    mut entries: Vec<DocEntry>,
) -> Result<RunLists> {
    let total_arena: usize = chunks.iter().map(|c| c.arena.len()).sum();
    if total_arena > u32::MAX as usize {
        return Err(Error::invalid(
            "run too large: more than 4 GiB of query and long document ids",
        ));
    }
    let mut arena_base = Vec::with_capacity(chunks.len());
    let mut arena = Vec::with_capacity(total_arena);
    for chunk in &chunks {
        arena_base.push(arena.len() as u32);
        arena.extend_from_slice(&chunk.arena);
    }
    // Long ids point into the joined arena from here on.
    let mut chunk_slices: Vec<&mut [DocEntry]> = Vec::with_capacity(chunks.len());
    let mut rest: &mut [DocEntry] = &mut entries;
    for &n in capacities {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
        chunk_slices.push(head);
        rest = tail;
    }
    chunk_slices
        .into_par_iter()
        .zip(&chunks)
        .zip(&arena_base)
        .filter(|((_, chunk), &base)| chunk.long_ids && base > 0)
        .for_each(|((slice, chunk), &base)| {
            for d in &mut slice[..chunk.filled] {
                d.id = d.id.shifted(base);
            }
        });

    // Blocks of consecutive lines: (query index, entry range in `entries`).
    let mut query_of: FxHashMap<&[u8], usize> = FxHashMap::default();
    let mut qid_of_query: Vec<Span> = Vec::new();
    let mut blocks: Vec<(usize, Range<usize>)> = Vec::new();
    let mut chunk_start = 0;
    for ((c, chunk), &capacity) in chunks.iter().enumerate().zip(capacities) {
        let mut begin = 0;
        for &(qid, end) in &chunk.groups {
            let qid = Span {
                start: qid.start + arena_base[c],
                len: qid.len,
            };
            let q = *query_of.entry(arena_span(&arena, qid)).or_insert_with(|| {
                qid_of_query.push(qid);
                qid_of_query.len() - 1
            });
            blocks.push((q, chunk_start + begin..chunk_start + end));
            begin = end;
        }
        chunk_start += capacity;
    }

    let num_queries = qid_of_query.len();
    let mut count = vec![0usize; num_queries + 1];
    for (q, range) in &blocks {
        count[q + 1] += range.len();
    }
    for q in 0..num_queries {
        count[q + 1] += count[q];
    }
    let total_docs = count[num_queries];
    // Each block goes where a counting sort by query puts it, keeping each query's lines in file
    // order; when that is where it already is for every block, nothing moves.
    let destinations: Vec<usize> = {
        let mut fill = count.clone();
        blocks
            .iter()
            .map(|(q, range)| {
                fill[*q] += range.len();
                fill[*q] - range.len()
            })
            .collect()
    };
    let in_place = blocks
        .iter()
        .zip(&destinations)
        .all(|((_, range), &to)| range.start == to);
    let mut docs = if in_place {
        entries.truncate(total_docs);
        entries
    } else {
        let mut docs = zeroed_entries(total_docs);
        for ((_, range), to) in blocks.into_iter().zip(destinations) {
            docs[to..to + range.len()].copy_from_slice(&entries[range]);
        }
        docs
    };
    let queries: Vec<QueryEntry> = (0..num_queries)
        .map(|q| QueryEntry {
            qid: qid_of_query[q],
            docs: count[q]..count[q + 1],
        })
        .collect();

    let mut slices: Vec<&mut [DocEntry]> = Vec::with_capacity(num_queries);
    let mut rest: &mut [DocEntry] = &mut docs;
    for q in &queries {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(q.docs.len());
        slices.push(head);
        rest = tail;
    }
    slices
        .into_par_iter()
        .for_each(|list| sort_entries(&arena, list));
    Ok(RunLists::from_parts(arena, queries, docs))
}

fn arena_span(arena: &[u8], span: Span) -> &[u8] {
    &arena[span.start as usize..(span.start + span.len) as usize]
}

/// Reject a repeated (query, document) pair, naming both lines as `read_run` does.
/// The first query (in query order) with a repeated document.
fn duplicate_query(lists: &RunLists) -> Option<usize> {
    (0..lists.num_queries())
        .into_par_iter()
        .map_init(FxHashSet::default, |seen, q| {
            first_duplicate(&lists.arena, lists.doc_entries(q), seen).map(|_| q)
        })
        .find_first(|found| found.is_some())
        .flatten()
}

fn check_duplicates(path: &Path, bytes: &[u8], lists: RunLists) -> Result<RunLists> {
    let Some(q) = duplicate_query(&lists) else {
        return Ok(lists);
    };
    let doc = first_duplicate(
        &lists.arena,
        lists.doc_entries(q),
        &mut FxHashSet::default(),
    )
    .unwrap_or_default();
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

/// Write `lists` as a TREC run (`qid Q0 docid rank score tag`, ranks from 1), atomically (see
/// [`write_batches_atomically`]).
pub fn write_run_lists(path: impl AsRef<Path>, lists: &RunLists, tag: &str) -> Result<()> {
    write_batches_atomically(path, |emit| write_batches(lists, tag, emit))
}

/// Write the runs that `next_segment` returns one after the other, until it returns `None`, as
/// one TREC run (the queries of each in turn), atomically, as [`write_run_lists`] writes one.
/// After a writing error the remaining segments are still asked for, so that an error of
/// theirs comes first.
pub(crate) fn write_run_segments(
    path: impl AsRef<Path>,
    tag: &str,
    mut next_segment: impl FnMut() -> std::io::Result<Option<RunLists>>,
) -> Result<()> {
    write_batches_atomically(path, |emit| {
        while let Some(lists) = next_segment()? {
            if let Err(e) = write_batches(&lists, tag, &mut *emit) {
                while next_segment()?.is_some() {}
                return Err(e);
            }
        }
        Ok(())
    })
}

/// Write `lists` as a TREC run to any writer (see [`write_batches`]).
pub fn write_run_lists_to(
    w: &mut (impl Write + Send),
    lists: &RunLists,
    tag: &str,
) -> std::io::Result<()> {
    write_batches(lists, tag, |texts| {
        texts.iter().try_for_each(|text| w.write_all(text))
    })?;
    w.flush()
}

/// Format `lists` as TREC run text and hand it to `emit` batch after batch, in order. Queries are
/// formatted in parallel in batches, into buffers reused from batch to batch, and each batch is
/// formatted while `emit` writes the one before it. An id a run cannot hold or a non-finite
/// score (a CombSUM overflow) is an error, never emitted.
fn write_batches(
    lists: &RunLists,
    tag: &str,
    mut emit: impl FnMut(&[Vec<u8>]) -> std::io::Result<()> + Send,
) -> std::io::Result<()> {
    /// Queries per batch, and per parallel piece of a batch.
    const BATCH: usize = 512;
    const PIECE: usize = 16;
    let format = |first: usize, buffers: &mut Vec<Vec<u8>>| -> std::io::Result<()> {
        let end = (first + BATCH).min(lists.num_queries());
        buffers.resize_with(BATCH.div_ceil(PIECE), Vec::new);
        buffers.par_iter_mut().enumerate().try_for_each(|(i, out)| {
            out.clear();
            let mut ints = itoa::Buffer::new();
            let mut floats = zmij::Buffer::new();
            // What every line of a query starts with, and what every line ends with: copied
            // whole, fewer and longer copies per line.
            let mut head = Vec::new();
            let tail = [b" ", tag.as_bytes(), b"\n"].concat();
            for q in (first + i * PIECE).min(end)..(first + (i + 1) * PIECE).min(end) {
                let qid = lists.bytes(lists.queries[q].qid);
                let qid_clean = plain_ascii_id(qid);
                head.clear();
                head.extend_from_slice(qid);
                head.extend_from_slice(b" Q0 ");
                for (rank, d) in lists.doc_entries(q).iter().enumerate() {
                    let doc = lists.doc_bytes(d);
                    if !(qid_clean && plain_ascii_id(doc) && d.score.is_finite()) {
                        check_run_line(
                            &String::from_utf8_lossy(qid),
                            &String::from_utf8_lossy(doc),
                            d.score,
                        )?;
                    }
                    let rank = ints.format(rank + 1).as_bytes();
                    let score = floats.format_finite(d.score).as_bytes();
                    out.reserve(head.len() + doc.len() + rank.len() + score.len() + 2 + tail.len());
                    out.extend_from_slice(&head);
                    out.extend_from_slice(doc);
                    out.push(b' ');
                    out.extend_from_slice(rank);
                    out.push(b' ');
                    out.extend_from_slice(score);
                    out.extend_from_slice(&tail);
                }
            }
            Ok(())
        })
    };
    let (mut ready, mut next) = (Vec::new(), Vec::new());
    format(0, &mut ready)?;
    for first in (BATCH..lists.num_queries()).step_by(BATCH) {
        let (written, formatted) = rayon::join(|| emit(&ready), || format(first, &mut next));
        written?;
        formatted?;
        std::mem::swap(&mut ready, &mut next);
    }
    emit(&ready)
}

/// Whether `id` is one that [`check_run_line`] accepts without looking further: not empty, all
/// printable ASCII. Anything else (rare: non-ASCII ids) goes through the full check.
#[inline]
fn plain_ascii_id(id: &[u8]) -> bool {
    !id.is_empty() && id.iter().all(|&b| b > b' ' && b < 0x7f)
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
            text.push_str(&run_line(i % 7, &format!("d{i}"), i, (i % 5) as f64 * 0.5));
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

    fn run_line(query: usize, doc: &str, rank: usize, score: f64) -> String {
        format!("q{query} Q0 {doc} {rank} {score:?} run\n")
    }

    fn parse_chunked(path: &Path, bytes: &[u8], step: usize) -> RunLists {
        let mut ranges = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let end = match memchr::memchr(b'\n', &bytes[(at + step).min(bytes.len() - 1)..]) {
                Some(i) => (at + step).min(bytes.len() - 1) + i + 1,
                None => bytes.len(),
            };
            ranges.push(at..end);
            at = end;
        }
        parse_ranges(path, bytes, &ranges).unwrap()
    }

    #[test]
    fn queries_held_together_are_parsed_in_place_with_long_ids_across_chunks() {
        let long_or_short = |i: usize| match i % 3 {
            0 => format!("a-rather-long-document-id-{i}"),
            _ => format!("d{i}"),
        };
        let text: String = (0..2000)
            .map(|i| run_line(i / 300, &long_or_short(i), i, (i % 11) as f64))
            .collect();
        let (_dir, p) = temp_file("r.trec", &text);
        let expected = read_run(&p).unwrap();
        assert_eq!(read_run_lists(&p).unwrap().to_run(), expected);
        for step in [40, 64, 1000, 5000] {
            assert_eq!(parse_chunked(&p, text.as_bytes(), step).to_run(), expected);
        }
        // A blank line between two lines of one query leaves a gap: the regrouping path.
        let gapped = text.replacen("\n", "\n\n", 500);
        assert_eq!(parse_chunked(&p, gapped.as_bytes(), 64).to_run(), expected);
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
    fn the_atomic_writer_writes_what_the_plain_writer_writes() {
        // Sizes around the direct writer's block and across several formatting batches.
        let dir = tempfile::tempdir().unwrap();
        for (queries, docs) in [(0, 0), (1, 1), (3, 70), (700, 3), (1100, 9)] {
            let mut builder = crate::fusion::RunListsBuilder::default();
            for q in 0..queries {
                let ids: Vec<String> = (0..docs)
                    .map(|d| format!("doc-{q}-{d}{}", "x".repeat((q + d) % 23)))
                    .collect();
                let scored = ids
                    .iter()
                    .enumerate()
                    .map(|(d, id)| (id.as_bytes(), 1.0 / (60.0 + d as f64) - q as f64));
                builder
                    .push_query(format!("q{q}").as_bytes(), scored)
                    .unwrap();
            }
            let lists = builder.finish();
            let mut expected = Vec::new();
            write_run_lists_to(&mut expected, &lists, "tag").unwrap();
            let out = dir.path().join(format!("{queries}x{docs}.trec"));
            // Twice: the second write replaces the first.
            for _ in 0..2 {
                write_run_lists(&out, &lists, "tag").unwrap();
                assert!(
                    std::fs::read(&out).unwrap() == expected,
                    "{queries} x {docs}"
                );
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 5);
    }

    #[test]
    fn empty_file_is_an_empty_run() {
        let (_dir, p) = temp_file("e.trec", "");
        assert_eq!(read_run_lists(&p).unwrap().num_queries(), 0);
    }

    #[test]
    fn read_in_pieces_equals_the_whole_file_read() {
        let mut text = String::new();
        for i in 0..2000 {
            // Interleaved queries, ties, blank lines, long and short ids, varied separators.
            let sep = ["\t", " ", "  "][i % 3];
            let doc = format!("d{}{}", i, "x".repeat((i * 7) % 40));
            text.push_str(&format!(
                "q{}{sep}Q0{sep}{doc}{sep}{i}{sep}{}\n",
                (i / 50) % 9,
                (i % 5) as f64 * 0.5
            ));
            if i % 97 == 0 {
                text.push('\n');
            }
        }
        text.push_str(&format!(
            "q1 Q0 long 1 1 {}\nq1 Q0 last 1 -1e3",
            "t".repeat(3000)
        ));
        let (_dir, p) = temp_file("r.trec", &text);
        let whole = parse_run_bytes(&p, text.as_bytes()).unwrap().to_run();
        for piece in [1, 5, 64, 1000, 4096, 1 << 20] {
            let lists = read_in_pieces(&p, 0, piece).unwrap().unwrap();
            assert_eq!(lists.to_run(), whole, "piece {piece}");
        }
        for broken in [
            format!("{text}\nq1 Q0 last 2 1\n"),
            format!("{text}\nq1 Q0 other 2 high\n"),
        ] {
            let (_dir, p) = temp_file("b.trec", &broken);
            for piece in [7, 1 << 20] {
                assert!(read_in_pieces(&p, 0, piece).unwrap().is_none());
            }
            assert!(read_run_lists(&p).is_err());
        }
    }
}
