//! A sharded dense index: [`crate::sharded`]'s directory of one dense index per shard (rows in
//! order: shard `s` holds the rows after those of shards `0..s`), `codebook/` (the index of the
//! training sample, whose codebook and IVF centroids every shard was encoded with), and the
//! manifest `clirkit-sharded-dense`. Searched through [`super::shards`], it gives the single
//! index's hits.
//!
//! [`ShardedDenseBuild`] builds one: `codebook/` is written first, each shard is then encoded
//! into [`ShardedDenseBuild::shard_dir`] by any process (a Ray task, say) with that codebook, and
//! [`ShardedDenseBuild::finish`] checks them (one codebook, ids unique across shards) and moves
//! the whole directory into place.

use super::DenseIndex;
use crate::error::{Error, Result};
use crate::io::manifest::{self, Layout};
use crate::sharded::{build_stamp, check_all, part_path, shard_path, ShardRecord, ShardedDir};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "clirkit-sharded-dense";
pub const VERSION: u64 = 1;
/// The directory of the index whose codebook the shards share.
pub const CODEBOOK_DIR: &str = "codebook";

/// A sharded dense index's `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardedDenseManifest {
    pub format: String,
    pub version: u64,
    /// Rows over all shards.
    pub num_docs: u64,
    pub dim: u64,
    pub metric: String,
    /// "flat", "pq{m}x{nbits}", "ivf{n},pq{m}x{nbits}".
    pub kind: String,
    pub has_vectors: bool,
    pub codebook: ShardRecord,
    pub shards: Vec<ShardRecord>,
}

manifest::manifest_of!(ShardedDenseManifest, FORMAT, VERSION);

/// A sharded dense index holds no file of its own beside its manifest: its shards and codebook
/// are indexes, verified as their parts ([`crate::sharded::parts`]).
pub const LAYOUT: Layout = crate::sharded::layout_of_parts(FORMAT, VERSION);

/// Read the manifest of the sharded dense index at `dir`, checking that every shard (and the
/// codebook) is there and of the recorded build.
pub fn check_sharded(dir: &Path) -> Result<ShardedDenseManifest> {
    let manifest: ShardedDenseManifest = manifest::read(dir)?;
    check_all(dir, &manifest.shards)?;
    codebook_path(dir, &manifest)?;
    Ok(manifest)
}

fn codebook_path(dir: &Path, manifest: &ShardedDenseManifest) -> Result<PathBuf> {
    part_path(dir, &manifest.codebook, "the codebook")
}

impl DenseIndex {
    /// Open shard `shard` of the sharded dense index at `dir` (refused if missing or of another
    /// build).
    pub fn open_shard(dir: impl AsRef<Path>, shard: usize) -> Result<Self> {
        let dir = dir.as_ref();
        let manifest: ShardedDenseManifest = manifest::read(dir)?;
        DenseIndex::open(shard_path(dir, &manifest.shards, shard)?)
    }
}

/// A sharded dense index under construction; dropped unfinished, it is removed with its shards.
pub struct ShardedDenseBuild {
    dir: ShardedDir,
}

impl ShardedDenseBuild {
    /// Start building a sharded index of `shards` shards at `out` (which, if it exists, must be
    /// empty or a clirkit index).
    pub fn create(out: &Path, shards: usize) -> Result<Self> {
        Ok(ShardedDenseBuild {
            dir: ShardedDir::create(out, shards)?,
        })
    }

    pub fn shards(&self) -> usize {
        self.dir.shards()
    }

    /// Where the codebook index is to be written (before the shards).
    pub fn codebook_dir(&self) -> PathBuf {
        self.dir.path().join(CODEBOOK_DIR)
    }

    /// Where shard `i` is to be built.
    pub fn shard_dir(&self, i: usize) -> PathBuf {
        self.dir.shard_dir(i)
    }

    /// Check the shards (all built, with the codebook's codebook, ids unique across them) and
    /// commit the sharded index; returns its manifest.
    pub fn finish(self) -> Result<ShardedDenseManifest> {
        let codebook = DenseIndex::open(self.codebook_dir())?;
        let shards = self.dir.open_built_shards(DenseIndex::open)?;
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (s, shard) in shards.iter().enumerate() {
            codebook.check_same_codebook(shard, s)?;
            for id in shard.ids.iter() {
                if let Some(first) = seen.insert(id, s) {
                    return Err(Error::invalid(format!(
                        "duplicate id '{id}' in shards {first} and {s}"
                    )));
                }
            }
        }
        let manifest = ShardedDenseManifest {
            format: FORMAT.into(),
            version: VERSION,
            num_docs: shards.iter().map(|s| s.ntotal as u64).sum(),
            dim: codebook.dim as u64,
            metric: codebook.metric.name().into(),
            kind: codebook.kind(),
            has_vectors: codebook.has_vectors(),
            codebook: ShardRecord {
                dir: CODEBOOK_DIR.into(),
                build: build_stamp(&self.codebook_dir())?,
                num_docs: codebook.ntotal as u64,
            },
            shards: self.dir.records(|i| shards[i].ntotal as u64)?,
        };
        drop(shards);
        self.dir.commit(&manifest)?;
        Ok(manifest)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::tests::{clustered, ids, opts};
    use super::super::{BuildOptions, Part};
    use super::*;
    use crate::dense::source::SliceSource;
    use crate::dense::Metric;

    /// A sharded dense index of `data` at `out`: a codebook trained on 100 rows, 2 shards.
    pub(crate) fn build(
        out: &Path,
        data: &[f32],
        d: usize,
        all_ids: &[String],
        seed: u64,
    ) -> Result<()> {
        let build = ShardedDenseBuild::create(out, 2)?;
        let o = BuildOptions {
            seed,
            ..opts(Some(4), 4, None, Metric::InnerProduct)
        };
        DenseIndex::build(&data[..100 * d], d, &all_ids[..100], &o)?.save(build.codebook_dir())?;
        let codebook = DenseIndex::open(build.codebook_dir())?;
        for (s, rows) in [0..120, 120..data.len() / d].into_iter().enumerate() {
            let source = SliceSource::new(&data[rows.start * d..rows.end * d], d)?;
            let part = Part::Vectors {
                source: &source,
                ids: &all_ids[rows],
            };
            codebook.write_combined(
                &[part],
                &build.shard_dir(s),
                1,
                1,
                &crate::progress::Progress::default(),
            )?;
        }
        build.finish().map(|_| ())
    }

    #[test]
    fn a_missing_shard_or_one_of_another_build_is_refused() {
        let (n, d) = (200, 8);
        let data = clustered(n, d, 1);
        let all_ids = ids(n);
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        build(&a, &data, d, &all_ids, 0).unwrap();
        build(&b, &data, d, &all_ids, 5).unwrap();
        let m = check_sharded(&a).unwrap();
        assert_eq!(
            (m.num_docs, m.shards.len(), m.kind.as_str()),
            (200, 2, "pq4x4")
        );
        assert_eq!(DenseIndex::open_shard(&a, 1).unwrap().ntotal(), 80);
        let moved = tmp.path().join("moved");
        std::fs::rename(a.join("shard-0001"), &moved).unwrap();
        let e = check_sharded(&a).unwrap_err().to_string();
        assert!(e.contains("shard 1 of the sharded index is missing"), "{e}");
        std::fs::rename(b.join("shard-0001"), a.join("shard-0001")).unwrap();
        let e = DenseIndex::open_shard(&a, 1).err().unwrap().to_string();
        assert!(e.contains("shard 1 is of another build"), "{e}");
        // Another build's codebook is named as the codebook, not as a shard (finding F23).
        std::fs::remove_dir_all(a.join("shard-0001")).unwrap();
        std::fs::rename(&moved, a.join("shard-0001")).unwrap();
        check_sharded(&a).unwrap();
        std::fs::remove_dir_all(a.join(CODEBOOK_DIR)).unwrap();
        std::fs::rename(b.join(CODEBOOK_DIR), a.join(CODEBOOK_DIR)).unwrap();
        let e = check_sharded(&a).unwrap_err().to_string();
        assert!(e.contains("the codebook is of another build"), "{e}");
        assert!(!e.contains("shard 0"), "{e}");
        let e = crate::sharded::parts(&a).unwrap_err().to_string();
        assert!(e.contains("the codebook is of another build"), "{e}");

        // Shards with another codebook, or repeating an id, are refused when the build ends.
        let dup: Vec<String> = (0..n).map(|i| format!("doc{}", i % 150)).collect();
        let e = build(&tmp.path().join("c"), &data, d, &dup, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("duplicate id 'doc0' in shards 0 and 1"), "{e}");
        assert!(!tmp.path().join("c").exists());
    }
}
