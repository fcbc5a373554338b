//! Block-max MaxScore over windows, document at a time (the windowed MaxScore of Lucene's
//! `MaxScoreBulkScorer`, on block maxima).
//!
//! The documents are walked in windows. A window runs from the first document not yet passed
//! to the end of the first block, over the essential terms of the window before, that holds
//! it; each term's bound there is the largest of its blocks' bounds over the window (a term
//! whose next posting lies past the window adds nothing). Per window, the terms are sorted by
//! those bounds; a window whose bounds together cannot reach the current k-th score is passed
//! over without decoding anything, and otherwise the terms whose bounds together cannot reach
//! it are non-essential there: only probed, block bound first, for documents an essential
//! term holds. Window bounds are tighter than each term's largest score, so fewer terms are
//! essential and whole windows are passed over (a query of one term reads only the blocks
//! that can still enter); bounding windows by the essential terms' blocks keeps them wide
//! when a dense non-essential term has short blocks.
//!
//! A document is passed over only when its bound, rounded to f32 like a real score, is
//! strictly below the current k-th score: at equality it may still win the doc-id tie-break.
//! Bounds are sums of f32 block bounds, which bound every posting (see
//! [`PostingScorer::block_bound`]).

use super::selection::{Hit, Selection, Threshold};
use crate::postings::{Cursor, PostingScorer, END};

/// Documents whose essential scores are summed at once, where a window has several essential
/// terms (Lucene's inner window): their sums fit the first-level cache.
const SLICE: u32 = 4096;
// A slice's words of `held` are tracked by the bits of one u64.
const _: () = assert!(SLICE / 64 <= 64);

/// Block-max MaxScore over windows of the query's term cursors, keeping the best hits in `top`,
/// pruning from `first` (at most the final k-th score) until `top` gives a higher threshold.
pub(super) fn windowed_maxscore<S: PostingScorer>(
    mut cursors: Vec<Cursor<'_, S>>,
    top: impl Selection,
    first: Threshold,
) -> Vec<Hit> {
    let n = cursors.len();
    let mut found = Found {
        threshold: first,
        top,
    };
    // Per window: each term's bound there, the terms by rising bound (`order[non_essential..]`
    // the essential ones), and prefix[i] the most the terms order[..=i] can add together.
    let mut bounds = vec![0f32; n];
    let mut order: Vec<usize> = (0..n).collect();
    let mut prefix = vec![0f64; n];
    let mut non_essential = 0;
    // Where several essential terms' scores are summed, a slice of a window at a time.
    let mut sums: Vec<f64> = Vec::new();
    let mut held = [0u64; SLICE as usize / 64];
    let mut candidates = Candidates::default();
    let mut start = cursors.iter().map(|c| c.doc).min().unwrap_or(END);
    while start != END {
        // The window [start, end]: up to the end of the first block that may hold `start` over
        // the last window's essential terms (all of them when there were none). Bounding never
        // moves a cursor: one left behind `start` (a non-essential term not probed up to it)
        // is bounded from its block metadata.
        let mut end = END - 1;
        for &i in &order[non_essential.min(n - 1)..] {
            let c = &mut cursors[i];
            c.block_bound(start);
            end = end.min(c.bound_block_last_doc());
        }
        if end == END - 1 {
            // Those terms have nothing left: the others bound the window.
            for c in cursors.iter_mut() {
                c.block_bound(start);
                end = end.min(c.bound_block_last_doc());
            }
        }
        for (c, bound) in cursors.iter_mut().zip(&mut bounds) {
            *bound = if c.doc > end {
                // Its next posting is past the window.
                0.0
            } else {
                c.window_bound(start, end)
            };
        }
        // Insertion sort: a handful of terms, most windows in the order of the last.
        for i in 1..n {
            let mut j = i;
            while j > 0 && bounds[order[j]] < bounds[order[j - 1]] {
                order.swap(j, j - 1);
                j -= 1;
            }
        }
        let mut acc = 0f64;
        for (p, &i) in prefix.iter_mut().zip(&order) {
            acc += bounds[i] as f64;
            *p = acc;
        }
        non_essential = 0;
        while non_essential < n && !found.threshold.admits(prefix[non_essential]) {
            non_essential += 1;
        }
        if non_essential + 1 == n {
            // One essential term: its postings in the window are the candidates, a slice at a
            // time.
            let i = order[n - 1];
            let probed = non_essential;
            cursors[i].advance(start);
            while cursors[i].doc <= end {
                let to = end.min(cursors[i].doc.saturating_add(SLICE - 1));
                let threshold = found.threshold;
                let rest = if probed > 0 { prefix[probed - 1] } else { 0.0 };
                let mut taker = candidates.taker();
                cursors[i].for_each_until(to, |doc, score| {
                    let score = score as f64;
                    taker.take(doc, score, threshold.admits(score + rest));
                });
                let kept = taker.kept;
                if candidates.offer(kept, &mut found, &mut cursors, &order[..probed], &prefix)
                    && !found.threshold.admits(prefix[n - 1])
                {
                    // Nothing left in this window can enter.
                    non_essential = n;
                    break;
                }
            }
        } else if non_essential < n {
            // Several: their scores are gathered a slice of the window at a time, term by term,
            // and the documents they hold taken in order.
            if sums.is_empty() {
                sums.resize(SLICE as usize, 0.0);
            }
            let mut from = start;
            loop {
                // From the first document an essential term holds.
                for &i in &order[non_essential..] {
                    cursors[i].advance(from);
                }
                from = order[non_essential..]
                    .iter()
                    .map(|&i| cursors[i].doc)
                    .min()
                    .unwrap_or(END);
                if from > end {
                    break;
                }
                let to = end.min(from.saturating_add(SLICE - 1));
                // Which words of `held` have a bit set: only those are read below.
                let mut words = 0u64;
                for &i in &order[non_essential..] {
                    cursors[i].for_each_until(to, |doc, score| {
                        let at = (doc - from) as usize;
                        sums[at] += score as f64;
                        held[at / 64] |= 1 << (at % 64);
                        words |= 1 << (at / 64);
                    });
                }
                // The partition the sums were gathered under: a term that turns non-essential
                // below has already added its score.
                let probed = non_essential;
                let threshold = found.threshold;
                let rest = if probed > 0 { prefix[probed - 1] } else { 0.0 };
                let mut taker = candidates.taker();
                while words != 0 {
                    let w = words.trailing_zeros() as usize;
                    words &= words - 1;
                    let mut bits = std::mem::take(&mut held[w]);
                    while bits != 0 {
                        let at = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let score = std::mem::take(&mut sums[at]);
                        taker.take(from + at as u32, score, threshold.admits(score + rest));
                    }
                }
                let kept = taker.kept;
                if candidates.offer(kept, &mut found, &mut cursors, &order[..probed], &prefix) {
                    while non_essential < n && !found.threshold.admits(prefix[non_essential]) {
                        non_essential += 1;
                    }
                    if non_essential == n {
                        break;
                    }
                }
                if to >= end {
                    break;
                }
                from = to + 1;
            }
        }
        start = end + 1;
    }
    found.top.into_hits()
}

/// A slice's candidate documents that pass the first bound test, in document order, with the
/// scores of their essential terms. A slice holds at most [`SLICE`] documents.
#[derive(Default)]
struct Candidates {
    docs: Vec<u32>,
    scores: Vec<f64>,
}

impl Candidates {
    /// Where a slice's candidates are written, from the first.
    #[inline(always)]
    fn taker(&mut self) -> Taker<'_> {
        if self.docs.is_empty() {
            self.docs.resize(SLICE as usize, 0);
            self.scores.resize(SLICE as usize, 0.0);
        }
        Taker {
            docs: &mut self.docs,
            scores: &mut self.scores,
            kept: 0,
        }
    }

    /// Offer the first `kept` candidates in order ([`Found::offer`], probing the `non_essential`
    /// terms), stopping once nothing more can enter. Whether the threshold rose.
    #[inline(always)]
    fn offer<T: Selection, S: PostingScorer>(
        &self,
        kept: usize,
        found: &mut Found<T>,
        cursors: &mut [Cursor<'_, S>],
        non_essential: &[usize],
        prefix: &[f64],
    ) -> bool {
        let mut raised = false;
        let most = prefix[prefix.len() - 1];
        for (&doc, &score) in self.docs[..kept].iter().zip(&self.scores[..kept]) {
            if found.offer(cursors, non_essential, prefix, score, doc) {
                raised = true;
                if !found.threshold.admits(most) {
                    break;
                }
            }
        }
        raised
    }
}

/// Writes candidates into [`Candidates`]: every one is written, a passing one kept (no branch
/// on the test, which a third of the candidates fail unpredictably).
struct Taker<'c> {
    docs: &'c mut [u32],
    scores: &'c mut [f64],
    kept: usize,
}

impl Taker<'_> {
    #[inline(always)]
    fn take(&mut self, doc: u32, score: f64, passes: bool) {
        self.docs[self.kept] = doc;
        self.scores[self.kept] = score;
        self.kept += passes as usize;
    }
}

/// The hits found so far and the threshold they set.
struct Found<T: Selection> {
    threshold: Threshold,
    top: T,
}

impl<T: Selection> Found<T> {
    /// Complete the score of `doc`, whose essential terms give `score`, by probing the
    /// `non_essential` terms (rising bounds, `prefix` their running sums) largest bound first,
    /// and offer it unless its bound falls below the threshold on the way. Whether the
    /// threshold rose.
    #[inline(always)]
    fn offer<S: PostingScorer>(
        &mut self,
        cursors: &mut [Cursor<'_, S>],
        non_essential: &[usize],
        prefix: &[f64],
        mut score: f64,
        doc: u32,
    ) -> bool {
        let threshold = self.threshold;
        for j in (0..non_essential.len()).rev() {
            if !threshold.admits(score + prefix[j]) {
                return false;
            }
            let rest = if j > 0 { prefix[j - 1] } else { 0.0 };
            let c = &mut cursors[non_essential[j]];
            if !threshold.admits(score + c.block_bound(doc) as f64 + rest) {
                return false;
            }
            c.advance(doc);
            if c.doc == doc {
                score += c.score() as f64;
            }
        }
        // Most candidates fully scored still fall short: the inlined test spares them the
        // selection's call (it passes every score the selection could take).
        if !threshold.admits(score) {
            return false;
        }
        match self.top.push(score as f32, doc) {
            Some(raised) => {
                self.threshold = raised;
                true
            }
            None => false,
        }
    }
}
