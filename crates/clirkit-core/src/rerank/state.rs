//! Per-query reranking state, stepped in batches across queries.
//!
//! Every query holds its current order (positions into its first-stage list) and a cursor into
//! its window plan. [`RerankState::pending`] lists the current window of every query that still
//! has one: one step of the batch. Answers are applied per window with [`RerankState::apply`],
//! in any order within the step; a query's next window exists only once its current one is
//! applied, which is what makes batched runs equal one-by-one runs.

use super::permutation::{parse_permutation, repair, Repairs};
use super::window::WindowPlan;
use crate::error::{Error, Result};
use std::ops::Range;

/// A backend's answer for one window.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// 1-based identifiers, best first (repaired if needed).
    Ids(&'a [u64]),
    /// A model's text answer such as `"[3] > [1] > [2]"` (parsed, then repaired).
    Text(&'a str),
    /// The backend gave up on this window (timeout, server error, ...): its order is kept.
    Failed,
}

/// What happened to a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowStatus {
    /// The permutation was applied as given.
    Applied,
    /// The permutation was applied after repair.
    Repaired(Repairs),
    /// No usable identifier: the window keeps its order.
    Unparsable,
    /// The backend failed: the window keeps its order.
    Failed,
}

/// A window waiting for an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingWindow {
    pub query: usize,
    /// Its number among the query's windows (0 = the bottom one).
    pub step: usize,
    pub range: Range<usize>,
}

struct QueryState {
    order: Vec<u32>,
    windows: Vec<Range<usize>>,
    next: usize,
}

/// The reranking state of a set of queries.
pub struct RerankState {
    queries: Vec<QueryState>,
    total_windows: usize,
    applied_windows: usize,
}

impl RerankState {
    /// One query per list length (its number of first-stage candidates), planned with `plan`.
    pub fn new(list_lens: impl IntoIterator<Item = usize>, plan: WindowPlan) -> Self {
        let queries: Vec<QueryState> = list_lens
            .into_iter()
            .map(|len| QueryState {
                order: (0..len as u32).collect(),
                windows: plan.windows(len),
                next: 0,
            })
            .collect();
        let total_windows = queries.iter().map(|q| q.windows.len()).sum();
        RerankState {
            queries,
            total_windows,
            applied_windows: 0,
        }
    }

    pub fn num_queries(&self) -> usize {
        self.queries.len()
    }

    /// Windows in the whole plan, over all queries.
    pub fn total_windows(&self) -> usize {
        self.total_windows
    }

    /// Windows answered so far.
    pub fn applied_windows(&self) -> usize {
        self.applied_windows
    }

    pub fn is_finished(&self) -> bool {
        self.applied_windows == self.total_windows
    }

    /// The current window of every query that has one, in query order.
    pub fn pending(&self) -> Vec<PendingWindow> {
        self.queries
            .iter()
            .enumerate()
            .filter_map(|(query, q)| {
                q.windows.get(q.next).map(|range| PendingWindow {
                    query,
                    step: q.next,
                    range: range.clone(),
                })
            })
            .collect()
    }

    /// The first-stage positions in `query`'s pending window, in current order.
    pub fn window_docs(&self, query: usize) -> Result<&[u32]> {
        let q = self.query(query)?;
        match q.windows.get(q.next) {
            Some(range) => Ok(&q.order[range.clone()]),
            None => Err(Error::invalid(format!(
                "query #{query} has no pending window"
            ))),
        }
    }

    /// Apply the answer for `query`'s pending window and move it to its next window.
    pub fn apply(&mut self, query: usize, outcome: Outcome<'_>) -> Result<WindowStatus> {
        self.window_docs(query)?;
        let q = &mut self.queries[query];
        let range = q.windows[q.next].clone();
        let parsed;
        let ids = match outcome {
            Outcome::Ids(ids) => ids,
            Outcome::Text(text) => {
                parsed = parse_permutation(text);
                &parsed
            }
            Outcome::Failed => &[],
        };
        let status = match outcome {
            Outcome::Failed => WindowStatus::Failed,
            _ => match repair(ids, range.len()) {
                None => WindowStatus::Unparsable,
                Some((perm, repairs)) => {
                    let window: Vec<u32> = q.order[range.clone()].to_vec();
                    for (slot, &from) in q.order[range].iter_mut().zip(&perm) {
                        *slot = window[from];
                    }
                    if repairs.any() {
                        WindowStatus::Repaired(repairs)
                    } else {
                        WindowStatus::Applied
                    }
                }
            },
        };
        q.next += 1;
        self.applied_windows += 1;
        Ok(status)
    }

    /// `query`'s current order: first-stage positions, the reranked top first.
    pub fn order(&self, query: usize) -> Result<&[u32]> {
        Ok(&self.query(query)?.order)
    }

    fn query(&self, query: usize) -> Result<&QueryState> {
        self.queries.get(query).ok_or_else(|| {
            Error::invalid(format!(
                "query #{query} out of range ({} queries)",
                self.queries.len()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reverse every window: the last of the top 100 climbs 80, 79, 60, 59, ..., 19, 0, which
    /// it reaches only if each window is applied before the next one is formed.
    #[test]
    fn windows_see_the_result_of_previous_windows() {
        let mut s = RerankState::new([100], WindowPlan::default());
        let reverse: Vec<u64> = (1..=20).rev().collect();
        let mut steps = 0;
        while !s.pending().is_empty() {
            assert_eq!(
                s.apply(0, Outcome::Ids(&reverse)).unwrap(),
                WindowStatus::Applied
            );
            steps += 1;
        }
        assert_eq!(steps, 9);
        assert!(s.is_finished());
        assert_eq!(s.order(0).unwrap()[0], 99);
    }

    #[test]
    fn batched_equals_one_by_one_and_failures_keep_order() {
        let lens = [100usize, 35, 7, 0, 100];
        let answer = |q: usize, step: usize, n: usize| -> String {
            // A deterministic, query-dependent answer, sometimes malformed.
            match (q + step) % 4 {
                0 => (1..=n)
                    .rev()
                    .map(|i| format!("[{i}]"))
                    .collect::<Vec<_>>()
                    .join(" > "),
                1 => "[2] > [2] > [1] > [40]".to_string(),
                2 => "none".to_string(),
                _ => format!("{}", n.div_ceil(2)),
            }
        };
        let plan = WindowPlan::new(30, 10, 4).unwrap();
        let mut batched = RerankState::new(lens, plan);
        loop {
            let pending = batched.pending();
            if pending.is_empty() {
                break;
            }
            for w in pending.iter().rev() {
                let text = answer(w.query, w.step, w.range.len());
                batched.apply(w.query, Outcome::Text(&text)).unwrap();
            }
        }
        for (q, &len) in lens.iter().enumerate() {
            let mut single = RerankState::new([len], plan);
            let mut step = 0;
            while let Some(w) = single.pending().first().cloned() {
                let text = answer(q, step, w.range.len());
                let status = single.apply(0, Outcome::Text(&text)).unwrap();
                if (q + step) % 4 == 2 {
                    assert_eq!(status, WindowStatus::Unparsable);
                }
                step += 1;
            }
            assert_eq!(single.order(0).unwrap(), batched.order(q).unwrap());
        }
        let mut s = RerankState::new([5], plan);
        assert_eq!(s.apply(0, Outcome::Failed).unwrap(), WindowStatus::Failed);
        assert_eq!(s.order(0).unwrap(), &[0, 1, 2, 3, 4]);
        assert!(s.apply(0, Outcome::Failed).is_err());
        assert!(s.apply(7, Outcome::Failed).is_err());
    }
}
