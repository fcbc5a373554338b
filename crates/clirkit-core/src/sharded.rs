//! What every sharded index shares, whatever its kind: a directory holding one ordinary index
//! per shard (`shard-0000/`, ...) and a `meta.json` whose format is `clirkit-sharded-<kind>`,
//! listing each shard with its build stamp (the `checksum` of the shard's own manifest, which
//! covers the digest of every file) and its document count. A sharded directory is a clirkit
//! index for the ownership rule of every build ([`crate::io::index_dir::is_clirkit_index`]), so a
//! build replaces it but never a directory of someone else's. Opening a shard checks that it is
//! there and of the recorded build, so a sharded index is one build too.
//!
//! [`ShardedDir`] builds one: shards are built into [`ShardedDir::shard_dir`] by any process
//! (a Ray task, say), then the kind's manifest is committed with [`ShardedDir::commit`], which
//! moves the whole directory into place at once.

mod hits;
pub use hits::{encode_hits, merge_hits};

use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::atomic::AtomicDir;
use crate::io::index_dir::{self, read_manifest_text, MANIFEST};
use crate::io::manifest::{self, Layout, Manifest};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};

/// The format name of every sharded index starts with this, its kind following.
pub const FORMAT_PREFIX: &str = "clirkit-sharded-";

/// One shard: its directory (relative to the sharded index), its build stamp and its document
/// count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub dir: String,
    pub build: String,
    pub num_docs: u64,
}

/// The directory name of shard `i`.
pub fn shard_name(i: usize) -> String {
    format!("shard-{i:04}")
}

/// The kind of the sharded index at `dir` (`bm25`, ...), or `None` if `dir` holds none.
pub fn kind(dir: &Path) -> Option<String> {
    index_dir::format_of(dir)?
        .strip_prefix(FORMAT_PREFIX)
        .map(String::from)
}

/// The build stamp of the clirkit index at `dir`: its checked manifest's own checksum.
pub fn build_stamp(dir: &Path) -> Result<String> {
    let path = dir.join(MANIFEST);
    let meta: serde_json::Value = serde_json::from_str(&read_manifest_text(&path)?)
        .map_err(|e| Error::format(&path, format!("unreadable manifest: {e}")))?;
    if !index_dir::is_clirkit_index(dir) {
        return Err(Error::format(dir, "not a clirkit index"));
    }
    let format = meta["format"].as_str().unwrap_or_default();
    let version = meta["version"].as_u64().unwrap_or_default();
    let meta = manifest::read_checked(dir, format, version)?;
    Ok(meta["checksum"].as_str().unwrap_or_default().to_string())
}

/// The directory of shard `i` of the sharded index at `dir` (whose manifest lists `shards`),
/// once it is found present and of the recorded build.
pub fn shard_path(dir: &Path, shards: &[ShardRecord], i: usize) -> Result<PathBuf> {
    let Some(record) = shards.get(i) else {
        return Err(Error::invalid(format!(
            "{}: no shard {i} (the index has {} shards)",
            dir.display(),
            shards.len()
        )));
    };
    part_path(dir, record, &format!("shard {i}"))
}

/// The directory of the index `record` names in the sharded index at `dir` (`what` says which in
/// an error: "shard 3", "the codebook"), once it is found present and of the recorded build.
pub fn part_path(dir: &Path, record: &ShardRecord, what: &str) -> Result<PathBuf> {
    let path = dir.join(&record.dir);
    if !path.join(MANIFEST).is_file() {
        return Err(Error::format(
            &path,
            format!("{what} of the sharded index is missing; rebuild the sharded index"),
        ));
    }
    let stamp = build_stamp(&path)?;
    if stamp != record.build {
        return Err(Error::format(
            &path,
            format!(
                "{what} is of another build (stamp {stamp}) than the sharded index records \
                 ({}); rebuild the sharded index",
                record.build
            ),
        ));
    }
    Ok(path)
}

/// Check every shard of the sharded index at `dir` as [`shard_path`] does.
pub fn check_all(dir: &Path, shards: &[ShardRecord]) -> Result<()> {
    (0..shards.len()).try_for_each(|i| shard_path(dir, shards, i).map(|_| ()))
}

/// The indexes a sharded index at `dir` is made of, which `verify` checks with it: every shard
/// and a `codebook` index if the manifest records one, each found present and of the recorded
/// build. An index of another kind has none.
pub fn parts(dir: &Path) -> Result<Vec<PathBuf>> {
    let path = dir.join(MANIFEST);
    let meta: serde_json::Value = serde_json::from_str(&read_manifest_text(&path)?)
        .map_err(|e| Error::format(&path, format!("unreadable manifest: {e}")))?;
    if !meta["format"]
        .as_str()
        .unwrap_or("")
        .starts_with(FORMAT_PREFIX)
    {
        return Ok(Vec::new());
    }
    let shards: Vec<ShardRecord> = serde_json::from_value(meta["shards"].clone())
        .map_err(|e| Error::format(&path, format!("invalid manifest: 'shards': {e}")))?;
    // A kind may keep one more index beside its shards (dense: the codebook every shard shares).
    let codebook: Option<ShardRecord> = serde_json::from_value(meta["codebook"].clone()).ok();
    let mut parts: Vec<PathBuf> = (0..shards.len())
        .map(|i| shard_path(dir, &shards, i))
        .collect::<Result<_>>()?;
    if let Some(record) = codebook {
        parts.push(part_path(dir, &record, "the codebook")?);
    }
    Ok(parts)
}

/// Refuse a document id held by two shards (a single build refuses a duplicate id too), and
/// more documents than the 32-bit document numbers of a single index could hold. Each shard's
/// ids are unique and stored in byte order, so one merge of the sorted lists finds a duplicate
/// as two equal neighbours: O(N log K) for N ids in K shards, no table of all ids. `shards`
/// holds each shard's directory (named in the error) and id table, in shard order.
pub fn check_unique_ids(shards: &[(&Path, &IdTable)]) -> Result<()> {
    let total: usize = shards.iter().map(|(_, ids)| ids.len()).sum();
    if total > u32::MAX as usize {
        return Err(Error::invalid("more than 2^32 - 1 documents in all shards"));
    }
    let mut lists: Vec<_> = shards.iter().map(|(_, ids)| ids.iter_sorted()).collect();
    let mut heads: BinaryHeap<Reverse<(&str, usize)>> = BinaryHeap::new();
    for (shard, list) in lists.iter_mut().enumerate() {
        if let Some(id) = list.next() {
            heads.push(Reverse((id, shard)));
        }
    }
    let mut previous: Option<(&str, usize)> = None;
    while let Some(Reverse((id, shard))) = heads.pop() {
        if let Some((earlier, earlier_shard)) = previous.filter(|(p, _)| *p == id) {
            let (first, second) = (earlier_shard.min(shard), earlier_shard.max(shard));
            return Err(Error::format(
                shards[second].0,
                format!(
                    "document id '{earlier}' is also in {}; ids must be unique across shards",
                    shards[first].0.display()
                ),
            ));
        }
        previous = Some((id, shard));
        if let Some(next) = lists[shard].next() {
            heads.push(Reverse((next, shard)));
        }
    }
    Ok(())
}

/// The layout of a sharded index that holds no file of its own beside its manifest: its shards
/// (and a codebook) are indexes, verified as its parts ([`parts`]).
pub const fn layout_of_parts(format: &'static str, version: u64) -> Layout {
    Layout::new(format, version, |_| None, |_, _| Ok(()))
}

/// A sharded index under construction. Dropped uncommitted, it is removed with its shards.
pub struct ShardedDir {
    dir: AtomicDir,
    shards: usize,
}

impl ShardedDir {
    /// Start building a sharded index of `shards` shards at `out` (which, if it exists, must be
    /// empty or a clirkit index, as for every build).
    pub fn create(out: &Path, shards: usize) -> Result<Self> {
        if shards == 0 {
            return Err(Error::invalid("a sharded index needs at least one shard"));
        }
        Ok(ShardedDir {
            dir: AtomicDir::create(out)?,
            shards,
        })
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Where the shared files (besides the shards) are to be written for now.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Where shard `i` is to be built.
    pub fn shard_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(shard_name(i))
    }

    /// The shards' directories, each refused if it was not built (no manifest).
    pub fn built_shards(&self) -> Result<Vec<PathBuf>> {
        (0..self.shards)
            .map(|i| {
                let path = self.shard_dir(i);
                match path.join(MANIFEST).is_file() {
                    true => Ok(path),
                    false => Err(Error::format(&path, format!("shard {i} was not built"))),
                }
            })
            .collect()
    }

    /// Each shard opened with `open`, once every shard is known to be built.
    pub fn open_built_shards<T>(&self, open: impl FnMut(PathBuf) -> Result<T>) -> Result<Vec<T>> {
        self.built_shards()?.into_iter().map(open).collect()
    }

    /// The record of each shard, given its document count.
    pub fn records(&self, num_docs: impl Fn(usize) -> u64) -> Result<Vec<ShardRecord>> {
        (0..self.shards)
            .map(|i| {
                Ok(ShardRecord {
                    dir: shard_name(i),
                    build: build_stamp(&self.shard_dir(i))?,
                    num_docs: num_docs(i),
                })
            })
            .collect()
    }

    /// Write the kind's manifest (its format must start with [`FORMAT_PREFIX`]) and move the
    /// sharded index into place.
    pub fn commit<M: Manifest>(self, manifest: &M) -> Result<()> {
        debug_assert!(M::FORMAT.starts_with(FORMAT_PREFIX));
        manifest::commit(self.dir, manifest)
    }
}
