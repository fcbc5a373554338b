//! [`TokenParts`]: the token vectors a multi-vector build reads, as one collection made of parts read
//! in place: a matrix in memory ([`super::TokenMatrix`]'s rows), or a `.npy` token file (float32 or
//! float16) read a chunk at a time through [`crate::dense::source`]. Each part brings its items'
//! offsets and ids, and optionally the items kept (a language's documents of a file); the items of all
//! parts, one part after another, are the collection, and their rows are read by global row number
//! without being copied into one matrix first.

use super::tokens::{check_offsets, item_name, no_tokens, norm_error, norm_overflow};
use crate::dense::source::{shared_dim, NpyFile, SliceSource, VectorSource};
use crate::error::{Error, Result};
use std::path::Path;

/// One part of a [`TokenParts`]: a source of token rows, its items (offsets, ids) and the items kept.
pub struct TokenPart<'a> {
    source: Box<dyn VectorSource + Send + 'a>,
    offsets: Vec<u64>,
    ids: Vec<String>,
    /// The items kept, in the order they are indexed; None: all.
    items: Option<Vec<usize>>,
    /// Names the part in errors.
    what: String,
}

impl<'a> TokenPart<'a> {
    /// The items of `source` delimited by `offsets` and named by `ids`, those listed in `items` only
    /// (in that order) when given; the offsets are checked against the source's rows, `what` naming
    /// the part in errors.
    pub fn new(
        source: Box<dyn VectorSource + Send + 'a>,
        offsets: Vec<u64>,
        ids: Vec<String>,
        items: Option<Vec<usize>>,
        what: &str,
    ) -> Result<Self> {
        check_offsets(&offsets, source.rows(), Some(&ids), what)?;
        if let Some(&bad) = items.iter().flatten().find(|&&i| i >= ids.len()) {
            return Err(Error::invalid(format!(
                "{what}: {} items; item {bad} was asked for",
                ids.len()
            )));
        }
        Ok(TokenPart {
            source,
            offsets,
            ids,
            items,
            what: what.to_string(),
        })
    }

    /// The items of a `.npy` token file (float32 or float16, rows of one token each), read a chunk at
    /// a time when the collection is read.
    pub fn npy(
        path: &Path,
        offsets: Vec<u64>,
        ids: Vec<String>,
        items: Option<Vec<usize>>,
    ) -> Result<TokenPart<'static>> {
        let source = Box::new(NpyFile::open(path)?);
        TokenPart::new(source, offsets, ids, items, &path.display().to_string())
    }

    /// The items of a row-major matrix of `dim` columns in memory, its values checked to be finite
    /// (`what` names it in errors).
    pub fn slice(
        data: &'a [f32],
        dim: usize,
        offsets: Vec<u64>,
        ids: Vec<String>,
        items: Option<Vec<usize>>,
        what: &str,
    ) -> Result<Self> {
        crate::dense::check_matrix(data, dim, what)?;
        let source = Box::new(SliceSource::trusted(data, dim));
        TokenPart::new(source, offsets, ids, items, what)
    }

    /// Number of items kept.
    fn len(&self) -> usize {
        self.items.as_ref().map_or(self.ids.len(), Vec::len)
    }

    /// The part's own number of its `i`-th kept item.
    fn item(&self, i: usize) -> usize {
        self.items.as_ref().map_or(i, |kept| kept[i])
    }
}

/// The kept items of several [`TokenPart`]s one after another: their offsets and ids as one
/// collection's, and their rows by global row number (a [`VectorSource`]).
pub struct TokenParts<'a> {
    parts: Vec<TokenPart<'a>>,
    /// Global item at which each part starts, then the number of items.
    starts: Vec<usize>,
    offsets: Vec<u64>,
    dim: usize,
}

impl<'a> TokenParts<'a> {
    /// `parts` must share their dimension; a part keeping no item is allowed, an empty collection is
    /// refused when built.
    pub fn new(parts: Vec<TokenPart<'a>>) -> Result<Self> {
        let dim = shared_dim(parts.iter().map(|p| p.source.dim()), "documents", "token")?;
        let (mut starts, mut offsets) = (vec![0usize], vec![0u64]);
        for (p, part) in parts.iter().enumerate() {
            for i in 0..part.len() {
                let item = part.item(i);
                let len = part.offsets[item + 1] - part.offsets[item];
                if len == 0 {
                    return Err(no_tokens(&part.what, &item_name(Some(&part.ids), item)));
                }
                offsets.push(offsets.last().expect("starts at 0") + len);
            }
            starts.push(starts[p] + part.len());
        }
        Ok(TokenParts {
            parts,
            starts,
            offsets,
            dim,
        })
    }

    /// Number of items (documents or passages).
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Item `i` owns rows `offsets[i]..offsets[i + 1]` of the collection.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The ids of the items, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.parts
            .iter()
            .flat_map(|part| (0..part.len()).map(move |i| part.ids[part.item(i)].as_str()))
    }

    /// Where item `item` of the collection is: (part, the part's own item number).
    fn locate(&self, item: usize) -> (&TokenPart<'a>, usize) {
        let p = self.starts.partition_point(|&s| s <= item) - 1;
        let part = &self.parts[p];
        (part, part.item(item - self.starts[p]))
    }

    /// Check that the squared norm of each token in `rows` (starting at row `first`) fits f32,
    /// naming the item of the first that does not and its part.
    pub(crate) fn check_norms(&self, first: usize, rows: &[f32]) -> Result<()> {
        match norm_overflow(rows, self.dim, first, &self.offsets) {
            None => Ok(()),
            Some((item, token)) => {
                let (part, own) = self.locate(item);
                Err(norm_error(
                    &part.what,
                    &item_name(Some(&part.ids), own),
                    token,
                ))
            }
        }
    }
}

impl VectorSource for TokenParts<'_> {
    fn dim(&self) -> usize {
        self.dim
    }

    fn rows(&self) -> usize {
        *self.offsets.last().expect("starts at 0") as usize
    }

    fn read_rows(&self, first: usize, out: &mut [f32]) -> Result<()> {
        let dim = self.dim;
        let end = first + out.len() / dim;
        // Runs of rows contiguous in one part's source are read with one call.
        let mut pending: Option<(usize, usize, usize, usize)> = None; // (part, source row, rows, out row)
        let flush = |run: (usize, usize, usize, usize), out: &mut [f32]| {
            let (p, at, n, to) = run;
            self.parts[p]
                .source
                .read_rows(at, &mut out[to * dim..(to + n) * dim])
        };
        let mut row = first;
        let mut item = self.offsets.partition_point(|&o| o as usize <= row) - 1;
        while row < end {
            let p = self.starts.partition_point(|&s| s <= item) - 1;
            let part = &self.parts[p];
            let own = part.item(item - self.starts[p]);
            let stop = end.min(self.offsets[item + 1] as usize);
            let at = part.offsets[own] as usize + (row - self.offsets[item] as usize);
            let n = stop - row;
            pending = match pending {
                Some((q, a, m, to)) if q == p && a + m == at => Some((q, a, m + n, to)),
                Some(run) => {
                    flush(run, out)?;
                    Some((p, at, n, row - first))
                }
                None => Some((p, at, n, row - first)),
            };
            row = stop;
            item += 1;
        }
        match pending {
            Some(run) => flush(run, out),
            None => Ok(()),
        }
    }
}
