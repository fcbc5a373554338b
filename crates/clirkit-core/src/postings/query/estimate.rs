//! A first k-th score before the walk: the full scores of a few documents likely to rank high,
//! so that pruning starts from a threshold close to the final one rather than from nothing
//! (the walk in document order otherwise raises it only as it meets better documents).
//!
//! The documents are those of the blocks with the largest bounds of the term with the largest
//! score, each scored in full on copies of the cursors (the walk's own cursors do not move).
//! Any k of them are k documents of the collection, so the k-th best of their scores is at most
//! the final k-th score: a bound strictly below it still cannot enter, and the hits are the
//! same as without it. Their scores are summed as the walk sums them (f32 term scores in f64,
//! rounded once), so each is the very score the walk computes for that document.

use crate::postings::{Cursor, PostingScorer, END};

/// Blocks of the leading term whose documents are scored. Measured on the 1M-document Zipfian
/// set at k=10 (benches/results/bm25.md): one block's documents already take away most of the
/// candidates a perfect first threshold would (48.0M of 59.3M offers left, 39.4M with the final
/// k-th score itself), eight take a few more, at a cost that grows with them. Since the walk's
/// candidates became cheaper, one block beats two by 2-3% of the search time, and none loses
/// 5% (per-query interleaved A/B, the same results entry).
const BLOCKS: usize = 1;

/// The k-th best full score of the documents in the leading term's best-bounded blocks; none
/// when they are fewer than k.
pub(crate) fn first_kth_score<S: PostingScorer>(
    cursors: &[Cursor<'_, S>],
    k: usize,
) -> Option<f32> {
    if k == 0 {
        return None;
    }
    // The term with the largest score (the first of them on a tie).
    let lead = (0..cursors.len()).max_by(|&a, &b| {
        cursors[a]
            .max_score
            .total_cmp(&cursors[b].max_score)
            .then(b.cmp(&a))
    })?;
    let blocks = cursors[lead].best_blocks(BLOCKS);
    let mut others: Vec<Cursor<'_, S>> = cursors
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != lead)
        .map(|(_, c)| c.clone())
        .collect();
    let mut lead = cursors[lead].clone();
    let mut scores: Vec<f32> = Vec::new();
    for b in blocks {
        lead.visit_block(b, |doc, score| {
            let mut sum = score as f64;
            for c in others.iter_mut() {
                c.advance(doc);
                if c.doc == doc {
                    sum += c.score() as f64;
                }
            }
            scores.push(sum as f32);
        });
        if lead.doc == END {
            break;
        }
    }
    if scores.len() < k {
        return None;
    }
    let (_, kth, _) = scores.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    Some(*kth)
}
