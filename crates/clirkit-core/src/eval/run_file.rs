//! A fast TREC run reader for evaluation: the file is memory-mapped and parsed in parallel
//! chunks without copying ids (documents borrow their ids from the mapping), scores take a
//! fast exact path for plain decimals. Same grammar and errors as [`crate::io::trec::read_run`]:
//! `qid Q0 docid rank score [tag]`, blank lines skipped, a repeated (qid, docid) is an error
//! naming both lines.

use crate::error::{Error, IoContext, Result};
use crate::eval::evaluator::RunQuery;
use crate::eval::ranked::ScoredRef;
use memmap2::Mmap;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use std::path::{Path, PathBuf};

enum Bytes {
    Mapped(Mmap),
    Empty,
}

/// An opened run file; [`RunFile::queries`] parses it.
pub struct RunFile {
    bytes: Bytes,
    path: PathBuf,
}

/// A parse failure located by byte offset (turned into a line number only when reported).
struct Located {
    offset: usize,
    message: String,
}

impl RunFile {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = std::fs::File::open(&path).at(&path)?;
        let len = file.metadata().at(&path)?.len();
        let bytes = if len == 0 {
            Bytes::Empty
        } else {
            // SAFETY: the mapping is read-only; a run file changed while being read gives wrong
            // numbers or a parse error, never undefined behaviour in safe code we rely on.
            Bytes::Mapped(unsafe { Mmap::map(&file) }.at(&path)?)
        };
        Ok(RunFile { bytes, path })
    }

    fn data(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(m) => m,
            Bytes::Empty => &[],
        }
    }

    fn line_of(&self, offset: usize) -> u64 {
        memchr::memchr_iter(b'\n', &self.data()[..offset]).count() as u64 + 1
    }

    fn error(&self, e: Located) -> Error {
        Error::parse(&self.path, self.line_of(e.offset), e.message)
    }

    /// Parse into queries (first-appearance order; documents in file order).
    pub fn queries(&self) -> Result<Vec<RunQuery<'_>>> {
        let data = self.data();
        let chunks = split_chunks(data, rayon::current_num_threads() * 4);
        let parsed: Vec<std::result::Result<Vec<RunQuery>, Located>> = chunks
            .par_iter()
            .map(|&(start, end)| parse_chunk(data, start, end))
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
            .filter_map(|q| find_duplicate(data, q))
            .min_by_key(|d| d.offset);
        if let Some(d) = first_dup {
            return Err(self.error(d));
        }
        Ok(queries)
    }
}

/// Chunk boundaries at line starts.
fn split_chunks(data: &[u8], n: usize) -> Vec<(usize, usize)> {
    let target = (data.len() / n.max(1)).max(1 << 16);
    let mut out = Vec::new();
    let mut start = 0;
    while start < data.len() {
        let mut end = (start + target).min(data.len());
        if end < data.len() {
            end = memchr::memchr(b'\n', &data[end..]).map_or(data.len(), |p| end + p + 1);
        }
        out.push((start, end));
        start = end;
    }
    out
}

#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c')
}

fn parse_chunk(
    data: &[u8],
    start: usize,
    end: usize,
) -> std::result::Result<Vec<RunQuery<'_>>, Located> {
    let chunk = &data[start..end];
    let text = std::str::from_utf8(chunk).map_err(|e| Located {
        offset: start + e.valid_up_to(),
        message: "not valid UTF-8".to_string(),
    })?;
    let mut segments: Vec<RunQuery> = Vec::new();
    let mut pos = 0;
    let bytes = text.as_bytes();
    while pos < bytes.len() {
        let line_end = memchr::memchr(b'\n', &bytes[pos..]).map_or(bytes.len(), |p| pos + p);
        let line_start = pos;
        pos = line_end + 1;
        let mut fields: [&str; 6] = [""; 6];
        let mut count = 0;
        let mut i = line_start;
        while i < line_end {
            while i < line_end && is_space(bytes[i]) {
                i += 1;
            }
            if i == line_end {
                break;
            }
            let f = i;
            while i < line_end && !is_space(bytes[i]) {
                i += 1;
            }
            if count < 6 {
                fields[count] = &text[f..i];
            }
            count += 1;
        }
        if count == 0 {
            continue;
        }
        if !(5..=6).contains(&count) {
            return Err(Located {
                offset: start + line_start,
                message: format!("expected 6 columns 'qid Q0 docid rank score tag', found {count}"),
            });
        }
        let score = parse_score(fields[4]).ok_or_else(|| Located {
            offset: start + line_start,
            message: format!("score '{}' is not a number", fields[4]),
        })?;
        if !score.is_finite() {
            return Err(Located {
                offset: start + line_start,
                message: format!("score '{}' is not finite", fields[4]),
            });
        }
        let qid = fields[0];
        let doc = ScoredRef::new(score, fields[2].as_bytes());
        match segments.last_mut() {
            Some(seg) if seg.qid == qid => seg.docs.push(doc),
            _ => segments.push(RunQuery {
                qid,
                docs: vec![doc],
            }),
        }
    }
    Ok(segments)
}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Parse a score as C's `atof` would (correctly rounded double). Plain decimals with at most 15
/// significant digits take an exact fast path (mantissa and power of ten are exact doubles, so
/// one division rounds correctly); everything else goes to the standard parser.
#[inline]
pub fn parse_score(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let mut mantissa: u64 = 0;
    let mut n_digits = 0;
    let mut frac_digits = 0;
    let mut seen_dot = false;
    let mut plain = !digits.is_empty();
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                mantissa = mantissa.wrapping_mul(10).wrapping_add((c - b'0') as u64);
                n_digits += 1;
                if seen_dot {
                    frac_digits += 1;
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => {
                plain = false;
                break;
            }
        }
    }
    if plain && n_digits > 0 && n_digits <= 15 {
        let v = mantissa as f64 / POW10[frac_digits];
        return Some(if neg { -v } else { v });
    }
    s.parse::<f64>().ok()
}

fn find_duplicate(data: &[u8], q: &RunQuery) -> Option<Located> {
    let mut seen: FxHashSet<&[u8]> =
        FxHashSet::with_capacity_and_hasher(q.docs.len(), Default::default());
    let mut first_dup: Option<Located> = None;
    for d in &q.docs {
        if let Some(first) = seen.get(d.id) {
            let offset = d.id.as_ptr() as usize - data.as_ptr() as usize;
            let first_offset = first.as_ptr() as usize - data.as_ptr() as usize;
            let first_line = memchr::memchr_iter(b'\n', &data[..first_offset]).count() + 1;
            let doc = String::from_utf8_lossy(d.id);
            first_dup = Some(Located {
                offset,
                message: format!(
                    "duplicate document '{doc}' for query '{}' (first at line {first_line})",
                    q.qid
                ),
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
        let p = write(
            &dir,
            "q1 Q0 a 1 1 x\nq2 Q0 a 1 1 x\nq1 Q0 b 2 0.5 x\nq1 Q0 a 2 0.5 x\n",
        );
        let e = RunFile::open(&p)
            .unwrap()
            .queries()
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("run.trec:4: duplicate document 'a' for query 'q1' (first at line 1)"),
            "{e}"
        );
        let p = write(&dir, "q1 Q0 a 1 1 x\nq1 Q0 b 1 high x\n");
        let e = RunFile::open(&p)
            .unwrap()
            .queries()
            .unwrap_err()
            .to_string();
        assert!(e.ends_with(":2: score 'high' is not a number"), "{e}");
        let p = write(&dir, "q1 Q0 a 1 nan x\n");
        assert!(RunFile::open(&p).unwrap().queries().is_err());
        let p = write(&dir, "q1 Q0 a 1\n");
        let e = RunFile::open(&p)
            .unwrap()
            .queries()
            .unwrap_err()
            .to_string();
        assert!(e.contains(":1: expected 6 columns"), "{e}");
        let p = write(&dir, "q1 Q0 a 1 1 x\nq1 Q0 \u{e9} 1 1 x\n");
        std::fs::write(&p, b"q1 Q0 a 1 1 x\nq1 Q0 \xff 1 1 x\n").unwrap();
        let e = RunFile::open(&p)
            .unwrap()
            .queries()
            .unwrap_err()
            .to_string();
        assert!(e.contains(":2: not valid UTF-8"), "{e}");
    }

    #[test]
    fn fast_score_path_is_exact() {
        for s in [
            "0",
            "1.5",
            "-0.25",
            "12.345678",
            "0.1",
            "123456789012345",
            "3.14159265358979",
            "+7",
            "1e-3",
            "1.",
            ".5",
        ] {
            assert_eq!(parse_score(s), s.parse::<f64>().ok(), "{s}");
        }
        assert_eq!(parse_score("1.2.3"), None);
        assert_eq!(parse_score("-"), None);
        let mut x: u64 = 12345;
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (x >> 11) as f64 / (1u64 << 53) as f64 * 100.0;
            let s = format!("{v:.6}");
            assert_eq!(parse_score(&s), s.parse::<f64>().ok(), "{s}");
        }
    }
}
