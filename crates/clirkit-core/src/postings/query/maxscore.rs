//! Block-max MaxScore, document at a time.
//!
//! Terms are sorted by their largest score; those whose bounds together cannot reach the
//! current k-th score are non-essential: they are only probed, block bound first, for documents
//! an essential term holds. Upper bounds are sums of f32 block bounds, which bound every
//! posting (see [`PostingScorer::block_bound`]). A document is skipped only when its bound,
//! rounded to f32 like a real score, is strictly below the current k-th score: at equality it
//! may still win the doc-id tie-break.

use super::selection::{Hit, Selection, Threshold};
use crate::postings::{Cursor, PostingScorer, END};

/// Block-max MaxScore over the query's term cursors, keeping the best hits in `top`, pruning
/// from `first` (at most the final k-th score) until `top` gives a higher threshold.
pub(super) fn maxscore<S: PostingScorer>(
    mut cursors: Vec<Cursor<'_, S>>,
    mut top: impl Selection,
    first: Threshold,
) -> Vec<Hit> {
    cursors.sort_by(|a, b| a.max_score.total_cmp(&b.max_score));
    let n = cursors.len();
    // prefix[i]: the most terms 0..=i can add together.
    let mut prefix = Vec::with_capacity(n);
    let mut acc = 0f64;
    for c in &cursors {
        acc += c.max_score as f64;
        prefix.push(acc);
    }
    let mut threshold = first;
    let mut non_essential = 0;
    while non_essential < n && !threshold.admits(prefix[non_essential]) {
        non_essential += 1;
    }
    let mut current = cursors.iter().map(|c| c.doc).min().unwrap_or(END);
    while non_essential < n && current != END {
        let mut score = 0f64;
        let mut next = END;
        for c in &mut cursors[non_essential..] {
            if c.doc == current {
                score += c.score() as f64;
                c.next();
            }
            next = next.min(c.doc);
        }
        let mut alive = true;
        for i in (0..non_essential).rev() {
            if !threshold.admits(score + prefix[i]) {
                alive = false;
                break;
            }
            let rest = if i > 0 { prefix[i - 1] } else { 0.0 };
            let c = &mut cursors[i];
            if !threshold.admits(score + c.block_bound(current) as f64 + rest) {
                alive = false;
                break;
            }
            c.advance(current);
            if c.doc == current {
                score += c.score() as f64;
            }
        }
        // Most candidates fully scored still fall short: the inlined test spares them the
        // selection's call (it passes every score the selection could take).
        let raised = if alive && threshold.admits(score) {
            top.push(score as f32, current)
        } else {
            None
        };
        if let Some(raised) = raised {
            threshold = raised;
            while non_essential < n && !threshold.admits(prefix[non_essential]) {
                non_essential += 1;
            }
        }
        current = next;
    }
    top.into_hits()
}
