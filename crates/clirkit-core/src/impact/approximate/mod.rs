//! Approximate impact search: opt-in, never the default (every front end searches exactly unless
//! asked), and auditable.
//!
//! The structure is built in memory from an opened [`crate::impact::ImpactIndex`], in the manner
//! of Seismic (Bruch et al., SIGIR 2024) and BMP's α mode: each term's postings are statically
//! pruned to the `postings_per_term` of highest impact (Seismic's λ), kept in impact order, and a
//! forward index holds every document's whole vector. A query walks the pruned lists of its
//! heaviest `query_terms` terms score-at-a-time into partial scores (what Seismic's block
//! summaries estimate, here summed exactly over the kept postings), and the `candidates` documents
//! of highest partial score are scored exactly through the forward index, with the whole query.
//! So every returned score is the document's exact score, hits are in canonical order, and what
//! is traded is only recall: a document of the exact top k that no walked pruned list holds, or
//! that ranks below the candidates, is missed.
//!
//! - [`params`]: the knobs, named for what they trade;
//! - [`structure`]: the forward index and the pruned lists, built in parallel;
//! - [`search`]: one query, and a batch in parallel (results independent of the thread count);
//! - [`audit`]: re-running sampled queries exactly (Accuracy@10, score gap), and choosing the
//!   cheapest search knobs whose Accuracy@10 on a sample reaches a target with 95% confidence, a
//!   lower confidence bound of the whole set's mean (`target_accuracy`).

pub mod audit;
pub mod params;
pub mod search;
pub mod structure;

pub use audit::{audit, calibrate, lower_bound, AuditReport, Calibration, QueryAudit};
pub use params::{BuildParams, SearchParams};
pub use search::BatchSettings;
pub use structure::ApproximateIndex;

#[cfg(test)]
mod tests;
