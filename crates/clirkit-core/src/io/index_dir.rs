//! What makes a directory a clirkit index, the rule every build and every opening shares: its
//! `meta.json` ([`MANIFEST`], written last, so a directory without it is not a complete index)
//! names a `clirkit-*` format and a version ([`format_of`], [`is_clirkit_index`]: the ownership
//! rule, by which a build replaces nothing else), and is read as UTF-8 text with its format and
//! version checked ([`read_manifest`]). Below both the atomic commit (`atomic.rs`, which refuses
//! to replace a directory that is not an index) and the typed manifests (`manifest.rs`).

use crate::error::{Error, IoContext, Result};
use serde_json::Value;
use std::fs;
use std::path::Path;

/// The file every clirkit index directory holds; it is written last, so a directory without it
/// is not a complete index.
pub const MANIFEST: &str = "meta.json";

/// The format name of the clirkit index (of any kind or version) at `dir`: its `meta.json` is a
/// JSON object naming a `clirkit-*` format and a numeric version; `None` for any other directory.
pub fn format_of(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(MANIFEST)).ok()?;
    let Value::Object(meta) = serde_json::from_str::<Value>(&text).ok()? else {
        return None;
    };
    let format = meta.get("format").and_then(Value::as_str)?;
    let versioned = meta.get("version").is_some_and(Value::is_u64);
    (format.starts_with("clirkit-") && versioned).then(|| format.to_string())
}

/// Whether `dir` holds a clirkit index (of any kind or version): its `meta.json` names a
/// `clirkit-*` format and a version. A directory that merely holds some `meta.json` is not one.
pub fn is_clirkit_index(dir: &Path) -> bool {
    format_of(dir).is_some()
}

/// The text of the manifest at `path`; bytes that are not UTF-8 are a format error (corruption).
pub fn read_manifest_text(path: &Path) -> Result<String> {
    String::from_utf8(fs::read(path).at(path)?)
        .map_err(|_| Error::format(path, "not valid UTF-8: the manifest is corrupt"))
}

/// Read and parse an index directory's manifest, checking its format name and version.
pub fn read_manifest(dir: impl AsRef<Path>, format: &str, version: u64) -> Result<Value> {
    let dir = dir.as_ref();
    let path = dir.join(MANIFEST);
    if !path.is_file() {
        return Err(Error::format(
            dir,
            "not a clirkit index (no meta.json): missing, or its build did not finish",
        ));
    }
    let text = read_manifest_text(&path)?;
    let meta: Value = serde_json::from_str(&text)
        .map_err(|e| Error::format(&path, format!("unreadable manifest: {e}")))?;
    let found_format = meta.get("format").and_then(|v| v.as_str()).unwrap_or("");
    if found_format != format {
        return Err(Error::format(
            dir,
            format!("is a '{found_format}' index, expected '{format}'"),
        ));
    }
    let found_version = meta.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
    if found_version != version {
        return Err(Error::format(
            dir,
            format!(
                "index format version {found_version}, but this clirkit reads version {version}; rebuild the index"
            ),
        ));
    }
    Ok(meta)
}
