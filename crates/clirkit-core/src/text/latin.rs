//! Filters of Lucene's German, Spanish, French, Italian, Portuguese and Turkish analyzers: Jacques Savoy's
//! light stemmers (as in Lucene's `GermanLightStemmer`, `SpanishLightStemmer`,
//! `FrenchLightStemmer`, `ItalianLightStemmer`, `PortugueseLightStemmer`), German umlaut normalization, French and Italian
//! elision, and Turkish apostrophe handling and casing.
//!
//! The stemmers work on a character buffer and a length, like Lucene's: some rules rewrite
//! characters just past the new end, and that is only faithful with the same buffer discipline.

fn ends_with(s: &[char], len: usize, suffix: &str) -> bool {
    let mut rest = s[..len].iter().rev();
    suffix.chars().rev().all(|c| rest.next() == Some(&c))
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

/// The Spanish and Italian light stemmers' accent folding: a, o, e, u, i with a grave, acute,
/// circumflex or diaeresis to the plain vowel.
fn fold_vowel_accents(s: &mut [char]) {
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
}

/// Lucene's `SpanishLightStemmer`.
pub fn spanish_light_stem(s: &mut Vec<char>) {
    let len = s.len();
    if len < 5 {
        return;
    }
    fold_vowel_accents(s);
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

/// Lucene's `ItalianLightStemmer`.
pub fn italian_light_stem(s: &mut Vec<char>) {
    let len = s.len();
    if len < 6 {
        return;
    }
    fold_vowel_accents(s);
    let before = s[len - 2];
    let new_len = match s[len - 1] {
        'e' | 'i' if matches!(before, 'i' | 'h') => len - 2,
        'a' | 'o' if before == 'i' => len - 2,
        'e' | 'i' | 'a' | 'o' => len - 1,
        _ => len,
    };
    s.truncate(new_len);
}

/// Lucene's `PortugueseLightStemmer`.
pub fn portuguese_light_stem(s: &mut Vec<char>) {
    if s.len() < 4 {
        return;
    }
    let len = s.len();
    let mut len = portuguese_remove_suffix(s, len);
    if len > 3 && s[len - 1] == 'a' {
        len = portuguese_norm_feminine(s, len);
    }
    if len > 4 && matches!(s[len - 1], 'e' | 'a' | 'o') {
        len -= 1;
    }
    s.truncate(len);
    for c in s.iter_mut() {
        *c = match *c {
            'à' | 'á' | 'â' | 'ä' | 'ã' => 'a',
            'ò' | 'ó' | 'ô' | 'ö' | 'õ' => 'o',
            'è' | 'é' | 'ê' | 'ë' => 'e',
            'ù' | 'ú' | 'û' | 'ü' => 'u',
            'ì' | 'í' | 'î' | 'ï' => 'i',
            'ç' => 'c',
            c => c,
        };
    }
}

fn portuguese_remove_suffix(s: &mut [char], len: usize) -> usize {
    if len > 4 && ends_with(s, len, "es") && matches!(s[len - 3], 'r' | 's' | 'l' | 'z') {
        return len - 2;
    }
    if len > 3 && ends_with(s, len, "ns") {
        s[len - 2] = 'm';
        return len - 1;
    }
    if len > 4 && (ends_with(s, len, "eis") || ends_with(s, len, "éis")) {
        s[len - 3] = 'e';
        s[len - 2] = 'l';
        return len - 1;
    }
    if len > 4 && ends_with(s, len, "ais") {
        s[len - 2] = 'l';
        return len - 1;
    }
    if len > 4 && ends_with(s, len, "óis") {
        s[len - 3] = 'o';
        s[len - 2] = 'l';
        return len - 1;
    }
    if len > 4 && ends_with(s, len, "is") {
        s[len - 1] = 'l';
        return len;
    }
    if len > 3 && (ends_with(s, len, "ões") || ends_with(s, len, "ães")) {
        s[len - 3] = 'ã';
        s[len - 2] = 'o';
        return len - 1;
    }
    if len > 6 && ends_with(s, len, "mente") {
        return len - 5;
    }
    if len > 3 && s[len - 1] == 's' {
        return len - 1;
    }
    len
}

fn portuguese_norm_feminine(s: &mut [char], len: usize) -> usize {
    if len > 7
        && ["inha", "iaca", "eira"]
            .iter()
            .any(|x| ends_with(s, len, x))
    {
        s[len - 1] = 'o';
        return len;
    }
    if len > 6 {
        if ["osa", "ica", "ida", "ada", "iva", "ama"]
            .iter()
            .any(|x| ends_with(s, len, x))
        {
            s[len - 1] = 'o';
            return len;
        }
        if ends_with(s, len, "ona") {
            s[len - 3] = 'ã';
            s[len - 2] = 'o';
            return len - 1;
        }
        if ends_with(s, len, "ora") {
            return len - 1;
        }
        if ends_with(s, len, "esa") {
            s[len - 3] = 'ê';
            return len - 1;
        }
        if ends_with(s, len, "na") {
            s[len - 1] = 'o';
            return len;
        }
    }
    len
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

/// One of the French stemmer's suffix rules: a word longer than `min` chars that ends with
/// `suffix` loses `cut` chars, and the last chars of what is left are overwritten with `tail`.
type SuffixRule = (usize, &'static str, usize, &'static str);

/// The first of `rules` (in order) that matches `s[..len]`, applied; returns the new length.
fn apply_first_rule(s: &mut [char], len: usize, rules: &[SuffixRule]) -> Option<usize> {
    let &(_, _, cut, tail) = rules
        .iter()
        .find(|&&(min, suffix, _, _)| len > min && ends_with(s, len, suffix))?;
    let len = len - cut;
    let from = len - tail.chars().count();
    for (slot, c) in s[from..len].iter_mut().zip(tail.chars()) {
        *slot = c;
    }
    Some(len)
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
    if let Some(len) = apply_first_rule(s, len, &[(9, "issement", 6, "r"), (8, "issant", 4, "r")]) {
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
    const AGENT_RULES: &[SuffixRule] = &[
        (11, "ficatrice", 5, "er"),
        (10, "ficateur", 4, "er"),
        (9, "catrice", 3, "quer"),
        (8, "cateur", 2, "quer"),
        (8, "atrice", 4, "er"),
        (7, "ateur", 3, "er"),
    ];
    if let Some(len) = apply_first_rule(s, len, AGENT_RULES) {
        return french_norm(s, len);
    }
    if len > 6 && ends_with(s, len, "trice") {
        len -= 1;
        s[len - 3] = 'e';
        s[len - 2] = 'u';
        s[len - 1] = 'r';
    }
    const ENDING_RULES: &[SuffixRule] = &[
        (5, "ième", 4, ""),
        (7, "teuse", 2, "r"),
        (6, "teur", 1, "r"),
        (5, "euse", 2, ""),
        (8, "ère", 1, "er"),
        (7, "ive", 1, "f"),
        (4, "folle", 2, "u"),
        (4, "molle", 2, "u"),
        (9, "nnelle", 5, ""),
        (9, "nnel", 3, ""),
    ];
    if let Some(len) = apply_first_rule(s, len, ENDING_RULES) {
        return french_norm(s, len);
    }
    if len > 4 && ends_with(s, len, "ète") {
        len -= 1;
        s[len - 2] = 'e';
    }
    if len > 8 && ends_with(s, len, "ique") {
        len -= 4;
    }
    if let Some(len) = apply_first_rule(s, len, &[(8, "esse", 3, ""), (7, "inage", 3, "")]) {
        return french_norm(s, len);
    }
    if len > 9 && ends_with(s, len, "isation") {
        len -= 7;
        if len > 5 && ends_with(s, len, "ual") {
            s[len - 2] = 'e';
        }
        return french_norm(s, len);
    }
    const NOUN_RULES: &[SuffixRule] = &[
        (9, "isateur", 7, ""),
        (8, "ation", 5, ""),
        (8, "ition", 5, ""),
    ];
    let len = apply_first_rule(s, len, NOUN_RULES).unwrap_or(len);
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
    fn italian() {
        assert_eq!(italian_elision("dell'arte"), "arte");
        assert_eq!(apply(italian_light_stem, "ragazzi"), "ragazz");
        assert_eq!(apply(italian_light_stem, "ragazza"), "ragazz");
        assert_eq!(apply(italian_light_stem, "banche"), "banc");
        assert_eq!(apply(italian_light_stem, "cittadini"), "cittadin");
        assert_eq!(apply(italian_light_stem, "casa"), "casa");
    }

    #[test]
    fn portuguese() {
        let cases = [
            ("homens", "homem"),
            ("papéis", "papel"),
            ("canções", "canca"),
            ("brasileiras", "brasileir"),
            ("rapidamente", "rapid"),
        ];
        for (word, expected) in cases {
            assert_eq!(apply(portuguese_light_stem, word), expected, "{word}");
        }
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
