//! Text analysis: normalize -> tokenize -> filter (stopwords) -> stem, one analyzer per language.
//!
//! The public interface other modules rely on is [`Analyzer`]: `Analyzer::for_lang(code)`,
//! `analyze`, `analyze_into`, `id`. An analyzer is `Send + Sync` and cheap to share across threads.

use crate::error::{Error, Result};

/// Language codes with an analyzer.
pub const SUPPORTED_LANGUAGES: &[&str] = &["en"];

/// A language's analysis chain.
#[derive(Debug, Clone)]
pub struct Analyzer {
    lang: &'static str,
}

impl Analyzer {
    /// The analyzer for an ISO 639-1 code; an unknown code lists the supported ones.
    pub fn for_lang(code: &str) -> Result<Self> {
        let code = code.trim().to_ascii_lowercase();
        SUPPORTED_LANGUAGES
            .iter()
            .find(|&&l| l == code)
            .map(|&lang| Analyzer { lang })
            .ok_or_else(|| Error::UnknownLanguage {
                code,
                supported: SUPPORTED_LANGUAGES.join(", "),
            })
    }

    pub fn lang(&self) -> &'static str {
        self.lang
    }

    /// A stable identifier of this chain and its version, recorded in indexes so that an index
    /// is never searched with a different analysis than it was built with.
    pub fn id(&self) -> String {
        format!("{}/v0", self.lang)
    }

    /// Analyze `text` into index terms, appended to `out`.
    pub fn analyze_into(&self, text: &str, out: &mut Vec<String>) {
        use unicode_segmentation::UnicodeSegmentation;
        out.extend(text.unicode_words().map(|w| w.to_lowercase()));
    }

    pub fn analyze(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.analyze_into(text, &mut out);
        out
    }
}
