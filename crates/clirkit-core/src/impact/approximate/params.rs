//! The approximate search's knobs, each named for what it trades (speed against recall of the
//! exact top k; returned scores are always exact).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// What the structure keeps of each term's postings (fixed when it is built).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildParams {
    /// The postings of highest impact kept per term (Seismic's λ); 0 keeps every posting. More
    /// costs memory and query time and finds documents that only a long list's tail holds.
    pub postings_per_term: usize,
}

/// The default λ (on the 1M synthetic SPLADE-like set, λ = 2000 keeps 44M of its about 150M postings).
pub const DEFAULT_POSTINGS_PER_TERM: usize = 4000;

impl Default for BuildParams {
    fn default() -> Self {
        BuildParams {
            postings_per_term: DEFAULT_POSTINGS_PER_TERM,
        }
    }
}

/// How one query is searched (chosen per run; [`crate::impact::approximate::calibrate`] picks
/// them for a target Accuracy@10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchParams {
    /// The query's heaviest terms whose pruned lists are walked for candidates (0 = all of
    /// them); the exact re-scoring always uses the whole query. Fewer is faster and misses
    /// documents matched mostly by light terms.
    pub query_terms: usize,
    /// Documents of highest partial score re-scored exactly (at least k are). More is slower
    /// and finds documents whose partial score underestimates them.
    pub candidates: usize,
}

pub const DEFAULT_CANDIDATES: usize = 400;

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams {
            query_terms: 0,
            candidates: DEFAULT_CANDIDATES,
        }
    }
}

/// A target Accuracy@10 must lie in (0, 1].
pub fn check_target(target: f64) -> Result<()> {
    if target.is_finite() && target > 0.0 && target <= 1.0 {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "target_accuracy must be in (0, 1], got {target}"
        )))
    }
}
