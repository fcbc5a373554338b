//! Bytes that are either owned or memory-mapped, and typed views over them: the one place where
//! file bytes become `&[u8]` or `&[T]`, so the `unsafe` and its argument are written once.
//!
//! [`Bytes`] holds a `Vec<u8>` or a read-only mapping (optionally starting past a header).
//! [`Array<T>`] is a slice of plain numbers (`u8`, `u32`, `u64`, `f32`), owned as a `Vec<T>` or
//! viewed in [`Bytes`] after its length and alignment are checked.

use crate::error::{Error, IoContext, Result};
use memmap2::{Mmap, MmapOptions};
use std::fs::File;
use std::ops::Deref;
use std::path::Path;

enum Storage {
    Owned(Vec<u8>),
    Mapped(Mmap),
}

/// Owned or memory-mapped bytes (see the module documentation); derefs to `[u8]`.
pub struct Bytes {
    storage: Storage,
    start: usize,
    end: usize,
}

impl Bytes {
    /// Map the whole file at `path` read-only (an empty file gives empty bytes). With `populate`,
    /// the pages are read in up front: cheaper than one fault per page when every byte is read.
    pub fn map(path: impl AsRef<Path>, populate: bool) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path).at(path)?;
        if file.metadata().at(path)?.len() == 0 {
            return Ok(Bytes::from(Vec::new()));
        }
        let mut options = MmapOptions::new();
        if populate {
            options.populate();
        }
        // SAFETY: the mapping is read-only. clirkit never changes a finished file in place (its
        // writes go to a temporary file renamed over the old one), so the bytes stay as they
        // were; a file another program truncates or rewrites while mapped is the usual mmap
        // caveat: wrong numbers, a parse error or SIGBUS, the same for every reader here. Only
        // index files come here; inputs are read, never mapped (`io::input`, README "Index
        // integrity", tested by test_truncated_files_under_an_open_index_do_not_kill_its_reader).
        let map = unsafe { options.map(&file) }.at(path)?;
        Ok(Bytes {
            end: map.len(),
            storage: Storage::Mapped(map),
            start: 0,
        })
    }

    /// These bytes without their first `n` (a header already checked).
    pub fn skip(mut self, n: usize) -> Self {
        assert!(n <= self.len(), "cannot skip {n} of {} bytes", self.len());
        self.start += n;
        self
    }

    /// The first `n` of these bytes (a payload without the trailer that follows it).
    pub fn truncate(mut self, n: usize) -> Self {
        assert!(n <= self.len(), "cannot keep {n} of {} bytes", self.len());
        self.end = self.start + n;
        self
    }

    /// Whether the bytes live in a mapping (rather than in memory of their own).
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped(_))
    }

    /// Drop the pages wholly inside bytes `range` of a mapping from this process's resident set;
    /// they are read again from the file (the page cache) when next touched. A no-op for owned
    /// bytes and off Linux. What a reader that checks far more bytes than it keeps calls after
    /// checking them (the stored vectors' chunk CRCs, each 64 KiB for one re-scored row).
    pub fn release(&self, range: std::ops::Range<usize>) {
        #[cfg(target_os = "linux")]
        if let Storage::Mapped(_) = self.storage {
            let end = range.end.min(self.len());
            if range.start >= end {
                return;
            }
            let page = 4096usize;
            let base = self.as_slice().as_ptr() as usize;
            let (first, last) = (
                (base + range.start).next_multiple_of(page),
                (base + end) / page * page,
            );
            if first < last {
                // SAFETY: [first, last) is page-aligned and inside a live read-only shared mapping of
                // a file clirkit never writes in place (see `map`): MADV_DONTNEED only unmaps those
                // pages, and the next access maps the file's same bytes again, so every slice of
                // these bytes stays valid and unchanged.
                unsafe {
                    libc::madvise(
                        first as *mut libc::c_void,
                        last - first,
                        libc::MADV_DONTNEED,
                    );
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = range;
    }

    /// [`Bytes::release`] of every page of the 64 KiB-aligned windows (within the mapping) that
    /// hold bytes `range`: a page fault on a mapped file also maps the cached pages around it (the
    /// kernel's fault-around, 64 KiB), so a reader that touches a few scattered bytes (one stored
    /// vector) and releases them after use keeps its resident set at what it is reading now.
    pub fn release_around(&self, range: std::ops::Range<usize>) {
        #[cfg(target_os = "linux")]
        if let Storage::Mapped(map) = &self.storage {
            let window = 64usize << 10;
            let (base, at) = (map.as_ptr() as usize, self.as_slice().as_ptr() as usize);
            let first = (at + range.start).saturating_sub(base) / window * window;
            let last = ((at + range.end.min(self.len())).saturating_sub(base))
                .next_multiple_of(window)
                .min(map.len());
            if first < last {
                // SAFETY: as in `release`: whole pages of this live read-only shared file mapping
                // (`first` and `last` are offsets in the mapping, page multiples or its end).
                unsafe {
                    libc::madvise(
                        (base + first) as *mut libc::c_void,
                        last - first,
                        libc::MADV_DONTNEED,
                    );
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = range;
    }

    pub fn as_slice(&self) -> &[u8] {
        let all: &[u8] = match &self.storage {
            Storage::Owned(v) => v,
            Storage::Mapped(m) => m,
        };
        &all[self.start..self.end]
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes {
            end: v.len(),
            storage: Storage::Owned(v),
            start: 0,
        }
    }
}

impl Deref for Bytes {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Numbers that any bit pattern of their size is a valid value of, without padding, so a byte
/// slice of the right length and alignment can be read as a slice of them.
///
/// # Safety
/// Only for types with no padding and no invalid bit patterns.
pub unsafe trait Plain: Copy + 'static {}
// SAFETY: plain integers and floats: no padding, every bit pattern a value.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for u16 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}
// SAFETY: as above.
unsafe impl Plain for f32 {}

enum Elements<T> {
    Owned(Vec<T>),
    View(Bytes),
}

/// A slice of little-endian plain numbers, owned or viewed in [`Bytes`]; derefs to `[T]`.
pub struct Array<T: Plain> {
    elements: Elements<T>,
}

impl<T: Plain> Array<T> {
    /// View `bytes` (read from `path`, named in errors) as exactly `count` values of `T`.
    pub fn view(bytes: Bytes, count: usize, path: impl AsRef<Path>) -> Result<Self> {
        let size = std::mem::size_of::<T>();
        if Some(bytes.len()) != count.checked_mul(size) {
            return Err(Error::format(
                path,
                format!(
                    "holds {} bytes, the manifest implies {count} values of {size} bytes",
                    bytes.len(),
                ),
            ));
        }
        if !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::format(path, "payload is not aligned"));
        }
        if cfg!(target_endian = "big") && size > 1 {
            return Err(Error::format(
                path,
                "clirkit files are little endian; this host is not",
            ));
        }
        Ok(Array {
            elements: Elements::View(bytes),
        })
    }

    pub fn as_slice(&self) -> &[T] {
        match &self.elements {
            Elements::Owned(v) => v,
            Elements::View(bytes) => {
                // SAFETY: `view` checked that the bytes hold exactly `len / size_of::<T>()`
                // values, are aligned for `T`, and are little endian like the host; `T: Plain`
                // makes every bit pattern a value; the slice borrows `self`, which owns the bytes
                // (a mapping never moves while it lives).
                unsafe {
                    std::slice::from_raw_parts(
                        bytes.as_ptr() as *const T,
                        bytes.len() / std::mem::size_of::<T>(),
                    )
                }
            }
        }
    }

    /// The values' bytes (little endian), as they are stored in a file.
    pub fn as_bytes(&self) -> &[u8] {
        as_byte_slice(self.as_slice())
    }

    /// [`Bytes::release`] of bytes `range` of a mapped view; a no-op for owned values.
    pub fn release(&self, range: std::ops::Range<usize>) {
        if let Elements::View(bytes) = &self.elements {
            bytes.release(range);
        }
    }

    /// [`Bytes::release_around`] of values `range` of a mapped view; a no-op for owned values.
    pub fn release_values_around(&self, range: std::ops::Range<usize>) {
        if let Elements::View(bytes) = &self.elements {
            let size = std::mem::size_of::<T>();
            bytes.release_around(range.start * size..range.end * size);
        }
    }
}

/// The bytes of plain numbers (little endian on the hosts clirkit runs on), as stored in a file.
pub fn as_byte_slice<T: Plain>(values: &[T]) -> &[u8] {
    // SAFETY: a slice of plain numbers is readable as its bytes: no padding, u8 has
    // alignment 1, and the length is the slice's size in bytes.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values))
    }
}

/// The bytes of a slice of plain values, writable (every bit pattern is a value of a [`Plain`] type).
pub fn as_byte_slice_mut<T: Plain>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as `as_byte_slice`; any bytes written make valid values of a plain type.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr() as *mut u8,
            std::mem::size_of_val(values),
        )
    }
}

impl<T: Plain> From<Vec<T>> for Array<T> {
    fn from(v: Vec<T>) -> Self {
        Array {
            elements: Elements::Owned(v),
        }
    }
}

impl<T: Plain> Deref for Array<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::temp_file;

    #[test]
    fn owned_and_mapped_bytes_read_alike() {
        let values: Vec<u32> = vec![1, 2, 0xdead_beef];
        let owned = Array::from(values.clone());
        let (_dir, p) = temp_file("b", owned.as_bytes());
        for populate in [false, true] {
            let mapped = Bytes::map(&p, populate).unwrap();
            assert!(mapped.is_mapped());
            assert_eq!(&mapped[..], owned.as_bytes());
            let view: Array<u32> = Array::view(mapped, 3, &p).unwrap();
            assert_eq!(&view[..], &values[..]);
        }
        let e = Array::<u32>::view(Bytes::map(&p, false).unwrap(), 4, &p)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("holds 12 bytes, the manifest implies 4 values of 4 bytes"),
            "{e}"
        );
        std::fs::write(&p, [&[0u8][..], owned.as_bytes()].concat()).unwrap();
        let e = Array::<u32>::view(Bytes::map(&p, false).unwrap().skip(1), 3, &p)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not aligned"), "{e}");
        std::fs::write(&p, b"").unwrap();
        assert!(Bytes::map(&p, true).unwrap().is_empty());
        assert_eq!(&Bytes::from(b"header+body".to_vec()).skip(7)[..], b"body");
    }

    /// Released pages come back with the file's bytes (the resident set itself is measured by
    /// `benches/experiment/dense_precomputed.py`).
    #[test]
    fn released_pages_read_back_the_same_bytes() {
        let data: Vec<u8> = (0..5 * 4096 + 123).map(|i| (i * 7 % 251) as u8).collect();
        let (_dir, p) = temp_file("pages.bin", &data);
        let mapped = Bytes::map(&p, false).unwrap().skip(10);
        assert_eq!(&mapped[..], &data[10..]);
        mapped.release(100..3 * 4096 + 5);
        mapped.release(0..mapped.len());
        mapped.release_around(5000..5001);
        mapped.release_around(0..mapped.len());
        assert_eq!(&mapped[..], &data[10..]);
        let owned = Bytes::from(data.clone());
        owned.release(0..owned.len()); // owned bytes are never dropped
        assert_eq!(&owned[..], &data[..]);
        let array: Array<u32> = vec![1u32, 2, 3].into();
        array.release(0..12);
        assert_eq!(&array[..], &[1, 2, 3]);
    }
}
