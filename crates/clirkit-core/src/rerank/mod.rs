//! Sliding-window listwise reranking, the model left out: the window plan ([`window`]), parsing
//! and repair of the permutations a model returns ([`permutation`]), and the per-query state
//! that applies them, stepped in batches across queries ([`state`]).
//!
//! The plan follows RankGPT's `sliding_windows`: windows of `w` documents move bottom-up over the
//! top `N` with stride `s`, each permutation is applied to the current order before the next
//! window is formed, so the best documents bubble up to the top. A backend (in Python) sees one
//! batch per step: the current window of every query that still has one. Queries never share
//! state, so batching across queries gives exactly the one-query-at-a-time result.

pub mod permutation;
pub mod state;
pub mod window;

pub use permutation::{parse_permutation, repair, Repairs};
pub use state::{Outcome, RerankState, WindowStatus};
pub use window::WindowPlan;
