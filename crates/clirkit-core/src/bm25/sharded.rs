//! Document-partitioned (sharded) BM25 whose search equals, byte for byte, the search of one
//! index over the whole corpus.
//!
//! A sharded BM25 index is a [`crate::sharded`] directory: one ordinary BM25 index per shard,
//! each built from one range of corpus lines (so shard order is corpus order), plus the whole
//! collection's statistics in its `meta.json` ([`ShardedManifest`]) and `terms.bin`, the global
//! dictionary (every term of every shard with its document frequency over all of them, no
//! postings). A shard opened with [`Bm25Index::open_shard`] scores with them, so each shard's
//! exact top k holds the single index's scores, and the single index's top k is among the
//! shards' top k's merged in canonical order ([`crate::sharded::merge_hits`]): score descending, then id
//! descending as bytes, which is also the single index's tie rule (its tie key is the id's rank
//! in byte order).
//!
//! Building is split so that the shards can be built anywhere, in parallel (by Ray tasks, say):
//! [`ShardedBuild::create`] makes the hidden temporary directory, each shard is built into
//! [`ShardedBuild::shard_dir`] by [`super::build`] with its range from
//! [`crate::io::jsonl::split_lines`], and [`ShardedBuild::finish`] merges the statistics, checks
//! the ids unique across shards, and moves the whole directory into place.

use super::format;
use super::merge::{check_built_alike, for_each_term};
use super::Bm25Index;
use crate::error::{Error, Result};
use crate::io::format::MappedFile;
use crate::io::index_dir::MANIFEST;
use crate::io::manifest::{self, Layout};
use crate::postings::termdict::{self, TermEntry};
use crate::sharded::{shard_path, ShardRecord, ShardedDir};
use format::Bm25Manifest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "clirkit-sharded-bm25";
pub const VERSION: u64 = 1;

/// A sharded BM25 index's `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardedManifest {
    pub format: String,
    pub version: u64,
    pub collection: CollectionStats,
    /// Every shard's languages with their analyzer ids: the languages of the single index, which
    /// decide how a query without a language is analyzed.
    pub analyzers: BTreeMap<String, String>,
    pub shards: Vec<ShardRecord>,
}

/// The whole collection's statistics: what the single index's `meta.json` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectionStats {
    pub num_docs: u64,
    /// Documents with at least one term (Lucene's `docCount`).
    pub doc_count: u64,
    pub sum_total_term_freq: u64,
    pub avgdl: f32,
    /// Terms in the global dictionary (`terms.bin`).
    pub num_terms: u64,
}

manifest::manifest_of!(ShardedManifest, FORMAT, VERSION);

/// A sharded BM25 index's own files (its shards are verified as its parts,
/// [`crate::sharded::parts`]): the global dictionary.
pub const LAYOUT: Layout = Layout::new(FORMAT, VERSION, file_header, |_, _| Ok(()));

fn file_header(name: &str) -> Option<(crate::io::format::Kind, u32)> {
    let files = [(format::TERMS_FILE, format::TERMS_KIND)];
    crate::io::format::header_of(name, &files, format::FILE_VERSION)
}

/// Read the manifest of the sharded BM25 index at `dir` and check that every shard is there and
/// of the build it records (reading each shard's manifest only).
pub fn check_shards(dir: &Path) -> Result<ShardedManifest> {
    let manifest: ShardedManifest = manifest::read(dir)?;
    crate::sharded::check_all(dir, &manifest.shards)?;
    Ok(manifest)
}

/// The whole collection's document frequencies (a sharded index's `terms.bin`), mapped.
pub struct GlobalTerms {
    terms: MappedFile,
    num_terms: usize,
}

impl GlobalTerms {
    fn open(dir: &Path, num_terms: usize) -> Result<Self> {
        let terms = MappedFile::open(
            dir.join(format::TERMS_FILE),
            format::TERMS_KIND,
            format::FILE_VERSION,
            true,
        )?;
        termdict::check_dictionary(&terms, num_terms)?;
        Ok(GlobalTerms { terms, num_terms })
    }

    /// The document frequency of `term` over all shards; a term a shard holds is always there.
    pub fn doc_freq(&self, term: &str) -> Result<u32> {
        termdict::lookup_term(self.terms.payload(), self.num_terms, term.as_bytes())
            .map(|e| e.doc_freq)
            .ok_or_else(|| {
                Error::format(
                    self.terms.path(),
                    format!("term '{term}' of a shard is missing from the global dictionary"),
                )
            })
    }
}

impl Bm25Index {
    /// Open shard `shard` of the sharded index at `dir` (refused if missing or of another
    /// build) to score with the whole collection's statistics.
    pub fn open_shard(dir: impl AsRef<Path>, shard: usize) -> Result<Self> {
        let dir = dir.as_ref();
        let manifest: ShardedManifest = manifest::read(dir)?;
        let mut index = Bm25Index::open(shard_path(dir, &manifest.shards, shard)?)?;
        let stats = &manifest.collection;
        let avgdl = super::scoring::avg_length(stats.sum_total_term_freq, stats.doc_count);
        if stats.avgdl != avgdl || index.manifest.doc_count > stats.doc_count {
            return Err(Error::format(
                dir.join(MANIFEST),
                "inconsistent statistics: the sharded index is corrupt",
            ));
        }
        index.doc_count = stats.doc_count;
        index.avgdl = avgdl;
        index.analyzers = super::load_analyzers(dir, &manifest.analyzers)?;
        index.global_terms = Some(GlobalTerms::open(dir, stats.num_terms as usize)?);
        Ok(index)
    }
}

/// A sharded BM25 index under construction: shards are built into
/// [`ShardedBuild::shard_dir`], then [`ShardedBuild::finish`] writes the global statistics and
/// moves it into place. Dropped unfinished, it is removed with every shard in it.
pub struct ShardedBuild {
    dir: ShardedDir,
}

impl ShardedBuild {
    /// Start building a sharded index of `shards` shards at `out`.
    pub fn create(out: &Path, shards: usize) -> Result<Self> {
        Ok(ShardedBuild {
            dir: ShardedDir::create(out, shards)?,
        })
    }

    /// The build of the shards built into `dir`.
    pub fn from_dir(dir: ShardedDir) -> Self {
        ShardedBuild { dir }
    }

    pub fn shards(&self) -> usize {
        self.dir.shards()
    }

    /// Where shard `i` is to be built.
    pub fn shard_dir(&self, i: usize) -> PathBuf {
        self.dir.shard_dir(i)
    }

    /// Merge the shards' statistics into the global ones, check the shards were built alike and
    /// their ids unique across them, and commit the sharded index.
    pub fn finish(self) -> Result<ShardedManifest> {
        let indexes = self.dir.open_built_shards(Bm25Index::open)?;
        check_built_alike(&indexes, false)?;
        if let Some(with) = indexes.iter().find(|i| i.manifest().docvectors) {
            return Err(Error::format(
                with.dir(),
                "stores document vectors (for RM3), which a sharded index cannot use",
            ));
        }
        let ids: Vec<(&Path, &crate::ids::IdTable)> =
            indexes.iter().map(|i| (i.dir(), &i.ids)).collect();
        crate::sharded::check_unique_ids(&ids)?;

        let mut entries = Vec::new();
        let mut texts = Vec::new();
        let mut num_terms = 0u64;
        for_each_term(&indexes, |term, holding| {
            let doc_freq: u64 = holding.iter().map(|(_, e)| e.doc_freq as u64).sum();
            TermEntry {
                text_offset: texts.len() as u64,
                text_len: term.len() as u32,
                // At most the document count, which is below 2^32 (checked with the ids).
                doc_freq: doc_freq as u32,
                postings_offset: 0,
                blocks: 0,
            }
            .encode(&mut entries);
            texts.extend_from_slice(term);
            num_terms += 1;
            Ok(())
        })?;
        super::builder::write_terms(self.dir.path(), num_terms, &entries, &texts)?;

        let sum =
            |f: fn(&Bm25Manifest) -> u64| indexes.iter().map(|i| f(i.manifest())).sum::<u64>();
        let (doc_count, sum_lengths) = (sum(|m| m.doc_count), sum(|m| m.sum_total_term_freq));
        let manifest = ShardedManifest {
            format: FORMAT.into(),
            version: VERSION,
            collection: CollectionStats {
                num_docs: sum(|m| m.num_docs),
                doc_count,
                sum_total_term_freq: sum_lengths,
                avgdl: super::scoring::avg_length(sum_lengths, doc_count),
                num_terms,
            },
            analyzers: indexes
                .iter()
                .flat_map(|i| i.manifest().analyzers.clone())
                .collect(),
            shards: self.dir.records(|i| indexes[i].num_docs() as u64)?,
        };
        drop(indexes);
        self.dir.commit(&manifest)?;
        Ok(manifest)
    }
}

#[cfg(test)]
pub(crate) mod tests;
