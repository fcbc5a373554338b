//! JSONL and TSV input, one concern per file: [`lines`] reads an input's lines (decompressed,
//! numbered, under the record-length cap; a plain file cut into line ranges), [`records`] parses
//! a line into a corpus document or a query by the one record rule.

pub mod lines;
pub mod records;

pub use lines::{
    max_record_bytes, set_max_record_bytes, split_lines, LineBlock, LineRange, LineReader,
    DEFAULT_MAX_RECORD_BYTES, MAX_RECORD_ENV,
};
pub use records::{
    id_from_raw, is_tsv, parse_record, read_records, trim_text, FieldSpec, Record, TextRule,
};
