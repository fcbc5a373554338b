//! Shapes shared by the binding modules: each module's `register` (its classes and functions),
//! the slot of a build under way that `finish()` or `abort()` empties, id lookups, and numpy arrays
//! read as slices.

use crate::errors::{to_py, DetachCaught, IntoPy};
use clirkit_core::ids::IdTable;
use clirkit_core::Error;
use pyo3::prelude::*;
use std::sync::Mutex;

/// The module's `register(m)`, which adds its classes and `#[pyfunction]`s to `_native`:
/// `define_register!(classes: [A, B], functions: [f, g]);` (either list may be empty).
macro_rules! define_register {
    (classes: [$($class:ty),* $(,)?], functions: [$($function:ident),* $(,)?]) => {
        pub fn register(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
            $(m.add_class::<$class>()?;)*
            $(m.add_function(pyo3::wrap_pyfunction!($function, m)?)?;)*
            Ok(())
        }
    };
}
pub(crate) use define_register;

/// A build under way, held by a frozen pyclass: used while present, taken by `finish()` or
/// dropped by `abort()`; any use after that is an `InvalidInputError`.
pub struct BuildSlot<B>(Mutex<Option<B>>);

fn finished() -> PyErr {
    to_py(Error::invalid("this sharded build is already finished"))
}

impl<B: Send> BuildSlot<B> {
    pub fn new(build: B) -> Self {
        BuildSlot(Mutex::new(Some(build)))
    }

    /// `f` of the build, or the error of a finished one.
    pub fn with<R>(&self, f: impl FnOnce(&B) -> R) -> PyResult<R> {
        let guard = self.0.lock().expect("not poisoned");
        guard.as_ref().map(f).ok_or_else(finished)
    }

    /// Take the build out and run `finish` on it with the GIL released.
    pub fn finish<R: Send>(
        &self,
        py: Python<'_>,
        finish: impl FnOnce(B) -> clirkit_core::Result<R> + Send,
    ) -> PyResult<R> {
        let build = self.0.lock().expect("not poisoned").take();
        let build = build.ok_or_else(finished)?;
        py.detach_caught(|| finish(build)).py_err()
    }

    /// Drop the build now (its `Drop` removes what it wrote).
    pub fn abort(&self) {
        self.0.lock().expect("not poisoned").take();
    }
}

/// The string id of internal id `i` of an index of `total` ids (an `IndexError` outside
/// `0..total`).
pub fn id_at(ids: &IdTable, i: i64, total: usize) -> PyResult<String> {
    if i < 0 || i as usize >= total {
        return Err(pyo3::exceptions::PyIndexError::new_err(format!(
            "internal id {i} out of range (0..{total})"
        )));
    }
    Ok(ids.get(i as u32).to_string())
}

/// The data of a C-contiguous numpy array (`what` names it in the error otherwise).
pub fn contiguous<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(
    a: &'a numpy::PyReadonlyArray<'_, T, D>,
    what: &str,
) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| Error::invalid(format!("{what} must be a C-contiguous array")))
        .py_err()
}
