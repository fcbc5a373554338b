//! The approximate search's structure, built in memory from an opened impact index:
//! - a forward index: each document's (term number, impact) pairs packed in one `u32` each
//!   (`term << impact_bits | impact`), documents one after another;
//! - per term, its `postings_per_term` postings of highest impact (ties to the lower document
//!   number), in document order (a walk then sweeps the partial scores in one direction), as
//!   parallel arrays of documents and impacts;
//! - per term, its largest impact over the whole list (the exact-score bound check).
//!
//! Both passes read each posting once (blocks checked as they are read, as search reads them).
//! The build runs on the caller's thread pool; its result does not depend on the thread count.

use super::params::BuildParams;
use crate::error::{Error, Result};
use crate::impact::format::ImpactManifest;
use crate::impact::ImpactIndex;
use crate::postings::END;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};

/// The forward index and pruned lists of one impact index (see the module documentation).
pub struct ApproximateIndex {
    pub(super) params: BuildParams,
    /// The manifest of the index it was built from: searching another index is refused.
    pub(super) source: ImpactManifest,
    pub(super) impact_bits: u32,
    pub(super) doc_starts: Vec<u64>,
    pub(super) entries: Vec<u32>,
    pub(super) list_starts: Vec<u64>,
    pub(super) list_docs: Vec<u32>,
    pub(super) list_impacts: Vec<u32>,
    pub(super) term_max: Vec<u32>,
}

/// Bits to hold `value`.
fn bits_for(value: u64) -> u32 {
    64 - value.leading_zeros()
}

/// One term's pruned list (in document order), its largest impact.
struct Pruned {
    docs: Vec<u32>,
    impacts: Vec<u32>,
    max: u32,
}

impl ApproximateIndex {
    /// Build the structure for `index` (on the current thread pool).
    pub fn build(index: &ImpactIndex, params: BuildParams) -> Result<Self> {
        let num_docs = index.num_docs();
        let num_terms = index.num_terms();
        let max_impact = index.manifest().max_impact as u64;
        let impact_bits = bits_for(max_impact).max(1);
        let term_bits = bits_for(num_terms.saturating_sub(1) as u64);
        // Impacts of 2^24 or more make any query's bound too large for exact f32 scores.
        if impact_bits > 24 || term_bits + impact_bits > 32 {
            return Err(Error::invalid(format!(
                "approximate search packs a term number and an impact in 32 bits: this index has \
                 {num_terms} terms and impacts up to {max_impact}; build it with a smaller \
                 --quantize"
            )));
        }
        let lengths: Vec<AtomicU32> = (0..num_docs).map(|_| AtomicU32::new(0)).collect();
        let keep = match params.postings_per_term {
            0 => usize::MAX,
            n => n,
        };
        let pruned: Vec<Pruned> = (0..num_terms)
            .into_par_iter()
            .map(|term| prune(index, term, keep, &lengths))
            .collect::<Result<_>>()?;
        index.postings_intact()?;
        let mut doc_starts = Vec::with_capacity(num_docs + 1);
        let mut total = 0u64;
        doc_starts.push(0);
        for l in &lengths {
            total += l.load(Ordering::Relaxed) as u64;
            doc_starts.push(total);
        }
        drop(lengths);
        let entries = forward(index, &doc_starts, impact_bits)?;
        let kept: usize = pruned.iter().map(|p| p.docs.len()).sum();
        let mut list_starts = Vec::with_capacity(num_terms + 1);
        let mut list_docs = Vec::with_capacity(kept);
        let mut list_impacts = Vec::with_capacity(kept);
        let mut term_max = Vec::with_capacity(num_terms);
        list_starts.push(0);
        for p in pruned {
            list_docs.extend_from_slice(&p.docs);
            list_impacts.extend_from_slice(&p.impacts);
            list_starts.push(list_docs.len() as u64);
            term_max.push(p.max);
        }
        Ok(ApproximateIndex {
            params,
            source: index.manifest().clone(),
            impact_bits,
            doc_starts,
            entries,
            list_starts,
            list_docs,
            list_impacts,
            term_max,
        })
    }

    pub fn params(&self) -> BuildParams {
        self.params
    }

    /// Postings kept in the pruned lists.
    pub fn kept_postings(&self) -> usize {
        self.list_docs.len()
    }

    /// Bytes the structure holds in memory.
    pub fn memory_bytes(&self) -> usize {
        8 * (self.doc_starts.len() + self.list_starts.len())
            + 4 * (self.entries.len()
                + self.list_docs.len()
                + self.list_impacts.len()
                + self.term_max.len())
    }

    /// An error unless this structure was built from `index` (the same manifest: the same build).
    pub(super) fn check_source(&self, index: &ImpactIndex) -> Result<()> {
        if *index.manifest() == self.source {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "the approximate structure was built from another index than {}",
                index.dir().display()
            )))
        }
    }

    /// Term `term`'s pruned list: documents (ascending) and their impacts.
    #[inline]
    pub(super) fn list(&self, term: usize) -> (&[u32], &[u32]) {
        let (a, b) = (
            self.list_starts[term] as usize,
            self.list_starts[term + 1] as usize,
        );
        (&self.list_docs[a..b], &self.list_impacts[a..b])
    }

    /// Document `doc`'s packed (term, impact) entries.
    #[inline]
    pub(super) fn doc_entries(&self, doc: u32) -> &[u32] {
        let d = doc as usize;
        &self.entries[self.doc_starts[d] as usize..self.doc_starts[d + 1] as usize]
    }
}

/// Term `term`'s `keep` postings of highest impact; counts every posting's document in `lengths`.
fn prune(index: &ImpactIndex, term: usize, keep: usize, lengths: &[AtomicU32]) -> Result<Pruned> {
    let mut cursor = index.term_cursor(term)?;
    let mut postings: Vec<(u32, u32)> = Vec::with_capacity(cursor.doc_freq());
    cursor.drain(|doc, impact| {
        lengths[doc as usize].fetch_add(1, Ordering::Relaxed);
        postings.push((impact, doc));
    });
    let max = postings.iter().map(|p| p.0).max().unwrap_or(0);
    let order = |a: &(u32, u32), b: &(u32, u32)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
    if postings.len() > keep {
        postings.select_nth_unstable_by(keep - 1, order);
        postings.truncate(keep);
        postings.sort_unstable_by_key(|p| p.1);
    }
    Ok(Pruned {
        docs: postings.iter().map(|p| p.1).collect(),
        impacts: postings.iter().map(|p| p.0).collect(),
        max,
    })
}

/// The forward index: document ranges filled in parallel, each walking every term's postings
/// over its range, so each document's entries come in term order.
fn forward(index: &ImpactIndex, doc_starts: &[u64], impact_bits: u32) -> Result<Vec<u32>> {
    let num_docs = doc_starts.len() - 1;
    let total = doc_starts[num_docs] as usize;
    let mut entries = vec![0u32; total];
    let ranges = (rayon::current_num_threads() * 4).clamp(1, num_docs.max(1));
    let step = num_docs.div_ceil(ranges).max(1);
    let mut slices: Vec<(usize, usize, &mut [u32])> = Vec::new();
    let mut rest: &mut [u32] = &mut entries;
    let mut first = 0;
    while first < num_docs {
        let last = (first + step).min(num_docs);
        let len = (doc_starts[last] - doc_starts[first]) as usize;
        let (mine, tail) = rest.split_at_mut(len);
        slices.push((first, last, mine));
        rest = tail;
        first = last;
    }
    slices
        .into_par_iter()
        .map(|(first, last, out)| {
            let base = doc_starts[first];
            let mut fill: Vec<usize> = (first..last)
                .map(|d| (doc_starts[d] - base) as usize)
                .collect();
            for term in 0..index.num_terms() {
                let mut cursor = index.term_cursor(term)?;
                cursor.advance(first as u32);
                while cursor.doc != END && (cursor.doc as usize) < last {
                    let doc = cursor.doc as usize;
                    // Impacts are below 2^24 (checked above), so the f32 score is exact.
                    let impact = cursor.score() as u32;
                    let at = fill[doc - first];
                    if at >= (doc_starts[doc + 1] - base) as usize {
                        return Err(Error::Internal(
                            "the postings changed between the two passes".into(),
                        ));
                    }
                    out[at] = ((term as u32) << impact_bits) | impact;
                    fill[doc - first] = at + 1;
                    cursor.next();
                }
            }
            Ok(())
        })
        .collect::<Result<()>>()?;
    index.postings_intact()?;
    Ok(entries)
}
