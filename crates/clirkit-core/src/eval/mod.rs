//! Evaluation with trec_eval's numbers: measures ([`measures`]: names parsed in
//! [`measures::spec`], one family per file), qrels prepared for lookups ([`qrels`]), trec_eval's ranking rules ([`ranked`]), a fast
//! run-file reader ([`run_file`]), piece-by-piece evaluation of large run files
//! ([`run_stream`], its line kernels in [`crate::io::run_line_kernels`]), the [`evaluator`] that ties them together, position-bias tables
//! ([`position`]), paired significance tests ([`significance`]), rank correlation
//! ([`correlation`]) and documents' languages as α-nDCG's aspects ([`doc_languages`]).

pub mod correlation;
pub mod doc_languages;
pub mod evaluator;
pub mod measures;
pub mod position;
pub mod qrels;
pub mod qrels_file;
pub mod ranked;
pub mod run_file;
pub mod run_stream;
pub mod significance;

pub use doc_languages::DocLanguages;
pub use evaluator::{EvalOptions, Evaluation, Evaluator};
pub use measures::{parse_measures, parse_measures_for, Family, Measure};
pub use qrels::{Judgements, QrelsIndex};
pub use ranked::{RunQuery, ScoredRef};
pub use run_file::RunFile;

use crate::error::Result;
use std::path::Path;

/// Evaluate a run file against a qrels file (TREC or BEIR TSV) end to end.
pub fn evaluate_files<S: AsRef<str>>(
    qrels: impl AsRef<Path>,
    run: impl AsRef<Path>,
    measures: &[S],
    options: EvalOptions,
) -> Result<Evaluation> {
    let measures = parse_measures(measures)?;
    let qrels = qrels_file::read_qrels_index(qrels)?;
    let evaluator = Evaluator::new(qrels, measures, options);
    let evaluation = evaluator.evaluate_file(run);
    // Thousands of small tables: the caller need not wait for them to be freed.
    crate::parallel::drop_in_background(evaluator);
    evaluation
}
