//! Reading and writing files: atomic writes, owned-or-mapped bytes and typed views over them,
//! the common binary file header, JSONL corpora and queries, TREC runs and qrels.

pub mod atomic;
pub mod batch_writer;
pub mod bytes;
pub mod checksum;
pub mod format;
pub mod id_text;
pub mod index_dir;
pub mod input;
pub mod jsonl;
pub mod manifest;
pub mod run_line_kernels;
pub mod snapshot;
pub mod trec;
pub mod trec_lines;

/// A file named `name` holding `contents`, in a temporary directory that lives as long as the
/// returned guard.
#[cfg(test)]
pub(crate) fn temp_file(
    name: &str,
    contents: impl AsRef<[u8]>,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, path) = temp_path(name);
    std::fs::write(&path, contents).unwrap();
    (dir, path)
}

/// Test helper: rewrite the text file at `path` with `from` replaced by `to`.
#[cfg(test)]
pub(crate) fn replace_in_file(path: &std::path::Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, text.replace(from, to)).unwrap();
}

/// Test helper: the path `name` (not created) in a fresh temporary directory, which is removed
/// when the returned guard drops.
#[cfg(test)]
pub(crate) fn temp_path(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}

/// The layer names no index kind (issue 27): no file of `io/` refers to the modules of a kind
/// (`bm25`, `dense`, `impact`, `multivector`) or to the id table (`ids`), which all sit above
/// it; a kind hands `io` what it needs (`manifest::Layout`) instead.
#[cfg(test)]
#[test]
fn io_names_no_index_kind() {
    const KINDS: [&str; 5] = ["bm25", "dense", "impact", "multivector", "ids"];
    let mut dirs = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/io")];
    let mut found = Vec::new();
    let mut read = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            read += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            for (line, names) in module_references(&text) {
                for name in names.into_iter().filter(|n| KINDS.contains(&n.as_str())) {
                    found.push(format!("{}:{line}: {name}", path.display()));
                }
            }
        }
    }
    // Every file of io/, its folders' included (io/jsonl/).
    assert!(read > 14, "read only {read} files of io/");
    assert!(found.is_empty(), "io/ names index kinds: {found:#?}");
}

/// Every module path in `text` starting at `crate::`, `super::` or `clirkit_core::`, as the
/// (1-based) line it is on and the names it goes through (all of a `{...}` group's).
#[cfg(test)]
fn module_references(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for root in ["crate::", "super::", "clirkit_core::"] {
            for (at, _) in line.match_indices(root) {
                let rest = &line[at + root.len()..];
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || "_:{}, ".contains(c)))
                    .unwrap_or(rest.len());
                let names = rest[..end]
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|n| !n.is_empty())
                    .map(String::from)
                    .collect();
                out.push((i + 1, names));
            }
        }
    }
    out
}

#[cfg(test)]
#[test]
fn module_references_see_paths_and_groups() {
    // Written so that this file's own text holds no such reference.
    let (root, parent, kind) = ("crate", "super", "bm25");
    let text = format!("use {root}::io::atomic;\nuse {root}::{{{kind}, dense::Metric}};\n// {parent}::ids::IdTable");
    let refs = module_references(&text);
    assert_eq!(refs[0], (1, vec!["io".to_string(), "atomic".to_string()]));
    assert_eq!(refs[1].1, ["bm25", "dense", "Metric"]);
    assert_eq!(refs[2], (3, vec!["ids".to_string(), "IdTable".to_string()]));
}
