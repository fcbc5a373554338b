//! Reading and writing files: atomic writes, owned-or-mapped bytes and typed views over them,
//! the common binary file header, JSONL corpora and queries, TREC runs and qrels.

pub mod atomic;
pub mod bytes;
pub mod format;
pub mod jsonl;
pub mod manifest;
pub mod trec;
pub mod trec_lines;
