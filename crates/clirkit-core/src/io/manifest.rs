//! Typed index manifests: each index kind's `meta.json` is one `#[derive(Serialize,
//! Deserialize)]` struct, written and read through it (as tantivy's `IndexMeta`), so a field
//! cannot be written under one name and read under another.
//!
//! Written through a JSON value, whose keys are sorted: the files are the same bytes as when
//! they were written from `json!` literals.

use crate::error::{Error, Result};
use crate::io::atomic::{read_manifest, AtomicDir, MANIFEST};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// A manifest struct: its format name and version are checked before its fields are read.
pub trait Manifest: Serialize + DeserializeOwned {
    const FORMAT: &'static str;
    const VERSION: u64;

    /// One line of JSON, keys sorted (what the bindings hand to Python).
    fn to_json(&self) -> String {
        serde_json::to_value(self)
            .expect("manifests serialize")
            .to_string()
    }
}

/// Write `manifest` as the index's `meta.json` and commit the index directory.
pub fn commit<M: Manifest>(out: AtomicDir, manifest: &M) -> Result<()> {
    let value = serde_json::to_value(manifest).expect("manifests serialize");
    out.commit(&value)
}

/// Read the manifest of the index at `dir`, checking its format name and version first.
pub fn read<M: Manifest>(dir: &Path) -> Result<M> {
    let value = read_manifest(dir, M::FORMAT, M::VERSION)?;
    serde_json::from_value(value)
        .map_err(|e| Error::format(dir.join(MANIFEST), format!("invalid manifest: {e}")))
}

/// A BM25 index's `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bm25Manifest {
    pub format: String,
    pub version: u64,
    pub num_docs: u64,
    /// Documents with at least one term (Lucene's `docCount`).
    pub doc_count: u64,
    pub sum_total_term_freq: u64,
    pub avgdl: f32,
    pub num_terms: u64,
    pub languages: Vec<String>,
    /// Language code -> the id (name and version) of the analyzer the index was built with.
    pub analyzers: BTreeMap<String, String>,
    pub lang_field: Option<String>,
    pub fields: Vec<String>,
    pub k1: f32,
    pub b: f32,
    pub build: Bm25BuildRecord,
    /// Whether `docvectors.bin` (the forward index RM3 needs) was written; absent when not, so
    /// the manifests of indexes without it are unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub docvectors: bool,
}

/// How a BM25 index was built (recorded, not read back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bm25BuildRecord {
    pub corpus: String,
    pub keep_first_duplicate: bool,
    pub skipped_duplicates: u64,
    pub memory_budget_bytes: u64,
    pub spilled_runs: u64,
}

impl Manifest for Bm25Manifest {
    const FORMAT: &'static str = crate::bm25::format::FORMAT;
    const VERSION: u64 = crate::bm25::format::VERSION;
}

/// A dense index's `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseManifest {
    pub format: String,
    pub version: u64,
    /// "flat", "pq{m}x{nbits}" or "ivf{nlist},pq{m}x{nbits}" (recorded, not read back).
    pub kind: String,
    pub dim: usize,
    pub ntotal: usize,
    pub metric: crate::dense::Metric,
    /// Whether `vectors.bin` holds the full vectors.
    pub vectors: bool,
    pub pq: Option<PqParams>,
    pub ivf: Option<IvfParams>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PqParams {
    pub m: usize,
    pub nbits: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IvfParams {
    pub nlist: usize,
}

impl Manifest for DenseManifest {
    const FORMAT: &'static str = crate::dense::index::FORMAT;
    const VERSION: u64 = crate::dense::index::VERSION;
}

/// An impact index's `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactManifest {
    pub format: String,
    pub version: u64,
    pub num_docs: u64,
    pub num_terms: u64,
    pub num_postings: u64,
    /// Impacts are `round(weight × quantize)`; query weights are quantized the same way.
    pub quantize: u32,
    pub max_impact: u32,
    pub build: ImpactBuildRecord,
}

/// How an impact index was built (recorded, not read back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactBuildRecord {
    pub vectors: String,
    /// Weighted terms left out because their impact rounded to 0.
    pub zero_impact_terms_dropped: u64,
}

impl Manifest for ImpactManifest {
    const FORMAT: &'static str = crate::impact::format::FORMAT;
    const VERSION: u64 = crate::impact::format::VERSION;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_and_read_through_the_struct() {
        let manifest = DenseManifest {
            format: DenseManifest::FORMAT.into(),
            version: DenseManifest::VERSION,
            kind: "pq4x4".into(),
            dim: 8,
            ntotal: 3,
            metric: crate::dense::Metric::L2,
            vectors: false,
            pq: Some(PqParams { m: 4, nbits: 4 }),
            ivf: None,
        };
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("idx");
        commit(AtomicDir::create(&dir).unwrap(), &manifest).unwrap();
        let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
        // Keys sorted, as the files written from `json!` literals were.
        assert!(
            text.starts_with("{\n  \"dim\": 8,\n  \"format\": \"clirkit-dense\""),
            "{text}"
        );
        assert!(text.contains("\"ivf\": null") && text.contains("\"metric\": \"l2\""));
        assert_eq!(read::<DenseManifest>(&dir).unwrap(), manifest);
        let e = read::<Bm25Manifest>(&dir).err().unwrap().to_string();
        assert!(e.contains("is a 'clirkit-dense' index"), "{e}");
        std::fs::write(dir.join(MANIFEST), text.replace("\"dim\": 8,", "")).unwrap();
        let e = read::<DenseManifest>(&dir).err().unwrap().to_string();
        assert!(e.contains("invalid manifest: missing field `dim`"), "{e}");
    }
}
