//! Lucene's Arabic and Persian filters: `ArabicNormalizer`, `ArabicStemmer` (light stemming after
//! Larkey, Ballesteros and Connell) and `PersianNormalizer`. Lucene 9.9's `PersianAnalyzer`,
//! which Pyserini runs, does not stem.

const ALEF: char = '\u{0627}';
const YEH: char = '\u{064A}';
const HEH: char = '\u{0647}';
const KAF: char = '\u{0643}';

/// Hamza-seated alefs to bare alef, alef maksura to yeh, teh marbuta to heh; harakat and
/// tatweel removed.
pub fn arabic_normalize(s: &mut Vec<char>) {
    s.retain(|&c| !matches!(c, '\u{0640}' | '\u{064B}'..='\u{0652}'));
    for c in s.iter_mut() {
        *c = match *c {
            '\u{0622}' | '\u{0623}' | '\u{0625}' => ALEF,
            '\u{0649}' => YEH,
            '\u{0629}' => HEH,
            c => c,
        };
    }
}

const ARABIC_PREFIXES: &[&str] = &[
    "\u{0627}\u{0644}",         // al
    "\u{0648}\u{0627}\u{0644}", // wal
    "\u{0628}\u{0627}\u{0644}", // bal
    "\u{0643}\u{0627}\u{0644}", // kal
    "\u{0641}\u{0627}\u{0644}", // fal
    "\u{0644}\u{0644}",         // ll
    "\u{0648}",                 // w
];

const ARABIC_SUFFIXES: &[&str] = &[
    "\u{0647}\u{0627}", // ha
    "\u{0627}\u{0646}", // an
    "\u{0627}\u{062A}", // at
    "\u{0648}\u{0646}", // wn
    "\u{064A}\u{0646}", // yn
    "\u{064A}\u{0647}", // yh
    "\u{064A}\u{0629}", // yp
    "\u{0647}",         // h
    "\u{0629}",         // p
    "\u{064A}",         // y
];

fn ends_with(s: &[char], suffix: &str) -> bool {
    let n = suffix.chars().count();
    n <= s.len() && s[s.len() - n..].iter().copied().eq(suffix.chars())
}

/// Removes one prefix (the first of the list that leaves enough of the word), then every
/// listed suffix in turn that leaves at least two characters.
pub fn arabic_stem(s: &mut Vec<char>) {
    for prefix in ARABIC_PREFIXES {
        let n = prefix.chars().count();
        // "w" needs a word of 4 characters or more; the others leave at least 2.
        let long_enough = if n == 1 {
            s.len() >= 4
        } else {
            s.len() >= n + 2
        };
        if long_enough && s[..n].iter().copied().eq(prefix.chars()) {
            s.drain(..n);
            break;
        }
    }
    strip_suffixes(s, ARABIC_SUFFIXES);
}

fn strip_suffixes(s: &mut Vec<char>, suffixes: &[&str]) {
    for suffix in suffixes {
        let n = suffix.chars().count();
        if s.len() >= n + 2 && ends_with(s, suffix) {
            s.truncate(s.len() - n);
        }
    }
}

/// Persian's letter variants to the Arabic forms the stopword list uses: farsi yeh and yeh
/// barree to yeh, keheh to kaf, heh-yeh and heh goal to heh; hamza above removed.
pub fn persian_normalize(s: &mut Vec<char>) {
    s.retain(|&c| c != '\u{0654}');
    for c in s.iter_mut() {
        *c = match *c {
            '\u{06CC}' | '\u{06D2}' => YEH,
            '\u{06A9}' => KAF,
            '\u{06C0}' | '\u{06C1}' => HEH,
            c => c,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(fs: &[fn(&mut Vec<char>)], word: &str) -> String {
        let mut buf: Vec<char> = word.chars().collect();
        for f in fs {
            f(&mut buf);
        }
        buf.into_iter().collect()
    }

    #[test]
    fn arabic_normalization() {
        // From Lucene's TestArabicNormalizationFilter.
        assert_eq!(apply(&[arabic_normalize], "آجن"), "اجن");
        assert_eq!(apply(&[arabic_normalize], "أحمد"), "احمد");
        assert_eq!(apply(&[arabic_normalize], "إعاذ"), "اعاذ");
        assert_eq!(apply(&[arabic_normalize], "بنى"), "بني");
        assert_eq!(apply(&[arabic_normalize], "فاطمة"), "فاطمه");
        assert_eq!(apply(&[arabic_normalize], "روبرـــــت"), "روبرت");
        assert_eq!(apply(&[arabic_normalize], "مَبنا"), "مبنا");
        assert_eq!(apply(&[arabic_normalize], "مبنًا"), "مبنا");
        assert_eq!(apply(&[arabic_normalize], "مبّنا"), "مبنا");
    }

    #[test]
    fn arabic_stemming() {
        // From Lucene's TestArabicStemFilter.
        let cases = [
            ("الحسن", "حسن"),
            ("والحسن", "حسن"),
            ("بالحسن", "حسن"),
            ("كالحسن", "حسن"),
            ("فالحسن", "حسن"),
            ("للاخر", "اخر"),
            ("وحسن", "حسن"),
            ("حسنها", "حسن"),
            ("ساهدان", "ساهد"),
            ("ساهدات", "ساهد"),
            ("ساهدون", "ساهد"),
            ("ساهدين", "ساهد"),
            ("ساهديه", "ساهد"),
            ("ساهدية", "ساهد"),
            ("ساهده", "ساهد"),
            ("ساهدة", "ساهد"),
            ("ساهدي", "ساهد"),
            ("وساهدون", "ساهد"),
            ("ساهدهات", "ساهد"),
            ("الو", "الو"),
            ("وح", "وح"),
            ("ال", "ال"),
            ("لل", "لل"),
        ];
        for (word, expected) in cases {
            assert_eq!(apply(&[arabic_stem], word), expected, "stem({word})");
        }
    }

    #[test]
    fn persian() {
        // From Lucene's TestPersianNormalizationFilter.
        assert_eq!(apply(&[persian_normalize], "های"), "هاي");
        assert_eq!(apply(&[persian_normalize], "كهٔ"), "كه");
        assert_eq!(apply(&[persian_normalize], "کتاب"), "كتاب");
    }
}
