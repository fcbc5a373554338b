//! The one list of index kinds: what every command that takes an index of any kind (`clirkit
//! verify`, `clirkit index merge`, a sharded index's parts, opening a sharded index for
//! `clirkit.distributed`) looks up by the format name its `meta.json` records, instead of each
//! repeating the dispatch. A kind is its files' [`Layout`] (which `verify` checks), how it is
//! opened (every check search makes when it opens one) and, where it has one, its merge and, for a
//! sharded kind, its checked manifest. A new kind is one more entry in [`KINDS`].
//!
//! The layers below name no kind (`io::manifest` checks any [`Layout`]); this is the top, where
//! the kinds meet, as FAISS's `index_read.cpp` or PISA's `index_types.hpp` is.

use crate::bm25::{self, Bm25Index};
use crate::dense::index::{self as dense_index, DenseIndex, Part};
use crate::error::{Error, Result};
use crate::impact::{self, ImpactIndex};
use crate::io::index_dir::{self, read_manifest_text, MANIFEST};
use crate::io::manifest::{self, Layout, Manifest, VerifySummary};
use crate::multivector::{self, MultiVectorIndex};
use std::path::{Path, PathBuf};

/// What a merge may use besides its inputs and output.
#[derive(Debug, Clone, Copy)]
pub struct MergeOptions {
    /// Memory for the rows being copied (dense), in bytes.
    pub memory_bytes: usize,
    /// Worker threads (0: all cores).
    pub threads: usize,
}

/// One kind of index.
pub struct IndexKind {
    /// Its format name and version and what each of its files must carry.
    pub layout: &'static Layout,
    /// Open the index at the path with every check opening makes (what search does first);
    /// returns its number of documents (or vectors).
    pub open: fn(&Path) -> Result<u64>,
    /// Merge indexes of this kind, in order, into a new index at the path; `None` where the
    /// kind cannot be merged.
    pub merge: Option<MergeFn>,
    /// A sharded kind's manifest as one line of JSON, read once every shard (and a shared
    /// codebook) is found present and of the recorded build; `None` for the other kinds.
    pub sharded_manifest: Option<fn(&Path) -> Result<String>>,
}

/// How a kind merges indexes: inputs in order, the output, the options.
pub type MergeFn = fn(&[PathBuf], &Path, &MergeOptions) -> Result<()>;

impl IndexKind {
    const fn new(
        layout: &'static Layout,
        open: fn(&Path) -> Result<u64>,
        merge: Option<MergeFn>,
    ) -> Self {
        IndexKind {
            layout,
            open,
            merge,
            sharded_manifest: None,
        }
    }

    const fn sharded(
        layout: &'static Layout,
        open: fn(&Path) -> Result<u64>,
        manifest: fn(&Path) -> Result<String>,
    ) -> Self {
        IndexKind {
            sharded_manifest: Some(manifest),
            ..IndexKind::new(layout, open, None)
        }
    }

    /// The format name `meta.json` records.
    pub fn format(&self) -> &'static str {
        self.layout.format
    }
}

/// Every index kind this clirkit reads: its layout, how it opens (counting its documents or
/// vectors) and its merge.
#[rustfmt::skip]
pub static KINDS: &[IndexKind] = &[
    IndexKind::new(&bm25::LAYOUT, |d| Ok(Bm25Index::open(d)?.num_docs() as u64), Some(merge_bm25)),
    IndexKind::new(&impact::format::LAYOUT, |d| Ok(ImpactIndex::open(d)?.num_docs() as u64), None),
    IndexKind::new(&dense_index::LAYOUT, |d| Ok(DenseIndex::open(d)?.ntotal() as u64), Some(merge_dense)),
    IndexKind::new(&multivector::format::LAYOUT, |d| Ok(MultiVectorIndex::open(d)?.ndocs() as u64), None),
    IndexKind::sharded(&bm25::sharded::LAYOUT, |d| Ok(bm25::sharded::check_shards(d)?.collection.num_docs),
        |d| Ok(bm25::sharded::check_shards(d)?.to_json())),
    IndexKind::sharded(&dense_index::SHARDED_LAYOUT, |d| Ok(dense_index::check_sharded(d)?.num_docs),
        |d| Ok(dense_index::check_sharded(d)?.to_json())),
    IndexKind::sharded(&impact::sharded::LAYOUT, |d| Ok(impact::sharded::check_shards(d)?.num_docs),
        |d| Ok(impact::sharded::check_shards(d)?.to_json())),
];

/// The kinds whose sharded index is a directory of shards built by line ranges of one input and
/// committed by [`finish_sharded`] (dense keeps a codebook beside its shards: its own build).
pub const LINE_SHARDED_KINDS: &[&str] = &["bm25", "impact"];

/// Commit the sharded index of kind `kind` (one of [`LINE_SHARDED_KINDS`]) whose shards were
/// built into `dir`: the kind's checks across shards and its manifest, returned as JSON.
pub fn finish_sharded(kind: &str, dir: crate::sharded::ShardedDir) -> Result<String> {
    match kind {
        "bm25" => Ok(bm25::sharded::ShardedBuild::from_dir(dir)
            .finish()?
            .to_json()),
        "impact" => Ok(impact::sharded::finish(dir)?.to_json()),
        other => Err(Error::invalid(format!(
            "no sharded build of kind '{other}' (kinds: {})",
            LINE_SHARDED_KINDS.join(", ")
        ))),
    }
}

/// The kind whose format name is `format`.
pub fn by_format(format: &str) -> Option<&'static IndexKind> {
    KINDS.iter().find(|kind| kind.format() == format)
}

/// The kind of the index at `dir`, by its manifest's format name; an error says why `dir` holds
/// no index this clirkit reads.
pub fn of(dir: &Path) -> Result<&'static IndexKind> {
    let path = dir.join(MANIFEST);
    let text = read_manifest_text(&path)?;
    serde_json::from_str::<serde_json::Value>(&text)
        .map_err(|e| Error::format(&path, format!("unreadable manifest: {e}")))?;
    let Some(format) = index_dir::format_of(dir) else {
        return Err(Error::format(dir, "not a clirkit index"));
    };
    by_format(&format).ok_or_else(|| {
        Error::format(
            &path,
            format!("a '{format}' index, which this clirkit does not read"),
        )
    })
}

/// The sharded index at `dir`: its kind (`bm25`, `dense`: what follows
/// [`crate::sharded::FORMAT_PREFIX`] in its format name) and its manifest as one line of JSON,
/// once every shard (and a shared codebook) is found present and of the recorded build. A
/// directory holding no sharded index is refused, naming it.
pub fn sharded_manifest(dir: &Path) -> Result<(&'static str, String)> {
    let not_sharded = || {
        Error::invalid(format!(
            "{}: not a sharded index (no {}* meta.json)",
            dir.display(),
            crate::sharded::FORMAT_PREFIX
        ))
    };
    if crate::sharded::kind(dir).is_none() {
        return Err(not_sharded());
    }
    let kind = of(dir)?;
    match (
        kind.sharded_manifest,
        kind.format().strip_prefix(crate::sharded::FORMAT_PREFIX),
    ) {
        (Some(manifest), Some(name)) => Ok((name, manifest(dir)?)),
        _ => Err(not_sharded()),
    }
}

/// Check the index at `dir` in full, whatever its kind: every byte of every file (headers
/// included) against its manifest and its kind's layout, every check opening makes, and every
/// part of a sharded index (its shards, its codebook) the same way. The first problem is an
/// error naming its file.
pub fn verify(dir: &Path) -> Result<VerifySummary> {
    let kind = of(dir)?;
    let mut summary = manifest::verify_dir(dir, kind.layout)?;
    (kind.open)(dir)?;
    for part in crate::sharded::parts(dir)? {
        let checked = verify(&part)?;
        summary.files += checked.files;
        summary.bytes += checked.bytes;
    }
    Ok(summary)
}

/// Merge the indexes `inputs` (in order, all of one kind) into a new index at `out`; returns the
/// kind's format name and the merged index's number of documents (or vectors).
pub fn merge(inputs: &[PathBuf], out: &Path, opts: &MergeOptions) -> Result<(&'static str, u64)> {
    let Some(first) = inputs.first() else {
        return Err(Error::invalid("merge: give at least one index"));
    };
    let kinds: Vec<&'static IndexKind> = inputs.iter().map(|i| of(i)).collect::<Result<_>>()?;
    let mut formats: Vec<&str> = kinds.iter().map(|k| k.format()).collect();
    formats.sort_unstable();
    formats.dedup();
    if formats.len() != 1 {
        return Err(Error::invalid(format!(
            "indexes of different kinds cannot be merged: {formats:?}"
        )));
    }
    let kind = kinds[0];
    let Some(merge) = kind.merge else {
        let mergeable: Vec<&str> = KINDS
            .iter()
            .filter(|k| k.merge.is_some())
            .map(IndexKind::format)
            .collect();
        return Err(Error::invalid(format!(
            "{}: '{}' indexes cannot be merged (only {})",
            first.display(),
            kind.format(),
            mergeable.join(", ")
        )));
    };
    merge(inputs, out, opts)?;
    Ok((kind.format(), (kind.open)(out)?))
}

fn merge_bm25(inputs: &[PathBuf], out: &Path, _: &MergeOptions) -> Result<()> {
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    bm25::merge::merge(&inputs, out).map(|_| ())
}

fn merge_dense(inputs: &[PathBuf], out: &Path, opts: &MergeOptions) -> Result<()> {
    let indexes: Vec<DenseIndex> = inputs.iter().map(DenseIndex::open).collect::<Result<_>>()?;
    let parts: Vec<Part<'_>> = indexes.iter().map(Part::Index).collect();
    indexes[0].write_combined(
        &parts,
        out,
        opts.memory_bytes,
        opts.threads,
        &crate::progress::Progress::default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_format_found_by_name() {
        for kind in KINDS {
            assert!(std::ptr::eq(by_format(kind.format()).unwrap(), kind));
            assert!(kind.format().starts_with("clirkit-"), "{}", kind.format());
        }
        let mergeable: Vec<&str> = KINDS
            .iter()
            .filter(|k| k.merge.is_some())
            .map(IndexKind::format)
            .collect();
        assert_eq!(mergeable, ["clirkit-bm25", "clirkit-dense"]);
        assert!(by_format("clirkit-unknown").is_none());
        // Exactly the sharded formats carry a sharded manifest.
        for kind in KINDS {
            assert_eq!(
                kind.sharded_manifest.is_some(),
                kind.format().starts_with(crate::sharded::FORMAT_PREFIX),
                "{}",
                kind.format()
            );
        }
    }

    /// A sharded index's manifest is found through its kind's entry; anything else is refused.
    #[test]
    fn the_sharded_manifest_by_kind() {
        use crate::bm25::sharded::tests::build_sharded;
        use crate::bm25::tests::{quiet, random_corpus, write_corpus, Rng};
        let dir = tempfile::tempdir().unwrap();
        let sharded = dir.path().join("sharded");
        let corpus = write_corpus(dir.path(), "all.jsonl", &random_corpus(&mut Rng(7), 60, 20));
        build_sharded(&corpus, &sharded, 2, &quiet()).unwrap();
        let (kind, json) = sharded_manifest(&sharded).unwrap();
        let fields: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            (kind, fields["shards"].as_array().unwrap().len()),
            ("bm25", 2)
        );
        let e = sharded_manifest(&sharded.join("shard-0000"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("shard-0000: not a sharded index"), "{e}");
        std::fs::remove_dir_all(sharded.join("shard-0001")).unwrap();
        let e = sharded_manifest(&sharded).unwrap_err().to_string();
        assert!(e.contains("shard 1 of the sharded index is missing"), "{e}");
    }

    /// `verify` reads every shard of a sharded BM25 index too: one flipped byte in a shard's
    /// postings is found.
    #[test]
    fn verify_reads_every_shard() {
        use crate::bm25::sharded::tests::build_sharded;
        use crate::bm25::tests::{quiet, random_corpus, write_corpus, Rng};
        let dir = tempfile::tempdir().unwrap();
        let (lines, sharded) = (
            random_corpus(&mut Rng(5), 200, 30),
            dir.path().join("sharded"),
        );
        let corpus = write_corpus(dir.path(), "all.jsonl", &lines);
        build_sharded(&corpus, &sharded, 3, &quiet()).unwrap();
        let summary = verify(&sharded).unwrap();
        assert_eq!(
            (summary.format.as_str(), summary.files),
            (bm25::sharded::FORMAT, 1 + 3 * 5)
        );
        let postings = sharded.join("shard-0002").join("postings.bin");
        let mut bytes = std::fs::read(&postings).unwrap();
        bytes[100] ^= 1;
        std::fs::write(&postings, &bytes).unwrap();
        let e = verify(&sharded).err().unwrap().to_string();
        assert!(
            e.contains("shard-0002") && e.contains("postings.bin"),
            "{e}"
        );
    }

    /// A sharded dense index: its own manifest, then its shards' and codebook's manifests and
    /// files; a corrupt codebook is found.
    #[test]
    fn verify_reads_the_codebook_of_a_sharded_dense_index() {
        use crate::dense::index::sharded::tests::build;
        use crate::dense::index::tests::{clustered, ids};
        let (n, d) = (200, 8);
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        build(&a, &clustered(n, d, 1), d, &ids(n), 0).unwrap();
        let whole = verify(&a).unwrap();
        let codebook = verify(&a.join(dense_index::sharded::CODEBOOK_DIR)).unwrap();
        assert!(whole.files > 2 * codebook.files, "{whole:?}");
        std::fs::write(a.join("codebook").join("pq.bin"), b"corrupt").unwrap();
        let e = verify(&a).err().unwrap().to_string();
        assert!(e.contains("pq.bin"), "{e}");
    }

    #[test]
    fn a_directory_that_is_no_index_of_a_known_kind_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let e = verify(root.path()).err().unwrap().to_string();
        assert!(e.contains("meta.json"), "{e}");
        std::fs::write(root.path().join(MANIFEST), r#"{"format": "x"}"#).unwrap();
        let e = verify(root.path()).err().unwrap().to_string();
        assert!(e.contains("not a clirkit index"), "{e}");
        let meta = r#"{"format": "clirkit-future", "version": 1}"#;
        std::fs::write(root.path().join(MANIFEST), meta).unwrap();
        let e = verify(root.path()).err().unwrap().to_string();
        assert!(
            e.contains("a 'clirkit-future' index, which this clirkit does not read"),
            "{e}"
        );
        let opts = MergeOptions {
            memory_bytes: 1 << 20,
            threads: 1,
        };
        let e = merge(&[], root.path(), &opts).err().unwrap().to_string();
        assert!(e.contains("give at least one index"), "{e}");
    }
}
