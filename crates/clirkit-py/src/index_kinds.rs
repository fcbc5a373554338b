//! The core's one list of index kinds (`clirkit_core::index_kinds`): what `clirkit verify`,
//! `clirkit index merge` and `clirkit.distributed`'s sharded indexes call for an index of any
//! kind, dispatched by its format name in the core.

use crate::common::define_register;
use crate::errors::{DetachCaught, IntoPy};
use clirkit_core::index_kinds::{self as kinds, MergeOptions, KINDS};
use pyo3::prelude::*;
use std::path::PathBuf;

/// Every index kind this clirkit reads: (format name, whether indexes of it can be merged).
#[pyfunction]
fn index_kinds() -> Vec<(&'static str, bool)> {
    KINDS
        .iter()
        .map(|k| (k.format(), k.merge.is_some()))
        .collect()
}

/// The format name of the index at `path` (refused, naming it, if it holds no index this
/// clirkit reads).
#[pyfunction]
fn index_format(path: PathBuf) -> PyResult<&'static str> {
    kinds::of(&path).map(|k| k.format()).py_err()
}

/// Check an index directory of any kind in full: the manifest's checksum, every byte of every
/// file (headers included) against the manifest and the kind's layout, what opening checks, and
/// the shards of a sharded index. Returns (format, files checked, bytes read); a problem raises
/// IndexFormatError naming the file.
#[pyfunction]
fn verify_index(py: Python<'_>, path: PathBuf) -> PyResult<(String, usize, u64)> {
    py.detach_caught(|| kinds::verify(&path))
        .py_err()
        .map(|s| (s.format, s.files, s.bytes))
}

/// Merge the indexes `inputs` (in order, all of one kind that can be merged) into a new index
/// `index`, atomically. Returns (format, documents or vectors in the merged index).
#[pyfunction]
#[pyo3(signature = (inputs, index, memory_mb=256, threads=0))]
fn merge_indexes(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    index: PathBuf,
    memory_mb: usize,
    threads: usize,
) -> PyResult<(&'static str, u64)> {
    let opts = MergeOptions {
        memory_bytes: memory_mb << 20,
        threads,
    };
    py.detach_caught(|| kinds::merge(&inputs, &index, &opts))
        .py_err()
}

/// The sharded index at `path`: (its kind, e.g. "bm25", its manifest as one line of JSON), read
/// once every shard (and a shared codebook) is found present and of the recorded build; a
/// directory holding no sharded index raises InvalidInputError naming it.
#[pyfunction]
fn sharded_manifest(py: Python<'_>, path: PathBuf) -> PyResult<(&'static str, String)> {
    py.detach_caught(|| kinds::sharded_manifest(&path)).py_err()
}

define_register!(
    classes: [],
    functions: [index_kinds, index_format, verify_index, merge_indexes, sharded_manifest]
);
