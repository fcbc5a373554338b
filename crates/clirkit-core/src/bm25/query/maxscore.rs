//! Block-max MaxScore, document at a time.
//!
//! Terms are sorted by their largest score; those whose bounds together cannot reach the
//! current k-th score are non-essential: they are only probed, block bound first, for documents
//! an essential term holds. Upper bounds are sums of f32 block bounds, which bound every
//! posting (see [`PostingScorer::block_bound`]). A document is skipped only when its bound,
//! rounded to f32 like a real score, is strictly below the current k-th score: at equality it
//! may still win the doc-id tie-break.

use super::{DocRanks, Hit, Leaders, Threshold};
use crate::postings::{Cursor, PostingScorer, BLOCK_LEN, END};

/// Block-max MaxScore over the query's term cursors.
pub fn maxscore<S: PostingScorer>(
    mut cursors: Vec<Cursor<'_, S>>,
    k: usize,
    ranks: DocRanks<'_>,
) -> Vec<Hit> {
    if k == 0 || cursors.is_empty() {
        return Vec::new();
    }
    cursors.sort_by(|a, b| a.max_score.total_cmp(&b.max_score));
    let n = cursors.len();
    // prefix[i]: the most terms 0..=i can add together.
    let mut prefix = Vec::with_capacity(n);
    let mut acc = 0f64;
    for c in &cursors {
        acc += c.max_score as f64;
        prefix.push(acc);
    }
    let mut top = Leaders::new(k, ranks);
    let mut threshold = top.threshold();
    let mut non_essential = 0;
    let mut current = cursors.iter().map(|c| c.doc).min().unwrap_or(END);
    while non_essential < n && current != END {
        if non_essential == n - 1 {
            single_essential(&mut cursors, &prefix, &mut top);
            break;
        }
        let mut score = 0f64;
        let mut next = END;
        for c in &mut cursors[non_essential..] {
            if c.doc == current {
                score += c.score() as f64;
                c.next();
            }
            next = next.min(c.doc);
        }
        let completed = complete(
            &mut cursors[..non_essential],
            &prefix,
            current,
            score,
            threshold,
        );
        if let Some(score) = completed {
            if top.push(score as f32, current) {
                threshold = top.threshold();
                while non_essential < n && !threshold.admits(prefix[non_essential]) {
                    non_essential += 1;
                }
            }
        }
        current = next;
    }
    top.into_hits()
}

/// `doc`'s full score from the essential terms' `score` and the non-essential terms (probed
/// highest bound first, block bound before decoding), or None once it cannot enter.
#[inline]
fn complete<S: PostingScorer>(
    non_essential: &mut [Cursor<'_, S>],
    prefix: &[f64],
    doc: u32,
    mut score: f64,
    threshold: Threshold,
) -> Option<f64> {
    for i in (0..non_essential.len()).rev() {
        if !threshold.admits(score + prefix[i]) {
            return None;
        }
        let rest = if i > 0 { prefix[i - 1] } else { 0.0 };
        let c = &mut non_essential[i];
        if !threshold.admits(score + c.block_bound(doc) as f64 + rest) {
            return None;
        }
        c.advance(doc);
        if c.doc == doc {
            score += c.score() as f64;
        }
    }
    Some(score)
}

/// The rest of the query once only the last term is essential (the usual case for small k
/// after the first hits): its postings are scored a block at a time in one tight loop, blocks
/// whose bound cannot lift a document past the k-th score are passed over undecoded, and only
/// documents that could still enter probe the other terms.
fn single_essential<S: PostingScorer>(
    cursors: &mut [Cursor<'_, S>],
    prefix: &[f64],
    top: &mut Leaders<'_>,
) {
    let n = cursors.len();
    let (others, last) = cursors.split_at_mut(n - 1);
    let essential = &mut last[0];
    let others_bound = if n >= 2 { prefix[n - 2] } else { 0.0 };
    let mut threshold = top.threshold();
    let mut docs = [0u32; BLOCK_LEN];
    let mut scores = [0f32; BLOCK_LEN];
    while essential.doc != END {
        if !threshold.admits(essential.block_bound(essential.doc) as f64 + others_bound) {
            essential.next_block();
            continue;
        }
        let count = essential.score_rest_of_block(&mut docs, &mut scores);
        for (&doc, &score) in docs[..count].iter().zip(&scores[..count]) {
            let score = score as f64;
            if !threshold.admits(score + others_bound) {
                continue;
            }
            let Some(score) = complete(others, prefix, doc, score, threshold) else {
                continue;
            };
            if top.push(score as f32, doc) {
                threshold = top.threshold();
                if !threshold.admits(prefix[n - 1]) {
                    return;
                }
            }
        }
    }
}
