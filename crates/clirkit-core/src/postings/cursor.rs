//! A cursor over one term's block-max postings: document-at-a-time movement (`next`,
//! `advance`), block bounds without decoding, and lazy decoding of a block's values. Scores
//! come from the [`PostingScorer`] it is given.

use super::codec::{decode_docs, decode_values, BlockMeta, BLOCK_LEN, BLOCK_META_LEN};
use crate::io::format::{read_u32, ChunkChecks};

/// The doc of a cursor past its last posting.
pub const END: u32 = u32::MAX;

/// How a cursor's postings are scored.
pub trait PostingScorer: Copy {
    /// The score of `doc`'s posting, whose stored value is `value`.
    fn score(&self, doc: u32, value: u32) -> f32;
    /// A bound on the score of every posting in a block, from its metadata alone.
    fn block_bound(&self, meta: &BlockMeta) -> f32;
    /// A bound on the score of every posting in a block from the maximum the index stored for
    /// it ([`TermPostings::block_maxima`]), never lower for a larger stored maximum. Only a
    /// scorer whose index stores maxima is given any; for the others this is never called, and
    /// the loosest bound stands in.
    #[inline(always)]
    fn stored_block_bound(&self, _stored: f32) -> f32 {
        f32::INFINITY
    }
}

/// A term's postings as mapped from disk.
#[derive(Clone, Copy)]
pub struct TermPostings<'a> {
    pub metas: &'a [u8],
    pub data: &'a [u8],
    pub blocks: usize,
    /// The postings file's checks: a block whose documents do not decode as its metadata says
    /// is marked there ([`ChunkChecks::mark_malformed`]), for the searcher to report after the
    /// query ([`postings_intact`]).
    pub checks: &'a ChunkChecks,
    /// One little-endian f32 per block, stored at build time for the search's scoring
    /// parameters (what it means is the scorer's: [`PostingScorer::stored_block_bound`]); when
    /// absent, bounds come from the block metadata.
    pub block_maxima: Option<&'a [u8]>,
}

impl TermPostings<'_> {
    /// Number of postings in the list.
    pub fn doc_freq(&self) -> usize {
        match self.blocks {
            0 => 0,
            n => (n - 1) * BLOCK_LEN + BlockMeta::decode(self.metas, n - 1).len as usize,
        }
    }

    /// A bound on the score of every posting in block `b`.
    #[inline(always)]
    fn bound<S: PostingScorer>(&self, scorer: &S, b: usize) -> f32 {
        match self.block_maxima {
            Some(maxima) => scorer.stored_block_bound(f32::from_bits(read_u32(maxima, b * 4))),
            None => scorer.block_bound(&BlockMeta::decode(self.metas, b)),
        }
    }
}

/// An error once a cursor over `file` met a malformed block: the query's results are not to
/// be trusted.
pub fn postings_intact(file: &crate::io::format::MappedFile) -> crate::error::Result<()> {
    file.checks()
        .decoded_intact("a postings block decodes to documents other than its metadata states")
}

/// Documents of a block that [`Cursor::advance`] compares with its target at a time.
const ADVANCE_STEP: usize = 16;

/// A position in one term's postings, decoding a block at a time.
#[derive(Clone)]
pub struct Cursor<'a, S: PostingScorer> {
    postings: TermPostings<'a>,
    scorer: S,
    block: usize,
    /// The last doc of `block`.
    block_last: u32,
    pos: usize,
    len: usize,
    docs: [u32; BLOCK_LEN],
    values: [u32; BLOCK_LEN],
    values_ready: bool,
    /// The current doc, or [`END`].
    pub doc: u32,
    /// The largest score this term gives any document.
    pub max_score: f32,
    bound_block: usize,
    bound: f32,
    /// The last doc of `bound_block` (one below [`END`] past the last block).
    bound_last: u32,
}

impl<'a, S: PostingScorer> Cursor<'a, S> {
    pub fn new(postings: TermPostings<'a>, scorer: S) -> Self {
        let max_score = match postings.block_maxima {
            // One bound from the largest stored maximum: bounds rise with it.
            Some(maxima) => scorer.stored_block_bound(
                maxima
                    .chunks_exact(4)
                    .map(|m| f32::from_le_bytes(m.try_into().unwrap()))
                    .fold(0f32, f32::max),
            ),
            None => (0..postings.blocks)
                .map(|b| scorer.block_bound(&BlockMeta::decode(postings.metas, b)))
                .fold(0f32, f32::max),
        };
        let mut c = Cursor {
            postings,
            scorer,
            block: 0,
            block_last: 0,
            pos: 0,
            len: 0,
            docs: [0; BLOCK_LEN],
            values: [0; BLOCK_LEN],
            values_ready: false,
            doc: END,
            max_score,
            bound_block: usize::MAX,
            bound: 0.0,
            bound_last: 0,
        };
        if postings.blocks > 0 {
            c.load_block(0);
        }
        c
    }

    /// The scorer of this term.
    #[inline]
    pub fn scorer(&self) -> &S {
        &self.scorer
    }

    /// Number of postings in the list.
    pub fn doc_freq(&self) -> usize {
        self.postings.doc_freq()
    }

    #[inline]
    fn meta(&self, b: usize) -> BlockMeta {
        BlockMeta::decode(self.postings.metas, b)
    }

    /// Block `b`'s last doc, read alone from its metadata.
    #[inline(always)]
    fn last_doc(&self, b: usize) -> u32 {
        read_u32(self.postings.metas, b * BLOCK_META_LEN)
    }

    fn load_block(&mut self, b: usize) {
        let prev_last = if b == 0 {
            u32::MAX
        } else {
            self.last_doc(b - 1)
        };
        let meta = self.meta(b);
        self.len = meta.len as usize;
        if !decode_docs(self.postings.data, &meta, prev_last, &mut self.docs) {
            // Go on with the one document the (checked) metadata vouches for, so the walk stays
            // in range and in order; the searcher turns the mark into an error.
            self.postings.checks.mark_malformed();
            self.docs[0] = meta.last_doc;
            self.len = 1;
        }
        self.block = b;
        self.block_last = meta.last_doc;
        self.pos = 0;
        self.values_ready = false;
        self.doc = self.docs[0];
    }

    /// Move to the next posting.
    #[inline]
    pub fn next(&mut self) {
        self.pos += 1;
        if self.pos < self.len {
            self.doc = self.docs[self.pos];
        } else if self.block + 1 < self.postings.blocks {
            self.load_block(self.block + 1);
        } else {
            self.doc = END;
        }
    }

    /// The first block that may hold `target`, if any. Targets only grow during a query, so
    /// the scan starts at the later of the decoded block and the last block bounded: each
    /// block's metadata is passed over once per query, however far apart the targets are.
    #[inline]
    fn block_for(&self, target: u32) -> Option<usize> {
        let start = match self.bound_block {
            usize::MAX => self.block,
            b => b.max(self.block),
        };
        (start..self.postings.blocks).find(|&b| self.last_doc(b) >= target)
    }

    /// Move to the first posting with doc >= `target`.
    #[inline]
    pub fn advance(&mut self, target: u32) {
        if self.doc >= target {
            return;
        }
        if target > self.block_last {
            self.advance_to_block(target);
            if self.doc == END {
                return;
            }
        }
        // The block's last doc is at least `target`, so one is found: the documents below it
        // are counted sixteen at a time (the docs rise; a count the compiler vectorizes, with
        // no branch per document), up to the first sixteen not all below, then one by one in
        // a block's last few. Sixteen is the step that measured best against a plain scan and
        // the other steps tried (benches/results/bm25.md).
        let docs = &self.docs[..self.len];
        let mut pos = self.pos;
        while pos + ADVANCE_STEP <= docs.len() {
            let below = docs[pos..pos + ADVANCE_STEP]
                .iter()
                .filter(|&&d| d < target)
                .count();
            pos += below;
            if below < ADVANCE_STEP {
                self.pos = pos;
                self.doc = docs[pos];
                return;
            }
        }
        pos += docs[pos..]
            .iter()
            .position(|&d| d >= target)
            .unwrap_or(docs.len() - 1 - pos);
        self.pos = pos;
        self.doc = docs[pos];
    }

    /// Decode the block that may hold `target`, or end the cursor when none does.
    #[inline(never)]
    fn advance_to_block(&mut self, target: u32) {
        match self.block_for(target) {
            Some(b) => self.load_block(b),
            None => self.doc = END,
        }
    }

    /// An upper bound of this term's score for `target` (from the block that would hold it),
    /// without decoding anything.
    #[inline]
    pub fn block_bound(&mut self, target: u32) -> f32 {
        let Some(b) = self.block_for(target) else {
            // Past the last block: no posting from `target` on, so later targets need no scan.
            self.bound_block = self.postings.blocks;
            self.bound = 0.0;
            self.bound_last = END - 1;
            return 0.0;
        };
        if b != self.bound_block {
            self.bound = self.postings.bound(&self.scorer, b);
            self.bound_block = b;
            self.bound_last = self.last_doc(b);
        }
        self.bound
    }

    /// A bound on this term's score for every document from `start` to `end` (the largest
    /// bound of the blocks that may hold one), without decoding anything. Leaves the cursor's
    /// bounded block at the one for `start`, so later bounds for targets within the window stay
    /// right.
    #[inline]
    pub fn window_bound(&mut self, start: u32, end: u32) -> f32 {
        let bound = self.block_bound(start);
        let (mut b, mut last) = (self.bound_block, self.bound_last);
        if last >= end || b + 1 >= self.postings.blocks {
            return bound;
        }
        match self.postings.block_maxima {
            // Bounds rise with the stored maxima: one bound from the largest.
            Some(maxima) => {
                let mut most = 0f32;
                while last < end && b + 1 < self.postings.blocks {
                    b += 1;
                    most = most.max(f32::from_bits(read_u32(maxima, b * 4)));
                    last = self.last_doc(b);
                }
                bound.max(self.scorer.stored_block_bound(most))
            }
            None => {
                let mut bound = bound;
                while last < end && b + 1 < self.postings.blocks {
                    b += 1;
                    bound = bound.max(self.postings.bound(&self.scorer, b));
                    last = self.last_doc(b);
                }
                bound
            }
        }
    }

    /// The `m` blocks with the largest bounds (by [`Cursor::block_bound`]'s measure), in doc
    /// order; all of them when there are at most `m`.
    pub fn best_blocks(&self, m: usize) -> Vec<usize> {
        // One pass keeping the m best so far (m is a handful): a block replaces the weakest
        // kept only when strictly better, so ties keep the earlier block.
        let mut best: Vec<(f32, usize)> = Vec::with_capacity(m);
        let mut keep = |value: f32, b: usize| {
            if best.len() < m {
                best.push((value, b));
            } else if let Some(weakest) = best
                .iter_mut()
                .min_by(|x, y| x.0.total_cmp(&y.0).then(y.1.cmp(&x.1)))
                .filter(|w| value > w.0)
            {
                *weakest = (value, b);
            }
        };
        match self.postings.block_maxima {
            // Bounds rise with the stored maxima: those order the blocks alike.
            Some(maxima) => (0..self.postings.blocks)
                .for_each(|b| keep(f32::from_bits(read_u32(maxima, b * 4)), b)),
            None => (0..self.postings.blocks)
                .for_each(|b| keep(self.postings.bound(&self.scorer, b), b)),
        }
        let mut blocks: Vec<usize> = best.into_iter().map(|(_, b)| b).collect();
        blocks.sort_unstable();
        blocks
    }

    /// Hand every posting of block `b` (not before the current block) to `visit` as (doc,
    /// score), leaving the cursor on the block's last posting.
    pub fn visit_block(&mut self, b: usize, mut visit: impl FnMut(u32, f32)) {
        if b != self.block {
            debug_assert!(b > self.block);
            self.load_block(b);
        }
        self.ensure_values();
        for i in 0..self.len {
            visit(
                self.docs[i],
                self.scorer.score(self.docs[i], self.values[i]),
            );
        }
        self.pos = self.len - 1;
        self.doc = self.docs[self.pos];
    }

    /// The last doc of the block the latest [`Cursor::block_bound`] bounded: its bound holds
    /// for every target up to this one. One below [`END`] when that target was past the last
    /// block.
    #[inline]
    pub fn bound_block_last_doc(&self) -> u32 {
        self.bound_last
    }

    #[inline]
    fn ensure_values(&mut self) {
        if !self.values_ready {
            let meta = self.meta(self.block);
            decode_values(self.postings.data, &meta, &mut self.values);
            self.values_ready = true;
        }
    }

    /// The score of the current posting.
    #[inline]
    pub fn score(&mut self) -> f32 {
        self.ensure_values();
        self.scorer.score(self.doc, self.values[self.pos])
    }

    /// Hand every posting up to `end` (below [`END`]) to `visit` as (doc, score), a block at a
    /// time, and leave the cursor on the first posting past `end`. A block's scores are
    /// computed in one loop, so the scorer's per-document lookups overlap.
    #[inline]
    pub fn for_each_until(&mut self, end: u32, mut visit: impl FnMut(u32, f32)) {
        while self.doc <= end {
            self.ensure_values();
            let from = self.pos;
            let to = from + self.docs[from..self.len].partition_point(|&d| d <= end);
            let scorer = self.scorer;
            for i in from..to {
                visit(self.docs[i], scorer.score(self.docs[i], self.values[i]));
            }
            if to < self.len {
                self.pos = to;
                self.doc = self.docs[to];
            } else if self.block + 1 < self.postings.blocks {
                self.load_block(self.block + 1);
            } else {
                self.doc = END;
            }
        }
    }

    /// Hand every remaining posting to `visit` as (doc, value), a block at a time, and end the
    /// cursor: the traversal of term-at-a-time scoring.
    #[inline]
    pub fn drain(&mut self, visit: impl FnMut(u32, u32)) {
        self.drain_until(END, visit)
    }

    /// Hand every posting before document `end` to `visit` as (doc, value), a block at a time,
    /// leaving the cursor on the first posting at or after `end` (or ended): a slice of documents
    /// at a time, as the forward index's bounded inversion walks them.
    #[inline]
    pub fn drain_until(&mut self, end: u32, mut visit: impl FnMut(u32, u32)) {
        while self.doc != END && self.doc < end {
            if !self.values_ready {
                let meta = self.meta(self.block);
                decode_values(self.postings.data, &meta, &mut self.values);
                self.values_ready = true;
            }
            for i in self.pos..self.len {
                let doc = self.docs[i];
                if doc >= end {
                    self.pos = i;
                    self.doc = doc;
                    return;
                }
                visit(doc, self.values[i]);
            }
            if self.block + 1 < self.postings.blocks {
                self.load_block(self.block + 1);
            } else {
                self.doc = END;
            }
        }
    }
}
