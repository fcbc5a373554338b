//! Lucene's Hindi and Bengali chain filters: `IndicNormalizer` (canonical composition of Indic
//! letters that Unicode normalization leaves alone), `HindiNormalizer` (Pingali and Varma's
//! spelling-variant folding with Larkey et al.'s additions), `HindiStemmer` (Ramanathan and Rao's
//! light stemmer), `BengaliNormalizer` (UzZaman and Khan's phonetic folding) and `BengaliStemmer`
//! (Sengupta and Chaudhuri's suffix list with Savoy's light-stemmer rules).

const DEVANAGARI: u16 = 1;
const BENGALI: u16 = 2;
const GURMUKHI: u16 = 4;
const GUJARATI: u16 = 8;
const ORIYA: u16 = 16;
const TAMIL: u16 = 32;
const TELUGU: u16 = 64;
const KANNADA: u16 = 128;
const MALAYALAM: u16 = 256;

/// Marks "zero-width joiner" in the third column of [`DECOMPOSITIONS`].
const ZWJ: i16 = 0xFF;

/// (first, second, third or -1, composed, scripts): offsets into each script's 128-character
/// block. From Unicode 5.2 chapter 6 and http://ldc.upenn.edu/myl/IndianScriptsUnicode.html.
#[rustfmt::skip]
const DECOMPOSITIONS: &[(u8, u8, i16, u8, u16)] = &[
    (0x05, 0x3E, 0x45, 0x11, DEVANAGARI | GUJARATI),
    (0x05, 0x3E, 0x46, 0x12, DEVANAGARI),
    (0x05, 0x3E, 0x47, 0x13, DEVANAGARI | GUJARATI),
    (0x05, 0x3E, 0x48, 0x14, DEVANAGARI | GUJARATI),
    (0x05, 0x3E, -1, 0x06, DEVANAGARI | BENGALI | GURMUKHI | GUJARATI | ORIYA),
    (0x05, 0x45, -1, 0x72, DEVANAGARI),
    (0x05, 0x45, -1, 0x0D, GUJARATI),
    (0x05, 0x46, -1, 0x04, DEVANAGARI),
    (0x05, 0x47, -1, 0x0F, GUJARATI),
    (0x05, 0x48, -1, 0x10, GURMUKHI | GUJARATI),
    (0x05, 0x49, -1, 0x11, DEVANAGARI | GUJARATI),
    (0x05, 0x4A, -1, 0x12, DEVANAGARI),
    (0x05, 0x4B, -1, 0x13, DEVANAGARI | GUJARATI),
    (0x05, 0x4C, -1, 0x14, DEVANAGARI | GURMUKHI | GUJARATI),
    (0x06, 0x45, -1, 0x11, DEVANAGARI | GUJARATI),
    (0x06, 0x46, -1, 0x12, DEVANAGARI),
    (0x06, 0x47, -1, 0x13, DEVANAGARI | GUJARATI),
    (0x06, 0x48, -1, 0x14, DEVANAGARI | GUJARATI),
    (0x07, 0x57, -1, 0x08, MALAYALAM),
    (0x09, 0x41, -1, 0x0A, DEVANAGARI),
    (0x09, 0x57, -1, 0x0A, TAMIL | MALAYALAM),
    (0x0E, 0x46, -1, 0x10, MALAYALAM),
    (0x0F, 0x45, -1, 0x0D, DEVANAGARI),
    (0x0F, 0x46, -1, 0x0E, DEVANAGARI),
    (0x0F, 0x47, -1, 0x10, DEVANAGARI),
    (0x0F, 0x57, -1, 0x10, ORIYA),
    (0x12, 0x3E, -1, 0x13, MALAYALAM),
    (0x12, 0x4C, -1, 0x14, TELUGU | KANNADA),
    (0x12, 0x55, -1, 0x13, TELUGU),
    (0x12, 0x57, -1, 0x14, TAMIL | MALAYALAM),
    (0x13, 0x57, -1, 0x14, ORIYA),
    (0x15, 0x3C, -1, 0x58, DEVANAGARI),
    (0x16, 0x3C, -1, 0x59, DEVANAGARI | GURMUKHI),
    (0x17, 0x3C, -1, 0x5A, DEVANAGARI | GURMUKHI),
    (0x1C, 0x3C, -1, 0x5B, DEVANAGARI | GURMUKHI),
    (0x21, 0x3C, -1, 0x5C, DEVANAGARI | BENGALI | ORIYA),
    (0x22, 0x3C, -1, 0x5D, DEVANAGARI | BENGALI | ORIYA),
    (0x23, 0x4D, ZWJ, 0x7A, MALAYALAM),
    (0x24, 0x4D, ZWJ, 0x4E, BENGALI),
    (0x28, 0x3C, -1, 0x29, DEVANAGARI),
    (0x28, 0x4D, ZWJ, 0x7B, MALAYALAM),
    (0x2B, 0x3C, -1, 0x5E, DEVANAGARI | GURMUKHI),
    (0x2F, 0x3C, -1, 0x5F, DEVANAGARI | BENGALI),
    (0x2C, 0x41, 0x41, 0x0B, TELUGU),
    (0x30, 0x3C, -1, 0x31, DEVANAGARI),
    (0x30, 0x4D, ZWJ, 0x7C, MALAYALAM),
    (0x32, 0x4D, ZWJ, 0x7D, MALAYALAM),
    (0x33, 0x3C, -1, 0x34, DEVANAGARI),
    (0x33, 0x4D, ZWJ, 0x7E, MALAYALAM),
    (0x35, 0x41, -1, 0x2E, TELUGU),
    (0x3E, 0x45, -1, 0x49, DEVANAGARI | GUJARATI),
    (0x3E, 0x46, -1, 0x4A, DEVANAGARI),
    (0x3E, 0x47, -1, 0x4B, DEVANAGARI | GUJARATI),
    (0x3E, 0x48, -1, 0x4C, DEVANAGARI | GUJARATI),
    (0x3F, 0x55, -1, 0x40, KANNADA),
    (0x41, 0x41, -1, 0x42, GURMUKHI),
    (0x46, 0x3E, -1, 0x4A, TAMIL | MALAYALAM),
    (0x46, 0x42, 0x55, 0x4B, KANNADA),
    (0x46, 0x42, -1, 0x4A, KANNADA),
    (0x46, 0x46, -1, 0x48, MALAYALAM),
    (0x46, 0x55, -1, 0x47, TELUGU | KANNADA),
    (0x46, 0x56, -1, 0x48, TELUGU | KANNADA),
    (0x46, 0x57, -1, 0x4C, TAMIL | MALAYALAM),
    (0x47, 0x3E, -1, 0x4B, BENGALI | ORIYA | TAMIL | MALAYALAM),
    (0x47, 0x57, -1, 0x4C, BENGALI | ORIYA),
    (0x4A, 0x55, -1, 0x4B, KANNADA),
    (0x72, 0x3F, -1, 0x07, GURMUKHI),
    (0x72, 0x40, -1, 0x08, GURMUKHI),
    (0x72, 0x47, -1, 0x0F, GURMUKHI),
    (0x73, 0x41, -1, 0x09, GURMUKHI),
    (0x73, 0x42, -1, 0x0A, GURMUKHI),
    (0x73, 0x4B, -1, 0x13, GURMUKHI),
];

/// The Indic script block of `c`: (block index 0..9, its flag, offset in the block).
fn indic_block(c: char) -> Option<(u32, u16, i16)> {
    let code = c as u32;
    if !(0x0900..0x0D80).contains(&code) {
        return None;
    }
    let block = (code - 0x0900) / 0x80;
    Some((block, 1 << block, ((code - 0x0900) % 0x80) as i16))
}

/// Composes decomposed Indic letters into their canonical single characters.
pub fn indic_normalize(s: &mut Vec<char>) {
    let mut pos = 0;
    while pos < s.len() {
        if let Some((block0, flag, ch0)) = indic_block(s[pos]) {
            compose(s, pos, block0, flag, ch0);
        }
        pos += 1;
    }
}

fn compose(s: &mut Vec<char>, pos: usize, block0: u32, flag: u16, ch0: i16) {
    if pos + 1 >= s.len() {
        return;
    }
    let ch1 = match indic_block(s[pos + 1]) {
        Some((block1, _, ch1)) if block1 == block0 => ch1,
        _ => return,
    };
    let ch2 = match s.get(pos + 2) {
        Some('\u{200D}') => ZWJ,
        Some(&c) => match indic_block(c) {
            Some((block2, _, ch2)) if block2 == block0 => ch2,
            _ => -1,
        },
        None => -1,
    };
    let found = DECOMPOSITIONS.iter().find(|&&(c0, c1, c2, _, flags)| {
        c0 as i16 == ch0 && flags & flag != 0 && c1 as i16 == ch1 && (c2 < 0 || c2 == ch2)
    });
    if let Some(&(_, _, c2, composed, _)) = found {
        let base = 0x0900 + block0 * 0x80;
        s[pos] = char::from_u32(base + composed as u32).expect("Indic block character");
        let remove = if c2 >= 0 { 2 } else { 1 };
        s.drain(pos + 1..pos + 1 + remove);
    }
}

/// Folds Hindi spelling variants: nukta forms, chandrabindu and dead "n" to anusvara, long
/// vowels to short, ZWJ/ZWNJ and virama removed.
pub fn hindi_normalize(s: &mut Vec<char>) {
    let mut i = 0;
    while i < s.len() {
        let replacement = match s[i] {
            '\u{0928}' => {
                if s.get(i + 1) == Some(&'\u{094D}') {
                    s[i] = '\u{0902}';
                    s.remove(i + 1);
                }
                None
            }
            '\u{0901}' => Some('\u{0902}'),
            '\u{093C}' | '\u{200D}' | '\u{200C}' | '\u{094D}' => {
                s.remove(i);
                continue;
            }
            '\u{0929}' => Some('\u{0928}'),
            '\u{0931}' => Some('\u{0930}'),
            '\u{0934}' => Some('\u{0933}'),
            '\u{0958}' => Some('\u{0915}'),
            '\u{0959}' => Some('\u{0916}'),
            '\u{095A}' => Some('\u{0917}'),
            '\u{095B}' => Some('\u{091C}'),
            '\u{095C}' => Some('\u{0921}'),
            '\u{095D}' => Some('\u{0922}'),
            '\u{095E}' => Some('\u{092B}'),
            '\u{095F}' => Some('\u{092F}'),
            '\u{0945}' | '\u{0946}' => Some('\u{0947}'),
            '\u{0949}' | '\u{094A}' => Some('\u{094B}'),
            '\u{090D}' | '\u{090E}' => Some('\u{090F}'),
            '\u{0911}' | '\u{0912}' => Some('\u{0913}'),
            '\u{0972}' => Some('\u{0905}'),
            '\u{0906}' => Some('\u{0905}'),
            '\u{0908}' => Some('\u{0907}'),
            '\u{090A}' => Some('\u{0909}'),
            '\u{0960}' => Some('\u{090B}'),
            '\u{0961}' => Some('\u{090C}'),
            '\u{0910}' => Some('\u{090F}'),
            '\u{0914}' => Some('\u{0913}'),
            '\u{0940}' => Some('\u{093F}'),
            '\u{0942}' => Some('\u{0941}'),
            '\u{0944}' => Some('\u{0943}'),
            '\u{0963}' => Some('\u{0962}'),
            '\u{0948}' => Some('\u{0947}'),
            '\u{094C}' => Some('\u{094B}'),
            _ => None,
        };
        if let Some(c) = replacement {
            s[i] = c;
        }
        i += 1;
    }
}

/// Suffix groups of the Hindi light stemmer, longest first: a word longer than `min_len`
/// loses the first suffix of the group it ends with.
const HINDI_SUFFIXES: &[(usize, &[&str])] = &[
    (6, &["ाएंगी", "ाएंगे", "ाऊंगी", "ाऊंगा", "ाइयाँ", "ाइयों", "ाइयां"]),
    (
        5,
        &[
            "ाएगी",
            "ाएगा",
            "ाओगी",
            "ाओगे",
            "एंगी",
            "ेंगी",
            "एंगे",
            "ेंगे",
            "ूंगी",
            "ूंगा",
            "ातीं",
            "नाओं",
            "नाएं",
            "ताओं",
            "ताएं",
            "ियाँ",
            "ियों",
            "ियां",
        ],
    ),
    (
        4,
        &[
            "ाकर",
            "ाइए",
            "ाईं",
            "ाया",
            "ेगी",
            "ेगा",
            "ोगी",
            "ोगे",
            "ाने",
            "ाना",
            "ाते",
            "ाती",
            "ाता",
            "तीं",
            "ाओं",
            "ाएं",
            "ुओं",
            "ुएं",
            "ुआं",
        ],
    ),
    (
        3,
        &[
            "कर", "ाओ", "िए", "ाई", "ाए", "ने", "नी", "ना", "ते", "ीं", "ती", "ता", "ाँ", "ां", "ों", "ें",
        ],
    ),
    (2, &["ो", "े", "ू", "ु", "ी", "ि", "ा"]),
];

pub fn hindi_stem(s: &mut Vec<char>) {
    strip_first_suffix(s, HINDI_SUFFIXES);
}

/// Removes the first suffix, in group order, that the word ends with and that its group allows
/// (the word is longer than the group's `min_len`).
fn strip_first_suffix(s: &mut Vec<char>, groups: &[(usize, &[&str])]) {
    for &(min_len, suffixes) in groups {
        if s.len() <= min_len {
            continue;
        }
        for suffix in suffixes {
            let n = suffix.chars().count();
            if s[s.len() - n..].iter().copied().eq(suffix.chars()) {
                s.truncate(s.len() - n);
                return;
            }
        }
    }
}

/// Folds Bengali spelling variants as Lucene's `BengaliNormalizer` does, rule for rule: the
/// index arithmetic (which looks back two or five places for a hasanta) is Lucene's, quirks
/// included, so that the terms match Lucene's.
pub fn bengali_normalize(s: &mut Vec<char>) {
    const HASANTA: char = '\u{09CD}';
    // Signed, because a rule may step back before the start and the loop then moves on to 0.
    let mut i: isize = 0;
    while (i as usize) < s.len() {
        let at = i as usize;
        match s[at] {
            // Chandrabindu.
            '\u{0981}' => {
                s.remove(at);
                i -= 1;
            }
            '\u{09C0}' => s[at] = '\u{09BF}',
            '\u{09C2}' => s[at] = '\u{09C1}',
            // Ka + hasanta + vowel sign i: Lucene's "khio" rule.
            '\u{0995}' if s.get(at + 1) == Some(&HASANTA) && s.get(at + 2) == Some(&'\u{09BF}') => {
                if at == 0 {
                    s[0] = '\u{0996}';
                    s.drain(1..3);
                } else {
                    s[at + 1] = '\u{0996}';
                    s.remove(at + 2);
                }
            }
            // Nga to anusvara.
            '\u{0999}' => s[at] = '\u{0982}',
            // Ya-phala.
            '\u{09AF}' if at == 2 && s[1] == HASANTA => {
                s[1] = '\u{09C7}';
                if s.get(3) == Some(&'\u{09BE}') {
                    s.remove(3);
                }
                s.remove(2);
                i -= 1;
            }
            '\u{09AF}' if at >= 1 && s[at - 1] == HASANTA => {
                s.drain(at - 1..=at);
                i -= 2;
            }
            // Ba-phala.
            '\u{09AC}' if at >= 1 && s[at - 1] == HASANTA => {
                if at == 2 || (at >= 5 && s[at - 3] == HASANTA) {
                    s.drain(at - 1..=at);
                    i -= 2;
                } else if at >= 2 {
                    s[at - 1] = s[at - 2];
                    s.remove(at);
                    i -= 1;
                }
            }
            // Visarga.
            '\u{0983}' => {
                if at + 1 == s.len() {
                    if s.len() <= 3 {
                        s[at] = '\u{09B9}';
                    } else {
                        s.remove(at);
                    }
                } else {
                    s[at] = s[at + 1];
                }
            }
            '\u{09B6}' | '\u{09B7}' => s[at] = '\u{09B8}',
            '\u{09A3}' => s[at] = '\u{09A8}',
            '\u{09DC}' | '\u{09DD}' => s[at] = '\u{09B0}',
            '\u{09CE}' => s[at] = '\u{09A4}',
            _ => {}
        }
        i += 1;
    }
}

/// Suffix groups of Lucene's `BengaliStemmer`, longest first: a word longer than `min_len`
/// loses the first suffix of the group it ends with. `য়` is the precomposed U+09DF, which the
/// Indic normalizer produces from য + nukta.
const BENGALI_SUFFIXES: &[(usize, &[&str])] = &[
    (
        9,
        &[
            "িয়াছিলাম",
            "িতেছিলাম",
            "িতেছিলেন",
            "ইতেছিলেন",
            "িয়াছিলেন",
            "ইয়াছিলেন",
        ],
    ),
    (
        8,
        &[
            "িতেছিলি",
            "িতেছিলে",
            "িয়াছিলা",
            "িয়াছিলে",
            "িতেছিলা",
            "িয়াছিলি",
            "য়েদেরকে",
        ],
    ),
    (
        7,
        &[
            "িতেছিস",
            "িতেছেন",
            "িয়াছিস",
            "িয়াছেন",
            "েছিলাম",
            "েছিলেন",
            "েদেরকে",
        ],
    ),
    (
        6,
        &[
            "িতেছি",
            "িতেছা",
            "িতেছে",
            "ছিলাম",
            "ছিলেন",
            "িয়াছি",
            "িয়াছা",
            "িয়াছে",
            "েছিলে",
            "েছিলা",
            "য়েদের",
            "দেরকে",
        ],
    ),
    (
        5,
        &[
            "িলাম",
            "িলেন",
            "িতাম",
            "িতেন",
            "িবেন",
            "ছিলি",
            "ছিলে",
            "ছিলা",
            "তেছে",
            "িতেছ",
            "খানা",
            "খানি",
            "গুলো",
            "গুলি",
            "য়েরা",
            "েদের",
        ],
    ),
    (
        4,
        &[
            "লাম",
            "িলি",
            "ইলি",
            "িলে",
            "ইলে",
            "লেন",
            "িলা",
            "ইলা",
            "তাম",
            "িতি",
            "ইতি",
            "িতে",
            "ইতে",
            "তেন",
            "িতা",
            "িবা",
            "ইবা",
            "িবি",
            "ইবি",
            "বেন",
            "িবে",
            "ইবে",
            "ছেন",
            "য়োন",
            "য়ের",
            "েরা",
            "দের",
        ],
    ),
    (
        3,
        &[
            "িস", "েন", "লি", "লে", "লা", "তি", "তে", "তা", "বি", "বে", "বা", "ছি", "ছা", "ছে", "ুন",
            "ুক", "টা", "টি", "নি", "ের", "রা", "কে",
        ],
    ),
    (2, &["ি", "ী", "া", "ো", "ে", "ব", "ত"]),
];

pub fn bengali_stem(s: &mut Vec<char>) {
    strip_first_suffix(s, BENGALI_SUFFIXES);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::assert_maps;

    #[test]
    fn indic_normalization() {
        // From Lucene's TestIndicNormalizer.
        assert_maps(
            indic_normalize,
            &[
                ("अाॅअाॅ", "ऑऑ"),
                ("अाॆअाॆ", "ऒऒ"),
                ("अाेअाे", "ओओ"),
                ("अाैअाै", "औऔ"),
                ("अाअा", "आआ"),
                ("अाैर", "और"),
                ("ত্‍", "ৎ"),
            ],
        );
    }

    #[test]
    fn hindi_normalization() {
        // From Lucene's TestHindiNormalizer.
        assert_maps(
            hindi_normalize,
            &[
                ("अँगरेज़ी", "अंगरेजि"),
                ("अँगरेजी", "अंगरेजि"),
                ("अंग्रेज़ी", "अंगरेजि"),
                ("अंग्रेजी", "अंगरेजि"),
                ("अन्ग्रेज़ी", "अंगरेजि"),
                ("समझ", "समझ"),
            ],
        );
    }

    #[test]
    fn hindi_stemming() {
        // From Lucene's TestHindiStemmer.
        let cases = [
            ("लडका", "लडक"),
            ("लडके", "लडक"),
            ("लडकों", "लडक"),
            ("गुरु", "गुर"),
            ("गुरुओं", "गुर"),
            ("दोस्त", "दोस्त"),
            ("दोस्तों", "दोस्त"),
            ("लडकी", "लडक"),
            ("लडकियों", "लडक"),
            ("किताबें", "किताब"),
            ("खाना", "खा"),
            ("खाती", "खा"),
            ("खाते", "खा"),
            ("वापस", "वापस"),
        ];
        assert_maps(hindi_stem, &cases);
    }

    #[test]
    fn bengali_normalization() {
        // From Lucene's TestBengaliNormalizer. Its words carry decomposed nukta letters, so the
        // Indic composition runs first, as in the analyzer.
        let cases = [
            ("চাঁদ", "চাদ"),
            ("বাড়ী", "বারি"),
            ("তীর", "তির"),
            ("ভূল", "ভুল"),
            ("অনূপ", "অনুপ"),
            ("বাঙলা", "বাংলা"),
            ("ব্যাক্তি", "বেক্তি"),
            ("সন্ধ্যা", "সন্ধা"),
            ("স্বদেশ", "সদেস"),
            ("তত্ত্ব", "তত্ত"),
            ("বিশ্ব", "বিসস"),
            ("দুঃখ", "দুখখ"),
            ("উঃ", "উহ"),
            ("পুনঃ", "পুন"),
            ("কণা", "কনা"),
            ("শরীর", "সরির"),
            ("বাড়ি", "বারি"),
            ("", ""),
        ];
        assert_maps(
            |s| {
                indic_normalize(s);
                bengali_normalize(s);
            },
            &cases,
        );
    }

    #[test]
    fn bengali_normalization_handles_every_short_string() {
        // Every string of up to six letters over those the look-behind rules test (hasanta, ya,
        // ba, visarga, chandrabindu, ka, vowel signs): none may panic or grow.
        let alphabet: Vec<char> =
            "\u{0981}\u{0983}\u{0995}\u{09AF}\u{09AC}\u{09CD}\u{09BF}\u{09BE}"
                .chars()
                .collect();
        for len in 1..=6u32 {
            for mut code in 0..alphabet.len().pow(len) {
                let mut buf = Vec::with_capacity(len as usize);
                for _ in 0..len {
                    buf.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                bengali_normalize(&mut buf);
                assert!(buf.len() <= len as usize);
            }
        }
    }

    #[test]
    fn bengali_stemming() {
        // From Lucene's TestBengaliStemmer (composed first, as above).
        let cases = [
            ("করেছিলাম", "কর"),
            ("করিতেছিলে", "কর"),
            ("খাইতাম", "খাই"),
            ("যাইবে", "যা"),
            ("করছিলাম", "কর"),
            ("করছিলে", "কর"),
            ("করতাম", "কর"),
            ("যাব", "যা"),
            ("যাবে", "যা"),
            ("করি", "কর"),
            ("করো", "কর"),
            ("মেয়েরা", "মে"),
            ("মেয়েদেরকে", "মে"),
            ("মেয়েদের", "মে"),
            ("একটি", "এক"),
            ("মানুষগুলি", "মানুষ"),
            ("", ""),
        ];
        assert_maps(
            |s| {
                indic_normalize(s);
                bengali_stem(s);
            },
            &cases,
        );
    }
}
