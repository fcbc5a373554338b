//! Typed index manifests: each index kind's `meta.json` is one `#[derive(Serialize,
//! Deserialize)]` struct, written and read through it (as tantivy's `IndexMeta`), so a field
//! cannot be written under one name and read under another.
//!
//! Written through a JSON value, whose keys are sorted: the files are the same bytes as when
//! they were written from `json!` literals.
//!
//! This is also the index's identity and integrity record, the same for every index kind:
//! - **Ownership**: a directory is a clirkit index only if its `meta.json` is a JSON object whose
//!   `format` starts with `clirkit-` and which has a numeric `version` ([`is_clirkit_index`]); a
//!   build replaces nothing else.
//! - **Build stamp**: `files` records every other file of the index with its size and CRC
//!   ([`FileDigest`]). A content hash rather than a random stamp, so identical builds stay
//!   byte-identical; opening compares each file's size and header CRC with it
//!   ([`crate::io::snapshot`]), which is how a file of another build is told apart.
//! - **Integrity**: `checksum` is the CRC of the manifest itself (its exact text with the checksum
//!   value zeroed), so a changed statistic is caught at open; [`verify_dir`] checks every file in full.

use crate::error::{Error, IoContext, Result};
use crate::ids::IdTable;
use crate::io::atomic::{read_manifest, read_manifest_text, AtomicDir, MANIFEST};
use crate::io::checksum::{self, FileDigest};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The manifest key of the per-file digests.
const FILES: &str = "files";
/// The manifest key of the manifest's own CRC.
const CHECKSUM: &str = "checksum";

/// The `checksum` entry with its value zeroed, as the manifest's own CRC is computed over it.
const UNSET: &str = "\"checksum\": \"00000000\"";

/// The manifest's text with its checksum filled in: the CRC32 of the exact text with the
/// checksum's value zeroed (exact bytes: JSON numbers need not survive a parse and re-print).
fn with_checksum(mut value: Value) -> String {
    value[CHECKSUM] = Value::String("00000000".into());
    let text = serde_json::to_string_pretty(&value).expect("JSON values serialize");
    let filled = format!("\"checksum\": \"{:08x}\"", checksum::crc32(text.as_bytes()));
    text.replacen(UNSET, &filled, 1)
}

/// Whether a manifest's text carries the checksum of its own bytes.
fn checksum_holds(text: &str) -> bool {
    let key = "\"checksum\": \"";
    let Some(at) = text.find(key).map(|at| at + key.len()) else {
        return false;
    };
    let Some(recorded) = text.get(at..at + 8) else {
        return false;
    };
    let zeroed = format!("{}00000000{}", &text[..at], &text[at + 8..]);
    recorded == format!("{:08x}", checksum::crc32(zeroed.as_bytes()))
}

/// Whether `dir` holds a clirkit index (of any kind or version): its `meta.json` names a
/// `clirkit-*` format and a version. A directory that merely holds some `meta.json` is not one.
pub fn is_clirkit_index(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join(MANIFEST)) else {
        return false;
    };
    let Ok(Value::Object(meta)) = serde_json::from_str::<Value>(&text) else {
        return false;
    };
    let format = meta.get("format").and_then(Value::as_str).unwrap_or("");
    format.starts_with("clirkit-") && meta.get("version").is_some_and(Value::is_u64)
}

/// The digest of every file an index directory under construction holds (hidden temporary
/// files and the manifest excepted), by name.
fn digest_files(dir: &Path) -> Result<BTreeMap<String, FileDigest>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == MANIFEST || name.starts_with('.') || !entry.file_type().at(dir)?.is_file() {
            continue;
        }
        files.insert(name, checksum::digest_file(&entry.path())?);
    }
    Ok(files)
}

/// The per-file digests a checked manifest records.
pub fn recorded_files(dir: &Path, meta: &Value) -> Result<BTreeMap<String, FileDigest>> {
    let files = meta.get(FILES).cloned().unwrap_or(Value::Null);
    serde_json::from_value(files).map_err(|e| {
        Error::format(
            dir.join(MANIFEST),
            format!("invalid manifest: '{FILES}': {e}"),
        )
    })
}

/// Read `dir`'s manifest, checking format name, version and the manifest's own checksum.
pub fn read_checked(dir: &Path, format: &str, version: u64) -> Result<Value> {
    let meta = read_manifest(dir, format, version)?;
    let path = dir.join(MANIFEST);
    if !checksum_holds(&read_manifest_text(&path)?) {
        return Err(Error::format(
            dir.join(MANIFEST),
            "checksum mismatch: the manifest was changed or is corrupt; rebuild the index",
        ));
    }
    Ok(meta)
}

/// What [`verify_dir`] checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifySummary {
    pub format: String,
    pub files: usize,
    pub bytes: u64,
}

/// The id table's name in every index kind, whose lookup order `verify_dir` checks in full.
const ID_TABLE_FILE: &str = "ids.bin";

/// Check a whole index directory of any kind: the manifest's checksum and every recorded file's
/// size and CRC in full, reading every byte, and the id table's lookup order. The first mismatch
/// is an error naming its file.
pub fn verify_dir(dir: &Path) -> Result<VerifySummary> {
    let text = read_manifest_text(&dir.join(MANIFEST))?;
    let meta: Value = serde_json::from_str(&text)
        .map_err(|e| Error::format(dir.join(MANIFEST), format!("unreadable manifest: {e}")))?;
    if !is_clirkit_index(dir) {
        return Err(Error::format(dir, "not a clirkit index"));
    }
    let format = meta["format"].as_str().unwrap_or_default().to_string();
    let version = meta["version"].as_u64().unwrap_or_default();
    let meta = read_checked(dir, &format, version)?;
    let files = recorded_files(dir, &meta)?;
    let mut bytes = 0;
    for (name, digest) in &files {
        let path = dir.join(name);
        checksum::verify_file(&path, digest)?;
        if name == ID_TABLE_FILE {
            IdTable::open(&path)?
                .check_lookup_order()
                .map_err(|message| Error::format(&path, message))?;
        }
        bytes += digest.bytes;
    }
    Ok(VerifySummary {
        format,
        files: files.len(),
        bytes,
    })
}

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

/// Write `manifest` as the index's `meta.json`, with the digest of every file written so far
/// and its own checksum, and commit the index directory.
pub fn commit<M: Manifest>(out: AtomicDir, manifest: &M) -> Result<()> {
    let mut value = serde_json::to_value(manifest).expect("manifests serialize");
    let files = serde_json::to_value(digest_files(out.path())?).expect("digests serialize");
    value[FILES] = files;
    out.commit(&with_checksum(value))
}

/// Read the manifest of the index at `dir`, checking its format name, version and checksum first.
pub fn read<M: Manifest>(dir: &Path) -> Result<M> {
    let value = read_checked(dir, M::FORMAT, M::VERSION)?;
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
    /// Whether the full vectors are kept (`vectors.bin`, or `vectors_f16.bin` with `float16`).
    pub vectors: bool,
    /// The full vectors are stored as float16 (absent when float32, as before the option).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub float16: bool,
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

/// Rewrite the manifest of the index files in `dir` in place, with `edit` applied and every
/// file's digest and its own checksum recomputed (no atomic commit, no fsync: what a fuzz
/// target can afford per input, and what a crafted index looks like).
#[cfg(test)]
pub(crate) fn reseal(dir: &Path, edit: impl FnOnce(&mut Value)) -> Result<()> {
    let path = dir.join(MANIFEST);
    let mut value: Value = serde_json::from_str(&read_manifest_text(&path)?)
        .map_err(|e| Error::format(&path, e.to_string()))?;
    edit(&mut value);
    if !value.is_object() {
        return Ok(());
    }
    value[FILES] = serde_json::to_value(digest_files(dir)?).expect("digests serialize");
    std::fs::write(&path, with_checksum(value)).at(&path)
}

/// The index at `index` with the payload of its checked file `file` edited by `edit`, and every
/// checksum recomputed (header, chunk CRCs, manifest): a crafted file, which only the format's
/// own consistency checks can catch.
#[cfg(test)]
pub(crate) fn craft_payload<M: Manifest>(
    index: &Path,
    file: &str,
    edit: impl FnOnce(&mut Vec<u8>),
) {
    use crate::io::format::{Header, HEADER_LEN};
    let copy = index.with_extension("crafted");
    let out = AtomicDir::create(&copy).unwrap();
    for entry in std::fs::read_dir(index).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != MANIFEST {
            std::fs::copy(entry.path(), out.path().join(entry.file_name())).unwrap();
        }
    }
    let bytes = std::fs::read(index.join(file)).unwrap();
    let header = Header::parse(&bytes).unwrap();
    let mut payload = bytes[HEADER_LEN..HEADER_LEN + header.payload_len as usize].to_vec();
    edit(&mut payload);
    let path = out.path().join(file);
    std::fs::remove_file(&path).unwrap();
    crate::io::format::write_checked(&path, header.kind, header.version, &payload).unwrap();
    let manifest: M = read(index).unwrap();
    commit(out, &manifest).unwrap();
    std::fs::remove_dir_all(index).unwrap();
    std::fs::rename(&copy, index).unwrap();
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
            float16: false,
            pq: Some(PqParams { m: 4, nbits: 4 }),
            ivf: None,
        };
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("idx");
        commit(AtomicDir::create(&dir).unwrap(), &manifest).unwrap();
        let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
        // Keys sorted, as the files written from `json!` literals were.
        assert!(
            text.starts_with("{\n  \"checksum\": \"")
                && text.contains("\"dim\": 8,\n  \"files\": {},\n  \"format\": \"clirkit-dense\""),
            "{text}"
        );
        assert!(text.contains("\"ivf\": null") && text.contains("\"metric\": \"l2\""));
        assert_eq!(read::<DenseManifest>(&dir).unwrap(), manifest);
        let e = read::<Bm25Manifest>(&dir).err().unwrap().to_string();
        assert!(e.contains("is a 'clirkit-dense' index"), "{e}");
        // Any change to the text (here a statistic) breaks the manifest's own checksum.
        std::fs::write(
            dir.join(MANIFEST),
            text.replace("\"dim\": 8,", "\"dim\": 9,"),
        )
        .unwrap();
        let e = read::<DenseManifest>(&dir).err().unwrap().to_string();
        assert!(e.contains("meta.json: checksum mismatch"), "{e}");
        let mut value: Value = serde_json::from_str(&text).unwrap();
        value.as_object_mut().unwrap().remove("dim");
        std::fs::write(dir.join(MANIFEST), with_checksum(value)).unwrap();
        let e = read::<DenseManifest>(&dir).err().unwrap().to_string();
        assert!(e.contains("invalid manifest: missing field `dim`"), "{e}");
    }
}
