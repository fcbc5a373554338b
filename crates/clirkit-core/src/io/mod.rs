//! Reading and writing files: atomic writes, owned-or-mapped bytes and typed views over them,
//! the common binary file header, JSONL corpora and queries, TREC runs and qrels.

pub mod atomic;
pub mod batch_writer;
pub mod bytes;
pub mod checksum;
pub mod format;
pub mod id_text;
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
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    (dir, path)
}
