//! Where a streamed build reads its vectors: rows of a matrix fetched a chunk at a time, from
//! memory or from a `.npy` file (float32 or float16, little endian, C order).
//!
//! The file is read with `read()` into a buffer the size of the chunk, not memory-mapped, so the
//! pages of a file of many GB are never counted in the resident set of the process; float16
//! rows are converted a chunk at a time.

use crate::error::{Error, IoContext, Result};
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
        let mut raw = vec![0u8; out.len() * size];
        {
            let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
            let at = self.data_start + (first * self.dim * size) as u64;
            file.seek(SeekFrom::Start(at)).at(&self.path)?;
            file.read_exact(&mut raw).at(&self.path)?;
        }
        match self.element {
            Element::F32 => {
                for (v, b) in out.iter_mut().zip(raw.chunks_exact(4)) {
                    *v = f32::from_le_bytes(b.try_into().unwrap());
                }
            }
            Element::F16 => {
                for (v, b) in out.iter_mut().zip(raw.chunks_exact(2)) {
                    *v = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
                }
            }
        }
        check_finite(out, self.dim, first, &self.path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(dtype: &str, shape: &str, payload: &[u8]) -> Vec<u8> {
        let mut header =
            format!("{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape}, }}");
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
