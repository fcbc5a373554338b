//! The coordinator's side of a dense search through shards (round 1 merged into the single
//! index's shortlist, final hits ordered and cut to k) and the ordered run writer it ends with.
//! Also the sharded dense index directory (build, check). Per-query lists travel as flat numpy arrays with int64 offsets (query `i` at
//! `offsets[i]..offsets[i + 1]`), which Ray passes between processes without copies.

use crate::common::{define_register, BuildSlot};
use crate::errors::{DetachCaught, IntoPy};
use crate::io::PyRun;
use clirkit_core::dense::index::{
    merge_shortlists, top_hits, training_rows, Candidate, ShardedDenseBuild,
};
use clirkit_core::dense::BuildOptions;
use clirkit_core::io::manifest::Manifest;
use clirkit_core::io::trec;
use clirkit_core::ranking::{Run, ScoredDoc};
use clirkit_core::Error;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use std::path::PathBuf;

/// A shard's shortlist as arrays: offsets, keys, lists, rows, scores.
pub type Shortlist<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<f32>>,
);

/// The merged shortlist or final hits: offsets, shards, rows, scores.
type ShardHits<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<f32>>,
);

/// A shard's arrays as they come from Python.
type ShortlistIn<'py> = (
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, f32>,
);

fn offsets_of<T>(lists: &[Vec<T>]) -> Vec<i64> {
    let mut offsets = Vec::with_capacity(lists.len() + 1);
    offsets.push(0i64);
    for l in lists {
        offsets.push(offsets.last().unwrap() + l.len() as i64);
    }
    offsets
}

pub fn shortlist_to_py<'py>(py: Python<'py>, lists: &[Vec<Candidate>]) -> Shortlist<'py> {
    let all = || lists.iter().flatten();
    (
        offsets_of(lists).into_pyarray(py),
        all().map(|c| c.key).collect::<Vec<_>>().into_pyarray(py),
        all().map(|c| c.list).collect::<Vec<_>>().into_pyarray(py),
        all().map(|c| c.row).collect::<Vec<_>>().into_pyarray(py),
        all().map(|c| c.score).collect::<Vec<_>>().into_pyarray(py),
    )
}

/// The query ranges of `offsets` over `len` values, checked.
fn ranges(offsets: &[i64], len: usize) -> PyResult<Vec<std::ops::Range<usize>>> {
    let bad = || {
        crate::errors::to_py(Error::invalid(format!(
            "offsets must rise from 0 to the {len} values they split"
        )))
    };
    if offsets.first() != Some(&0) || *offsets.last().unwrap() as usize != len {
        return Err(bad());
    }
    offsets
        .windows(2)
        .map(|w| {
            if w[0] <= w[1] {
                Ok(w[0] as usize..w[1] as usize)
            } else {
                Err(bad())
            }
        })
        .collect()
}

/// Rows split by query.
pub fn split_rows(offsets: &[i64], rows: &[u32]) -> PyResult<Vec<Vec<u32>>> {
    Ok(ranges(offsets, rows.len())?
        .into_iter()
        .map(|r| rows[r].to_vec())
        .collect())
}

fn shortlist_from_py(part: &ShortlistIn<'_>) -> PyResult<Vec<Vec<Candidate>>> {
    let (offsets, keys, lists, rows, scores) = part;
    let (keys, lists, rows, scores) = (
        keys.as_slice()?,
        lists.as_slice()?,
        rows.as_slice()?,
        scores.as_slice()?,
    );
    if lists.len() != keys.len() || rows.len() != keys.len() || scores.len() != keys.len() {
        return Err(crate::errors::to_py(Error::invalid(
            "a shortlist's keys, lists, rows and scores must have one length",
        )));
    }
    Ok(ranges(offsets.as_slice()?, keys.len())?
        .into_iter()
        .map(|r| {
            r.map(|i| Candidate {
                key: keys[i],
                list: lists[i],
                row: rows[i],
                score: scores[i],
            })
            .collect()
        })
        .collect())
}

/// Round 1 merged: from each shard's shortlist (`parts[s]`, its first global row
/// `row_offsets[s]`), the single index's shortlist of `len` per query, in selection order.
#[pyfunction]
fn merge_dense_shortlists<'py>(
    py: Python<'py>,
    parts: Vec<ShortlistIn<'py>>,
    row_offsets: Vec<u64>,
    len: usize,
) -> PyResult<ShardHits<'py>> {
    let parts: Vec<Vec<Vec<Candidate>>> = parts
        .iter()
        .map(shortlist_from_py)
        .collect::<PyResult<_>>()?;
    let nq = parts.first().map_or(0, |p| p.len());
    if parts.iter().any(|p| p.len() != nq) {
        return Err(crate::errors::to_py(Error::invalid(
            "the shards' shortlists are for different numbers of queries",
        )));
    }
    let merged = py
        .detach_caught(|| {
            (0..nq)
                .map(|q| {
                    let per_shard: Vec<&[Candidate]> =
                        parts.iter().map(|p| p[q].as_slice()).collect();
                    merge_shortlists(&per_shard, &row_offsets, len)
                })
                .collect::<clirkit_core::Result<Vec<_>>>()
        })
        .py_err()?;
    let all = || merged.iter().flatten();
    Ok((
        offsets_of(&merged).into_pyarray(py),
        all().map(|c| c.shard).collect::<Vec<_>>().into_pyarray(py),
        all()
            .map(|c| c.candidate.row)
            .collect::<Vec<_>>()
            .into_pyarray(py),
        all()
            .map(|c| c.candidate.score)
            .collect::<Vec<_>>()
            .into_pyarray(py),
    ))
}

/// The final hits: per query the `k` best of the given (shard, row, score), best score first,
/// ties to the lower global row (`row_offsets[shard] + row`).
#[pyfunction]
fn dense_top_hits<'py>(
    py: Python<'py>,
    hits: (
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, u32>,
        PyReadonlyArray1<'py, u32>,
        PyReadonlyArray1<'py, f32>,
    ),
    row_offsets: Vec<u64>,
    k: usize,
) -> PyResult<ShardHits<'py>> {
    let (shards, rows, scores) = (hits.1.as_slice()?, hits.2.as_slice()?, hits.3.as_slice()?);
    if rows.len() != shards.len() || scores.len() != shards.len() {
        return Err(crate::errors::to_py(Error::invalid(
            "hits: shards, rows and scores must have one length",
        )));
    }
    if let Some(&s) = shards.iter().find(|&&s| s as usize >= row_offsets.len()) {
        return Err(crate::errors::to_py(Error::invalid(format!(
            "hits name shard {s}, but there are {} shards",
            row_offsets.len()
        ))));
    }
    let ranges = ranges(hits.0.as_slice()?, shards.len())?;
    // Shard and row of a global row, to give the hits back as the shards know them.
    let global = |i: usize| row_offsets[shards[i] as usize] + rows[i] as u64;
    let top: Vec<Vec<(f32, u64, u32, u32)>> = py.detach(|| {
        ranges
            .into_iter()
            .map(|r| {
                let by_global: std::collections::HashMap<u64, (u32, u32)> = r
                    .clone()
                    .map(|i| (global(i), (shards[i], rows[i])))
                    .collect();
                let pairs = r.map(|i| (scores[i], global(i))).collect();
                top_hits(pairs, k)
                    .into_iter()
                    .map(|(s, g)| (s, g, by_global[&g].0, by_global[&g].1))
                    .collect()
            })
            .collect()
    });
    let all = || top.iter().flatten();
    Ok((
        offsets_of(&top).into_pyarray(py),
        all().map(|h| h.2).collect::<Vec<_>>().into_pyarray(py),
        all().map(|h| h.3).collect::<Vec<_>>().into_pyarray(py),
        all().map(|h| h.0).collect::<Vec<_>>().into_pyarray(py),
    ))
}

/// The rows (increasing, uint64) a build of `n` vectors with `train_size` and `seed` trains
/// its codebook on: an index built from exactly those rows trains the same codebook.
#[pyfunction]
#[pyo3(signature = (n, train_size=None, seed=0))]
fn dense_training_rows(
    py: Python<'_>,
    n: usize,
    train_size: Option<usize>,
    seed: u64,
) -> Bound<'_, PyArray1<u64>> {
    let opts = BuildOptions {
        train_size,
        seed,
        ..Default::default()
    };
    training_rows(n, &opts)
        .into_iter()
        .map(|r| r as u64)
        .collect::<Vec<_>>()
        .into_pyarray(py)
}

/// Write a run given as ordered (qid, [(docid, score), ...]) pairs atomically: queries in the
/// given order (as a search writes them), each query's documents in canonical order.
#[pyfunction]
#[pyo3(signature = (path, run, tag = "clirkit"))]
fn write_run_pairs(py: Python<'_>, path: PathBuf, run: PyRun, tag: &str) -> PyResult<()> {
    let mut out = Run::new();
    for (qid, docs) in run {
        out.push(
            qid,
            docs.into_iter()
                .map(|(d, s)| ScoredDoc::new(d, s))
                .collect(),
        );
    }
    py.detach_caught(|| trec::write_run(&path, &out, tag))
        .py_err()
}

/// A sharded dense index under construction: write the codebook index into `codebook_dir`,
/// encode shard `i` with it into `shard_dir(i)` (from any process), then `finish()` checks the
/// shards and moves the index into place. Released unfinished, it is removed with its shards.
#[pyclass(name = "ShardedDenseBuild", module = "clirkit._native", frozen)]
pub struct PyShardedDenseBuild {
    inner: BuildSlot<ShardedDenseBuild>,
}

#[pymethods]
impl PyShardedDenseBuild {
    #[new]
    fn new(index: PathBuf, shards: usize) -> PyResult<Self> {
        let build = ShardedDenseBuild::create(&index, shards).py_err()?;
        Ok(PyShardedDenseBuild {
            inner: BuildSlot::new(build),
        })
    }

    #[getter]
    fn shards(&self) -> PyResult<usize> {
        self.inner.with(ShardedDenseBuild::shards)
    }

    /// Where the codebook index is to be written.
    fn codebook_dir(&self) -> PyResult<PathBuf> {
        self.inner.with(ShardedDenseBuild::codebook_dir)
    }

    /// Where shard `i` is to be built.
    fn shard_dir(&self, i: usize) -> PyResult<PathBuf> {
        self.inner.with(|build| build.shard_dir(i))
    }

    /// Check the shards and commit the sharded index; returns its manifest as JSON.
    fn finish(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.inner.finish(py, ShardedDenseBuild::finish)?.to_json())
    }

    /// Give the build up now (its directory and shards are removed).
    fn abort(&self) {
        self.inner.abort();
    }
}

define_register!(classes: [PyShardedDenseBuild], functions: [
    merge_dense_shortlists, dense_top_hits, dense_training_rows,
    write_run_pairs
]);
