//! Merging BM25 indexes: the documents of each input, in order, as one index whose
//! `terms.bin`, `postings.bin`, `docs.bin` and `ids.bin` equal those of a single build over the
//! inputs' corpora concatenated (documents are numbered across inputs, postings re-blocked, and
//! the global statistics of `meta.json` recomputed).
//!
//! Terms are merged in byte order a term at a time, so memory holds one term's postings, the
//! dictionary being written, each document's norm and the ids.

use super::builder::{write_docs, write_terms};
use super::format::{self, Bm25BuildRecord, Bm25Manifest};
use super::Bm25Index;
use crate::error::{Error, Result};
use crate::ids::{IdTable, UniqueIds};
use crate::io::atomic::AtomicDir;
use crate::io::format::FileWriter;
use crate::io::manifest;
use crate::postings::termdict::TermEntry;
use crate::postings::{codec, BlockMeta, BLOCK_LEN};
use std::path::Path;

/// Postings bytes encoded before they are written out.
const WRITE_AT: usize = 1 << 24;

/// Refuse inputs that were not built alike (analyzers, fields, language field, BM25 defaults):
/// only those score as parts of one index. With `same_languages` false, inputs may hold
/// different languages (the shards of a multilingual corpus), as long as no language was
/// analyzed differently.
pub(super) fn check_built_alike(inputs: &[Bm25Index], same_languages: bool) -> Result<()> {
    let first = inputs[0].manifest();
    let mut analyzers = first.analyzers.clone();
    for index in &inputs[1..] {
        let m = index.manifest();
        let conflict = m.analyzers.iter().any(|(lang, id)| {
            analyzers
                .insert(lang.clone(), id.clone())
                .is_some_and(|a| a != *id)
        });
        let differs = if conflict || (same_languages && m.analyzers != first.analyzers) {
            Some("analyzers")
        } else if m.fields != first.fields {
            Some("indexed fields")
        } else if m.lang_field != first.lang_field {
            Some("language field")
        } else if (m.k1, m.b) != (first.k1, first.b) {
            Some("k1 and b")
        } else {
            None
        };
        if let Some(what) = differs {
            return Err(Error::format(
                index.dir(),
                format!(
                    "was built with other {what} than {}; only indexes built alike merge",
                    inputs[0].dir().display()
                ),
            ));
        }
    }
    Ok(())
}

/// Refuse inputs that cannot merge: built differently, or holding what merging drops.
fn check_compatible(inputs: &[Bm25Index]) -> Result<()> {
    check_built_alike(inputs, true)?;
    if let Some(with) = inputs.iter().find(|i| i.manifest().docvectors) {
        return Err(Error::format(
            with.dir(),
            "stores document vectors (for RM3), which merging does not carry over; build the \
             merged corpus with --store-docvectors instead",
        ));
    }
    Ok(())
}

/// Walk the terms of `indexes` in byte order, handing `each` every term with the dictionary
/// entries of the indexes holding it (by position in `indexes`): the one term-by-term merge of
/// index merging and of a sharded index's global statistics.
pub(super) fn for_each_term(
    indexes: &[Bm25Index],
    mut each: impl FnMut(&[u8], &[(usize, TermEntry)]) -> Result<()>,
) -> Result<()> {
    let mut heads = vec![0usize; indexes.len()];
    let mut holding = Vec::with_capacity(indexes.len());
    loop {
        let smallest = indexes
            .iter()
            .zip(&heads)
            .filter(|(index, &h)| h < index.num_terms())
            .map(|(index, &h)| index.term_text(&index.term_entry(h)))
            .min();
        let Some(term) = smallest else {
            return Ok(());
        };
        holding.clear();
        for (i, index) in indexes.iter().enumerate() {
            if heads[i] < index.num_terms() {
                let e = index.term_entry(heads[i]);
                if index.term_text(&e) == term {
                    holding.push((i, e));
                    heads[i] += 1;
                }
            }
        }
        each(term, &holding)?;
    }
}

/// Append the postings of term entry `e` of `index` to `docs` and `tfs`, documents shifted by
/// `offset`.
fn append_postings(
    index: &Bm25Index,
    e: &TermEntry,
    offset: u32,
    docs: &mut Vec<u32>,
    tfs: &mut Vec<u32>,
) -> Result<()> {
    let postings = e.postings(&index.postings, index.num_docs())?;
    let (mut d, mut t) = ([0u32; BLOCK_LEN], [0u32; BLOCK_LEN]);
    let mut prev = u32::MAX;
    for b in 0..postings.blocks {
        let meta = BlockMeta::decode(postings.metas, b);
        if !codec::decode_docs(postings.data, &meta, prev, &mut d) {
            postings.checks.mark_malformed();
            crate::postings::postings_intact(&index.postings)?;
        }
        codec::decode_values(postings.data, &meta, &mut t);
        let n = meta.len as usize;
        docs.extend(d[..n].iter().map(|&doc| doc + offset));
        tfs.extend_from_slice(&t[..n]);
        prev = meta.last_doc;
    }
    Ok(())
}

/// Merge the indexes at `inputs` (in order) into a new index at `out`, atomically; returns the
/// number of documents and terms. Ids must be unique across the inputs.
pub fn merge(inputs: &[&Path], out: &Path) -> Result<(u64, u64)> {
    if inputs.is_empty() {
        return Err(Error::invalid("merge: give at least one index"));
    }
    let indexes: Vec<Bm25Index> = inputs.iter().map(Bm25Index::open).collect::<Result<_>>()?;
    for index in &indexes {
        index.verify()?;
    }
    check_compatible(&indexes)?;

    let mut ids = UniqueIds::default();
    let mut norms = Vec::new();
    let mut offsets = Vec::with_capacity(indexes.len());
    for index in &indexes {
        offsets.push(norms.len() as u32);
        for doc in 0..index.num_docs() as u32 {
            let id = index.doc_id(doc);
            if ids.insert(id).is_err() {
                return Err(Error::format(
                    index.dir(),
                    format!("document id '{id}' is also in an earlier input; ids must be unique"),
                ));
            }
        }
        norms.extend_from_slice(index.norms());
        if norms.len() > u32::MAX as usize {
            return Err(Error::invalid("merge: more than 2^32 - 1 documents"));
        }
    }

    let dir = AtomicDir::create(out)?;
    let tmp = dir.path().to_path_buf();
    let mut postings = FileWriter::create(
        tmp.join(format::POSTINGS_FILE),
        format::POSTINGS_KIND,
        format::FILE_VERSION,
    )?;
    let (mut entries, mut texts, mut encoded) = (Vec::new(), Vec::new(), Vec::new());
    let (mut docs, mut tfs) = (Vec::new(), Vec::new());
    let mut num_terms = 0u64;
    for_each_term(&indexes, |term, holding| {
        docs.clear();
        tfs.clear();
        for &(i, e) in holding {
            append_postings(&indexes[i], &e, offsets[i], &mut docs, &mut tfs)?;
        }
        let start = postings.position() + encoded.len() as u64;
        let blocks = crate::postings::encode_postings(&docs, &tfs, &norms, &mut encoded);
        TermEntry {
            text_offset: texts.len() as u64,
            text_len: term.len() as u32,
            doc_freq: docs.len() as u32,
            postings_offset: start,
            blocks,
        }
        .encode(&mut entries);
        texts.extend_from_slice(term);
        num_terms += 1;
        if encoded.len() >= WRITE_AT {
            postings.write(&encoded)?;
            encoded.clear();
        }
        Ok(())
    })?;
    postings.write(&encoded)?;
    postings.write(&[0u8; crate::postings::POSTINGS_PADDING])?;
    postings.finish()?;
    write_terms(&tmp, num_terms, &entries, &texts)?;
    drop((entries, texts, encoded));

    let sorted = ids.sorted_positions();
    write_docs(&tmp, &norms, &sorted)?;
    IdTable::write_unique(tmp.join(format::IDS_FILE), &ids, &sorted)?;

    let first = indexes[0].manifest();
    let sum = |f: fn(&Bm25Manifest) -> u64| indexes.iter().map(|i| f(i.manifest())).sum::<u64>();
    let (doc_count, sum_lengths) = (sum(|m| m.doc_count), sum(|m| m.sum_total_term_freq));
    let avgdl = super::scoring::avg_length(sum_lengths, doc_count);
    super::block_maxima::write(&tmp, &norms, first.k1, first.b, avgdl)?;
    let manifest = Bm25Manifest {
        format: format::FORMAT.into(),
        version: format::VERSION,
        num_docs: ids.len() as u64,
        doc_count,
        sum_total_term_freq: sum_lengths,
        avgdl,
        num_terms,
        languages: first.languages.clone(),
        analyzers: first.analyzers.clone(),
        lang_field: first.lang_field.clone(),
        fields: first.fields.clone(),
        k1: first.k1,
        b: first.b,
        build: Bm25BuildRecord {
            corpus: indexes
                .iter()
                .map(|i| i.manifest().build.corpus.as_str())
                .collect::<Vec<_>>()
                .join(" + "),
            keep_first_duplicate: first.build.keep_first_duplicate,
            skipped_duplicates: sum(|m| m.build.skipped_duplicates),
            memory_budget_bytes: first.build.memory_budget_bytes,
            spilled_runs: 0,
        },
        docvectors: false,
    };
    manifest::commit(dir, &manifest)?;
    Ok((ids.len() as u64, num_terms))
}
