//! The crate's one error type. Every message names the file, line or id at fault, so a user
//! can fix the input without reading code.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system failure on a named file.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A malformed line in an input file (JSONL, TREC run/qrels, TSV).
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: u64,
        message: String,
    },
    /// The same id twice where ids must be unique.
    #[error("{}: duplicate id '{id}' at line {line} (first seen at {})", path.display(),
            first_seen(first_path.as_deref(), *first_line))]
    DuplicateId {
        path: PathBuf,
        id: String,
        line: u64,
        first_line: u64,
        /// The file of the first occurrence when it is another file than `path` (a build over
        /// several corpus files read in sequence).
        first_path: Option<PathBuf>,
    },
    /// An index or data file that is not what it claims: wrong magic, other format version,
    /// checksum mismatch, truncated, or built with incompatible settings.
    #[error("{}: {message}", path.display())]
    Format { path: PathBuf, message: String },
    /// A language code without an analyzer.
    #[error("unknown language '{code}'; supported languages: {supported}")]
    UnknownLanguage { code: String, supported: String },
    /// Arguments or data that violate a precondition (dimension mismatch, NaN vectors, ...).
    #[error("{0}")]
    InvalidInput(String),
    /// A bug: clirkit panicked. Bindings turn a panic into this error, so a caller sees one of
    /// clirkit's errors rather than an abort or an exception it cannot catch.
    #[error("internal error (a bug in clirkit, please report it): {0}")]
    Internal(String),
    /// A worker pool the system would not start (out of threads or memory).
    #[error("cannot start {threads} worker threads: {message}")]
    ThreadPool { threads: usize, message: String },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    pub fn parse(path: impl AsRef<Path>, line: u64, message: impl Into<String>) -> Self {
        Error::Parse {
            path: path.as_ref().to_path_buf(),
            line,
            message: message.into(),
        }
    }

    pub fn format(path: impl AsRef<Path>, message: impl Into<String>) -> Self {
        Error::Format {
            path: path.as_ref().to_path_buf(),
            message: message.into(),
        }
    }

    /// Id `id` at `line` of `path`, first seen at line `first_line`.
    pub fn duplicate_id(path: impl AsRef<Path>, id: String, line: u64, first_line: u64) -> Self {
        Error::DuplicateId {
            path: path.as_ref().to_path_buf(),
            id,
            line,
            first_line,
            first_path: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidInput(message.into())
    }

    /// The same error with a path under `from` named under `to` instead: an index opened
    /// through a directory handle reports its files under the directory the user named.
    pub fn relocated(self, from: &Path, to: &Path) -> Self {
        let fix = |path: PathBuf| match path.strip_prefix(from) {
            Ok(rest) if rest.as_os_str().is_empty() => to.to_path_buf(),
            Ok(rest) => to.join(rest),
            Err(_) => path,
        };
        match self {
            Error::Io { path, source } => Error::Io {
                path: fix(path),
                source,
            },
            Error::Parse {
                path,
                line,
                message,
            } => Error::Parse {
                path: fix(path),
                line,
                message,
            },
            Error::DuplicateId {
                path,
                id,
                line,
                first_line,
                first_path,
            } => Error::DuplicateId {
                path: fix(path),
                id,
                line,
                first_line,
                first_path: first_path.map(fix),
            },
            Error::Format { path, message } => Error::Format {
                path: fix(path),
                message,
            },
            other => other,
        }
    }
}

/// Where a duplicate id was first seen: `line N` of the same file, or `FILE:N` of another.
fn first_seen(path: Option<&Path>, line: u64) -> String {
    match path {
        Some(p) => format!("{}:{line}", p.display()),
        None => format!("line {line}"),
    }
}

/// Attach a path to `std::io::Result`s.
pub trait IoContext<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}
