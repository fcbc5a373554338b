//! One Python exception per core error kind, all under `ClirkitError`, which subclasses
//! `ValueError` (as pydantic-core's `ValidationError` does): bad input is a `ValueError` to code
//! that knows nothing of clirkit. I/O failures are `OSError`, not `ClirkitError`.

use clirkit_core::Error;
use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    clirkit,
    ClirkitError,
    PyValueError,
    "Base class of clirkit's errors."
);
create_exception!(
    clirkit,
    ParseError,
    ClirkitError,
    "A malformed line in an input file; the message names file and line."
);
create_exception!(
    clirkit,
    DuplicateIdError,
    ClirkitError,
    "An id that must be unique appears twice."
);
create_exception!(
    clirkit,
    IndexFormatError,
    ClirkitError,
    "An index or data file of another format version, corrupt, or incomplete."
);
create_exception!(
    clirkit,
    UnknownLanguageError,
    ClirkitError,
    "A language code without an analyzer."
);
create_exception!(
    clirkit,
    InvalidInputError,
    ClirkitError,
    "Arguments or data that violate a precondition."
);

pub fn to_py(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        Error::Io { source, .. } => PyOSError::new_err((source.raw_os_error().unwrap_or(0), msg)),
        Error::Parse { .. } => ParseError::new_err(msg),
        Error::DuplicateId { .. } => DuplicateIdError::new_err(msg),
        Error::Format { .. } => IndexFormatError::new_err(msg),
        Error::UnknownLanguage { .. } => UnknownLanguageError::new_err(msg),
        Error::InvalidInput(_) => InvalidInputError::new_err(msg),
        Error::ThreadPool { .. } => PyOSError::new_err(msg),
    }
}

/// `result.map_err(to_py)` as a method.
pub trait IntoPy<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for clirkit_core::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ClirkitError", py.get_type::<ClirkitError>())?;
    m.add("ParseError", py.get_type::<ParseError>())?;
    m.add("DuplicateIdError", py.get_type::<DuplicateIdError>())?;
    m.add("IndexFormatError", py.get_type::<IndexFormatError>())?;
    m.add(
        "UnknownLanguageError",
        py.get_type::<UnknownLanguageError>(),
    )?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    Ok(())
}
