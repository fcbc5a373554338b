//! Reading and writing files: atomic writes, the common binary file header, JSONL corpora and
//! queries, TREC runs and qrels.

pub mod atomic;
pub mod format;
pub mod jsonl;
pub mod trec;
