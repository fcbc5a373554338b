//! Lucene's Greek filters: `GreekLowerCaseFilter` (lowercase, final sigma to sigma, tonos and
//! dialytika removed) and `GreekStemmer`, Georgios Ntais' stemmer ("Development of a Stemmer
//! for the Greek Language", 2006) as Lucene implements it.
//!
//! The stemmer keeps Lucene's buffer discipline (a character buffer and a length; some rules
//! grow the length back over characters left past the end) and reproduces its rule conditions
//! exactly, including those whose `&&`/`||` grouping differs from the paper, because index terms
//! must equal Lucene's.

/// Greek lowercasing with accents removed.
pub fn greek_lower(c: char) -> char {
    match c {
        '\u{03C2}' => '\u{03C3}',
        '\u{0386}' | '\u{03AC}' => '\u{03B1}',
        '\u{0388}' | '\u{03AD}' => '\u{03B5}',
        '\u{0389}' | '\u{03AE}' => '\u{03B7}',
        '\u{038A}' | '\u{03AA}' | '\u{03AF}' | '\u{03CA}' | '\u{0390}' => '\u{03B9}',
        '\u{038E}' | '\u{03AB}' | '\u{03CD}' | '\u{03CB}' | '\u{03B0}' => '\u{03C5}',
        '\u{038C}' | '\u{03CC}' => '\u{03BF}',
        '\u{038F}' | '\u{03CE}' => '\u{03C9}',
        '\u{03A2}' => '\u{03C2}',
        c => super::tokenize::lower(c),
    }
}

/// Stems a lowercased, accent-free Greek word in place.
pub fn stem(word: &mut Vec<char>) {
    let len = stem_len(word.as_mut_slice());
    word.truncate(len);
}

fn ew(s: &[char], len: usize, suffix: &str) -> bool {
    let n = suffix.chars().count();
    n <= len && s[len - n..len].iter().copied().eq(suffix.chars())
}

fn ew_any(s: &[char], len: usize, suffixes: &[&str]) -> bool {
    suffixes.iter().any(|x| ew(s, len, x))
}

fn is(s: &[char], len: usize, words: &[&str]) -> bool {
    words.iter().any(|w| s[..len].iter().copied().eq(w.chars()))
}

fn ends_with_vowel(s: &[char], len: usize) -> bool {
    len > 0 && matches!(s[len - 1], 'α' | 'ε' | 'η' | 'ι' | 'ο' | 'υ' | 'ω')
}

fn ends_with_vowel_no_y(s: &[char], len: usize) -> bool {
    len > 0 && matches!(s[len - 1], 'α' | 'ε' | 'η' | 'ι' | 'ο' | 'ω')
}

/// Writes `text` over the last characters of `s[..len]`.
fn put(s: &mut [char], len: usize, text: &str) {
    let n = text.chars().count();
    for (slot, c) in s[len - n..len].iter_mut().zip(text.chars()) {
        *slot = c;
    }
}

fn stem_len(s: &mut [char]) -> usize {
    let orig = s.len();
    if orig < 4 {
        return orig;
    }
    let mut len = orig;
    len = rule0(s, len);
    len = rule1(s, len);
    len = rule2(s, len);
    len = rule3(s, len);
    len = rule4(s, len);
    len = rule5(s, len);
    len = rule6(s, len);
    len = rule7(s, len);
    len = rule8(s, len);
    len = rule9(s, len);
    len = rule10(s, len);
    len = rule11(s, len);
    len = rule12(s, len);
    len = rule13(s, len);
    len = rule14(s, len);
    len = rule15(s, len);
    len = rule16(s, len);
    len = rule17(s, len);
    len = rule18(s, len);
    len = rule19(s, len);
    len = rule20(s, len);
    // The "long list" only when no short rule fired.
    if len == orig {
        len = rule21(s, len);
    }
    rule22(s, len)
}

fn rule0(s: &[char], len: usize) -> usize {
    if len > 9 && ew_any(s, len, &["καθεστωτοσ", "καθεστωτων"]) {
        return len - 4;
    }
    if len > 8 && ew_any(s, len, &["γεγονοτοσ", "γεγονοτων"]) {
        return len - 4;
    }
    if len > 8 && ew(s, len, "καθεστωτα") {
        return len - 3;
    }
    if len > 7 && ew_any(s, len, &["τατογιου", "τατογιων"]) {
        return len - 4;
    }
    if len > 7 && ew(s, len, "γεγονοτα") {
        return len - 3;
    }
    if len > 7 && ew(s, len, "καθεστωσ") {
        return len - 2;
    }
    if ew_any(
        s,
        len,
        &[
            "σκαγιου",
            "σκαγιων",
            "ολογιου",
            "ολογιων",
            "κρεατοσ",
            "κρεατων",
            "περατοσ",
            "περατων",
            "τερατοσ",
            "τερατων",
        ],
    ) {
        return len - 4;
    }
    if len > 6 && ew(s, len, "τατογια") {
        return len - 3;
    }
    if len > 6 && ew(s, len, "γεγονοσ") {
        return len - 2;
    }
    if len > 5 && ew_any(s, len, &["φαγιου", "φαγιων", "σογιου", "σογιων"])
    {
        return len - 4;
    }
    if len > 5 && ew_any(s, len, &["σκαγια", "ολογια", "κρεατα", "περατα", "τερατα"])
    {
        return len - 3;
    }
    if len > 4 && ew_any(s, len, &["φαγια", "σογια", "φωτοσ", "φωτων"]) {
        return len - 3;
    }
    if len > 4 && ew_any(s, len, &["κρεασ", "περασ", "τερασ"]) {
        return len - 2;
    }
    if len > 3 && ew(s, len, "φωτα") {
        return len - 2;
    }
    if len > 2 && ew(s, len, "φωσ") {
        return len - 1;
    }
    len
}

fn rule1(s: &[char], mut len: usize) -> usize {
    if len > 4 && ew_any(s, len, &["αδεσ", "αδων"]) {
        len -= 4;
        if !ew_any(
            s,
            len,
            &[
                "οκ",
                "μαμ",
                "μαν",
                "μπαμπ",
                "πατερ",
                "γιαγι",
                "νταντ",
                "κυρ",
                "θει",
                "πεθερ",
            ],
        ) {
            len += 2;
        }
    }
    len
}

fn rule2(s: &[char], mut len: usize) -> usize {
    if len > 4 && ew_any(s, len, &["εδεσ", "εδων"]) {
        len -= 4;
        if ew_any(
            s,
            len,
            &["οπ", "ιπ", "εμπ", "υπ", "γηπ", "δαπ", "κρασπ", "μιλ"],
        ) {
            len += 2;
        }
    }
    len
}

fn rule3(s: &[char], mut len: usize) -> usize {
    if len > 5 && ew_any(s, len, &["ουδεσ", "ουδων"]) {
        len -= 5;
        if ew_any(
            s,
            len,
            &[
                "αρκ",
                "καλιακ",
                "πεταλ",
                "λιχ",
                "πλεξ",
                "σκ",
                "σ",
                "φλ",
                "φρ",
                "βελ",
                "λουλ",
                "χν",
                "σπ",
                "τραγ",
                "φε",
            ],
        ) {
            len += 3;
        }
    }
    len
}

fn rule4(s: &[char], mut len: usize) -> usize {
    if len > 3 && ew_any(s, len, &["εωσ", "εων"]) {
        len -= 3;
        if is(s, len, &["θ", "δ", "ελ", "γαλ", "ν", "π", "ιδ", "παρ"]) {
            len += 1;
        }
    }
    len
}

fn rule5(s: &[char], mut len: usize) -> usize {
    if len > 2 && ew(s, len, "ια") {
        len -= 2;
        if ends_with_vowel(s, len) {
            len += 1;
        }
    } else if len > 3 && ew_any(s, len, &["ιου", "ιων"]) {
        len -= 3;
        if ends_with_vowel(s, len) {
            len += 1;
        }
    }
    len
}

const EXC6: &[&str] = &[
    "αλ",
    "αδ",
    "ενδ",
    "αμαν",
    "αμμοχαλ",
    "ηθ",
    "ανηθ",
    "αντιδ",
    "φυσ",
    "βρωμ",
    "γερ",
    "εξωδ",
    "καλπ",
    "καλλιν",
    "καταδ",
    "μουλ",
    "μπαν",
    "μπαγιατ",
    "μπολ",
    "μποσ",
    "νιτ",
    "ξικ",
    "συνομηλ",
    "πετσ",
    "πιτσ",
    "πικαντ",
    "πλιατσ",
    "ποστελν",
    "πρωτοδ",
    "σερτ",
    "συναδ",
    "τσαμ",
    "υποδ",
    "φιλον",
    "φυλοδ",
    "χασ",
];

fn rule6(s: &[char], mut len: usize) -> usize {
    let mut removed = false;
    if len > 3 && ew_any(s, len, &["ικα", "ικο"]) {
        len -= 3;
        removed = true;
    } else if len > 4 && ew_any(s, len, &["ικου", "ικων"]) {
        len -= 4;
        removed = true;
    }
    if removed && (ends_with_vowel(s, len) || is(s, len, EXC6)) {
        len += 2;
    }
    len
}

fn rule7(s: &[char], mut len: usize) -> usize {
    if len == 5 && ew(s, len, "αγαμε") {
        return len - 1;
    }
    if len > 7 && ew(s, len, "ηθηκαμε") {
        len -= 7;
    } else if len > 6 && ew(s, len, "ουσαμε") {
        len -= 6;
    } else if len > 5 && ew_any(s, len, &["αγαμε", "ησαμε", "ηκαμε"]) {
        len -= 5;
    }
    if len > 3 && ew(s, len, "αμε") {
        len -= 3;
        if is(
            s,
            len,
            &[
                "αναπ",
                "αποθ",
                "αποκ",
                "αποστ",
                "βουβ",
                "ξεθ",
                "ουλ",
                "πεθ",
                "πικρ",
                "ποτ",
                "σιχ",
                "χ",
            ],
        ) {
            len += 2;
        }
    }
    len
}

const EXC8B: &[&str] = &[
    "βετερ",
    "βουλκ",
    "βραχμ",
    "γ",
    "δραδουμ",
    "θ",
    "καλπουζ",
    "καστελ",
    "κορμορ",
    "λαοπλ",
    "μωαμεθ",
    "μ",
    "μουσουλμ",
    "ν",
    "ουλ",
    "π",
    "πελεκ",
    "πλ",
    "πολισ",
    "πορτολ",
    "σαρακατσ",
    "σουλτ",
    "τσαρλατ",
    "ορφ",
    "τσιγγ",
    "τσοπ",
    "φωτοστεφ",
    "χ",
    "ψυχοπλ",
    "αγ",
    "ορφ",
    "γαλ",
    "γερ",
    "δεκ",
    "διπλ",
    "αμερικαν",
    "ουρ",
    "πιθ",
    "πουριτ",
    "σ",
    "ζωντ",
    "ικ",
    "καστ",
    "κοπ",
    "λιχ",
    "λουθηρ",
    "μαιντ",
    "μελ",
    "σιγ",
    "σπ",
    "στεγ",
    "τραγ",
    "τσαγ",
    "φ",
    "ερ",
    "αδαπ",
    "αθιγγ",
    "αμηχ",
    "ανικ",
    "ανοργ",
    "απηγ",
    "απιθ",
    "ατσιγγ",
    "βασ",
    "βασκ",
    "βαθυγαλ",
    "βιομηχ",
    "βραχυκ",
    "διατ",
    "διαφ",
    "ενοργ",
    "θυσ",
    "καπνοβιομηχ",
    "καταγαλ",
    "κλιβ",
    "κοιλαρφ",
    "λιβ",
    "μεγλοβιομηχ",
    "μικροβιομηχ",
    "νταβ",
    "ξηροκλιβ",
    "ολιγοδαμ",
    "ολογαλ",
    "πενταρφ",
    "περηφ",
    "περιτρ",
    "πλατ",
    "πολυδαπ",
    "πολυμηχ",
    "στεφ",
    "ταβ",
    "τετ",
    "υπερηφ",
    "υποκοπ",
    "χαμηλοδαπ",
    "ψηλοταβ",
];

fn rule8(s: &mut [char], mut len: usize) -> usize {
    let mut removed = false;
    // The grouping `len > n && a || b || c` is Lucene's: only the first suffix is length-guarded.
    if len > 8 && ew(s, len, "ιουντανε") {
        len -= 8;
        removed = true;
    } else if (len > 7 && ew(s, len, "ιοντανε")) || ew_any(s, len, &["ουντανε", "ηθηκανε"])
    {
        len -= 7;
        removed = true;
    } else if (len > 6 && ew(s, len, "ιοτανε")) || ew_any(s, len, &["οντανε", "ουσανε"])
    {
        len -= 6;
        removed = true;
    } else if (len > 5 && ew(s, len, "αγανε")) || ew_any(s, len, &["ησανε", "οτανε", "ηκανε"])
    {
        len -= 5;
        removed = true;
    }
    if removed && is(s, len, &["τρ", "τσ"]) {
        len += 4;
        put(s, len, "αγαν");
    }
    if len > 3 && ew(s, len, "ανε") {
        len -= 3;
        if ends_with_vowel_no_y(s, len) || is(s, len, EXC8B) {
            len += 2;
        }
    }
    len
}

fn rule9(s: &[char], mut len: usize) -> usize {
    if len > 5 && ew(s, len, "ησετε") {
        len -= 5;
    }
    if len > 3 && ew(s, len, "ετε") {
        len -= 3;
        let exceptions = [
            "αβαρ",
            "βεν",
            "εναρ",
            "αβρ",
            "αδ",
            "αθ",
            "αν",
            "απλ",
            "βαρον",
            "ντρ",
            "σκ",
            "κοπ",
            "μπορ",
            "νιφ",
            "παγ",
            "παρακαλ",
            "σερπ",
            "σκελ",
            "συρφ",
            "τοκ",
            "υ",
            "δ",
            "εμ",
            "θαρρ",
            "θ",
        ];
        let endings = [
            "οδ",
            "αιρ",
            "φορ",
            "ταθ",
            "διαθ",
            "σχ",
            "ενδ",
            "ευρ",
            "τιθ",
            "υπερθ",
            "ραθ",
            "ενθ",
            "ροθ",
            "σθ",
            "πυρ",
            "αιν",
            "συνδ",
            "συν",
            "συνθ",
            "χωρ",
            "πον",
            "βρ",
            "καθ",
            "ευθ",
            "εκθ",
            "νετ",
            "ρον",
            "αρκ",
            "βαρ",
            "βολ",
            "ωφελ",
        ];
        if is(s, len, &exceptions) || ends_with_vowel_no_y(s, len) || ew_any(s, len, &endings) {
            len += 2;
        }
    }
    len
}

fn rule10(s: &mut [char], mut len: usize) -> usize {
    if len > 5 && ew_any(s, len, &["οντασ", "ωντασ"]) {
        len -= 5;
        if len == 3 && ew(s, len, "αρχ") {
            len += 3;
            s[len - 3] = 'ο';
        }
        if ew(s, len, "κρε") {
            len += 3;
            s[len - 3] = 'ω';
        }
    }
    len
}

fn rule11(s: &mut [char], mut len: usize) -> usize {
    if len > 6 && ew(s, len, "ομαστε") {
        len -= 6;
        if len == 2 && ew(s, len, "ον") {
            len += 5;
        }
    } else if len > 7 && ew(s, len, "ιομαστε") {
        len -= 7;
        if len == 2 && ew(s, len, "ον") {
            len += 5;
            put(s, len, "ομαστ");
        }
    }
    len
}

fn rule12(s: &[char], mut len: usize) -> usize {
    if len > 5 && ew(s, len, "ιεστε") {
        len -= 5;
        if is(s, len, &["π", "απ", "συμπ", "ασυμπ", "ακαταπ", "αμεταμφ"]) {
            len += 4;
        }
    }
    if len > 4 && ew(s, len, "εστε") {
        len -= 4;
        if is(
            s,
            len,
            &["αλ", "αρ", "εκτελ", "ζ", "μ", "ξ", "παρακαλ", "προ", "νισ"],
        ) {
            len += 3;
        }
    }
    len
}

fn rule13(s: &[char], mut len: usize) -> usize {
    if len > 6 && ew(s, len, "ηθηκεσ") {
        len -= 6;
    } else if len > 5 && ew_any(s, len, &["ηθηκα", "ηθηκε"]) {
        len -= 5;
    }
    let mut removed = false;
    if len > 4 && ew(s, len, "ηκεσ") {
        len -= 4;
        removed = true;
    } else if len > 3 && ew_any(s, len, &["ηκα", "ηκε"]) {
        len -= 3;
        removed = true;
    }
    if removed
        && (is(s, len, &["διαθ", "θ", "παρακαταθ", "προσθ", "συνθ"])
            || ew_any(s, len, &["σκωλ", "σκουλ", "ναρθ", "σφ", "οθ", "πιθ"]))
    {
        len += 2;
    }
    len
}

fn rule14(s: &[char], mut len: usize) -> usize {
    let mut removed = false;
    if len > 5 && ew(s, len, "ουσεσ") {
        len -= 5;
        removed = true;
    } else if len > 4 && ew_any(s, len, &["ουσα", "ουσε"]) {
        len -= 4;
        removed = true;
    }
    let exceptions = [
        "φαρμακ",
        "χαδ",
        "αγκ",
        "αναρρ",
        "βρομ",
        "εκλιπ",
        "λαμπιδ",
        "λεχ",
        "μ",
        "πατ",
        "ρ",
        "λ",
        "μεδ",
        "μεσαζ",
        "υποτειν",
        "αμ",
        "αιθ",
        "ανηκ",
        "δεσποζ",
        "ενδιαφερ",
        "δε",
        "δευτερευ",
        "καθαρευ",
        "πλε",
        "τσα",
    ];
    let endings = [
        "ποδαρ",
        "βλεπ",
        "πανταχ",
        "φρυδ",
        "μαντιλ",
        "μαλλ",
        "κυματ",
        "λαχ",
        "ληγ",
        "φαγ",
        "ομ",
        "πρωτ",
    ];
    if removed && (is(s, len, &exceptions) || ends_with_vowel(s, len) || ew_any(s, len, &endings)) {
        len += 3;
    }
    len
}

fn rule15(s: &[char], mut len: usize) -> usize {
    let mut removed = false;
    if len > 4 && ew(s, len, "αγεσ") {
        len -= 4;
        removed = true;
    } else if len > 3 && ew_any(s, len, &["αγα", "αγε"]) {
        len -= 3;
        removed = true;
    }
    if removed {
        let exceptions = [
            "αβαστ",
            "πολυφ",
            "αδηφ",
            "παμφ",
            "ρ",
            "ασπ",
            "αφ",
            "αμαλ",
            "αμαλλι",
            "ανυστ",
            "απερ",
            "ασπαρ",
            "αχαρ",
            "δερβεν",
            "δροσοπ",
            "ξεφ",
            "νεοπ",
            "νομοτ",
            "ολοπ",
            "ομοτ",
            "προστ",
            "προσωποπ",
            "συμπ",
            "συντ",
            "τ",
            "υποτ",
            "χαρ",
            "αειπ",
            "αιμοστ",
            "ανυπ",
            "αποτ",
            "αρτιπ",
            "διατ",
            "εν",
            "επιτ",
            "κροκαλοπ",
            "σιδηροπ",
            "λ",
            "ναυ",
            "ουλαμ",
            "ουρ",
            "π",
            "τρ",
            "μ",
        ];
        let endings = [
            "οφ", "πελ", "χορτ", "λλ", "σφ", "ρπ", "φρ", "πρ", "λοχ", "σμην",
        ];
        let cond1 = is(s, len, &exceptions) || ew_any(s, len, &endings);
        let cond2 = is(s, len, &["ψοφ", "ναυλοχ"]) || ew(s, len, "κολλ");
        if cond1 && !cond2 {
            len += 2;
        }
    }
    len
}

fn rule16(s: &[char], mut len: usize) -> usize {
    let mut removed = false;
    if len > 4 && ew(s, len, "ησου") {
        len -= 4;
        removed = true;
    } else if len > 3 && ew_any(s, len, &["ησε", "ησα"]) {
        len -= 3;
        removed = true;
    }
    if removed
        && is(
            s,
            len,
            &["ν", "χερσον", "δωδεκαν", "ερημον", "μεγαλον", "επταν"],
        )
    {
        len += 2;
    }
    len
}

fn rule17(s: &[char], mut len: usize) -> usize {
    if len > 4 && ew(s, len, "ηστε") {
        len -= 4;
        if is(
            s,
            len,
            &[
                "ασβ",
                "σβ",
                "αχρ",
                "χρ",
                "απλ",
                "αειμν",
                "δυσχρ",
                "ευχρ",
                "κοινοχρ",
                "παλιμψ",
            ],
        ) {
            len += 3;
        }
    }
    len
}

fn rule18(s: &mut [char], mut len: usize) -> usize {
    let mut removed = false;
    if len > 6 && ew_any(s, len, &["ησουνε", "ηθουνε"]) {
        len -= 6;
        removed = true;
    } else if len > 4 && ew(s, len, "ουνε") {
        len -= 4;
        removed = true;
    }
    if removed
        && is(
            s,
            len,
            &["ν", "ρ", "σπι", "στραβομουτσ", "κακομουτσ", "εξων"],
        )
    {
        len += 3;
        put(s, len, "ουν");
    }
    len
}

fn rule19(s: &mut [char], mut len: usize) -> usize {
    let mut removed = false;
    if len > 6 && ew_any(s, len, &["ησουμε", "ηθουμε"]) {
        len -= 6;
        removed = true;
    } else if len > 4 && ew(s, len, "ουμε") {
        len -= 4;
        removed = true;
    }
    if removed
        && is(
            s,
            len,
            &["παρασουσ", "φ", "χ", "ωριοπλ", "αζ", "αλλοσουσ", "ασουσ"],
        )
    {
        len += 3;
        put(s, len, "ουμ");
    }
    len
}

fn rule20(s: &[char], mut len: usize) -> usize {
    if len > 5 && ew_any(s, len, &["ματων", "ματοσ"]) {
        len -= 3;
    } else if len > 4 && ew(s, len, "ματα") {
        len -= 2;
    }
    len
}

/// The "long list" of inflectional endings, longest first: (minimum length exclusive, endings).
const LONG_LIST: &[(usize, &[&str])] = &[
    (9, &["ιοντουσαν"]),
    (8, &["ιομασταν", "ιοσασταν", "ιουμαστε", "οντουσαν"]),
    (
        7,
        &[
            "ιεμαστε",
            "ιεσαστε",
            "ιομουνα",
            "ιοσαστε",
            "ιοσουνα",
            "ιουνται",
            "ιουνταν",
            "ηθηκατε",
            "ομασταν",
            "οσασταν",
            "ουμαστε",
        ],
    ),
    (
        6,
        &[
            "ιομουν",
            "ιονταν",
            "ιοσουν",
            "ηθειτε",
            "ηθηκαν",
            "ομουνα",
            "οσαστε",
            "οσουνα",
            "ουνται",
            "ουνταν",
            "ουσατε",
        ],
    ),
    (
        5,
        &[
            "αγατε",
            "ιεμαι",
            "ιεται",
            "ιεσαι",
            "ιοταν",
            "ιουμα",
            "ηθεισ",
            "ηθουν",
            "ηκατε",
            "ησατε",
            "ησουν",
            "ομουν",
            "ονται",
            "ονταν",
            "οσουν",
            "ουμαι",
            "ουσαν",
        ],
    ),
    (
        4,
        &[
            "αγαν", "αμαι", "ασαι", "αται", "ειτε", "εσαι", "εται", "ηδεσ", "ηδων", "ηθει", "ηκαν",
            "ησαν", "ησει", "ησεσ", "ομαι", "οταν",
        ],
    ),
    (3, &["αει", "εισ", "ηθω", "ησω", "ουν", "ουσ"]),
    (
        2,
        &[
            "αν", "ασ", "αω", "ει", "εσ", "ησ", "οι", "οσ", "ου", "υσ", "ων",
        ],
    ),
];

fn rule21(s: &[char], len: usize) -> usize {
    for &(min_len, endings) in LONG_LIST {
        if len > min_len && ew_any(s, len, endings) {
            return len - endings[0].chars().count();
        }
    }
    if len > 1 && ends_with_vowel(s, len) {
        return len - 1;
    }
    len
}

fn rule22(s: &[char], len: usize) -> usize {
    if ew_any(s, len, &["εστερ", "εστατ"]) {
        return len - 5;
    }
    if ew_any(s, len, &["οτερ", "οτατ", "υτερ", "υτατ", "ωτερ", "ωτατ"]) {
        return len - 4;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze(word: &str) -> String {
        let mut buf: Vec<char> = word.chars().map(greek_lower).collect();
        stem(&mut buf);
        buf.into_iter().collect()
    }

    #[test]
    fn lowercase_removes_accents() {
        let lowered: String = "ΆΈΉΊΌΎΏάέήίόύώς".chars().map(greek_lower).collect();
        assert_eq!(lowered, "αεηιουωαεηιουωσ");
    }

    #[test]
    fn stems_from_lucene_tests() {
        // From Lucene's TestGreekStemmer (inputs given there already lowercased and unaccented).
        let cases = [
            ("καθεστωσ", "καθεστ"),
            ("καθεστωτοσ", "καθεστ"),
            ("καθεστωτα", "καθεστ"),
            ("καθεστωτων", "καθεστ"),
            ("γεγονοσ", "γεγον"),
            ("γεγονοτα", "γεγον"),
            ("ευθυσ", "ευθ"),
            ("ευθεια", "ευθει"),
            ("ψηλοσ", "ψηλ"),
            ("ψηλοτεροσ", "ψηλ"),
            ("ψηλοτατοσ", "ψηλ"),
            ("χωρα", "χωρ"),
            ("χωρεσ", "χωρ"),
            ("ζωγραφοσ", "ζωγραφ"),
            ("ζωγραφοι", "ζωγραφ"),
            ("αγορασαμε", "αγορασ"),
            ("τσιγγανεσ", "τσιγγαν"),
        ];
        for (word, expected) in cases {
            assert_eq!(analyze(word), expected, "stem({word})");
        }
    }
}
