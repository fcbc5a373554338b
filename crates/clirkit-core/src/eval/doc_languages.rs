//! Each document's language, the aspect α-nDCG measures on a multilingual (MLIR) task: read from
//! a TSV of `docid<TAB>lang` (`clirkit eval --doc-lang`) or given as pairs (a task's documents),
//! then set as the judged documents' aspects ([`QrelsIndex::set_language_aspects`]).

use crate::error::{Error, Result};
use crate::eval::qrels::QrelsIndex;
use crate::io::trec_lines::read_text;
use rustc_hash::FxHashMap;
use std::path::Path;

/// Documents' languages, numbered in order of first appearance.
#[derive(Debug, Clone, Default)]
pub struct DocLanguages {
    by_doc: FxHashMap<Box<[u8]>, u32>,
    names: Vec<String>,
}

impl DocLanguages {
    /// From (doc id, language) pairs; a document given twice with two languages is an error.
    pub fn from_pairs<D: AsRef<[u8]>, L: AsRef<str>>(
        pairs: impl IntoIterator<Item = (D, L)>,
    ) -> Result<Self> {
        let mut langs = DocLanguages::default();
        for (doc, lang) in pairs {
            langs
                .insert(doc.as_ref(), lang.as_ref())
                .map_err(Error::invalid)?;
        }
        Ok(langs)
    }

    /// Read a TSV of `docid<TAB>lang` lines (blank lines skipped); errors name the line.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = read_text(path)?;
        let mut langs = DocLanguages::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
            let (doc, lang) = match fields[..] {
                [doc, lang] if !doc.is_empty() && !lang.is_empty() => (doc, lang),
                _ => {
                    return Err(Error::parse(
                        path,
                        i as u64 + 1,
                        format!("expected 'docid<TAB>lang', found '{line}'"),
                    ))
                }
            };
            langs
                .insert(doc.as_bytes(), lang)
                .map_err(|m| Error::parse(path, i as u64 + 1, m))?;
        }
        Ok(langs)
    }

    fn insert(&mut self, doc: &[u8], lang: &str) -> std::result::Result<(), String> {
        let next = self.names.len() as u32;
        let number = match self.names.iter().position(|n| n == lang) {
            Some(i) => i as u32,
            None => {
                self.names.push(lang.to_string());
                next
            }
        };
        match self.by_doc.insert(doc.into(), number) {
            Some(before) if before != number => Err(format!(
                "document '{}' is given two languages, '{}' and '{lang}'",
                String::from_utf8_lossy(doc),
                self.names[before as usize]
            )),
            _ => Ok(()),
        }
    }

    /// The number of a document's language.
    pub fn get(&self, doc: &[u8]) -> Option<u32> {
        self.by_doc.get(doc).copied()
    }

    /// The languages, by number.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn len(&self) -> usize {
        self.by_doc.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_doc.is_empty()
    }

    /// Make these languages the aspects of `qrels`' judged documents.
    pub fn apply(&self, qrels: &mut QrelsIndex) -> Result<()> {
        qrels.set_language_aspects(|doc| self.get(doc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tsv_and_refuses_conflicts() {
        let dir = std::env::temp_dir().join(format!("clirkit-doclang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("langs.tsv");
        std::fs::write(&path, "d1\tzh\nd2\tfa\n\nd3\tzh\n").unwrap();
        let langs = DocLanguages::read(&path).unwrap();
        assert_eq!(
            (langs.get(b"d3"), langs.get(b"d2"), langs.get(b"x")),
            (Some(0), Some(1), None)
        );
        std::fs::write(&path, "d1\tzh\nd1\tfa\n").unwrap();
        let e = DocLanguages::read(&path).unwrap_err().to_string();
        assert!(
            e.contains("langs.tsv:2:") && e.contains("two languages"),
            "{e}"
        );
        std::fs::write(&path, "d1 zh\n").unwrap();
        assert!(DocLanguages::read(&path)
            .unwrap_err()
            .to_string()
            .contains("docid<TAB>lang"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn languages_become_aspects() {
        let mut qrels = QrelsIndex::from_pairs([(
            "q".to_string(),
            vec![(&b"d1"[..], 2), (b"d2", 1), (b"d3", 0)],
        )]);
        let langs = DocLanguages::from_pairs([("d1", "zh"), ("d2", "fa")]).unwrap();
        langs.apply(&mut qrels).unwrap();
        let j = qrels.get("q").unwrap();
        let aspects: Vec<Vec<(u32, i32)>> = (0..3).map(|d| j.aspects(d).collect()).collect();
        assert_eq!(aspects, [vec![(0, 2)], vec![(1, 1)], vec![]]);
        let missing = DocLanguages::from_pairs([("d1", "zh")]).unwrap();
        let e = missing.apply(&mut qrels).unwrap_err().to_string();
        assert!(e.contains("'d2'") && e.contains("'q'"), "{e}");
    }
}
