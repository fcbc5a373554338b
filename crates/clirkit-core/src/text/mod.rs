//! Text analysis: normalize -> tokenize -> filter (stopwords) -> stem, one analyzer per language.
//!
//! The public interface other modules rely on is [`Analyzer`]: `Analyzer::for_lang(code)`,
//! `analyze`, `analyze_into`, `id`. An analyzer is `Send + Sync` and cheap to share across threads.
//!
//! Each chain reproduces the Lucene analyzer that Anserini/Pyserini use for the language, so
//! that BM25 over clirkit's terms ranks as Lucene's does. The normalizers and stemmers follow
//! Apache Lucene's (Apache License 2.0) rule for rule, and the stopword lists are Lucene's
//! (`stopwords/NOTICE.md`); `benches/text/analysis_parity.py` compares the terms with Lucene 9.9.1's.
//!
//! | lang | Lucene analyzer | chain |
//! |---|---|---|
//! | en | Anserini `DefaultEnglishAnalyzer` | standard tokenizer, possessive `'s` removal, lowercase, 33 English stopwords, Porter |
//! | de | `GermanAnalyzer` | lowercase, stopwords, German normalization, German light stemmer |
//! | es | `SpanishAnalyzer` | lowercase, stopwords, Spanish light stemmer |
//! | fr | `FrenchAnalyzer` | elision, lowercase, stopwords, French light stemmer |
//! | ru | `RussianAnalyzer` | lowercase, stopwords, Snowball Russian |
//! | el | `GreekAnalyzer` | Greek lowercase (accents removed), stopwords, Greek stemmer |
//! | tr | `TurkishAnalyzer` | apostrophe, Turkish lowercase, stopwords, Snowball Turkish |
//! | ar | `ArabicAnalyzer` | lowercase, decimal digits, stopwords, Arabic normalization, Arabic light stemmer |
//! | fa | `PersianAnalyzer` | ZWNJ as space, lowercase, digits, Arabic + Persian normalization, stopwords (no stemmer, as in Lucene 9.9) |
//! | hi | `HindiAnalyzer` | lowercase, digits, Indic + Hindi normalization, stopwords, Hindi stemmer |
//! | bn | `BengaliAnalyzer` | lowercase, digits, Indic + Bengali normalization, stopwords, Bengali stemmer |
//! | id | `IndonesianAnalyzer` | lowercase, stopwords, Indonesian stemmer (derivational) |
//! | zh ja ko | `CJKAnalyzer` | width folding, lowercase, CJK bigrams, English stopwords |
//! | th | `ThaiAnalyzer` | dictionary word segmentation (ICU4X), lowercase, digits, Thai stopwords |
//! | vi | (none in Lucene) | standard tokenizer, lowercase, NFC: Vietnamese syllables are tokens |
//! | it | `ItalianAnalyzer` | elision, lowercase, stopwords, Italian light stemmer |
//! | pt | `PortugueseAnalyzer` | lowercase, stopwords, Portuguese light stemmer |
//! | nl sv da no fi hu ro | Lucene's stopwords and Snowball stemmers (rust-stemmers), as Lucene's analyzers |

mod arabic;
mod cjk;
mod greek;
mod indic;
mod indonesian;
mod latin;
mod porter;
mod stopwords;
mod thai;
mod tokenize;

use std::sync::Arc;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use crate::error::{Error, Result};
use stopwords::StopSet;
use tokenize::{fold_decimal_digits, push_lowercase, standard_tokens};

/// Language codes with an analyzer.
pub const SUPPORTED_LANGUAGES: &[&str] = &[
    "ar", "bn", "da", "de", "el", "en", "es", "fa", "fi", "fr", "hi", "hu", "id", "it", "ja", "ko",
    "nl", "no", "pt", "ro", "ru", "sv", "th", "tr", "vi", "zh",
];

/// A filter that rewrites one token's characters in place.
type CharFilter = fn(&mut Vec<char>);

/// Version of the analysis chains; bump on any change that alters terms.
const CHAIN_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chain {
    English,
    German,
    Spanish,
    French,
    Italian,
    Portuguese,
    Russian,
    Greek,
    Turkish,
    Arabic,
    Persian,
    Hindi,
    Bengali,
    Indonesian,
    Cjk,
    Thai,
    Vietnamese,
    /// Lowercase, stopwords, then a Snowball stemmer.
    Snowball,
}

impl Chain {
    /// A short name of the chain's family, part of [`Analyzer::id`].
    fn family(self) -> &'static str {
        match self {
            Chain::English => "lucene-porter",
            Chain::Cjk => "lucene-cjk-bigram",
            Chain::Thai => "icu4x-dictionary",
            Chain::Vietnamese => "standard-nfc",
            Chain::Snowball => "snowball",
            Chain::Russian => "lucene-snowball",
            _ => "lucene",
        }
    }
}

/// A language's analysis chain.
#[derive(Clone)]
pub struct Analyzer {
    lang: &'static str,
    chain: Chain,
    stopwords: &'static StopSet,
    /// The length in characters of the longest stopword: longer tokens skip the set lookup.
    stopword_max_chars: usize,
    stemmer: Option<Arc<Stemmer>>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer").field("id", &self.id()).finish()
    }
}

/// Per-call scratch space, so that a token costs no allocation.
#[derive(Default)]
struct Scratch {
    chars: Vec<char>,
    text: String,
}

impl Scratch {
    fn load_text(&mut self) -> &str {
        self.text.clear();
        self.text.extend(self.chars.iter());
        &self.text
    }
}

impl Analyzer {
    /// The analyzer for a language code: ISO 639-1 ("fa"), ISO 639-2/3 ("fas", "per", as
    /// NeuCLIR writes them) or a BCP 47 tag whose region is ignored ("zh-CN", "pt_BR"). An
    /// unknown code lists the supported ones.
    pub fn for_lang(code: &str) -> Result<Self> {
        let lang = canonical_code(code).ok_or_else(|| Error::UnknownLanguage {
            code: code.trim().to_string(),
            supported: SUPPORTED_LANGUAGES.join(", "),
        })?;
        use stopwords as sw;
        let (chain, stopwords, algorithm): (Chain, &'static StopSet, Option<Algorithm>) = match lang
        {
            "en" => (Chain::English, sw::english(), None),
            "de" => (Chain::German, sw::german(), None),
            "es" => (Chain::Spanish, sw::spanish(), None),
            "fr" => (Chain::French, sw::french(), None),
            "ru" => (Chain::Russian, sw::russian(), Some(Algorithm::Russian)),
            "el" => (Chain::Greek, sw::greek(), None),
            "tr" => (Chain::Turkish, sw::turkish(), Some(Algorithm::Turkish)),
            "ar" => (Chain::Arabic, sw::arabic(), None),
            "fa" => (Chain::Persian, sw::persian(), None),
            "hi" => (Chain::Hindi, sw::hindi(), None),
            "bn" => (Chain::Bengali, sw::bengali(), None),
            "id" => (Chain::Indonesian, sw::indonesian(), None),
            "zh" | "ja" | "ko" => (Chain::Cjk, sw::cjk(), None),
            "th" => (Chain::Thai, sw::thai(), None),
            "vi" => (Chain::Vietnamese, sw::none(), None),
            "it" => (Chain::Italian, sw::italian(), None),
            "pt" => (Chain::Portuguese, sw::portuguese(), None),
            "nl" => (Chain::Snowball, sw::dutch(), Some(Algorithm::Dutch)),
            "sv" => (Chain::Snowball, sw::swedish(), Some(Algorithm::Swedish)),
            "da" => (Chain::Snowball, sw::danish(), Some(Algorithm::Danish)),
            "no" => (Chain::Snowball, sw::norwegian(), Some(Algorithm::Norwegian)),
            "fi" => (Chain::Snowball, sw::finnish(), Some(Algorithm::Finnish)),
            "hu" => (Chain::Snowball, sw::hungarian(), Some(Algorithm::Hungarian)),
            "ro" => (Chain::Snowball, sw::romanian(), Some(Algorithm::Romanian)),
            other => unreachable!("supported language without a chain: {other}"),
        };
        Ok(Analyzer {
            lang,
            chain,
            stopwords,
            stopword_max_chars: stopwords
                .iter()
                .map(|w| w.chars().count())
                .max()
                .unwrap_or(0),
            stemmer: algorithm.map(|a| Arc::new(Stemmer::create(a))),
        })
    }

    pub fn lang(&self) -> &'static str {
        self.lang
    }

    /// A stable identifier of this chain and its version, recorded in indexes so that an index
    /// is never searched with a different analysis than it was built with.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.lang, self.chain.family(), CHAIN_VERSION)
    }

    /// Analyze `text` into index terms, appended to `out`.
    pub fn analyze_into(&self, text: &str, out: &mut Vec<String>) {
        self.analyze_each(text, |term| out.push(term.to_string()));
    }

    /// The index terms of `text`.
    pub fn analyze(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.analyze_into(text, &mut out);
        out
    }

    /// Calls `emit` with each index term of `text`, in order: the terms of [`Analyzer::analyze`]
    /// without an allocation per term (each is lent from a reused buffer).
    pub fn analyze_each(&self, text: &str, mut emit: impl FnMut(&str)) {
        let emit = &mut emit;
        let mut scratch = Scratch::default();
        match self.chain {
            Chain::Thai => thai::thai_words(text, |word| {
                scratch.chars.clear();
                push_lowercase(word, &mut scratch.chars);
                fold_decimal_digits(&mut scratch.chars);
                self.emit_unless_stopword(&mut scratch, emit);
            }),
            Chain::Cjk => self.analyze_cjk(text, &mut scratch, emit),
            Chain::Persian if text.contains('\u{200C}') => {
                // Lucene's PersianCharFilter: a zero-width non-joiner separates words.
                let spaced = text.replace('\u{200C}', " ");
                standard_tokens(&spaced, |t| self.analyze_token(t.text, &mut scratch, emit));
            }
            _ => standard_tokens(text, |t| self.analyze_token(t.text, &mut scratch, emit)),
        }
    }

    fn is_stopword(&self, scratch: &mut Scratch) -> bool {
        scratch.chars.len() <= self.stopword_max_chars
            && self.stopwords.contains(scratch.load_text())
    }

    fn emit_unless_stopword(&self, scratch: &mut Scratch, emit: &mut impl FnMut(&str)) {
        if scratch.chars.is_empty() {
            return;
        }
        let text = scratch.load_text();
        if !self.stopwords.contains(text) {
            emit(text);
        }
    }

    fn emit(scratch: &mut Scratch, emit: &mut impl FnMut(&str)) {
        if !scratch.chars.is_empty() {
            emit(scratch.load_text());
        }
    }

    fn snowball(&self, scratch: &mut Scratch, emit: &mut impl FnMut(&str)) {
        let stemmer = self.stemmer.as_ref().expect("Snowball chain has a stemmer");
        let stemmed = stemmer.stem(scratch.load_text());
        if !stemmed.is_empty() {
            emit(&stemmed);
        }
    }

    /// Runs one standard-tokenizer token through the chain's filters.
    fn analyze_token(&self, token: &str, scratch: &mut Scratch, emit: &mut impl FnMut(&str)) {
        let chars = &mut scratch.chars;
        chars.clear();
        match self.chain {
            Chain::English
            | Chain::German
            | Chain::Spanish
            | Chain::French
            | Chain::Italian
            | Chain::Portuguese
            | Chain::Indonesian => {
                // Lowercase (after the language's elision or possessive filter, if any), drop
                // stopwords, stem.
                let (elide, stem): (fn(&str) -> &str, CharFilter) = match self.chain {
                    Chain::English => (strip_possessive, porter::stem),
                    Chain::German => (no_elision, |chars| {
                        latin::german_normalize(chars);
                        latin::german_light_stem(chars);
                    }),
                    Chain::Spanish => (no_elision, latin::spanish_light_stem),
                    Chain::French => (latin::french_elision, latin::french_light_stem),
                    Chain::Italian => (latin::italian_elision, latin::italian_light_stem),
                    Chain::Portuguese => (no_elision, latin::portuguese_light_stem),
                    Chain::Indonesian => (no_elision, indonesian::indonesian_stem),
                    _ => unreachable!("only the chains of this arm"),
                };
                push_lowercase(elide(token), chars);
                if self.is_stopword(scratch) {
                    return;
                }
                stem(&mut scratch.chars);
            }
            Chain::Russian => {
                push_lowercase(token, chars);
                if !self.is_stopword(scratch) {
                    // Snowball 2's Russian stemmer (Lucene 9) reads ё as е; rust-stemmers' does not.
                    for c in scratch.chars.iter_mut().filter(|c| **c == 'ё') {
                        *c = 'е';
                    }
                    self.snowball(scratch, emit);
                }
                return;
            }
            Chain::Snowball => {
                push_lowercase(token, chars);
                if !self.is_stopword(scratch) {
                    self.snowball(scratch, emit);
                }
                return;
            }
            Chain::Turkish => {
                latin::turkish_lowercase(latin::strip_after_apostrophe(token), chars);
                if !chars.is_empty() && !self.is_stopword(scratch) {
                    self.snowball(scratch, emit);
                }
                return;
            }
            Chain::Greek => {
                chars.extend(token.chars().map(greek::greek_lower));
                if self.is_stopword(scratch) {
                    return;
                }
                greek::stem(&mut scratch.chars);
            }
            Chain::Arabic => {
                push_lowercase(token, chars);
                fold_decimal_digits(chars);
                // Lucene's list is not normalized, so stopwords are removed before normalizing.
                if self.is_stopword(scratch) {
                    return;
                }
                arabic::arabic_normalize(&mut scratch.chars);
                arabic::arabic_stem(&mut scratch.chars);
            }
            Chain::Persian => {
                push_lowercase(token, chars);
                fold_decimal_digits(chars);
                arabic::arabic_normalize(chars);
                arabic::persian_normalize(chars);
                if self.is_stopword(scratch) {
                    return;
                }
            }
            Chain::Hindi | Chain::Bengali => {
                // Lucene's HindiAnalyzer and BengaliAnalyzer share the chain around their
                // language's normalizer and stemmer.
                let (normalize, stem): (CharFilter, CharFilter) = if self.chain == Chain::Hindi {
                    (indic::hindi_normalize, indic::hindi_stem)
                } else {
                    (indic::bengali_normalize, indic::bengali_stem)
                };
                push_lowercase(token, chars);
                fold_decimal_digits(chars);
                indic::indic_normalize(chars);
                normalize(chars);
                if self.is_stopword(scratch) {
                    return;
                }
                stem(&mut scratch.chars);
            }
            Chain::Vietnamese => {
                push_lowercase(token, chars);
                let text = scratch.load_text();
                if is_nfc_quick(text.chars()) == IsNormalized::Yes {
                    emit(text);
                } else {
                    emit(&text.nfc().collect::<String>());
                }
                return;
            }
            Chain::Thai | Chain::Cjk => unreachable!("segmented by their own tokenizers"),
        }
        Self::emit(scratch, emit);
    }

    /// Lucene's CJKAnalyzer: width folding and lowercase per token, bigrams over runs of
    /// adjacent CJK characters, other tokens filtered by the (English) stopword list.
    fn analyze_cjk(&self, text: &str, scratch: &mut Scratch, emit: &mut impl FnMut(&str)) {
        let mut bigrams = cjk::Bigrammer::default();
        standard_tokens(text, |t| {
            scratch.chars.clear();
            push_lowercase(t.text, &mut scratch.chars);
            cjk::fold_width(&mut scratch.chars);
            if t.kind.is_cjk() {
                bigrams.push(&scratch.chars, t.start, t.end, emit);
            } else {
                bigrams.flush(emit);
                self.emit_unless_stopword(scratch, emit);
            }
        });
        bigrams.flush(emit);
    }
}

/// ISO 639-2/3 codes of the supported languages (bibliographic and terminological forms).
const THREE_LETTER_CODES: &[(&str, &str)] = &[
    ("ara", "ar"),
    ("ben", "bn"),
    ("dan", "da"),
    ("deu", "de"),
    ("ger", "de"),
    ("ell", "el"),
    ("gre", "el"),
    ("eng", "en"),
    ("spa", "es"),
    ("fas", "fa"),
    ("per", "fa"),
    ("fin", "fi"),
    ("fra", "fr"),
    ("fre", "fr"),
    ("hin", "hi"),
    ("hun", "hu"),
    ("ind", "id"),
    ("ita", "it"),
    ("jpn", "ja"),
    ("kor", "ko"),
    ("nld", "nl"),
    ("dut", "nl"),
    ("nor", "no"),
    ("nob", "no"),
    ("por", "pt"),
    ("ron", "ro"),
    ("rum", "ro"),
    ("rus", "ru"),
    ("swe", "sv"),
    ("tha", "th"),
    ("tur", "tr"),
    ("vie", "vi"),
    ("zho", "zh"),
    ("chi", "zh"),
];

/// The supported two-letter code a language code names, if any.
fn canonical_code(code: &str) -> Option<&'static str> {
    let primary = code
        .trim()
        .split(['-', '_'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let primary = match primary.as_str() {
        "nb" | "nn" => "no",
        other => THREE_LETTER_CODES
            .iter()
            .find(|(three, _)| *three == other)
            .map_or(other, |(_, two)| two),
    };
    SUPPORTED_LANGUAGES.iter().copied().find(|&l| l == primary)
}

/// The token as it is, for chains without an elision filter.
fn no_elision(token: &str) -> &str {
    token
}

/// Lucene's `EnglishPossessiveFilter`: "John's" -> "John".
fn strip_possessive(token: &str) -> &str {
    token
        .strip_suffix(['s', 'S'])
        .and_then(|rest| rest.strip_suffix(['\'', '\u{2019}', '\u{FF07}']))
        .unwrap_or(token)
}

/// Asserts that `f` maps each word of `cases` to its expected form (the filters' unit tests).
#[cfg(test)]
fn assert_maps(f: impl Fn(&mut Vec<char>), cases: &[(&str, &str)]) {
    for &(word, expected) in cases {
        let mut buf: Vec<char> = word.chars().collect();
        f(&mut buf);
        assert_eq!(buf.into_iter().collect::<String>(), expected, "{word}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze(lang: &str, text: &str) -> Vec<String> {
        Analyzer::for_lang(lang).unwrap().analyze(text)
    }

    #[test]
    fn unknown_language_lists_supported() {
        let err = Analyzer::for_lang("xx").unwrap_err().to_string();
        assert!(
            err.contains("'xx'") && err.contains("en, es") && err.contains("zh"),
            "{err}"
        );
        assert_eq!(Analyzer::for_lang(" EN ").unwrap().lang(), "en");
        for (code, lang) in [
            ("fas", "fa"),
            ("zho", "zh"),
            ("zh-CN", "zh"),
            ("pt_BR", "pt"),
            ("nb", "no"),
        ] {
            assert_eq!(Analyzer::for_lang(code).unwrap().lang(), lang, "{code}");
        }
        assert!(Analyzer::for_lang("").is_err());
    }

    #[test]
    fn ids_name_language_chain_and_version() {
        assert_eq!(Analyzer::for_lang("en").unwrap().id(), "en/lucene-porter/1");
        assert_eq!(Analyzer::for_lang("fa").unwrap().id(), "fa/lucene/1");
        assert_eq!(Analyzer::for_lang("ben").unwrap().id(), "bn/lucene/1");
        assert_eq!(Analyzer::for_lang("id-ID").unwrap().id(), "id/lucene/1");
        assert_eq!(
            Analyzer::for_lang("zh").unwrap().id(),
            "zh/lucene-cjk-bigram/1"
        );
    }

    #[test]
    fn every_language_handles_empty_and_punctuation() {
        for lang in SUPPORTED_LANGUAGES {
            assert!(analyze(lang, "").is_empty(), "{lang}");
            assert!(analyze(lang, " .,;!? ").is_empty(), "{lang}");
        }
    }

    #[test]
    fn english() {
        assert_eq!(strip_possessive("John\u{2019}S"), "John");
        assert_eq!(strip_possessive("its"), "its");
        assert_eq!(
            analyze("en", "The quick brown foxes jumped over John's lazy dogs!"),
            ["quick", "brown", "fox", "jump", "over", "john", "lazi", "dog"]
        );
    }

    #[test]
    fn cjk_bigrams_with_latin_inside() {
        // From Lucene's TestCJKAnalyzer: mixed scripts and stopwords.
        assert_eq!(
            analyze("zh", "一二三四五六七八九十"),
            [
                "一二", "二三", "三四", "四五", "五六", "六七", "七八", "八九", "九十"
            ]
        );
        assert_eq!(
            analyze("zh", "一 二三四 五六七八九 十"),
            ["一", "二三", "三四", "五六", "六七", "七八", "八九", "十"]
        );
        assert_eq!(
            analyze("zh", "一二三四The 五六七八九十"),
            ["一二", "二三", "三四", "五六", "六七", "七八", "八九", "九十"]
        );
        assert_eq!(
            analyze("ja", "あいうえおabcかきくけこ"),
            ["あい", "いう", "うえ", "えお", "abc", "かき", "きく", "くけ", "けこ"]
        );
        assert_eq!(analyze("ko", "한국어"), ["한국", "국어"]);
        assert_eq!(analyze("zh", "ＡＢＣ　中"), ["abc", "中"]);
    }

    #[test]
    fn chains_apply_their_filters() {
        assert_eq!(analyze("de", "Die Häuser"), ["haus"]);
        assert_eq!(analyze("fr", "L'avion des chevaux"), ["avion", "cheval"]);
        assert_eq!(analyze("es", "las naciones"), ["nacion"]);
        assert_eq!(analyze("pt", "Os homens"), ["homem"]);
        assert_eq!(analyze("it", "dell'arte ragazzi"), ["arte", "ragazz"]);
        assert_eq!(analyze("tr", "Türkiye'de İstanbul"), ["türki", "istanbul"]);
        assert_eq!(analyze("ar", "والحسن ٣"), ["حسن", "3"]);
        assert_eq!(analyze("fa", "کتاب\u{200C}ها"), ["كتاب"]);
        assert_eq!(analyze("hi", "लडकों ने"), ["लडक"]);
        assert_eq!(analyze("bn", "মেয়েরা ও ১০টি বইগুলো"), ["মে", "10", "বই"]);
        assert_eq!(
            analyze("id", "Buku-bukunya dan pembaruan"),
            ["buku", "buku", "baru"]
        );
        assert_eq!(analyze("vi", "Tiếng Việt"), ["tiếng", "việt"]);
        // Decomposed input composes to the same terms.
        assert_eq!(analyze("vi", "Tie\u{0302}\u{0301}ng"), ["tiếng"]);
        assert_eq!(analyze("ru", "книги всё"), ["книг", "все"]);
    }

    #[test]
    fn thai_is_segmented_and_stopwords_removed() {
        let terms = analyze("th", "การที่ได้ต้องแสดงว่างานดี");
        assert!(terms.contains(&"แสดง".to_string()), "{terms:?}");
        assert!(
            !terms.contains(&"ที่".to_string()),
            "stopword kept: {terms:?}"
        );
    }

    #[test]
    fn very_long_text_is_analyzed() {
        let text = "retrieval systems index documents ".repeat(50_000);
        let terms = analyze("en", &text);
        assert_eq!(terms.len(), 200_000);
        assert_eq!(&terms[..4], ["retriev", "system", "index", "document"]);
    }

    #[test]
    fn analyzer_is_send_sync() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Analyzer>();
    }
}
