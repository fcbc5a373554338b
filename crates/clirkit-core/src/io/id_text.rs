//! What a document or query id may be, checked wherever one is read from a record or written to
//! a run or id file: not empty, and no white space or control character (a TREC line splits on
//! white space, an id file on line breaks, so such an id would forge columns or lines). The same
//! rule is in the Python reader (`clirkit.datasets.id_problem`); both are tested on the shared
//! table `tests/data/reader_cases.json`.

use crate::error::Error;
use std::path::Path;

/// Why `id` cannot be an id, or `None` if it can.
pub fn id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("id is empty".into());
    }
    let bad = |c: char| c.is_whitespace() || c.is_control();
    // Ids are nearly always ASCII: one pass over the bytes settles those.
    let clean = if id.is_ascii() {
        id.bytes().all(|b| b > b' ' && b != 0x7f)
    } else {
        !id.chars().any(bad)
    };
    if clean {
        None
    } else {
        Some(format!(
            "id {id:?} contains white space or a control character (TREC files and id lists cannot hold it)"
        ))
    }
}

/// Why `score` cannot be written to a run for `doc` of query `qid`, or `None` if it can.
pub fn score_problem(qid: &str, doc: &str, score: f64) -> Option<String> {
    (!score.is_finite()).then(|| {
        format!("score {score} of document '{doc}' for query '{qid}' is not finite; a run cannot hold it")
    })
}

/// The check of one run line about to be written, as an I/O error (the writers' error type).
pub fn check_run_line(qid: &str, doc: &str, score: f64) -> std::io::Result<()> {
    let problem = id_problem(qid)
        .map(|p| format!("query {p}"))
        .or_else(|| id_problem(doc).map(|p| format!("document {p}")))
        .or_else(|| score_problem(qid, doc, score));
    match problem {
        None => Ok(()),
        Some(message) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            message,
        )),
    }
}

/// The crate error for a failed write to `path`: a refused line ([`check_run_line`]) is
/// invalid input naming the file, anything else an I/O error.
pub fn write_error(path: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::InvalidData {
        Error::invalid(format!("{}: {e}", path.display()))
    } else {
        Error::io(path, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_break_lines_or_columns_are_refused() {
        for good in ["d1", "99999999999999999999", "文書-7", "a#0", "-3"] {
            assert_eq!(id_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "a b",
            "a\tb",
            "a\nb",
            "a\rb",
            "a\u{0}",
            "a\u{7f}",
            "a\u{85}b",
            "a\u{a0}b",
            "a\u{2028}b",
            "a\u{3000}b",
            "a\u{1c}b",
        ] {
            assert!(id_problem(bad).is_some(), "{bad:?}");
        }
        assert!(check_run_line("q", "d", f64::NAN).is_err());
        assert!(check_run_line("q", "d", f64::INFINITY).is_err());
        assert!(check_run_line("q", "d e", 1.0).is_err());
        assert!(check_run_line("q", "d", -1.5).is_ok());
    }
}
