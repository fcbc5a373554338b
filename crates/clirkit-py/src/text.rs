//! Per-language text analysis: the terms clirkit indexes and searches.

use crate::common::define_register;
use crate::errors::{DetachCaught, IntoPy};
use clirkit_core::text::{Analyzer, SUPPORTED_LANGUAGES};
use pyo3::prelude::*;

/// Analyze `text` with the analyzer of language `lang`: the list of index terms.
#[pyfunction]
fn analyze(py: Python<'_>, text: &str, lang: &str) -> PyResult<Vec<String>> {
    let analyzer = Analyzer::for_lang(lang).py_err()?;
    py.detach_caught(|| Ok(analyzer.analyze(text))).py_err()
}

/// The identifier (language, chain, version) that indexes record for `lang`'s analyzer.
#[pyfunction]
fn analyzer_id(lang: &str) -> PyResult<String> {
    Analyzer::for_lang(lang).py_err().map(|a| a.id())
}

/// Language codes with an analyzer.
#[pyfunction]
fn supported_languages() -> Vec<&'static str> {
    SUPPORTED_LANGUAGES.to_vec()
}

define_register!(classes: [], functions: [analyze, analyzer_id, supported_languages]);
