//! Typed index manifests, whatever the index kind: each kind's `meta.json` is one
//! `#[derive(Serialize, Deserialize)]` struct implementing [`Manifest`], kept beside the kind's
//! `FORMAT` (as tantivy's `IndexMeta`), written and read through it here, so a field cannot be
//! written under one name and read under another. This module names no kind: a kind hands
//! [`verify_dir`] its [`Layout`] (which header each of its files carries).
//!
//! Written through a JSON value, whose keys are sorted: the files are the same bytes as when
//! they were written from `json!` literals.
//!
//! This is also the index's identity and integrity record, the same for every index kind:
//! - **Ownership**: a directory is a clirkit index only if its `meta.json` is a JSON object whose
//!   `format` starts with `clirkit-` and which has a numeric `version` ([`crate::io::index_dir::is_clirkit_index`]);
//!   a build replaces nothing else.
//! - **Build stamp**: `files` records every other file of the index with its size and CRC
//!   ([`FileDigest`]). A content hash rather than a random stamp, so identical builds stay
//!   byte-identical; opening compares each file's size and header CRC with it
//!   ([`crate::io::snapshot`]), which is how a file of another build is told apart.
//! - **Integrity**: `checksum` is the CRC of the manifest itself (its exact text with the checksum
//!   value zeroed), so a changed statistic is caught at open; [`verify_dir`] checks every file in
//!   full, every byte of it, headers included.

use crate::error::{Error, IoContext, Result};
use crate::io::atomic::AtomicDir;
use crate::io::checksum::{self, FileDigest};
use crate::io::format::Kind;
use crate::io::index_dir::{read_manifest, read_manifest_text, MANIFEST};
use serde::de::DeserializeOwned;
use serde::Serialize;
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

/// What [`verify_dir`] needs to know of one kind of index: its manifest's format and version,
/// the header each of its files carries and the checks of a file's content that checksums
/// cannot make (the id table's lookup order).
pub struct Layout {
    pub format: &'static str,
    pub version: u64,
    /// The header kind and version of the kind's file `name`; `None`: the kind writes no such file.
    pub header: fn(&str) -> Option<(Kind, u32)>,
    /// A check of the content of file `name` at the path given, run after its checksums hold.
    pub content: fn(&Path, &str) -> Result<()>,
}

impl Layout {
    pub const fn new(
        format: &'static str,
        version: u64,
        header: fn(&str) -> Option<(Kind, u32)>,
        content: fn(&Path, &str) -> Result<()>,
    ) -> Self {
        Layout {
            format,
            version,
            header,
            content,
        }
    }
}

/// Check a whole index directory of the kind `layout` describes: the manifest's format, version
/// and checksum, and every recorded file in full: its header (magic, the kind and version the
/// layout expects, lengths, unused bytes), its payload's CRC and chunk CRCs, then its content
/// check. Every byte of every file is read; the first mismatch is an error naming its file.
pub fn verify_dir(dir: &Path, layout: &Layout) -> Result<VerifySummary> {
    let meta = read_checked(dir, layout.format, layout.version)?;
    let files = recorded_files(dir, &meta)?;
    let mut bytes = 0;
    for (name, digest) in &files {
        let path = dir.join(name);
        let Some((kind, version)) = (layout.header)(name) else {
            return Err(Error::format(
                &path,
                format!(
                    "no file of this name belongs to a '{}' index",
                    layout.format
                ),
            ));
        };
        checksum::verify_file(&path, digest, kind, version)?;
        (layout.content)(&path, name)?;
        bytes += digest.bytes;
    }
    Ok(VerifySummary {
        format: layout.format.to_string(),
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

/// `impl Manifest for $manifest` with its kind's format name and version, in one line.
macro_rules! manifest_of {
    ($manifest:ty, $format:expr, $version:expr) => {
        impl $crate::io::manifest::Manifest for $manifest {
            const FORMAT: &'static str = $format;
            const VERSION: u64 = $version;
        }
    };
}
pub(crate) use manifest_of;

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
    use crate::io::index_dir::is_clirkit_index;
    use serde::Deserialize;
    use std::path::PathBuf;

    /// A manifest of no real kind: this module is tested without naming one.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Sample {
        format: String,
        version: u64,
        dim: usize,
        metric: String,
        ivf: Option<usize>,
    }

    impl Manifest for Sample {
        const FORMAT: &'static str = "clirkit-sample";
        const VERSION: u64 = 3;
    }

    /// Another kind, to be refused where a `Sample` is found.
    #[derive(Debug, Serialize, Deserialize)]
    struct Other {
        format: String,
    }

    impl Manifest for Other {
        const FORMAT: &'static str = "clirkit-other";
        const VERSION: u64 = 3;
    }

    #[test]
    fn written_and_read_through_the_struct() {
        let manifest = Sample {
            format: Sample::FORMAT.into(),
            version: Sample::VERSION,
            dim: 8,
            metric: "l2".into(),
            ivf: None,
        };
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("idx");
        commit(AtomicDir::create(&dir).unwrap(), &manifest).unwrap();
        let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
        // Keys sorted, as the files written from `json!` literals were.
        assert!(
            text.starts_with("{\n  \"checksum\": \"")
                && text.contains("\"dim\": 8,\n  \"files\": {},\n  \"format\": \"clirkit-sample\""),
            "{text}"
        );
        assert!(text.contains("\"ivf\": null") && text.contains("\"metric\": \"l2\""));
        assert_eq!(read::<Sample>(&dir).unwrap(), manifest);
        assert!(is_clirkit_index(&dir));
        let e = read::<Other>(&dir).err().unwrap().to_string();
        assert!(e.contains("is a 'clirkit-sample' index"), "{e}");
        // Any change to the text (here a statistic) breaks the manifest's own checksum.
        std::fs::write(
            dir.join(MANIFEST),
            text.replace("\"dim\": 8,", "\"dim\": 9,"),
        )
        .unwrap();
        let e = read::<Sample>(&dir).err().unwrap().to_string();
        assert!(e.contains("meta.json: checksum mismatch"), "{e}");
        let mut value: Value = serde_json::from_str(&text).unwrap();
        value.as_object_mut().unwrap().remove("dim");
        std::fs::write(dir.join(MANIFEST), with_checksum(value)).unwrap();
        let e = read::<Sample>(&dir).err().unwrap().to_string();
        assert!(e.contains("invalid manifest: missing field `dim`"), "{e}");
    }

    /// A layout of one checked file, `data.bin`, of header kind `SAMPLE`, version 1.
    const LAYOUT: Layout = Layout {
        format: Sample::FORMAT,
        version: Sample::VERSION,
        header: |name| (name == "data.bin").then_some((*b"SAMPLE\0\0", 1)),
        content: |_, _| Ok(()),
    };

    /// A sample index holding `data.bin` (`payload`, under header `kind` and `version`).
    fn sample_index(kind: Kind, version: u32, payload: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("idx");
        let out = AtomicDir::create(&dir).unwrap();
        crate::io::format::write_checked(out.path().join("data.bin"), kind, version, payload)
            .unwrap();
        let manifest = Sample {
            format: Sample::FORMAT.into(),
            version: Sample::VERSION,
            dim: 1,
            metric: "ip".into(),
            ivf: None,
        };
        commit(out, &manifest).unwrap();
        (root, dir)
    }

    /// `verify_dir` reads every byte: a flip anywhere in the file, its header's kind and version
    /// bytes included (which its payload CRC does not cover), is refused, naming the file.
    #[test]
    fn verify_checks_every_byte_headers_included() {
        let (_root, dir) = sample_index(*b"SAMPLE\0\0", 1, &[7u8; 300]);
        let summary = verify_dir(&dir, &LAYOUT).unwrap();
        assert_eq!(
            (summary.files, summary.format.as_str()),
            (1, "clirkit-sample")
        );
        let path = dir.join("data.bin");
        let clean = std::fs::read(&path).unwrap();
        for at in 0..clean.len() {
            let mut bytes = clean.clone();
            bytes[at] ^= 0x01;
            std::fs::write(&path, &bytes).unwrap();
            let e = verify_dir(&dir, &LAYOUT).err();
            let e = e.unwrap_or_else(|| panic!("a flip of byte {at} passed verify"));
            assert!(e.to_string().contains("data.bin"), "byte {at}: {e}");
        }
        std::fs::write(&path, &clean).unwrap();
        verify_dir(&dir, &LAYOUT).unwrap();
    }

    /// A file of another kind or version than the layout expects, with every checksum right
    /// (what a flip of its kind or version bytes looks like once resealed), is refused by name.
    #[test]
    fn verify_checks_the_expected_kind_and_version() {
        let (_root, dir) = sample_index(*b"OTHER\0\0\0", 1, b"x");
        let e = verify_dir(&dir, &LAYOUT).err().unwrap().to_string();
        assert!(e.contains("is a 'OTHER' file, expected 'SAMPLE'"), "{e}");
        let (_root, dir) = sample_index(*b"SAMPLE\0\0", 9, b"x");
        let e = verify_dir(&dir, &LAYOUT).err().unwrap().to_string();
        assert!(e.contains("format version 9"), "{e}");
        let (_root, dir) = sample_index(*b"SAMPLE\0\0", 1, b"x");
        std::fs::write(dir.join("stray.bin"), b"x").unwrap();
        reseal(&dir, |_| ()).unwrap();
        let e = verify_dir(&dir, &LAYOUT).err().unwrap().to_string();
        assert!(e.contains("stray.bin: no file of this name belongs"), "{e}");
    }
}
