//! [`TokenMatrix`]: the token vectors of many items (documents, passages or queries) stored back to
//! back, row-major, with `offsets[i]..offsets[i + 1]` the rows of item `i`.

use crate::error::{Error, Result};

/// A checked view of items' token vectors; see the module documentation.
#[derive(Clone, Copy)]
pub struct TokenMatrix<'a> {
    data: &'a [f32],
    dim: usize,
    offsets: &'a [u64],
}

impl<'a> TokenMatrix<'a> {
    /// Check that `offsets` start at 0, never decrease and end at the number of rows, that every
    /// item has at least one token and that every value is finite; `what` names the input in errors
    /// and `ids` (one per item, when given) name the items.
    pub fn new(
        data: &'a [f32],
        dim: usize,
        offsets: &'a [u64],
        ids: Option<&[String]>,
        what: &str,
    ) -> Result<Self> {
        let rows = crate::dense::check_matrix(data, dim, what)?;
        check_offsets(offsets, rows, ids, what)?;
        let name = |i| item_name(ids, i);
        for (i, w) in offsets.windows(2).enumerate() {
            if w[1] == w[0] {
                return Err(no_tokens(what, &name(i)));
            }
        }
        if let Some((item, token)) = norm_overflow(data, dim, 0, offsets) {
            return Err(norm_error(what, &name(item), token));
        }
        Ok(TokenMatrix { data, dim, offsets })
    }

    /// A view of data checked before (an index's stored vectors).
    pub(crate) fn trusted(data: &'a [f32], dim: usize, offsets: &'a [u64]) -> Self {
        TokenMatrix { data, dim, offsets }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of token rows over all items.
    pub fn rows(&self) -> usize {
        self.data.len() / self.dim
    }

    pub fn data(&self) -> &'a [f32] {
        self.data
    }

    pub fn offsets(&self) -> &'a [u64] {
        self.offsets
    }

    /// Items `range` on their own: their rows, and offsets rebased to start at 0 (for
    /// [`TokenMatrix::trusted`]).
    pub(crate) fn window(&self, range: std::ops::Range<usize>) -> (&'a [f32], Vec<u64>) {
        let first = self.offsets[range.start];
        let offsets = self.offsets[range.start..=range.end]
            .iter()
            .map(|o| o - first)
            .collect();
        let rows = first as usize * self.dim..self.offsets[range.end] as usize * self.dim;
        (&self.data[rows], offsets)
    }

    /// The token rows of item `i`, row-major.
    pub fn item(&self, i: usize) -> &'a [f32] {
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        &self.data[a * self.dim..b * self.dim]
    }
}

/// How an item is named in errors: `'id' (item i)`, or `item i` without ids.
pub(crate) fn item_name(ids: Option<&[String]>, i: usize) -> String {
    match ids {
        Some(ids) => format!("'{}' (item {i})", ids[i]),
        None => format!("item {i}"),
    }
}

/// The error for an item without token vectors.
pub(crate) fn no_tokens(what: &str, name: &str) -> Error {
    Error::invalid(format!(
        "{what}: {name} has no tokens; every item needs at least one token vector"
    ))
}

/// Check that `offsets` start at 0, never decrease and end at `rows`, and that there is one id per
/// item when `ids` are given; `what` names the input in errors.
pub(crate) fn check_offsets(
    offsets: &[u64],
    rows: usize,
    ids: Option<&[String]>,
    what: &str,
) -> Result<()> {
    let Some((&first, _)) = offsets.split_first() else {
        return Err(Error::invalid(format!(
            "{what}: offsets are empty (need one more offset than items, starting at 0)"
        )));
    };
    if first != 0 {
        return Err(Error::invalid(format!(
            "{what}: offsets must start at 0, the first is {first}"
        )));
    }
    let last = *offsets.last().expect("not empty");
    if last != rows as u64 {
        return Err(Error::invalid(format!(
            "{what}: offsets do not add up: the last offset is {last} but there are {rows} token rows"
        )));
    }
    let items = offsets.len() - 1;
    if let Some(ids) = ids {
        if ids.len() != items {
            return Err(Error::invalid(format!(
                "{what}: {} ids for {items} items (offsets): give exactly one id per item",
                ids.len()
            )));
        }
    }
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::invalid(format!(
            "{what}: offsets decrease at {}: {} then {}",
            item_name(ids, i),
            offsets[i],
            offsets[i + 1]
        )));
    }
    Ok(())
}

/// The first token of `data` (rows from row `first` of the items delimited by `offsets`) whose squared
/// norm overflows f32, as (item, token of the item). Scores are f32 inner products: such a vector (a
/// norm past ~1.8e19) would make infinite or NaN scores, and search would drop its items.
pub(crate) fn norm_overflow(
    data: &[f32],
    dim: usize,
    first: usize,
    offsets: &[u64],
) -> Option<(usize, u64)> {
    let bad = data
        .chunks_exact(dim)
        .position(|v| !v.iter().map(|x| x * x).sum::<f32>().is_finite())?;
    let row = (first + bad) as u64;
    let item = offsets.partition_point(|&o| o <= row) - 1;
    Some((item, row - offsets[item]))
}

/// The error for token `token` of the item `name` whose norm overflows f32.
pub(crate) fn norm_error(what: &str, name: &str, token: u64) -> Error {
    Error::invalid(format!(
        "{what}: token {token} of {name} has a norm too large for f32 scores (above ~1.8e19): \
         normalize or scale the vectors"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(data: &[f32], offsets: &[u64], ids: Option<&[String]>) -> String {
        TokenMatrix::new(data, 2, offsets, ids, "docs")
            .err()
            .unwrap()
            .to_string()
    }

    #[test]
    fn checks_offsets_ids_and_empty_items() {
        let data = [0.0f32; 8];
        let ok = TokenMatrix::new(&data, 2, &[0, 1, 4], None, "docs").unwrap();
        assert_eq!((ok.len(), ok.rows(), ok.item(1).len()), (2, 4, 6));
        assert!(err(&data, &[0, 1, 3], None).contains("do not add up"));
        assert!(err(&data, &[1, 4], None).contains("start at 0"));
        assert!(err(&data, &[0, 3, 2, 4], None).contains("decrease"));
        let ids: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let e = err(&data, &[0, 2, 2, 4], Some(&ids));
        assert!(e.contains("'b'") && e.contains("no tokens"), "{e}");
        assert!(err(&data, &[0, 4], Some(&ids)).contains("3 ids for 1 items"));
        assert!(err(&[f32::NAN, 0.0], &[0, 1], None).contains("non-finite"));
        assert!(err(&data, &[], None).contains("empty"));
        let e = err(&[1e20, 0.0, 1.0, 0.0], &[0, 1, 2], Some(&ids[..2]));
        assert!(
            e.contains("token 0 of 'a' (item 0) has a norm too large"),
            "{e}"
        );
        assert!(TokenMatrix::new(&[1e18, 0.0], 2, &[0, 1], None, "docs").is_ok());
    }
}
