//! Document-partitioned (sharded) impact indexes whose exact search equals, byte for byte, the
//! search of one index over all the vectors.
//!
//! A sharded impact index is a [`crate::sharded`] directory: one ordinary impact index per
//! shard, each built from one range of lines of the vectors file (so shard order is file order),
//! and a `meta.json` ([`ShardedImpactManifest`]) recording the shards, the `quantize` they were
//! all built with and the largest impact of any. Unlike BM25, an impact score needs no
//! statistics of the whole collection: it is the integer dot product of the query's and the
//! document's impacts, the same in a shard as in the single index. So each shard's exact top k
//! holds the single index's scores, and the single index's top k is among the shards' top k's
//! merged in canonical order ([`crate::sharded::merge_hits`]: score descending, then id
//! descending as bytes, the single index's tie rule).
//!
//! The one difference: the single index refuses a query whose largest possible score, over the
//! whole collection's block maxima, could reach 2^24 (where f32 stops holding every integer); a
//! shard bounds it by its own block maxima, so such a query may be searched (its scores still
//! exact, every one below each shard's bound) where the single index refuses it.
//!
//! Building: [`ShardedDir::create`], each shard built into [`ShardedDir::shard_dir`] by
//! [`super::build`] with its range (`BuildOptions::range`, from
//! [`crate::io::jsonl::split_lines`]) by any process, then [`finish`].

use super::format::ImpactManifest;
use super::ImpactIndex;
use crate::error::{Error, Result};
use crate::io::manifest::{self, Layout};
use crate::sharded::{shard_path, ShardRecord, ShardedDir};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A sharded impact index's `meta.json` (format [`FORMAT`], version [`VERSION`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardedImpactManifest {
    pub format: String,
    pub version: u64,
    /// Documents in all shards.
    pub num_docs: u64,
    /// Postings in all shards.
    pub num_postings: u64,
    /// The factor every shard quantized weights with.
    pub quantize: u32,
    /// The largest impact of any shard.
    pub max_impact: u32,
    pub shards: Vec<ShardRecord>,
}

pub const FORMAT: &str = "clirkit-sharded-impact";
pub const VERSION: u64 = 1;
manifest::manifest_of!(ShardedImpactManifest, FORMAT, VERSION);

/// A sharded impact index has no files of its own besides `meta.json`.
pub const LAYOUT: Layout = crate::sharded::layout_of_parts(FORMAT, VERSION);

/// Read the manifest of the sharded impact index at `dir` and check that every shard is there
/// and of the build it records (reading each shard's manifest only).
pub fn check_shards(dir: &Path) -> Result<ShardedImpactManifest> {
    let manifest: ShardedImpactManifest = manifest::read(dir)?;
    crate::sharded::check_all(dir, &manifest.shards)?;
    Ok(manifest)
}

impl ImpactIndex {
    /// Open shard `shard` of the sharded impact index at `dir` (refused if missing, of another
    /// build or quantized otherwise than the sharded index records).
    pub fn open_shard(dir: impl AsRef<Path>, shard: usize) -> Result<Self> {
        let dir = dir.as_ref();
        let manifest: ShardedImpactManifest = manifest::read(dir)?;
        let index = ImpactIndex::open(shard_path(dir, &manifest.shards, shard)?)?;
        if index.quantize() != manifest.quantize {
            return Err(Error::format(
                index.dir(),
                format!(
                    "quantize {} differs from the sharded index's {}: the sharded index is corrupt",
                    index.quantize(),
                    manifest.quantize
                ),
            ));
        }
        Ok(index)
    }
}

/// Check the shards built into `dir` (every one built, all with one `quantize`, ids unique
/// across them), write the sharded manifest and move the sharded index into place.
pub fn finish(dir: ShardedDir) -> Result<ShardedImpactManifest> {
    let indexes = dir.open_built_shards(ImpactIndex::open)?;
    let quantize = indexes[0].quantize();
    if let Some(other) = indexes.iter().find(|i| i.quantize() != quantize) {
        return Err(Error::format(
            other.dir(),
            format!(
                "built with quantize {}, shard 0 ({}) with {quantize}: every shard must quantize alike",
                other.quantize(),
                indexes[0].dir().display()
            ),
        ));
    }
    let ids: Vec<(&Path, &crate::ids::IdTable)> =
        indexes.iter().map(|i| (i.dir(), &i.ids)).collect();
    crate::sharded::check_unique_ids(&ids)?;
    let sum = |f: fn(&ImpactManifest) -> u64| indexes.iter().map(|i| f(i.manifest())).sum::<u64>();
    let manifest = ShardedImpactManifest {
        format: FORMAT.into(),
        version: VERSION,
        num_docs: sum(|m| m.num_docs),
        num_postings: sum(|m| m.num_postings),
        quantize,
        max_impact: indexes
            .iter()
            .map(|i| i.manifest().max_impact)
            .max()
            .unwrap_or(0),
        shards: dir.records(|i| indexes[i].num_docs() as u64)?,
    };
    drop(indexes);
    dir.commit(&manifest)?;
    Ok(manifest)
}

#[cfg(test)]
mod tests;
