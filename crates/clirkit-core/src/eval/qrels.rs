//! Qrels prepared for evaluation: per query, its judged documents in a small hash table of its
//! own (ids stored one after another, so a query costs a few allocations rather than one per
//! document) plus the label statistics every measure needs (how many documents at each level,
//! the ideal gains) and, for α-nDCG, each document's aspects: the subtopics of ndeval's qrels
//! (`qid subtopic docid rel`), or the document's language on a multilingual task.

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
    /// Per document, where its aspects end in `aspects` (they start where the previous
    /// document's end). Empty: each document has one aspect, 0, carrying its label.
    aspect_ends: Vec<u32>,
    /// (aspect, label) pairs, document after document.
    aspects: Vec<(u32, i32)>,
    /// Distinct aspects (1 when `aspect_ends` is empty).
    aspect_count: u32,
}

/// A judged document of a query's [`Judgements`]: its index there and its label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JudgedRef {
    pub doc: u32,
    pub label: i32,
}

/// The rank entry of a retrieved document the qrels do not mention, in a ranking's list of
/// [`JudgedRef::doc`]s.
pub const NO_DOC: u32 = u32::MAX;

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
            aspect_ends: Vec::new(),
            aspects: Vec::new(),
            aspect_count: 1,
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
        self.find_hashed(doc, hash).map(|j| j.label)
    }

    /// The judged document with id `doc` (its [`id_hash`] given), or `None`.
    #[inline(always)]
    pub fn find_hashed(&self, doc: &[u8], hash: u64) -> Option<JudgedRef> {
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
                let index = slot.doc - 1;
                return Some(JudgedRef {
                    doc: index,
                    label: self.docs[index as usize].label,
                });
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

    /// The id and label of the `doc`-th judged document.
    pub fn doc(&self, doc: usize) -> (&[u8], i32) {
        (self.id(doc), self.docs[doc].label)
    }

    /// The (aspect, label) pairs of the `doc`-th judged document: without aspects given, the one
    /// aspect 0 with the document's label.
    pub fn aspects(&self, doc: usize) -> impl Iterator<Item = (u32, i32)> + '_ {
        let (given, single): (&[(u32, i32)], _) = if self.aspect_ends.is_empty() {
            (&[], Some((0, self.docs[doc].label)))
        } else {
            let start = if doc == 0 {
                0
            } else {
                self.aspect_ends[doc - 1] as usize
            };
            (&self.aspects[start..self.aspect_ends[doc] as usize], None)
        };
        given.iter().copied().chain(single)
    }

    /// How many distinct aspects the documents have (1 without aspects given).
    pub fn aspect_count(&self) -> usize {
        self.aspect_count as usize
    }

    /// Give each document its (aspect, label) pairs, in document order; aspects are numbered
    /// from 0 up to `count`.
    pub fn set_aspects(&mut self, per_doc: impl IntoIterator<Item = Vec<(u32, i32)>>, count: u32) {
        self.aspect_ends.clear();
        self.aspects.clear();
        for pairs in per_doc {
            self.aspects.extend(pairs);
            self.aspect_ends.push(self.aspects.len() as u32);
        }
        assert_eq!(
            self.aspect_ends.len(),
            self.docs.len(),
            "one entry per document"
        );
        self.aspect_count = count;
    }

    /// From ndeval's subtopic judgements (doc id, subtopic, label): a document judged for several
    /// subtopics is one document whose label, for the measures that do not look at aspects, is
    /// its largest (ndeval: relevant to any subtopic is relevant to the topic), with one aspect
    /// per subtopic. `Err(i)` when `judged[i]` repeats an earlier (doc, subtopic).
    pub fn with_subtopics(judged: &[(&[u8], &str, i32)]) -> Result<Self, usize> {
        let mut docs: FxHashMap<&[u8], usize> = FxHashMap::default();
        let mut subtopics: FxHashMap<&str, u32> = FxHashMap::default();
        let mut merged: Vec<(&[u8], i32)> = Vec::new();
        let mut per_doc: Vec<Vec<(u32, i32)>> = Vec::new();
        for (i, &(doc, subtopic, label)) in judged.iter().enumerate() {
            let next = subtopics.len() as u32;
            let aspect = *subtopics.entry(subtopic).or_insert(next);
            let at = *docs.entry(doc).or_insert_with(|| {
                merged.push((doc, label));
                per_doc.push(Vec::new());
                merged.len() - 1
            });
            if per_doc[at].iter().any(|&(a, _)| a == aspect) {
                return Err(i);
            }
            merged[at].1 = merged[at].1.max(label);
            per_doc[at].push((aspect, label));
        }
        let mut j = Self::unique(&merged).expect("documents merged");
        j.set_aspects(per_doc, subtopics.len() as u32);
        Ok(j)
    }
}

/// A query's judged documents as (doc id, label) pairs.
pub type JudgedDocs<'a> = Vec<(&'a [u8], i32)>;

/// A query's judgements as (doc id, subtopic, label), subtopic as ndeval's qrels give it.
pub type SubtopicJudgements<'a> = Vec<(&'a [u8], &'a str, i32)>;

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

    /// Make each judged document's language its one aspect (α-nDCG's aspects on a multilingual
    /// task), with the document's label. `language` gives a document's language, numbered; a
    /// document with a positive label and no language is an error naming it (documents judged
    /// non-relevant may lack one: they never gain).
    pub fn set_language_aspects(
        &mut self,
        language: impl Fn(&[u8]) -> Option<u32> + Sync,
    ) -> crate::error::Result<()> {
        use rayon::prelude::*;
        let missing: Option<(String, String)> = self
            .queries
            .par_iter_mut()
            .filter_map(|(qid, j)| {
                let mut per_doc = Vec::with_capacity(j.len());
                let mut seen = rustc_hash::FxHashSet::default();
                for d in 0..j.len() {
                    let (id, label) = j.doc(d);
                    match language(id) {
                        Some(lang) => {
                            seen.insert(lang);
                            per_doc.push(vec![(lang, label)]);
                        }
                        None if label > 0 => {
                            return Some((qid.clone(), String::from_utf8_lossy(id).into_owned()))
                        }
                        None => per_doc.push(Vec::new()),
                    }
                }
                let count = seen.into_iter().max().map_or(0, |m| m + 1);
                j.set_aspects(per_doc, count);
                None
            })
            .min();
        match missing {
            Some((qid, doc)) => Err(crate::error::Error::invalid(format!(
                "document languages: relevant document '{doc}' of query '{qid}' has no language"
            ))),
            None => Ok(()),
        }
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
