//! Lucene's `StandardTokenizer`, approximated with UAX#29 word boundaries, and the per-character
//! filters every chain shares (Lucene's `LowerCaseFilter` and `DecimalDigitFilter`).
//!
//! Like Lucene, a token is a word-boundary segment holding a letter or digit; each Han ideograph
//! and each hiragana character is its own token (UAX#29 already breaks between them); katakana
//! and hangul runs stay whole; a run of South-East Asian "complex context" letters (Thai, Lao,
//! Khmer, Myanmar) is one token; a token longer than 255 characters is cut into 255-character
//! pieces; emoji (Extended_Pictographic) are tokens, as in Lucene 9.

use unicode_segmentation::UnicodeSegmentation;

/// Lucene's default maximum token length.
pub const MAX_TOKEN_CHARS: usize = 255;

/// The token types of Lucene's `StandardTokenizer` that the CJK bigram filter needs to tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Letters or digits of alphabetic scripts (Lucene's `<ALPHANUM>` and `<NUM>`).
    Word,
    Ideographic,
    Hiragana,
    Katakana,
    Hangul,
    /// A run of Thai/Lao/Khmer/Myanmar letters, unsegmented (Lucene's `<SOUTHEAST_ASIAN>`).
    SoutheastAsian,
}

impl TokenKind {
    /// Scripts written without spaces that the CJK bigram filter joins into bigrams.
    pub fn is_cjk(self) -> bool {
        matches!(
            self,
            TokenKind::Ideographic | TokenKind::Hiragana | TokenKind::Katakana | TokenKind::Hangul
        )
    }
}

/// One token: its text and byte offsets in the analyzed string.
#[derive(Debug, Clone, Copy)]
pub struct Token<'a> {
    pub text: &'a str,
    pub kind: TokenKind,
    pub start: usize,
    pub end: usize,
}

fn in_ranges(c: char, ranges: &[(u32, u32)]) -> bool {
    let c = c as u32;
    ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi)
}

pub fn is_han(c: char) -> bool {
    in_ranges(
        c,
        &[
            (0x2E80, 0x2FDF),
            (0x3005, 0x3007),
            (0x3021, 0x3029),
            (0x3038, 0x303B),
            (0x3400, 0x4DBF),
            (0x4E00, 0x9FFF),
            (0xF900, 0xFAFF),
            (0x20000, 0x3FFFF),
        ],
    )
}

pub fn is_hiragana(c: char) -> bool {
    in_ranges(c, &[(0x3041, 0x309F), (0x1B001, 0x1B11F)])
}

pub fn is_katakana(c: char) -> bool {
    in_ranges(
        c,
        &[
            (0x30A0, 0x30FF),
            (0x31F0, 0x31FF),
            (0x32D0, 0x32FE),
            (0x3300, 0x3357),
            (0xFF66, 0xFF9F),
        ],
    )
}

pub fn is_hangul(c: char) -> bool {
    in_ranges(
        c,
        &[
            (0x1100, 0x11FF),
            (0x3130, 0x318F),
            (0xA960, 0xA97F),
            (0xAC00, 0xD7FF),
            (0xFFA0, 0xFFDC),
        ],
    )
}

/// Letters and marks of scripts written without spaces between words (Unicode line-break class
/// SA), excluding their digits and punctuation.
pub fn is_southeast_asian(c: char) -> bool {
    let scripts = [
        (0x0E01, 0x0E3A),
        (0x0E40, 0x0E4E),
        (0x0E81, 0x0ECF),
        (0x0EDC, 0x0EDF),
        (0x1000, 0x103F),
        (0x1050, 0x108F),
        (0x109A, 0x109F),
        (0x1780, 0x17D3),
        (0x17D7, 0x17D7),
        (0x17DC, 0x17DD),
        (0x1950, 0x197F),
        (0x1980, 0x19CF),
        (0x1A20, 0x1A7F),
        (0xA9E0, 0xA9EF),
        (0xAA60, 0xAADF),
    ];
    in_ranges(c, &scripts)
}

/// Unicode's Extended_Pictographic ranges: Lucene 9 keeps emoji as tokens.
pub fn is_pictographic(c: char) -> bool {
    in_ranges(
        c,
        &[
            (0x00A9, 0x00A9),
            (0x00AE, 0x00AE),
            (0x203C, 0x203C),
            (0x2049, 0x2049),
            (0x2122, 0x2122),
            (0x2139, 0x2139),
            (0x2194, 0x2199),
            (0x21A9, 0x21AA),
            (0x231A, 0x231B),
            (0x2328, 0x2328),
            (0x2388, 0x2388),
            (0x23CF, 0x23CF),
            (0x23E9, 0x23F3),
            (0x23F8, 0x23FA),
            (0x24C2, 0x24C2),
            (0x25AA, 0x25AB),
            (0x25B6, 0x25B6),
            (0x25C0, 0x25C0),
            (0x25FB, 0x25FE),
            (0x2600, 0x2605),
            (0x2607, 0x2612),
            (0x2614, 0x2685),
            (0x2690, 0x2705),
            (0x2708, 0x2712),
            (0x2714, 0x2714),
            (0x2716, 0x2716),
            (0x271D, 0x271D),
            (0x2721, 0x2721),
            (0x2728, 0x2728),
            (0x2733, 0x2734),
            (0x2744, 0x2744),
            (0x2747, 0x2747),
            (0x274C, 0x274C),
            (0x274E, 0x274E),
            (0x2753, 0x2755),
            (0x2757, 0x2757),
            (0x2763, 0x2767),
            (0x2795, 0x2797),
            (0x27A1, 0x27A1),
            (0x27B0, 0x27B0),
            (0x27BF, 0x27BF),
            (0x2934, 0x2935),
            (0x2B05, 0x2B07),
            (0x2B1B, 0x2B1C),
            (0x2B50, 0x2B50),
            (0x2B55, 0x2B55),
            (0x3030, 0x3030),
            (0x303D, 0x303D),
            (0x3297, 0x3297),
            (0x3299, 0x3299),
            (0x1F000, 0x1F0FF),
            (0x1F10D, 0x1F10F),
            (0x1F12F, 0x1F12F),
            (0x1F16C, 0x1F171),
            (0x1F17E, 0x1F17F),
            (0x1F18E, 0x1F18E),
            (0x1F191, 0x1F19A),
            (0x1F1AD, 0x1F1FF),
            (0x1F201, 0x1F20F),
            (0x1F21A, 0x1F21A),
            (0x1F22F, 0x1F22F),
            (0x1F232, 0x1F23A),
            (0x1F23C, 0x1F23F),
            (0x1F249, 0x1F3FA),
            (0x1F400, 0x1F53D),
            (0x1F546, 0x1F64F),
            (0x1F680, 0x1F6FF),
            (0x1F774, 0x1F77F),
            (0x1F7D5, 0x1F7FF),
            (0x1F80C, 0x1F80F),
            (0x1F848, 0x1F84F),
            (0x1F85A, 0x1F85F),
            (0x1F888, 0x1F88F),
            (0x1F8AE, 0x1F8FF),
            (0x1F90C, 0x1F93A),
            (0x1F93C, 0x1F945),
            (0x1F947, 0x1FAFF),
            (0x1FC00, 0x1FFFD),
        ],
    )
}

/// A letter or a decimal digit: what a word token needs (fractions such as '½' do not count).
fn is_word_char(c: char) -> bool {
    c.is_alphabetic() || c.is_ascii_digit() || is_decimal_digit(c)
}

fn classify(segment: &str) -> Option<TokenKind> {
    let first = segment.chars().next()?;
    // UAX#29 attaches combining marks to a preceding space; such a segment is no word.
    if first.is_whitespace() {
        return None;
    }
    if is_pictographic(first) {
        return Some(TokenKind::Word);
    }
    let c = segment.chars().find(|&c| is_word_char(c))?;
    // A segment mixing scripts (UAX#29 joins hangul or katakana with Latin letters) is a word.
    let all = |script: fn(char) -> bool| segment.chars().filter(|&c| is_word_char(c)).all(script);
    Some(if is_han(c) {
        TokenKind::Ideographic
    } else if is_hiragana(c) {
        TokenKind::Hiragana
    } else if is_katakana(c) && all(is_katakana) {
        TokenKind::Katakana
    } else if is_hangul(c) && all(is_hangul) {
        TokenKind::Hangul
    } else if is_southeast_asian(c) {
        TokenKind::SoutheastAsian
    } else {
        TokenKind::Word
    })
}

/// Calls `emit` for each token of `text`, in order.
///
/// Whitespace-separated chunks of pure ASCII take a fast path implementing the UAX#29 rules
/// that apply to ASCII; other chunks, with the whitespace before them, go through the full
/// UAX#29 segmenter. Both give the same tokens (a test checks it), since UAX#29 always breaks
/// around whitespace.
pub fn standard_tokens<'a>(text: &'a str, mut emit: impl FnMut(Token<'a>)) {
    let bytes = text.as_bytes();
    let mut pos = 0;
    // Start of the pending run of non-ASCII chunks, whitespace before them included.
    let mut unicode_from: Option<usize> = None;
    while pos < bytes.len() {
        let space_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_whitespace() {
            pos += 1;
        }
        let chunk_start = pos;
        while pos < bytes.len() && !bytes[pos].is_ascii_whitespace() {
            pos += 1;
        }
        if chunk_start == pos {
            break;
        }
        if bytes[chunk_start..pos].is_ascii() {
            if let Some(from) = unicode_from.take() {
                unicode_tokens(text, from, space_start, &mut emit);
            }
            ascii_tokens(text, chunk_start, pos, &mut emit);
        } else if unicode_from.is_none() {
            unicode_from = Some(space_start);
        }
    }
    if let Some(from) = unicode_from {
        unicode_tokens(text, from, bytes.len(), &mut emit);
    }
}

/// UAX#29 word-break classes of ASCII characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AsciiClass {
    Letter,
    Digit,
    /// '_' (ExtendNumLet): joins letters and digits.
    Underscore,
    /// ':' (MidLetter): inside a word between letters.
    MidLetter,
    /// '.' and '\'' (MidNumLet): between letters or between digits.
    MidNumLet,
    /// ',' and ';' (MidNum): between digits.
    MidNum,
    Other,
}

fn ascii_class(b: u8) -> AsciiClass {
    match b {
        b'a'..=b'z' | b'A'..=b'Z' => AsciiClass::Letter,
        b'0'..=b'9' => AsciiClass::Digit,
        b'_' => AsciiClass::Underscore,
        b':' => AsciiClass::MidLetter,
        b'.' | b'\'' => AsciiClass::MidNumLet,
        b',' | b';' => AsciiClass::MidNum,
        _ => AsciiClass::Other,
    }
}

/// Tokens of the ASCII text `text[start..end]` (rules WB5-WB13b of UAX#29).
fn ascii_tokens<'a>(text: &'a str, start: usize, end: usize, emit: &mut impl FnMut(Token<'a>)) {
    use AsciiClass::*;
    let bytes = text.as_bytes();
    let mut i = start;
    while i < end {
        let class = ascii_class(bytes[i]);
        if !matches!(class, Letter | Digit | Underscore) {
            i += 1;
            continue;
        }
        let token_start = i;
        let mut has_word_char = class != Underscore;
        let mut prev = class;
        i += 1;
        while i < end {
            let class = ascii_class(bytes[i]);
            match class {
                Letter | Digit | Underscore => {
                    has_word_char |= class != Underscore;
                    prev = class;
                    i += 1;
                }
                MidLetter | MidNumLet | MidNum if i + 1 < end => {
                    let next = ascii_class(bytes[i + 1]);
                    let between_letters = prev == Letter && next == Letter && class != MidNum;
                    let between_digits = prev == Digit && next == Digit && class != MidLetter;
                    if !(between_letters || between_digits) {
                        break;
                    }
                    prev = next;
                    i += 2;
                }
                _ => break,
            }
        }
        if has_word_char {
            emit_limited(text, token_start, i, TokenKind::Word, emit);
        }
    }
}

/// Tokens of `text[start..end]` by the full UAX#29 word segmentation.
fn unicode_tokens<'a>(text: &'a str, start: usize, end: usize, emit: &mut impl FnMut(Token<'a>)) {
    // A South-East Asian run spans several UAX#29 segments; it is held here until it ends.
    let mut run: Option<(usize, usize)> = None;
    for (offset, segment) in text[start..end].split_word_bound_indices() {
        let seg_start = start + offset;
        let seg_end = seg_start + segment.len();
        let kind = classify(segment);
        if kind == Some(TokenKind::SoutheastAsian) && segment.chars().all(is_southeast_asian) {
            run = match run {
                Some((s, e)) if e == seg_start => Some((s, seg_end)),
                Some((s, e)) => {
                    emit_limited(text, s, e, TokenKind::SoutheastAsian, emit);
                    Some((seg_start, seg_end))
                }
                None => Some((seg_start, seg_end)),
            };
            continue;
        }
        if let Some((s, e)) = run.take() {
            emit_limited(text, s, e, TokenKind::SoutheastAsian, emit);
        }
        if let Some(kind) = kind {
            emit_limited(text, seg_start, seg_end, kind, emit);
        }
    }
    if let Some((s, e)) = run {
        emit_limited(text, s, e, TokenKind::SoutheastAsian, emit);
    }
}

/// Emits `text[start..end]`, cut into pieces of at most [`MAX_TOKEN_CHARS`] characters.
fn emit_limited<'a>(
    text: &'a str,
    start: usize,
    end: usize,
    kind: TokenKind,
    emit: &mut impl FnMut(Token<'a>),
) {
    // A character is at least one byte: a short token needs no counting.
    if end - start <= MAX_TOKEN_CHARS {
        return emit(Token {
            text: &text[start..end],
            kind,
            start,
            end,
        });
    }
    let mut piece_start = start;
    let mut chars = 0;
    for (offset, _) in text[start..end].char_indices() {
        if chars == MAX_TOKEN_CHARS {
            let at = start + offset;
            emit(Token {
                text: &text[piece_start..at],
                kind,
                start: piece_start,
                end: at,
            });
            piece_start = at;
            chars = 0;
        }
        chars += 1;
    }
    emit(Token {
        text: &text[piece_start..end],
        kind,
        start: piece_start,
        end,
    });
}

/// Java's `Character.toLowerCase(int)`: a one-to-one mapping (unlike Rust's `to_lowercase`,
/// which maps 'İ' to two characters).
#[inline]
pub fn lower(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    if c == '\u{0130}' {
        return 'i';
    }
    let mut lowered = c.to_lowercase();
    match (lowered.next(), lowered.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// Appends the lowercased characters of `token` to `buf` (Lucene's `LowerCaseFilter`).
pub fn push_lowercase(token: &str, buf: &mut Vec<char>) {
    buf.extend(token.chars().map(lower));
}

/// The zero of every block of ten Unicode decimal digits (general category Nd) in the Basic
/// Multilingual Plane, plus the common supplementary ones.
const DIGIT_ZEROS: &[u32] = &[
    0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6, 0x0D66,
    0x0DE6, 0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0,
    0x11730, 0x118E0, 0x16A60, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E950,
];

/// The value of a non-ASCII decimal digit.
fn decimal_digit_value(c: char) -> Option<u8> {
    let code = c as u32;
    if code < 0x0660 {
        return None;
    }
    DIGIT_ZEROS
        .iter()
        .find(|&&zero| zero <= code && code < zero + 10)
        .map(|zero| (code - zero) as u8)
}

fn is_decimal_digit(c: char) -> bool {
    decimal_digit_value(c).is_some()
}

/// Lucene's `DecimalDigitFilter`: any decimal digit becomes its ASCII digit.
pub fn fold_decimal_digits(buf: &mut [char]) {
    for c in buf.iter_mut() {
        if let Some(value) = decimal_digit_value(*c) {
            *c = char::from(b'0' + value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<(String, TokenKind)> {
        let mut out = Vec::new();
        standard_tokens(text, |t| out.push((t.text.to_string(), t.kind)));
        out
    }

    fn texts(text: &str) -> Vec<String> {
        tokens(text).into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn words_numbers_and_punctuation() {
        // Cases from Lucene's TestStandardAnalyzer.
        assert_eq!(
            texts("Wha\u{0301}t's this thing do?"),
            ["Wha\u{0301}t's", "this", "thing", "do"]
        );
        assert_eq!(
            texts("U.S.A. 3.14 1,000 co-operate"),
            ["U.S.A", "3.14", "1,000", "co", "operate"]
        );
        assert_eq!(texts("   "), Vec::<String>::new());
    }

    #[test]
    fn cjk_tokens_by_script() {
        let t = tokens("中国abcカタカナひら한국어");
        let expect = [
            ("中", TokenKind::Ideographic),
            ("国", TokenKind::Ideographic),
            ("abc", TokenKind::Word),
            ("カタカナ", TokenKind::Katakana),
            ("ひ", TokenKind::Hiragana),
            ("ら", TokenKind::Hiragana),
            ("한국어", TokenKind::Hangul),
        ];
        let expect: Vec<_> = expect.iter().map(|&(s, k)| (s.to_string(), k)).collect();
        assert_eq!(t, expect);
    }

    #[test]
    fn thai_run_is_one_token() {
        assert_eq!(
            tokens("ภาษาไทย 123"),
            [
                ("ภาษาไทย".to_string(), TokenKind::SoutheastAsian),
                ("123".to_string(), TokenKind::Word)
            ]
        );
    }

    #[test]
    fn ascii_fast_path_equals_uax29() {
        // Random strings over letters, digits and every ASCII class the fast path knows.
        let alphabet: Vec<char> = "aZb09_.',:;-! \t\n\"é".chars().collect();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            let len = (state % 12) as usize;
            let text: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            let mut fast = Vec::new();
            standard_tokens(&text, |t| fast.push((t.start, t.end)));
            let mut full = Vec::new();
            unicode_tokens(&text, 0, text.len(), &mut |t: Token| {
                full.push((t.start, t.end))
            });
            assert_eq!(fast, full, "{text:?}");
        }
    }

    #[test]
    fn long_tokens_are_cut() {
        let long = "a".repeat(600);
        let lens: Vec<usize> = texts(&long).iter().map(|t| t.len()).collect();
        assert_eq!(lens, [255, 255, 90]);
    }

    #[test]
    fn fractions_are_not_words_but_emoji_are() {
        assert_eq!(texts("½ ™ ☆ 😀 x"), ["™", "😀", "x"]);
        // A harakah after a space is no token.
        assert_eq!(texts("a \u{064B}b"), ["a", "b"]);
    }

    #[test]
    fn lowercase_and_digits() {
        assert_eq!(lower('İ'), 'i');
        assert_eq!(lower('Σ'), 'σ');
        let mut buf: Vec<char> = "٣٤۵१२๓".chars().collect();
        fold_decimal_digits(&mut buf);
        assert_eq!(buf.iter().collect::<String>(), "345123");
    }
}
