//! Lucene's default stopword sets, embedded (see `stopwords/NOTICE.md` for their sources).

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// A set of stopwords, compared after the chain's normalization (as in Lucene).
pub type StopSet = HashSet<&'static str, BuildHasherDefault<WordHasher>>;

/// A fast multiply-rotate hash (as rustc's FxHash) for the per-token stopword lookup. The sets
/// are fixed at build time, so the hash-flooding resistance of the default hasher buys nothing.
#[derive(Default, Clone, Copy)]
pub struct WordHasher(u64);

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`, used by Anserini's default English analyzer.
const ENGLISH: &str =
    "a an and are as at be but by for if in into is it no not of on or such that \
                       the their then there these they this to was will with";

/// Parses a Snowball-format list: `|` starts a comment, words are separated by whitespace.
fn snowball_list(text: &'static str) -> StopSet {
    text.lines()
        .flat_map(|line| line.split('|').next().unwrap_or("").split_whitespace())
        .collect()
}

/// Parses a plain list: one word per line, lines starting with `#` are comments.
fn plain_list(text: &'static str) -> StopSet {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect()
}

macro_rules! stop_set {
    ($name:ident, $parse:expr, $text:expr) => {
        pub fn $name() -> &'static StopSet {
            static SET: OnceLock<StopSet> = OnceLock::new();
            SET.get_or_init(|| $parse($text))
        }
    };
}

stop_set!(
    english,
    |t: &'static str| t.split_whitespace().collect(),
    ENGLISH
);
stop_set!(cjk, plain_list, include_str!("stopwords/cjk.txt"));
stop_set!(arabic, plain_list, include_str!("stopwords/ar.txt"));
stop_set!(persian, plain_list, include_str!("stopwords/fa.txt"));
stop_set!(hindi, plain_list, include_str!("stopwords/hi.txt"));
stop_set!(bengali, plain_list, include_str!("stopwords/bn.txt"));
stop_set!(indonesian, plain_list, include_str!("stopwords/id.txt"));
stop_set!(greek, plain_list, include_str!("stopwords/el.txt"));
stop_set!(thai, plain_list, include_str!("stopwords/th.txt"));
stop_set!(turkish, plain_list, include_str!("stopwords/tr.txt"));
stop_set!(romanian, plain_list, include_str!("stopwords/ro.txt"));
stop_set!(german, snowball_list, include_str!("stopwords/de.txt"));
stop_set!(spanish, snowball_list, include_str!("stopwords/es.txt"));
stop_set!(french, snowball_list, include_str!("stopwords/fr.txt"));
stop_set!(russian, snowball_list, include_str!("stopwords/ru.txt"));
stop_set!(italian, snowball_list, include_str!("stopwords/it.txt"));
stop_set!(portuguese, snowball_list, include_str!("stopwords/pt.txt"));
stop_set!(dutch, snowball_list, include_str!("stopwords/nl.txt"));
stop_set!(swedish, snowball_list, include_str!("stopwords/sv.txt"));
stop_set!(danish, snowball_list, include_str!("stopwords/da.txt"));
stop_set!(norwegian, snowball_list, include_str!("stopwords/no.txt"));
stop_set!(finnish, snowball_list, include_str!("stopwords/fi.txt"));
stop_set!(hungarian, snowball_list, include_str!("stopwords/hu.txt"));

/// The empty set, for chains without stopwords.
pub fn none() -> &'static StopSet {
    static SET: OnceLock<StopSet> = OnceLock::new();
    SET.get_or_init(StopSet::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_lucene() {
        assert_eq!(english().len(), 33);
        assert_eq!(cjk().len(), 35);
        assert!(german().contains("und") && german().contains("über"));
        assert!(!german().iter().any(|w| w.contains('|')));
        assert!(arabic().contains("في"));
        assert!(!arabic().iter().any(|w| w.starts_with('#')));
        assert!(spanish().contains("de") && russian().contains("и"));
    }
}
