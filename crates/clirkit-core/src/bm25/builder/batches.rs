//! Reading the corpus a batch of lines at a time: lines parsed in parallel, then ids checked and
//! numbered in input order, and each document's analyzer chosen.

use super::options::CorpusPart;
use crate::error::{Error, Result};
use crate::ids::UniqueIds;
use crate::io::jsonl::{parse_record, FieldSpec, LineBlock, LineReader, Record};
use crate::progress::Progress;
use crate::text::Analyzer;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};

/// Chooses each document's analyzer: one for the index, or one per language code, created once
/// per code and referred to by position.
pub(super) struct Analyzers {
    lang_field: Option<String>,
    pub(super) list: Vec<Analyzer>,
    by_code: HashMap<String, usize>,
}

impl Analyzers {
    pub(super) fn new(lang: Option<&str>, lang_field: Option<&str>) -> Result<Self> {
        let list = match lang_field {
            None => vec![Analyzer::for_lang(lang.unwrap_or("en"))?],
            Some(_) => Vec::new(),
        };
        Ok(Analyzers {
            lang_field: lang_field.map(String::from),
            list,
            by_code: HashMap::new(),
        })
    }

    pub(super) fn for_record(&mut self, part: &CorpusPart, rec: &Record) -> Result<usize> {
        let Some(field) = &self.lang_field else {
            return Ok(0);
        };
        let path = part.path.as_path();
        let code = part
            .lang
            .as_deref()
            .or(rec.lang.as_deref())
            .or(part.default_lang.as_deref())
            .unwrap_or_default();
        if let Some(&i) = self.by_code.get(code) {
            return Ok(i);
        }
        let analyzer = Analyzer::for_lang(code).map_err(|e| {
            Error::parse(
                path,
                rec.line,
                format!("document '{}' ({field} = {code:?}): {e}", rec.id),
            )
        })?;
        let i = match self.list.iter().position(|a| a.lang() == analyzer.lang()) {
            Some(i) => i,
            None => {
                self.list.push(analyzer);
                self.list.len() - 1
            }
        };
        self.by_code.insert(code.to_string(), i);
        Ok(i)
    }

    /// The languages used, sorted, with their analyzer ids.
    pub(super) fn recorded(&self) -> BTreeMap<String, String> {
        self.list
            .iter()
            .map(|a| (a.lang().to_string(), a.id()))
            .collect()
    }
}

/// The corpus line of every document, kept as the few documents from which line minus
/// document number changes (after blank lines, skipped duplicates or the start of the next
/// corpus file): usually none.
#[derive(Default)]
pub(super) struct DocLines {
    changes: Vec<(u32, i64)>,
}

impl DocLines {
    /// Record that document `doc` is on line `line` (documents come in line order within a file).
    pub(super) fn push(&mut self, doc: u32, line: u64) {
        let offset = line as i64 - doc as i64;
        if self.changes.last().map(|&(_, o)| o) != Some(offset) {
            self.changes.push((doc, offset));
        }
    }

    pub(super) fn line_of(&self, doc: u32) -> u64 {
        let i = self.changes.partition_point(|&(first, _)| first <= doc);
        (doc as i64 + self.changes[i - 1].1) as u64
    }
}

/// The fields read from the corpus file `part`: its language field only when the part does not
/// fix its documents' language, and optional when the part has a default language.
pub(super) fn part_spec(fields: &[&str], lang_field: Option<&str>, part: &CorpusPart) -> FieldSpec {
    FieldSpec::corpus()
        .with_text_fields(fields)
        .with_lang_field(lang_field.filter(|_| part.lang.is_none()))
        .with_optional_lang(part.default_lang.is_some())
}

/// Parsed documents with unique ids, in input order, and each one's analyzer.
pub(super) struct Batch {
    pub(super) records: Vec<Record>,
    pub(super) chosen: Vec<usize>,
}

/// Reads the corpus batch by batch: parses lines in parallel, then checks ids (in input order)
/// and picks each document's analyzer.
pub(super) struct BatchReader<'a> {
    /// The corpus files, read in order; `reader` reads `parts[part]`.
    pub(super) parts: &'a [CorpusPart],
    pub(super) part: usize,
    /// The number of the first document of each part opened so far.
    pub(super) part_starts: Vec<u32>,
    /// The fields read from `parts[part]` ([`part_spec`]).
    pub(super) spec: FieldSpec,
    pub(super) fields: &'a [&'a str],
    pub(super) lang_field: Option<&'a str>,
    pub(super) reader: LineReader,
    /// Counts the bytes read from every part (the build's progress).
    pub(super) progress: &'a Progress,
    pub(super) block: LineBlock,
    pub(super) batch_lines: usize,
    pub(super) keep_first_duplicate: bool,
    /// Every document's id; a document's number is its position.
    pub(super) ids: UniqueIds,
    pub(super) lines: DocLines,
    pub(super) skipped: u64,
    pub(super) analyzers: Analyzers,
}

impl BatchReader<'_> {
    /// The next batch, or `None` at the end of the corpus.
    pub(super) fn next_batch(&mut self) -> Result<Option<Batch>> {
        loop {
            self.reader.next_block(self.batch_lines, &mut self.block)?;
            if !self.block.is_empty() {
                break;
            }
            if self.part + 1 == self.parts.len() {
                return Ok(None);
            }
            self.part += 1;
            self.part_starts.push(self.ids.len() as u32);
            self.reader =
                LineReader::open_counted(&self.parts[self.part].path, None, self.progress)?;
            self.spec = part_spec(self.fields, self.lang_field, &self.parts[self.part]);
        }
        let part = &self.parts[self.part];
        let (block, corpus, spec) = (&self.block, part.path.as_path(), &self.spec);
        let parsed: Vec<Result<Record>> = (0..block.len())
            .into_par_iter()
            .map(|i| {
                let (line, bytes) = block.line(i);
                parse_record(corpus, line, bytes, spec)
            })
            .collect();
        let mut records = Vec::with_capacity(parsed.len());
        let mut chosen = Vec::with_capacity(parsed.len());
        for rec in parsed {
            let rec = rec?;
            if self.ids.len() >= u32::MAX as usize {
                return Err(Error::invalid("more than 2^32 - 1 documents"));
            }
            match self.ids.insert(&rec.id) {
                Ok(doc) => self.lines.push(doc, rec.line),
                Err(_) if self.keep_first_duplicate => {
                    self.skipped += 1;
                    continue;
                }
                Err(first) => {
                    let first_line = self.lines.line_of(first);
                    let first_part = self.part_starts.partition_point(|&s| s <= first) - 1;
                    let mut err = Error::duplicate_id(corpus, rec.id, rec.line, first_line);
                    if first_part != self.part {
                        if let Error::DuplicateId { first_path, .. } = &mut err {
                            *first_path = Some(self.parts[first_part].path.clone());
                        }
                    }
                    return Err(err);
                }
            }
            chosen.push(self.analyzers.for_record(part, &rec)?);
            records.push(rec);
        }
        Ok(Some(Batch { records, chosen }))
    }
}
