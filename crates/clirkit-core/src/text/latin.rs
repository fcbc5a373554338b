//! Filters of Lucene's German, Spanish, French and Turkish analyzers: Jacques Savoy's light
//! stemmers (as in Lucene's `GermanLightStemmer`, `SpanishLightStemmer`, `FrenchLightStemmer`),
//! German umlaut normalization, French elision, and Turkish apostrophe handling and casing.
//!
//! The stemmers work on a character buffer and a length, like Lucene's: some rules rewrite
//! characters just past the new end, and that is only faithful with the same buffer discipline.

fn ends_with(s: &[char], len: usize, suffix: &str) -> bool {
    let n = suffix.chars().count();
    n <= len && s[len - n..len].iter().copied().eq(suffix.chars())
}

/// Lucene's `GermanNormalizationFilter`: ß -> ss, umlauts folded, and "ae", "oe", "ue" to "a",
/// "o", "u" (the German2 Snowball heuristics).
pub fn german_normalize(s: &mut Vec<char>) {
    #[derive(PartialEq)]
    enum State {
        Ordinary,
        Vowel,
        Umlaut,
    }
    let mut state = State::Ordinary;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            'a' | 'o' => state = State::Umlaut,
            'u' => {
                state = if state == State::Ordinary {
                    State::Umlaut
                } else {
                    State::Vowel
                }
            }
            'e' => {
                let delete = state == State::Umlaut;
                state = State::Vowel;
                if delete {
                    s.remove(i);
                    continue;
                }
            }
            'i' | 'q' | 'y' => state = State::Vowel,
            'ä' => {
                s[i] = 'a';
                state = State::Vowel;
            }
            'ö' => {
                s[i] = 'o';
                state = State::Vowel;
            }
            'ü' => {
                s[i] = 'u';
                state = State::Vowel;
            }
            'ß' => {
                s[i] = 's';
                s.insert(i + 1, 's');
                i += 1;
                state = State::Ordinary;
            }
            _ => state = State::Ordinary,
        }
        i += 1;
    }
}

/// Lucene's `GermanLightStemmer`.
pub fn german_light_stem(s: &mut Vec<char>) {
    for c in s.iter_mut() {
        *c = match *c {
            'ä' | 'à' | 'á' | 'â' => 'a',
            'ö' | 'ò' | 'ó' | 'ô' => 'o',
            'ï' | 'ì' | 'í' | 'î' => 'i',
            'ü' | 'ù' | 'ú' | 'û' => 'u',
            c => c,
        };
    }
    let st_ending =
        |c: char| matches!(c, 'b' | 'd' | 'f' | 'g' | 'h' | 'k' | 'l' | 'm' | 'n' | 't');
    let step1 = |s: &[char], len: usize| -> usize {
        if len > 5 && ends_with(s, len, "ern") {
            return len - 3;
        }
        if len > 4 && s[len - 2] == 'e' && matches!(s[len - 1], 'm' | 'n' | 'r' | 's') {
            return len - 2;
        }
        if len > 3 && s[len - 1] == 'e' {
            return len - 1;
        }
        if len > 3 && s[len - 1] == 's' && st_ending(s[len - 2]) {
            return len - 1;
        }
        len
    };
    let step2 = |s: &[char], len: usize| -> usize {
        if len > 5 && ends_with(s, len, "est") {
            return len - 3;
        }
        if len > 4 && s[len - 2] == 'e' && matches!(s[len - 1], 'r' | 'n') {
            return len - 2;
        }
        if len > 4 && s[len - 2] == 's' && s[len - 1] == 't' && st_ending(s[len - 3]) {
            return len - 2;
        }
        len
    };
    let len = step2(s, step1(s, s.len()));
    s.truncate(len);
}

/// Lucene's `SpanishLightStemmer`.
pub fn spanish_light_stem(s: &mut Vec<char>) {
    let len = s.len();
    if len < 5 {
        return;
    }
    for c in s.iter_mut() {
        *c = match *c {
            'à' | 'á' | 'â' | 'ä' => 'a',
            'ò' | 'ó' | 'ô' | 'ö' => 'o',
            'è' | 'é' | 'ê' | 'ë' => 'e',
            'ù' | 'ú' | 'û' | 'ü' => 'u',
            'ì' | 'í' | 'î' | 'ï' => 'i',
            c => c,
        };
    }
    let new_len = match s[len - 1] {
        'o' | 'a' | 'e' => len - 1,
        's' if s[len - 2] == 'e' && s[len - 3] == 's' && s[len - 4] == 'e' => len - 2,
        's' if s[len - 2] == 'e' && s[len - 3] == 'c' => {
            s[len - 3] = 'z';
            len - 2
        }
        's' if matches!(s[len - 2], 'o' | 'a' | 'e') => len - 2,
        _ => len,
    };
    s.truncate(new_len);
}

/// Lucene's `ElisionFilter`: an article and its apostrophe removed from the token's start.
fn elision<'a>(token: &'a str, articles: &[&str]) -> &'a str {
    if let Some(pos) = token.find(['\'', '\u{2019}']) {
        let article = &token[..pos];
        if articles.iter().any(|a| a.eq_ignore_ascii_case(article)) {
            let apostrophe_len = token[pos..].chars().next().map_or(1, char::len_utf8);
            return &token[pos + apostrophe_len..];
        }
    }
    token
}

/// French elision: "l'avion" -> "avion".
pub fn french_elision(token: &str) -> &str {
    const ARTICLES: &[&str] = &[
        "l", "m", "t", "qu", "n", "s", "j", "d", "c", "jusqu", "quoiqu", "lorsqu", "puisqu",
    ];
    elision(token, ARTICLES)
}

/// Italian elision (Lucene's `ItalianAnalyzer` articles): "dell'arte" -> "arte".
pub fn italian_elision(token: &str) -> &str {
    const ARTICLES: &[&str] = &[
        "c", "l", "all", "dall", "dell", "nell", "sull", "coll", "pell", "gl", "agl", "dagl",
        "degl", "negl", "sugl", "un", "m", "t", "s", "v", "d",
    ];
    elision(token, ARTICLES)
}

/// Lucene's `FrenchLightStemmer`.
pub fn french_light_stem(s: &mut Vec<char>) {
    let len = french_stem_len(s.as_mut_slice());
    s.truncate(len);
}

fn french_stem_len(s: &mut [char]) -> usize {
    let mut len = s.len();
    if len > 5 && s[len - 1] == 'x' {
        if s[len - 3] == 'a' && s[len - 2] == 'u' && s[len - 4] != 'e' {
            s[len - 2] = 'l';
        }
        len -= 1;
    }
    if len > 3 && s[len - 1] == 'x' {
        len -= 1;
    }
    if len > 3 && s[len - 1] == 's' {
        len -= 1;
    }
    if len > 9 && ends_with(s, len, "issement") {
        len -= 6;
        s[len - 1] = 'r';
        return french_norm(s, len);
    }
    if len > 8 && ends_with(s, len, "issant") {
        len -= 4;
        s[len - 1] = 'r';
        return french_norm(s, len);
    }
    if len > 6 && ends_with(s, len, "ement") {
        len -= 4;
        if len > 3 && ends_with(s, len, "ive") {
            len -= 1;
            s[len - 1] = 'f';
        }
        return french_norm(s, len);
    }
    if len > 11 && ends_with(s, len, "ficatrice") {
        len -= 5;
        s[len - 2] = 'e';
        s[len - 1] = 'r';
        return french_norm(s, len);
    }
    if len > 10 && ends_with(s, len, "ficateur") {
        len -= 4;
        s[len - 2] = 'e';
        s[len - 1] = 'r';
        return french_norm(s, len);
    }
    if len > 9 && ends_with(s, len, "catrice") {
        len -= 3;
        s[len - 4] = 'q';
        s[len - 3] = 'u';
        s[len - 2] = 'e';
        return french_norm(s, len);
    }
    if len > 8 && ends_with(s, len, "cateur") {
        len -= 2;
        s[len - 4] = 'q';
        s[len - 3] = 'u';
        s[len - 2] = 'e';
        s[len - 1] = 'r';
        return french_norm(s, len);
    }
    if len > 8 && ends_with(s, len, "atrice") {
        len -= 4;
        s[len - 2] = 'e';
        s[len - 1] = 'r';
        return french_norm(s, len);
    }
    if len > 7 && ends_with(s, len, "ateur") {
        len -= 3;
        s[len - 2] = 'e';
        s[len - 1] = 'r';
        return french_norm(s, len);
    }
    if len > 6 && ends_with(s, len, "trice") {
        len -= 1;
        s[len - 3] = 'e';
        s[len - 2] = 'u';
        s[len - 1] = 'r';
    }
    if len > 5 && ends_with(s, len, "ième") {
        return french_norm(s, len - 4);
    }
    if len > 7 && ends_with(s, len, "teuse") {
        len -= 2;
        s[len - 1] = 'r';
        return french_norm(s, len);
    }
    if len > 6 && ends_with(s, len, "teur") {
        len -= 1;
        s[len - 1] = 'r';
        return french_norm(s, len);
    }
    if len > 5 && ends_with(s, len, "euse") {
        return french_norm(s, len - 2);
    }
    if len > 8 && ends_with(s, len, "ère") {
        len -= 1;
        s[len - 2] = 'e';
        return french_norm(s, len);
    }
    if len > 7 && ends_with(s, len, "ive") {
        len -= 1;
        s[len - 1] = 'f';
        return french_norm(s, len);
    }
    if len > 4 && (ends_with(s, len, "folle") || ends_with(s, len, "molle")) {
        len -= 2;
        s[len - 1] = 'u';
        return french_norm(s, len);
    }
    if len > 9 && ends_with(s, len, "nnelle") {
        return french_norm(s, len - 5);
    }
    if len > 9 && ends_with(s, len, "nnel") {
        return french_norm(s, len - 3);
    }
    if len > 4 && ends_with(s, len, "ète") {
        len -= 1;
        s[len - 2] = 'e';
    }
    if len > 8 && ends_with(s, len, "ique") {
        len -= 4;
    }
    if len > 8 && ends_with(s, len, "esse") {
        return french_norm(s, len - 3);
    }
    if len > 7 && ends_with(s, len, "inage") {
        return french_norm(s, len - 3);
    }
    if len > 9 && ends_with(s, len, "isation") {
        len -= 7;
        if len > 5 && ends_with(s, len, "ual") {
            s[len - 2] = 'e';
        }
        return french_norm(s, len);
    }
    if len > 9 && ends_with(s, len, "isateur") {
        return french_norm(s, len - 7);
    }
    if len > 8 && (ends_with(s, len, "ation") || ends_with(s, len, "ition")) {
        return french_norm(s, len - 5);
    }
    french_norm(s, len)
}

fn french_norm(s: &mut [char], mut len: usize) -> usize {
    if len > 4 {
        for c in s[..len].iter_mut() {
            *c = match *c {
                'à' | 'á' | 'â' => 'a',
                'ô' => 'o',
                'è' | 'é' | 'ê' => 'e',
                'ù' | 'û' => 'u',
                'î' => 'i',
                'ç' => 'c',
                c => c,
            };
        }
        // Collapse doubled letters, shifting the rest of the word left.
        let mut ch = s[0];
        let mut i = 1;
        while i < len {
            if s[i] == ch && ch.is_alphabetic() {
                s.copy_within(i + 1..len, i);
                len -= 1;
            } else {
                ch = s[i];
                i += 1;
            }
        }
    }
    if len > 4 && ends_with(s, len, "ie") {
        len -= 2;
    }
    if len > 4 {
        if s[len - 1] == 'r' {
            len -= 1;
        }
        if s[len - 1] == 'e' {
            len -= 1;
        }
        if s[len - 1] == 'e' {
            len -= 1;
        }
        if s[len - 1] == s[len - 2] && s[len - 1].is_alphabetic() {
            len -= 1;
        }
    }
    len
}

/// Lucene's `ApostropheFilter` (Turkish): drops an apostrophe and everything after it, the
/// suffixes Turkish attaches to proper nouns ("Türkiye'de" -> "Türkiye").
pub fn strip_after_apostrophe(token: &str) -> &str {
    match token.find(['\'', '\u{2019}']) {
        Some(pos) => &token[..pos],
        None => token,
    }
}

/// Lucene's `TurkishLowerCaseFilter`: I -> ı, İ -> i, and I followed by a combining dot above
/// -> i (the dot removed); everything else as `Character.toLowerCase`.
pub fn turkish_lowercase(token: &str, buf: &mut Vec<char>) {
    const COMBINING_DOT_ABOVE: char = '\u{0307}';
    let mut chars = token.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            'I' => {
                if chars.peek() == Some(&COMBINING_DOT_ABOVE) {
                    chars.next();
                    buf.push('i');
                } else {
                    buf.push('ı');
                }
            }
            '\u{0130}' => {
                buf.push('i');
                if chars.peek() == Some(&COMBINING_DOT_ABOVE) {
                    chars.next();
                }
            }
            c => buf.push(super::tokenize::lower(c)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(f: fn(&mut Vec<char>), word: &str) -> String {
        let mut buf: Vec<char> = word.chars().collect();
        f(&mut buf);
        buf.into_iter().collect()
    }

    #[test]
    fn german() {
        // From Lucene's TestGermanNormalizationFilter and TestGermanLightStemFilter.
        assert_eq!(apply(german_normalize, "weißbier"), "weissbier");
        assert_eq!(apply(german_normalize, "schaltflächen"), "schaltflachen");
        assert_eq!(apply(german_normalize, "schaltflaechen"), "schaltflachen");
        assert_eq!(apply(german_normalize, "mauer"), "mauer");
        assert_eq!(apply(german_normalize, "quelle"), "quelle");
        assert_eq!(apply(german_light_stem, "häuser"), "haus");
        assert_eq!(apply(german_light_stem, "kinder"), "kind");
        assert_eq!(apply(german_light_stem, "schönsten"), "schon");
    }

    #[test]
    fn spanish() {
        // From Lucene's TestSpanishLightStemFilter vocabulary.
        assert_eq!(apply(spanish_light_stem, "chicas"), "chic");
        assert_eq!(apply(spanish_light_stem, "luces"), "luz");
        assert_eq!(apply(spanish_light_stem, "casas"), "cas");
        assert_eq!(apply(spanish_light_stem, "rosa"), "rosa");
        assert_eq!(apply(spanish_light_stem, "naciones"), "nacion");
    }

    #[test]
    fn french() {
        assert_eq!(french_elision("l'avion"), "avion");
        assert_eq!(french_elision("L\u{2019}avion"), "avion");
        assert_eq!(french_elision("aujourd'hui"), "aujourd'hui");
        // From Lucene's TestFrenchLightStemFilter.
        assert_eq!(apply(french_light_stem, "chevaux"), "cheval");
        assert_eq!(apply(french_light_stem, "hiboux"), "hibou");
        assert_eq!(apply(french_light_stem, "chantés"), "chant");
        assert_eq!(apply(french_light_stem, "chanter"), "chant");
        assert_eq!(apply(french_light_stem, "chante"), "chant");
        assert_eq!(apply(french_light_stem, "baronnes"), "baron");
        assert_eq!(apply(french_light_stem, "barons"), "baron");
        assert_eq!(apply(french_light_stem, "baron"), "baron");
    }

    #[test]
    fn turkish() {
        assert_eq!(strip_after_apostrophe("Türkiye'de"), "Türkiye");
        let mut buf = Vec::new();
        turkish_lowercase("İSTANBUL IĞDIR", &mut buf);
        assert_eq!(buf.iter().collect::<String>(), "istanbul ığdır");
    }
}
