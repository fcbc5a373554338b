//! MaxP aggregation of passage runs into document runs.

use crate::common::define_register;
use crate::errors::{DetachCaught, IntoPy};
use crate::io::{run_from_py, run_to_py, PyRun};
use clirkit_core::passages;
use pyo3::prelude::*;
use std::collections::HashMap;

/// Document run from a passage run given as dict[qid, dict[passage_id, score]]: each document
/// scores the max of its passages (passage id = doc id + separator + anything, split at the last
/// separator). Returns (qid, [(docid, score)]) pairs, queries sorted, documents in canonical order.
#[pyfunction]
#[pyo3(signature = (run, separator = "#", depth = None))]
fn maxp(
    py: Python<'_>,
    run: HashMap<String, HashMap<String, f64>>,
    separator: &str,
    depth: Option<usize>,
) -> PyResult<PyRun> {
    let run = run_from_py(run);
    py.detach_caught(|| passages::maxp(&run, separator, depth))
        .py_err()
        .map(run_to_py)
}

/// The document id of a passage id (split at the last separator; no separator = itself).
#[pyfunction]
#[pyo3(signature = (passage_id, separator = "#"))]
fn passage_doc_id(passage_id: &str, separator: &str) -> String {
    passages::doc_id(passage_id, separator).to_string()
}

define_register!(classes: [], functions: [maxp, passage_doc_id]);
