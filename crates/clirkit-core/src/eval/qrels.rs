//! Qrels prepared for evaluation: per query, its judged documents in a small hash table of its
//! own (ids stored one after another, so a query costs a few allocations rather than one per
//! document) plus the label statistics every measure needs (how many documents at each level,
//! the ideal gains).

use crate::io::trec::Qrels;
use rustc_hash::FxHashMap;

/// A hash of a document id for [`Judgements::label_hashed`] and duplicate checks: one hash per
/// id serves both. Short ids (most are) are read as two overlapping words.
#[inline]
pub fn id_hash(id: &[u8]) -> u64 {
    const K1: u64 = 0x9E37_79B9_7F4A_7C15;
    const K2: u64 = 0xD6E8_FEB8_6659_FD93;
    let n = id.len();
    let word = |i: usize| u64::from_le_bytes(id[i..i + 8].try_into().expect("8 bytes"));
    let half = |i: usize| {
        u64::from(u32::from_le_bytes(
            id[i..i + 4].try_into().expect("4 bytes"),
        ))
    };
    let (mut a, b) = match n {
        0 => (0, 0),
        1..=3 => (
            u64::from(id[0]) << 16 | u64::from(id[n / 2]) << 8 | u64::from(id[n - 1]),
            0,
        ),
        4..=7 => (half(0), half(n - 4)),
        _ => (word(0), word(n - 8)),
    };
    let mut at = 8;
    while at + 8 < n {
        a = fold(a ^ word(at), K1);
        at += 8;
    }
    fold(a ^ K1, b ^ K2 ^ n as u64)
}

/// The two halves of a full 64 x 64-bit product, xored: every input bit reaches every output bit.
#[inline]
fn fold(x: u64, y: u64) -> u64 {
    let product = u128::from(x) * u128::from(y);
    product as u64 ^ (product >> 64) as u64
}

/// One judged document: where its id ends in [`Judgements`]' id bytes (it starts where the
/// previous one ends) and its label.
#[derive(Debug, Clone, Copy)]
struct JudgedDoc {
    end: usize,
    label: i32,
}

/// A slot of the open-addressing table: the upper half of the id's hash and the document's
/// index plus one (0: empty).
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    tag: u32,
    doc: u32,
}

/// The judgements of one query.
#[derive(Debug, Clone, Default)]
pub struct Judgements {
    ids: Vec<u8>,
    docs: Vec<JudgedDoc>,
    /// One bit per value of the hash's upper half modulo a power of two at least 16 times the
    /// number of documents, set for the judged ids: most retrieved documents are not judged, and
    /// a clear bit says so from a table of a few cache lines, with a branch mostly predicted right.
    filter: Vec<u64>,
    /// A power of two of slots, at most half of them used, probed linearly from the hash's low
    /// bits.
    slots: Vec<Slot>,
    /// Non-negative labels and how many documents carry each, ascending by label.
    level_counts: Vec<(i32, usize)>,
    /// Positive labels, descending: the ideal ranking's gains for nDCG.
    ideal_gains: Vec<f64>,
}

/// What to do when [`Judgements::build`] meets an id a second time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Repeat {
    /// The later label replaces the earlier one.
    Replace,
    /// Stop: the input is in error.
    Refuse,
}

impl Judgements {
    /// From (doc id, label) pairs; a repeated id takes its last label.
    pub fn new<'a>(judged: impl IntoIterator<Item = (&'a [u8], i32)>) -> Self {
        let judged: Vec<(&[u8], i32)> = judged.into_iter().collect();
        Self::build(&judged, Repeat::Replace).0
    }

    /// From (doc id, label) pairs with unique ids; `Err(i)` when `judged[i]` repeats an earlier
    /// id (the first such `i`).
    pub fn unique(judged: &[(&[u8], i32)]) -> Result<Self, usize> {
        match Self::build(judged, Repeat::Refuse) {
            (judgements, None) => Ok(judgements),
            (_, Some(i)) => Err(i),
        }
    }

    /// The table, and with [`Repeat::Refuse`] the index of the first repeated id (the table is
    /// then unfinished).
    fn build(judged: &[(&[u8], i32)], repeat: Repeat) -> (Self, Option<usize>) {
        let mut j = Judgements {
            ids: Vec::with_capacity(judged.iter().map(|(d, _)| d.len()).sum()),
            docs: Vec::with_capacity(judged.len()),
            filter: vec![0; (judged.len() / 4).next_power_of_two()],
            slots: vec![Slot::default(); (2 * judged.len()).next_power_of_two().max(8)],
            level_counts: Vec::new(),
            ideal_gains: Vec::new(),
        };
        let mask = j.slots.len() - 1;
        for (i, &(id, label)) in judged.iter().enumerate() {
            let hash = id_hash(id);
            let mut at = hash as usize & mask;
            loop {
                let slot = j.slots[at];
                if slot.doc == 0 {
                    let bit = j.filter_bit(hash);
                    j.filter[bit / 64] |= 1 << (bit % 64);
                    j.ids.extend_from_slice(id);
                    j.docs.push(JudgedDoc {
                        end: j.ids.len(),
                        label,
                    });
                    j.slots[at] = Slot {
                        tag: (hash >> 32) as u32,
                        doc: j.docs.len() as u32,
                    };
                    break;
                }
                let doc = slot.doc as usize - 1;
                if slot.tag == (hash >> 32) as u32 && j.id(doc) == id {
                    if repeat == Repeat::Refuse {
                        return (j, Some(i));
                    }
                    j.docs[doc].label = label;
                    break;
                }
                at = (at + 1) & mask;
            }
        }
        j.count_levels();
        (j, None)
    }

    fn count_levels(&mut self) {
        let mut counts: std::collections::BTreeMap<i32, usize> = Default::default();
        for d in self.docs.iter().filter(|d| d.label >= 0) {
            *counts.entry(d.label).or_default() += 1;
        }
        self.level_counts = counts.into_iter().collect();
        self.ideal_gains = self
            .docs
            .iter()
            .filter(|d| d.label > 0)
            .map(|d| d.label as f64)
            .collect();
        self.ideal_gains.sort_by(|a, b| b.total_cmp(a));
    }

    /// The bit of [`Self::filter`] for an id's hash.
    #[inline(always)]
    fn filter_bit(&self, hash: u64) -> usize {
        (hash >> 32) as usize & (self.filter.len() * 64 - 1)
    }

    /// The id of the `doc`-th judged document.
    #[inline]
    fn id(&self, doc: usize) -> &[u8] {
        let start = if doc == 0 { 0 } else { self.docs[doc - 1].end };
        &self.ids[start..self.docs[doc].end]
    }

    /// The label of a document, or `None` when the qrels do not mention it.
    #[inline]
    pub fn label(&self, doc: &[u8]) -> Option<i32> {
        self.label_hashed(doc, id_hash(doc))
    }

    /// [`Self::label`] given the document's [`id_hash`].
    #[inline(always)]
    pub fn label_hashed(&self, doc: &[u8], hash: u64) -> Option<i32> {
        if self.filter.is_empty() {
            return None;
        }
        let bit = self.filter_bit(hash);
        if self.filter[bit / 64] & (1 << (bit % 64)) == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let tag = (hash >> 32) as u32;
        let mut at = hash as usize & mask;
        loop {
            let slot = self.slots[at];
            if slot.doc == 0 {
                return None;
            }
            if slot.tag == tag && self.id(slot.doc as usize - 1) == doc {
                return Some(self.docs[slot.doc as usize - 1].label);
            }
            at = (at + 1) & mask;
        }
    }

    /// Documents judged relevant at `level` (label >= level; negative labels never count, as in
    /// trec_eval where they mark pooled but unjudged documents).
    pub fn num_relevant(&self, level: i32) -> usize {
        self.level_counts
            .iter()
            .filter(|(l, _)| *l >= level)
            .map(|(_, n)| n)
            .sum()
    }

    /// Documents judged non-relevant at `level` (0 <= label < level), bpref's denominator.
    pub fn num_nonrelevant(&self, level: i32) -> usize {
        self.level_counts
            .iter()
            .filter(|(l, _)| *l < level)
            .map(|(_, n)| n)
            .sum()
    }

    /// Positive labels in descending order (the ideal ranking's gains).
    pub fn ideal_gains(&self) -> &[f64] {
        &self.ideal_gains
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

/// A query's judged documents as (doc id, label) pairs.
pub type JudgedDocs<'a> = Vec<(&'a [u8], i32)>;

/// All queries' judgements, by query id.
#[derive(Debug, Clone, Default)]
pub struct QrelsIndex {
    queries: Vec<(String, Judgements)>,
    by_id: FxHashMap<String, usize>,
}

impl QrelsIndex {
    pub fn from_qrels(qrels: &Qrels) -> Self {
        Self::from_pairs(qrels.queries.iter().map(|(q, docs)| {
            (
                q.clone(),
                docs.iter()
                    .map(|(d, l)| (d.as_bytes(), *l))
                    .collect::<Vec<_>>(),
            )
        }))
    }

    /// Build from (qid, [(docid, label)]) pairs; a query id given twice merges its documents, a
    /// query without any judgement is left out (pytrec_eval drops those too).
    pub fn from_pairs<'a>(queries: impl IntoIterator<Item = (String, JudgedDocs<'a>)>) -> Self {
        let mut merged: Vec<(String, JudgedDocs<'a>)> = Vec::new();
        let mut by_id: FxHashMap<String, usize> = FxHashMap::default();
        for (qid, docs) in queries {
            match by_id.get(&qid) {
                Some(&i) => merged[i].1.extend(docs),
                None => {
                    by_id.insert(qid.clone(), merged.len());
                    merged.push((qid, docs));
                }
            }
        }
        Self::from_judgements(
            merged
                .into_iter()
                .map(|(q, d)| (q, Judgements::new(d)))
                .collect(),
        )
    }

    /// From queries with their judgements (ids unique); queries without judgements are left out.
    pub fn from_judgements(mut queries: Vec<(String, Judgements)>) -> Self {
        queries.retain(|(_, j)| !j.is_empty());
        let by_id = queries
            .iter()
            .enumerate()
            .map(|(i, (q, _))| (q.clone(), i))
            .collect();
        QrelsIndex { queries, by_id }
    }

    pub fn get(&self, qid: &str) -> Option<&Judgements> {
        self.by_id.get(qid).map(|&i| &self.queries[i].1)
    }

    /// Queries in the order they were first given.
    pub fn queries(&self) -> impl Iterator<Item = (&str, &Judgements)> {
        self.queries.iter().map(|(q, j)| (q.as_str(), j))
    }

    pub fn len(&self) -> usize {
        self.queries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
}
