//! Lucene's CJKAnalyzer filters: `CJKWidthFilter` (fullwidth ASCII to ASCII, halfwidth katakana
//! to fullwidth) and `CJKBigramFilter` (overlapping bigrams over adjacent Han, hiragana,
//! katakana and hangul characters; a character with no CJK neighbour stays a unigram).

/// Fullwidth forms of halfwidth katakana U+FF65..=U+FF9F.
#[rustfmt::skip]
const KANA_NORM: [u16; 59] = [
    0x30fb, 0x30f2, 0x30a1, 0x30a3, 0x30a5, 0x30a7, 0x30a9, 0x30e3, 0x30e5, 0x30e7, 0x30c3,
    0x30fc, 0x30a2, 0x30a4, 0x30a6, 0x30a8, 0x30aa, 0x30ab, 0x30ad, 0x30af, 0x30b1, 0x30b3,
    0x30b5, 0x30b7, 0x30b9, 0x30bb, 0x30bd, 0x30bf, 0x30c1, 0x30c4, 0x30c6, 0x30c8, 0x30ca,
    0x30cb, 0x30cc, 0x30cd, 0x30ce, 0x30cf, 0x30d2, 0x30d5, 0x30d8, 0x30db, 0x30de, 0x30df,
    0x30e0, 0x30e1, 0x30e2, 0x30e4, 0x30e6, 0x30e8, 0x30e9, 0x30ea, 0x30eb, 0x30ec, 0x30ed,
    0x30ef, 0x30f3, 0x3099, 0x309a,
];

/// The katakana a halfwidth (semi-)voiced sound mark turns `base` into, if any.
fn combine_mark(base: char, mark: char) -> Option<char> {
    let b = base as u32;
    let voiced = match b {
        0x30A6 => Some(0x30F4),
        0x30AB | 0x30AD | 0x30AF | 0x30B1 | 0x30B3 | 0x30B5 | 0x30B7 | 0x30B9 | 0x30BB | 0x30BD
        | 0x30BF | 0x30C1 | 0x30C4 | 0x30C6 | 0x30C8 | 0x30CF | 0x30D2 | 0x30D5 | 0x30D8
        | 0x30DB | 0x30FD => Some(b + 1),
        0x30EF..=0x30F2 => Some(b + 8),
        _ => None,
    };
    let semi_voiced = match b {
        0x30CF | 0x30D2 | 0x30D5 | 0x30D8 | 0x30DB => Some(b + 2),
        _ => None,
    };
    let combined = if mark == '\u{FF9E}' {
        voiced
    } else {
        semi_voiced
    };
    combined.and_then(char::from_u32)
}

/// Folds character widths in place.
pub fn fold_width(s: &mut Vec<char>) {
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let code = c as u32;
        if (0xFF01..=0xFF5E).contains(&code) {
            s[i] = char::from_u32(code - 0xFEE0).expect("ASCII");
        } else if (0xFF65..=0xFF9F).contains(&code) {
            let combined = if (c == '\u{FF9E}' || c == '\u{FF9F}') && i > 0 {
                combine_mark(s[i - 1], c)
            } else {
                None
            };
            match combined {
                Some(k) => {
                    s[i - 1] = k;
                    s.remove(i);
                    continue;
                }
                None => {
                    s[i] = char::from_u32(KANA_NORM[(code - 0xFF65) as usize] as u32)
                        .expect("katakana")
                }
            }
        }
        i += 1;
    }
}

/// Collects runs of adjacent CJK characters and turns them into bigrams.
#[derive(Default)]
pub struct Bigrammer {
    run: Vec<char>,
    run_end: Option<usize>,
    /// The term being emitted.
    term: String,
}

impl Bigrammer {
    /// Adds the characters of a CJK token spanning `start..end`; a gap since the previous one
    /// ends the current run first.
    pub fn push(&mut self, chars: &[char], start: usize, end: usize, emit: &mut impl FnMut(&str)) {
        if self.run_end != Some(start) {
            self.flush(emit);
        }
        self.run.extend_from_slice(chars);
        self.run_end = Some(end);
    }

    /// Emits the pending run: its bigrams, or the lone character.
    pub fn flush(&mut self, emit: &mut impl FnMut(&str)) {
        if self.run.len() == 1 {
            self.term.clear();
            self.term.push(self.run[0]);
            emit(&self.term);
        }
        for pair in self.run.windows(2) {
            self.term.clear();
            self.term.extend(pair);
            emit(&self.term);
        }
        self.run.clear();
        self.run_end = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_folding() {
        let mut s: Vec<char> = "ＡＢＣ１２３ｶﾞﾊﾟｷ".chars().collect();
        fold_width(&mut s);
        assert_eq!(s.iter().collect::<String>(), "ABC123ガパキ");
    }

    #[test]
    fn bigrams_and_unigrams() {
        let mut b = Bigrammer::default();
        let mut out: Vec<String> = Vec::new();
        let mut emit = |term: &str| out.push(term.to_string());
        let chars: Vec<char> = "一二三".chars().collect();
        b.push(&chars[0..1], 0, 3, &mut emit);
        b.push(&chars[1..2], 3, 6, &mut emit);
        b.push(&chars[2..3], 6, 9, &mut emit);
        b.push(&['四'], 10, 13, &mut emit);
        b.flush(&mut emit);
        assert_eq!(out, ["一二", "二三", "四"]);
    }
}
