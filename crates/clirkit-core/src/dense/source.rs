//! Where a streamed build reads its vectors: rows of a matrix fetched a chunk at a time, from
//! memory or from a `.npy` file (float32 or float16, little endian, C order).
//!
//! The file is read with `read()` into a buffer the size of the chunk, not memory-mapped, so the
//! pages of a file of many GB are never counted in the resident set of the process; float16
//! rows are converted a chunk at a time.

use crate::error::{Error, IoContext, Result};
use crate::io::bytes::as_byte_slice_mut;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Rows of `dim` float32 values, read by range.
pub trait VectorSource: Sync {
    fn dim(&self) -> usize;
    fn rows(&self) -> usize;
    /// Rows `first..first + out.len() / dim` into `out`, checked to be finite.
    fn read_rows(&self, first: usize, out: &mut [f32]) -> Result<()>;
}

/// Name the first non-finite value of rows starting at row `first`.
fn check_finite(values: &[f32], dim: usize, first: usize, what: &str) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(pos) => Err(Error::invalid(format!(
            "{what}: vector {} has a non-finite value ({}) at dimension {}",
            first + pos / dim,
            values[pos],
            pos % dim
        ))),
    }
}

/// A row-major matrix in memory.
pub struct SliceSource<'a> {
    data: &'a [f32],
    dim: usize,
}

impl<'a> SliceSource<'a> {
    pub fn new(data: &'a [f32], dim: usize) -> Result<Self> {
        super::check_matrix(data, dim, "embeddings")?;
        Ok(SliceSource { data, dim })
    }

    /// A matrix checked before (finite values, a whole number of rows of `dim > 0`).
    pub(crate) fn trusted(data: &'a [f32], dim: usize) -> Self {
        SliceSource { data, dim }
    }
}

impl VectorSource for SliceSource<'_> {
    fn dim(&self) -> usize {
        self.dim
    }
    fn rows(&self) -> usize {
        self.data.len() / self.dim
    }
    fn read_rows(&self, first: usize, out: &mut [f32]) -> Result<()> {
        out.copy_from_slice(&self.data[first * self.dim..first * self.dim + out.len()]);
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Element {
    F32,
    F16,
}

impl Element {
    fn size(self) -> usize {
        match self {
            Element::F32 => 4,
            Element::F16 => 2,
        }
    }
}

/// A 2-D float32 or float16 `.npy` file, read by row ranges.
pub struct NpyFile {
    path: PathBuf,
    file: Mutex<File>,
    element: Element,
    rows: usize,
    dim: usize,
    data_start: u64,
}

/// The value of `key` in a `.npy` header dictionary, up to the next top-level comma.
fn header_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')')? + 1
    } else {
        rest.find([',', '}'])?
    };
    Some(rest[..end].trim())
}

impl NpyFile {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mut file = File::open(&path).at(&path)?;
        let bad = |why: &str| Error::format(&path, format!("not a usable .npy matrix: {why}"));
        let mut lead = [0u8; 10];
        file.read_exact(&mut lead)
            .map_err(|_| bad("shorter than a .npy header"))?;
        if &lead[..6] != b"\x93NUMPY" {
            return Err(bad("bad magic bytes"));
        }
        let (header_len, prefix) = match lead[6] {
            1 => (u16::from_le_bytes([lead[8], lead[9]]) as usize, 10),
            2 | 3 => {
                let mut more = [0u8; 2];
                file.read_exact(&mut more)
                    .map_err(|_| bad("truncated header"))?;
                let len = u32::from_le_bytes([lead[8], lead[9], more[0], more[1]]);
                (len as usize, 12)
            }
            v => return Err(bad(&format!("unknown format version {v}"))),
        };
        let mut header = vec![0u8; header_len];
        file.read_exact(&mut header)
            .map_err(|_| bad("truncated header"))?;
        let header = String::from_utf8(header).map_err(|_| bad("header is not text"))?;
        let element = match header_value(&header, "descr") {
            Some("'<f4'") => Element::F32,
            Some("'<f2'") => Element::F16,
            other => {
                return Err(bad(&format!(
                    "dtype {} (float32 '<f4' or float16 '<f2' expected)",
                    other.unwrap_or("missing")
                )))
            }
        };
        if header_value(&header, "fortran_order") != Some("False") {
            return Err(bad("Fortran order (save a C-ordered array)"));
        }
        let shape: Vec<usize> = header_value(&header, "shape")
            .and_then(|s| s.strip_prefix('(')?.strip_suffix(')'))
            .map(|s| {
                s.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| p.parse::<usize>())
                    .collect::<std::result::Result<_, _>>()
            })
            .transpose()
            .map_err(|_| bad("unreadable shape"))?
            .ok_or_else(|| bad("missing shape"))?;
        let [rows, dim] = shape[..] else {
            return Err(bad(&format!(
                "shape {shape:?}: a 2-D matrix (rows are vectors) is needed"
            )));
        };
        if dim == 0 {
            return Err(bad("dimension 0"));
        }
        let data_start = (prefix + header_len) as u64;
        let need = data_start + (rows * dim * element.size()) as u64;
        let have = file.metadata().at(&path)?.len();
        if have != need {
            return Err(bad(&format!(
                "{have} bytes, but its shape ({rows}, {dim}) needs {need}"
            )));
        }
        Ok(NpyFile {
            path,
            file: Mutex::new(file),
            element,
            rows,
            dim,
            data_start,
        })
    }
}

impl VectorSource for NpyFile {
    fn dim(&self) -> usize {
        self.dim
    }
    fn rows(&self) -> usize {
        self.rows
    }
    fn read_rows(&self, first: usize, out: &mut [f32]) -> Result<()> {
        let size = self.element.size();
        let read = |bytes: &mut [u8]| -> Result<()> {
            let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
            let at = self.data_start + (first * self.dim * size) as u64;
            file.seek(SeekFrom::Start(at)).at(&self.path)?;
            file.read_exact(bytes).at(&self.path)
        };
        match self.element {
            Element::F32 => {
                // Read into the rows themselves (no second buffer), then from little endian.
                read(as_byte_slice_mut(out))?;
                for v in out.iter_mut() {
                    *v = f32::from_le_bytes(v.to_ne_bytes());
                }
            }
            Element::F16 => {
                let mut raw = vec![0u8; out.len() * size];
                read(&mut raw)?;
                for (v, b) in out.iter_mut().zip(raw.chunks_exact(2)) {
                    *v = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
                }
            }
        }
        check_finite(out, self.dim, first, &self.path.display().to_string())
    }
}

/// The dimension of parts whose rows have dimensions `dims`, which must be the same and at least
/// one; `what` names the whole and `row` its rows (`vector`, `token`) in errors.
pub fn shared_dim(dims: impl IntoIterator<Item = usize>, what: &str, row: &str) -> Result<usize> {
    let mut dims = dims.into_iter();
    let Some(dim) = dims.next() else {
        return Err(Error::invalid(format!("{what}: no {row} files given")));
    };
    match dims.enumerate().find(|&(_, d)| d != dim) {
        None => Ok(dim),
        Some((i, other)) => Err(Error::invalid(format!(
            "{what}: part {} has {row}s of dimension {other}, part 1 has {dim}",
            i + 2
        ))),
    }
}

/// One part of a [`Concat`]: a source, whole or only some of its rows.
pub struct ConcatPart {
    pub source: Box<dyn VectorSource + Send>,
    /// The rows kept, in the order they are read (each below the source's row count); None: all.
    pub rows: Option<Vec<usize>>,
}

/// The rows of several sources one after another as one source (a task's documents spread over
/// several encoded files, or a language's rows of one), read from the parts a chunk at a time: runs
/// of consecutive kept rows are read with one call, so nothing is copied into a matrix first.
pub struct Concat {
    parts: Vec<ConcatPart>,
    /// Row of the whole at which each part starts, then the total.
    starts: Vec<usize>,
    dim: usize,
}

impl Concat {
    /// `what` names the source in errors; parts must share their dimension.
    pub fn new(parts: Vec<ConcatPart>, what: &str) -> Result<Self> {
        let dim = shared_dim(parts.iter().map(|p| p.source.dim()), what, "vector")?;
        let mut starts = vec![0usize];
        for (i, part) in parts.iter().enumerate() {
            let rows = match &part.rows {
                None => part.source.rows(),
                Some(kept) => {
                    if let Some(&bad) = kept.iter().find(|&&r| r >= part.source.rows()) {
                        return Err(Error::invalid(format!(
                            "{what}: part {} has {} rows; row {bad} was asked for",
                            i + 1,
                            part.source.rows()
                        )));
                    }
                    kept.len()
                }
            };
            starts.push(starts[i] + rows);
        }
        Ok(Concat { parts, starts, dim })
    }
}

impl VectorSource for Concat {
    fn dim(&self) -> usize {
        self.dim
    }
    fn rows(&self) -> usize {
        *self.starts.last().unwrap_or(&0)
    }
    fn read_rows(&self, first: usize, out: &mut [f32]) -> Result<()> {
        let dim = self.dim;
        let (mut row, end) = (first, first + out.len() / dim);
        while row < end {
            // the part holding `row`: the last one starting at or before it
            let p = self.starts.partition_point(|&s| s <= row) - 1;
            let part = &self.parts[p];
            let (local, stop) = (
                row - self.starts[p],
                end.min(self.starts[p + 1]) - self.starts[p],
            );
            let dst = &mut out[(row - first) * dim..];
            match &part.rows {
                None => part
                    .source
                    .read_rows(local, &mut dst[..(stop - local) * dim])?,
                Some(kept) => {
                    let mut i = local;
                    while i < stop {
                        let mut j = i + 1;
                        while j < stop && kept[j] == kept[j - 1] + 1 {
                            j += 1;
                        }
                        let at = (i - local) * dim;
                        part.source
                            .read_rows(kept[i], &mut dst[at..at + (j - i) * dim])?;
                        i = j;
                    }
                }
            }
            row = self.starts[p] + stop;
        }
        Ok(())
    }
}

/// The bytes of a `.npy` file of dtype `dtype` (e.g. `<f4`), shape `shape` (e.g. `(3, 2)`) and data
/// `payload`, for tests.
#[cfg(test)]
pub(crate) fn npy(dtype: &str, shape: &str, payload: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_float32_and_float16_rows() {
        let dir = tempfile::tempdir().unwrap();
        let values = [1.0f32, -2.5, 0.25, 3.0, 0.5, -0.125];
        let f32_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let f16_bytes: Vec<u8> = values
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect();
        for (dtype, payload) in [("<f4", f32_bytes), ("<f2", f16_bytes)] {
            let p = dir.path().join(format!("m{}.npy", &dtype[1..]));
            std::fs::write(&p, npy(dtype, "(3, 2)", &payload)).unwrap();
            let src = NpyFile::open(&p).unwrap();
            assert_eq!((src.rows(), src.dim()), (3, 2));
            let mut out = [0f32; 4];
            src.read_rows(1, &mut out).unwrap();
            assert_eq!(out, values[2..6]);
        }
    }

    #[test]
    fn concat_reads_parts_and_kept_rows_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, values: &[f32]| {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let p = dir.path().join(name);
            let shape = format!("({}, 2)", values.len() / 2);
            std::fs::write(&p, npy("<f4", &shape, &bytes)).unwrap();
            Box::new(NpyFile::open(&p).unwrap()) as Box<dyn VectorSource + Send>
        };
        let a: Vec<f32> = (0..10).map(|v| v as f32).collect(); // rows 0..5
        let b: Vec<f32> = (100..108).map(|v| v as f32).collect(); // rows 0..4
        let parts = vec![
            ConcatPart {
                source: write("a.npy", &a),
                rows: Some(vec![1, 2, 4]),
            },
            ConcatPart {
                source: write("b.npy", &b),
                rows: None,
            },
        ];
        let all = Concat::new(parts, "test").unwrap();
        assert_eq!((all.rows(), all.dim()), (7, 2));
        let want = [
            2.0, 3.0, 4.0, 5.0, 8.0, 9.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0,
        ];
        for first in 0..7 {
            for n in 1..=7 - first {
                let mut out = vec![0f32; n * 2];
                all.read_rows(first, &mut out).unwrap();
                assert_eq!(out, want[first * 2..(first + n) * 2], "rows {first}+{n}");
            }
        }
        let bad = vec![ConcatPart {
            source: write("c.npy", &a),
            rows: Some(vec![5]),
        }];
        let e = Concat::new(bad, "emb").err().unwrap().to_string();
        assert!(e.contains("emb: part 1 has 5 rows; row 5"), "{e}");
    }

    #[test]
    fn refuses_other_dtypes_shapes_and_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.npy");
        for (dtype, shape, len, want) in [
            ("<f8", "(1, 2)", 16, "dtype '<f8'"),
            ("<f4", "(4,)", 16, "2-D matrix"),
            ("<f4", "(2, 2)", 12, "needs"),
        ] {
            std::fs::write(&p, npy(dtype, shape, &vec![0u8; len])).unwrap();
            let e = NpyFile::open(&p).err().unwrap().to_string();
            assert!(e.contains(want) && e.contains("m.npy"), "{e}");
        }
        let nan: Vec<u8> = [0.0f32, f32::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(&p, npy("<f4", "(1, 2)", &nan)).unwrap();
        let e = NpyFile::open(&p)
            .unwrap()
            .read_rows(0, &mut [0f32; 2])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("vector 0 has a non-finite value"), "{e}");
    }
}
