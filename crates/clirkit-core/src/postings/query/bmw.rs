//! Block-max WAND (Ding and Suel, 2011; PISA's `block_max_wand_query`), document at a time.
//!
//! Cursors are kept in doc order. The pivot is the first cursor at which the terms' largest
//! scores, summed in doc order, may reach the k-th score: no document before the pivot's can
//! enter. The block bounds of the cursors up to the pivot then decide: below the k-th score,
//! every document up to the end of the first of their blocks to end is skipped without
//! decoding; otherwise the pivot document is scored in full (every term that holds it sits at
//! or before the pivot) or a lagging cursor is moved up to it.
//!
//! As in [`super::maxscore`], a document is passed over only when its bound, rounded to f32
//! like a score, is strictly below the k-th score: at equality it may still win the tie-break.

use super::selection::{Hit, Selection, Threshold};
use crate::postings::{Cursor, PostingScorer, END};

/// Restore doc order after the cursor at `order[from]` moved forward.
#[inline]
fn bubble_down<S: PostingScorer>(order: &mut [usize], cursors: &[Cursor<'_, S>], from: usize) {
    for i in from + 1..order.len() {
        if cursors[order[i]].doc < cursors[order[i - 1]].doc {
            order.swap(i, i - 1);
        } else {
            break;
        }
    }
}

/// Block-max WAND over the query's term cursors, keeping the best hits in `top`, pruning from
/// `first` (at most the final k-th score) until `top` gives a higher threshold.
pub(super) fn block_max_wand<S: PostingScorer>(
    mut cursors: Vec<Cursor<'_, S>>,
    mut top: impl Selection,
    first: Threshold,
) -> Vec<Hit> {
    let n = cursors.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| cursors[i].doc);
    let mut threshold = first;
    loop {
        let mut bound = 0f64;
        let mut pivot = None;
        for (p, &i) in order.iter().enumerate() {
            let c = &cursors[i];
            if c.doc == END {
                break;
            }
            bound += c.max_score as f64;
            if threshold.admits(bound) {
                pivot = Some(p);
                break;
            }
        }
        let Some(mut pivot) = pivot else { break };
        let pivot_doc = cursors[order[pivot]].doc;
        while pivot + 1 < n && cursors[order[pivot + 1]].doc == pivot_doc {
            pivot += 1;
        }
        let mut block_bound = 0f64;
        for &i in &order[..=pivot] {
            block_bound += cursors[i].block_bound(pivot_doc) as f64;
        }
        if threshold.admits(block_bound) {
            if cursors[order[0]].doc == pivot_doc {
                // Every cursor up to the pivot holds the pivot document, and no other does.
                let mut score = 0f64;
                let mut alive = true;
                for &i in &order[..=pivot] {
                    let c = &mut cursors[i];
                    if alive {
                        let part = c.score();
                        score += part as f64;
                        block_bound -= c.block_bound(pivot_doc) as f64 - part as f64;
                        alive = threshold.admits(block_bound);
                    }
                    c.next();
                }
                if alive {
                    if let Some(raised) = top.push(score as f32, pivot_doc) {
                        threshold = raised;
                    }
                }
                order.sort_by_key(|&i| cursors[i].doc);
            } else {
                let mut lagging = pivot;
                while cursors[order[lagging]].doc == pivot_doc {
                    lagging -= 1;
                }
                cursors[order[lagging]].advance(pivot_doc);
                bubble_down(&mut order, &cursors, lagging);
            }
        } else {
            // No document up to the end of the first of these blocks to end can enter: move the
            // term with the largest bound (the likeliest to skip far) past it.
            let mut next = END as u64;
            let mut widest = pivot;
            for (p, &i) in order[..=pivot].iter().enumerate() {
                let c = &cursors[i];
                next = next.min(c.bound_block_last_doc() as u64 + 1);
                if c.max_score > cursors[order[widest]].max_score {
                    widest = p;
                }
            }
            if pivot + 1 < n {
                next = next.min(cursors[order[pivot + 1]].doc as u64);
            }
            let next = next.max(pivot_doc as u64 + 1).min(END as u64) as u32;
            cursors[order[widest]].advance(next);
            bubble_down(&mut order, &cursors, widest);
        }
    }
    top.into_hits()
}
