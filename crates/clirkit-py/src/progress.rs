//! `ProgressCounter`: the core's progress count ([`clirkit_core::progress::Counter`]) as Python sees
//! it. A search given one adds to it while it runs with the GIL released; a Python thread reads
//! `done` meanwhile and draws the bar (`clirkit._progress.polled`).

use clirkit_core::progress::{Counter, Progress};
use pyo3::prelude::*;
use std::sync::Arc;

use crate::common::define_register;

#[pyclass(name = "ProgressCounter", module = "clirkit._native", frozen)]
pub struct PyProgressCounter {
    counter: Arc<Counter>,
}

#[pymethods]
impl PyProgressCounter {
    #[new]
    fn new() -> Self {
        PyProgressCounter {
            counter: Arc::new(Counter::default()),
        }
    }

    /// Units done so far (for a search, queries).
    #[getter]
    fn done(&self) -> u64 {
        self.counter.done()
    }

    /// The units the work stated it will count (a build, once its sizes are known), else 0.
    #[getter]
    fn total(&self) -> u64 {
        self.counter.total()
    }
}

/// The core's progress hook adding to `counter`, or one that counts nothing.
pub fn progress_of(counter: Option<&Bound<'_, PyProgressCounter>>) -> Progress {
    counter.map_or_else(Progress::default, |c| Progress::to(c.get().counter.clone()))
}

define_register!(classes: [PyProgressCounter], functions: []);
