//! What a BM25 build is asked ([`BuildOptions`]) and what it reports ([`BuildSummary`]).

use crate::io::jsonl::LineRange;
use crate::progress::Progress;
use std::path::{Path, PathBuf};

/// One corpus file of a build over several files read in sequence (documents numbered across
/// them, ids unique across them), with how its documents' language is chosen when the build has a
/// language field: `lang` for every document of the file, else the document's language field, else
/// `default_lang`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusPart {
    pub path: PathBuf,
    pub lang: Option<String>,
    pub default_lang: Option<String>,
}

impl CorpusPart {
    /// A file whose documents' language comes from the build's options alone.
    pub fn whole(path: &Path) -> Self {
        CorpusPart {
            path: path.to_path_buf(),
            lang: None,
            default_lang: None,
        }
    }
}

/// How to build an index.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// One analyzer for the whole corpus (default English when `lang_field` is not set).
    pub lang: Option<String>,
    /// A JSON field naming each document's language; each document gets its own analyzer.
    pub lang_field: Option<String>,
    /// Text fields, joined with a space into the one indexed field.
    pub fields: Vec<String>,
    /// Worker threads; 0 = all cores.
    pub threads: usize,
    /// Keep the first of duplicate doc ids instead of failing.
    pub keep_first_duplicate: bool,
    /// Counts the bytes of the input read from disk, against the inputs' sizes.
    pub progress: Progress,
    /// In-memory postings budget before a sorted run is spilled to disk.
    pub memory_budget_bytes: usize,
    /// Lines read, parsed and analyzed together.
    pub batch_lines: usize,
    /// Also write the forward index (`docvectors.bin`) that RM3 needs.
    pub store_docvectors: bool,
    /// Index only these lines of the corpus (one shard of a sharded build); all when `None`.
    pub range: Option<LineRange>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            lang: None,
            lang_field: None,
            fields: vec!["title".into(), "text".into()],
            threads: 0,
            keep_first_duplicate: false,
            progress: Progress::default(),
            memory_budget_bytes: 1 << 30,
            batch_lines: 8192,
            store_docvectors: false,
            range: None,
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSummary {
    pub num_docs: u64,
    pub num_terms: u64,
    pub skipped_duplicates: u64,
    pub spilled_runs: u64,
}
