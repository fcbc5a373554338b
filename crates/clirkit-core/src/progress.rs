//! Progress of long work, counted where the work is done and drawn by no one here: [`Progress`],
//! a count the core adds to and a caller reads while the work runs (every long build and search:
//! BM25, impact, dense, multi-vector). The core draws nothing and never asks whether a terminal is
//! attached; the one bar is Python's (`clirkit._progress`), which reads the count from a thread of
//! its own while a call runs with the GIL released.

use std::io::Read;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// How far a long call has got, counted where the work is done and read by another thread while
/// it runs: the hook the bindings show in Python's progress bar (they poll [`Counter::done`] from
/// a Python thread while the call runs with the GIL released), with no drawing and no PyO3 here.
/// The default reports nothing, and costs one branch where work would be counted; a live one costs
/// one relaxed atomic add per unit of work counted (a query, or a chunk of them).
#[derive(Clone, Debug, Default)]
pub struct Progress(Option<Arc<Counter>>);

/// The count a [`Progress`] adds to: units done so far (for searches, queries), and the total when
/// the work states it ([`Progress::expect`]; 0 until then: the caller knows it, as a search's
/// query count).
#[derive(Debug, Default)]
pub struct Counter {
    done: AtomicU64,
    total: AtomicU64,
}

impl Counter {
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

impl Progress {
    /// A progress that adds to `counter`.
    pub fn to(counter: Arc<Counter>) -> Self {
        Progress(Some(counter))
    }

    /// Whether anything is counted (work that would only count may be skipped otherwise).
    pub fn is_live(&self) -> bool {
        self.0.is_some()
    }

    /// The work will count `total` units (a build states it once its sizes are known).
    pub fn expect(&self, total: usize) {
        if let Some(counter) = &self.0 {
            counter.total.store(total as u64, Ordering::Relaxed);
        }
    }

    /// `n` more units done.
    pub fn advance(&self, n: usize) {
        if let Some(counter) = &self.0 {
            counter.done.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Counting for work split into `chunks` × `slices` items (a chunk of queries against one
    /// slice of the data, as the flat and PQ scans split it): a chunk's queries count once its
    /// last slice finishes.
    pub fn sliced(&self, chunks: usize, slices: usize) -> Sliced<'_> {
        let left = match self.0 {
            Some(_) => (0..chunks).map(|_| AtomicUsize::new(slices)).collect(),
            None => Vec::new(),
        };
        Sliced {
            progress: self,
            left,
        }
    }
}

/// A reader adding the bytes it reads to a [`Progress`]: a build reading its input counts the
/// bytes as they lie on disk (compressed or not), against the input's size as its total.
pub struct CountedRead<R> {
    inner: R,
    progress: Progress,
}

impl<R> CountedRead<R> {
    pub fn new(inner: R, progress: &Progress) -> Self {
        CountedRead {
            inner,
            progress: progress.clone(),
        }
    }
}

impl<R: Read> Read for CountedRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n);
        Ok(n)
    }
}

/// See [`Progress::sliced`].
pub struct Sliced<'a> {
    progress: &'a Progress,
    left: Vec<AtomicUsize>,
}

impl Sliced<'_> {
    /// One slice of chunk `chunk` (of `queries` queries) finished.
    pub fn finished(&self, chunk: usize, queries: usize) {
        if let Some(left) = self.left.get(chunk) {
            if left.fetch_sub(1, Ordering::Relaxed) == 1 {
                self.progress.advance(queries);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_counts_when_its_last_slice_finishes() {
        let counter = Arc::new(Counter::default());
        let progress = Progress::to(counter.clone());
        let sliced = progress.sliced(2, 3);
        sliced.finished(0, 5);
        sliced.finished(0, 5);
        assert_eq!(counter.done(), 0);
        sliced.finished(0, 5);
        assert_eq!(counter.done(), 5);
        for _ in 0..3 {
            sliced.finished(1, 2);
        }
        assert_eq!(counter.done(), 7);
        progress.advance(3);
        assert_eq!(counter.done(), 10);
        assert_eq!(counter.total(), 0);
        progress.expect(12);
        assert_eq!(counter.total(), 12);
    }

    #[test]
    fn a_counted_reader_counts_the_bytes_read() {
        let counter = Arc::new(Counter::default());
        let mut reader = CountedRead::new(&b"hello world"[..], &Progress::to(counter.clone()));
        let mut first = [0u8; 4];
        reader.read_exact(&mut first).unwrap();
        assert_eq!(counter.done(), 4);
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        assert_eq!(counter.done(), 11);
    }

    #[test]
    fn the_default_counts_nothing() {
        let progress = Progress::default();
        assert!(!progress.is_live());
        progress.advance(4);
        progress.expect(4);
        progress.sliced(2, 2).finished(0, 1);
    }
}
