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
create_exception!(
    clirkit,
    InternalError,
    ClirkitError,
    "A bug in clirkit (a Rust panic): please report it with the message."
);

pub fn to_py(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        // An OS error keeps its errno; an error of the data (a truncated gzip stream) has none, and
        // is raised with the message alone (never "[Errno 0] ...").
        Error::Io { source, .. } => match source.raw_os_error() {
            Some(errno) => PyOSError::new_err((errno, msg)),
            None => PyOSError::new_err(msg),
        },
        Error::Parse { .. } => ParseError::new_err(msg),
        Error::DuplicateId { .. } => DuplicateIdError::new_err(msg),
        Error::Format { .. } => IndexFormatError::new_err(msg),
        Error::UnknownLanguage { .. } => UnknownLanguageError::new_err(msg),
        Error::InvalidInput(_) => InvalidInputError::new_err(msg),
        Error::ThreadPool { .. } => PyOSError::new_err(msg),
        Error::Internal(_) => InternalError::new_err(msg),
    }
}

/// What a detached call returns when its closure panicked.
pub trait FromPanic {
    fn from_panic(message: String) -> Self;
}

impl<T> FromPanic for clirkit_core::Result<T> {
    fn from_panic(message: String) -> Self {
        Err(Error::Internal(message))
    }
}

/// [`Python::detach`] that turns a panic of `f` into [`Error::Internal`] (an `InternalError` in
/// Python): a PyO3 panic is a `BaseException` that `except Exception` does not catch.
pub trait DetachCaught {
    fn detach_caught<R: FromPanic + Send, F: FnOnce() -> R + Send>(self, f: F) -> R;
}

impl DetachCaught for Python<'_> {
    fn detach_caught<R: FromPanic + Send, F: FnOnce() -> R + Send>(self, f: F) -> R {
        self.detach(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panic".into());
                R::from_panic(message)
            })
        })
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
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
