//! Top-k retrieval: block-max MaxScore (document at a time), and exhaustive scoring as the
//! reference it must equal.
//!
//! Exactness. Each term's contribution is Lucene's f32 score; a document's contributions are
//! summed in f64 (exact for the handful of positive terms of a query, so the order of addition
//! cannot change the result) and rounded once to f32. Upper bounds are sums of f32 scores of
//! (max tf, min norm) pairs, which bound every posting because Lucene's formula is monotone in
//! both. A document is skipped only when its bound, rounded to f32 like a real score, is
//! strictly below the current k-th score: at equality it may still win the doc-id tie-break.

use super::format::{decode_docs, decode_tfs, BlockMeta, BLOCK_LEN};
use super::scoring::{NormCache, TermScorer};
use std::cmp::Ordering;

/// One retrieved document: internal number and BM25 score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: u32,
    pub score: f32,
}

const END: u32 = u32::MAX;

/// What the searcher needs from the index's per-document data.
#[derive(Clone, Copy)]
pub struct DocData<'a> {
    pub norms: &'a [u8],
    /// Byte offset of `rank [u32; n]` inside `bytes`.
    pub ranks: &'a [u8],
}

impl DocData<'_> {
    #[inline]
    fn rank(&self, doc: u32) -> u32 {
        let at = doc as usize * 4;
        u32::from_le_bytes(self.ranks[at..at + 4].try_into().unwrap())
    }
}

/// A query term's postings as mapped from disk.
#[derive(Clone, Copy)]
pub struct TermPostings<'a> {
    pub metas: &'a [u8],
    pub data: &'a [u8],
    pub blocks: usize,
    pub scorer: TermScorer,
}

/// A position in one term's postings, decoding a block at a time.
pub struct Cursor<'a> {
    postings: TermPostings<'a>,
    block: usize,
    pos: usize,
    len: usize,
    docs: [u32; BLOCK_LEN],
    tfs: [u32; BLOCK_LEN],
    tfs_ready: bool,
    /// The current doc, or `END`.
    pub doc: u32,
    /// The largest score this term gives any document.
    pub max_score: f32,
    bound_block: usize,
    bound: f32,
}

impl<'a> Cursor<'a> {
    pub fn new(postings: TermPostings<'a>, cache: &NormCache) -> Self {
        let mut max_score = 0f32;
        for b in 0..postings.blocks {
            let m = BlockMeta::decode(postings.metas, b);
            max_score = max_score.max(
                postings
                    .scorer
                    .score(m.max_tf, cache.inverse[m.min_norm as usize]),
            );
        }
        let mut c = Cursor {
            postings,
            block: 0,
            pos: 0,
            len: 0,
            docs: [0; BLOCK_LEN],
            tfs: [0; BLOCK_LEN],
            tfs_ready: false,
            doc: END,
            max_score,
            bound_block: usize::MAX,
            bound: 0.0,
        };
        if postings.blocks > 0 {
            c.load_block(0);
        }
        c
    }

    /// Number of postings in the list.
    pub fn doc_freq(&self) -> usize {
        match self.postings.blocks {
            0 => 0,
            n => (n - 1) * BLOCK_LEN + self.meta(n - 1).len as usize,
        }
    }

    #[inline]
    fn meta(&self, b: usize) -> BlockMeta {
        BlockMeta::decode(self.postings.metas, b)
    }

    fn load_block(&mut self, b: usize) {
        let prev_last = if b == 0 {
            u32::MAX
        } else {
            self.meta(b - 1).last_doc
        };
        let meta = self.meta(b);
        decode_docs(self.postings.data, &meta, prev_last, &mut self.docs);
        self.block = b;
        self.len = meta.len as usize;
        self.pos = 0;
        self.tfs_ready = false;
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
        (start..self.postings.blocks).find(|&b| self.meta(b).last_doc >= target)
    }

    /// Move to the first posting with doc >= `target`.
    pub fn advance(&mut self, target: u32) {
        if self.doc >= target {
            return;
        }
        if target > self.meta(self.block).last_doc {
            match self.block_for(target) {
                Some(b) => self.load_block(b),
                None => {
                    self.doc = END;
                    return;
                }
            }
        }
        while self.docs[self.pos] < target {
            self.pos += 1;
        }
        self.doc = self.docs[self.pos];
    }

    /// An upper bound of this term's score for `target` (from the block that would hold it),
    /// without decoding anything.
    #[inline]
    pub fn block_bound(&mut self, target: u32, cache: &NormCache) -> f32 {
        let Some(b) = self.block_for(target) else {
            return 0.0;
        };
        if b != self.bound_block {
            let m = self.meta(b);
            self.bound = self
                .postings
                .scorer
                .score(m.max_tf, cache.inverse[m.min_norm as usize]);
            self.bound_block = b;
        }
        self.bound
    }

    /// The score of the current posting.
    #[inline]
    pub fn score(&mut self, cache: &NormCache, norms: &[u8]) -> f32 {
        if !self.tfs_ready {
            let meta = self.meta(self.block);
            decode_tfs(self.postings.data, &meta, &mut self.tfs);
            self.tfs_ready = true;
        }
        let norm = norms[self.doc as usize];
        self.postings
            .scorer
            .score(self.tfs[self.pos], cache.inverse[norm as usize])
    }
}

/// Heap entry ordered by the canonical rank order: score, then doc-id rank (larger wins).
#[derive(Clone, Copy)]
struct Entry {
    score: f32,
    rank: u32,
    doc: u32,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(self.rank.cmp(&other.rank))
    }
}

/// The best `k` documents seen so far. Candidates above the threshold are appended to a
/// buffer of 2k; a full buffer is cut back to its best k in linear time, which raises the
/// threshold. Amortized O(1) per candidate, where a binary heap pays a sift per replacement.
struct TopK {
    k: usize,
    buf: Vec<Entry>,
    /// The k-th best entry when last known; entries not above it can never be in the top k.
    floor: Option<Entry>,
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK {
            k,
            buf: Vec::with_capacity(2 * k.min(1 << 20)),
            floor: None,
        }
    }

    /// The score a document must reach to enter (None until k documents were seen).
    #[inline]
    fn threshold(&self) -> Option<f32> {
        self.floor.map(|e| e.score)
    }

    /// Offer a document; true when the threshold changed.
    #[inline]
    fn push(&mut self, score: f32, doc: u32, docs: &DocData) -> bool {
        if let Some(floor) = self.floor {
            if score < floor.score {
                return false;
            }
        }
        let e = Entry {
            score,
            rank: docs.rank(doc),
            doc,
        };
        if let Some(floor) = self.floor {
            if e <= floor {
                return false;
            }
        }
        self.buf.push(e);
        if self.floor.is_none() && self.buf.len() == self.k {
            self.floor = self.buf.iter().min().copied();
            return true;
        }
        if self.buf.len() >= 2 * self.k {
            self.buf.select_nth_unstable_by(self.k - 1, |a, b| b.cmp(a));
            self.buf.truncate(self.k);
            self.floor = self.buf.iter().min().copied();
            return true;
        }
        false
    }

    fn into_sorted(mut self) -> Vec<Hit> {
        self.buf.sort_unstable_by(|a, b| b.cmp(a));
        self.buf.truncate(self.k);
        self.buf
            .into_iter()
            .map(|e| Hit {
                doc: e.doc,
                score: e.score,
            })
            .collect()
    }
}

/// Could a document whose score is at most `bound` still enter the top k?
#[inline]
fn may_enter(bound: f64, threshold: Option<f32>) -> bool {
    match threshold {
        None => true,
        // The nudge covers any rounding in the bound's own summation.
        Some(t) => ((bound * (1.0 + 1e-9)) as f32) >= t,
    }
}

/// Block-max MaxScore over the query's term cursors.
pub fn maxscore(
    mut cursors: Vec<Cursor<'_>>,
    k: usize,
    cache: &NormCache,
    docs: &DocData,
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
    let mut top = TopK::new(k);
    let mut threshold = None;
    let mut non_essential = 0;
    let mut current = cursors.iter().map(|c| c.doc).min().unwrap_or(END);
    while non_essential < n && current != END {
        let mut score = 0f64;
        let mut next = END;
        for c in &mut cursors[non_essential..] {
            if c.doc == current {
                score += c.score(cache, docs.norms) as f64;
                c.next();
            }
            next = next.min(c.doc);
        }
        let mut alive = true;
        for i in (0..non_essential).rev() {
            if !may_enter(score + prefix[i], threshold) {
                alive = false;
                break;
            }
            let rest = if i > 0 { prefix[i - 1] } else { 0.0 };
            let c = &mut cursors[i];
            if !may_enter(
                score + c.block_bound(current, cache) as f64 + rest,
                threshold,
            ) {
                alive = false;
                break;
            }
            c.advance(current);
            if c.doc == current {
                score += c.score(cache, docs.norms) as f64;
            }
        }
        if alive && top.push(score as f32, current, docs) {
            threshold = top.threshold();
            while non_essential < n && !may_enter(prefix[non_essential], threshold) {
                non_essential += 1;
            }
        }
        current = next;
    }
    top.into_sorted()
}

/// Score every posting of every term and keep the top k: the reference `maxscore` must equal,
/// and the faster strategy when k is a large share of the candidates. Postings are scored a
/// block at a time into a dense f64 accumulator, then the top k are selected without a heap.
pub fn exhaustive(
    cursors: Vec<Cursor<'_>>,
    k: usize,
    cache: &NormCache,
    docs: &DocData,
) -> Vec<Hit> {
    let mut sums = vec![0f64; docs.norms.len()];
    for mut c in cursors {
        while c.doc != END {
            let meta = c.meta(c.block);
            decode_tfs(c.postings.data, &meta, &mut c.tfs);
            for (&doc, &tf) in c.docs[c.pos..c.len].iter().zip(&c.tfs[c.pos..c.len]) {
                let norm = docs.norms[doc as usize];
                sums[doc as usize] +=
                    c.postings.scorer.score(tf, cache.inverse[norm as usize]) as f64;
            }
            if c.block + 1 < c.postings.blocks {
                c.load_block(c.block + 1);
            } else {
                c.doc = END;
            }
        }
    }
    top_k_dense(&sums, k, docs)
}

/// The best `k` of the documents with a positive sum, in canonical order. Every BM25 term score
/// is positive, so a zero sum means "not matched". Selection on the f32 score finds the k-th
/// best; the documents at or above it (ties included) are then ordered by one sort of packed
/// keys: positive f32 bits order like the floats, and the doc-id rank below them breaks ties.
fn top_k_dense(sums: &[f64], k: usize, docs: &DocData) -> Vec<Hit> {
    if k == 0 {
        return Vec::new();
    }
    let mut candidates: Vec<(f32, u32)> = sums
        .iter()
        .enumerate()
        .filter(|(_, &s)| s > 0.0)
        .map(|(d, &s)| (s as f32, d as u32))
        .collect();
    if candidates.len() > k {
        let (_, kth, _) = candidates.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
        let floor = kth.0;
        candidates.retain(|c| c.0 >= floor);
    }
    let mut keyed: Vec<(u64, u32)> = candidates
        .into_iter()
        .map(|(score, doc)| {
            (
                ((score.to_bits() as u64) << 32) | docs.rank(doc) as u64,
                doc,
            )
        })
        .collect();
    keyed.sort_unstable_by_key(|&(key, _)| std::cmp::Reverse(key));
    keyed.truncate(k);
    keyed
        .into_iter()
        .map(|(key, doc)| Hit {
            doc,
            score: f32::from_bits((key >> 32) as u32),
        })
        .collect()
}
