//! The original Porter stemmer (Porter 1980), with the departures of Lucene's `PorterStemmer`
//! (Martin Porter's reference implementation: `-bli` -> `-ble`, `-logi` -> `-log`, words of one
//! or two letters untouched). Not Snowball's "Porter2" English stemmer: Anserini's default
//! English analyzer uses this one, and BM25 parity with it depends on identical stems.

/// Stems a lowercased word in place.
pub fn stem(word: &mut Vec<char>) {
    if word.len() <= 2 {
        return;
    }
    let mut s = Stemmer {
        b: std::mem::take(word),
        k: 0,
        j: 0,
    };
    s.k = s.b.len() - 1;
    s.step1ab();
    s.step1c();
    s.step2();
    s.step3();
    s.step4();
    s.step5();
    let k = s.k;
    *word = s.b;
    word.truncate(k + 1);
}

/// `b[..=k]` is the word being stemmed; `j` marks the end of the stem before a matched suffix.
/// `j` and `k` are signed in the reference; here `j` can underflow only where `ends` failed.
struct Stemmer {
    b: Vec<char>,
    k: usize,
    j: usize,
}

impl Stemmer {
    fn cons(&self, i: usize) -> bool {
        match self.b[i] {
            'a' | 'e' | 'i' | 'o' | 'u' => false,
            'y' => i == 0 || !self.cons(i - 1),
            _ => true,
        }
    }

    /// The number of vowel-consonant sequences in `b[..=j]`.
    fn m(&self) -> usize {
        let mut n = 0;
        let Some(first_vowel) = self.next_letter(0, false) else {
            return n;
        };
        let mut i = first_vowel + 1;
        loop {
            let Some(consonant) = self.next_letter(i, true) else {
                return n;
            };
            n += 1;
            let Some(vowel) = self.next_letter(consonant + 1, false) else {
                return n;
            };
            i = vowel + 1;
        }
    }

    /// The first position in `b[from..=j]` holding a consonant (`consonant`) or a vowel (not).
    fn next_letter(&self, from: usize, consonant: bool) -> Option<usize> {
        (from..=self.j).find(|&i| self.cons(i) == consonant)
    }

    fn vowel_in_stem(&self) -> bool {
        (0..=self.j).any(|i| !self.cons(i))
    }

    fn double_consonant(&self, j: usize) -> bool {
        j >= 1 && self.b[j] == self.b[j - 1] && self.cons(j)
    }

    /// consonant-vowel-consonant ending at `i`, the last consonant not w, x or y.
    fn cvc(&self, i: usize) -> bool {
        if i < 2 || !self.cons(i) || self.cons(i - 1) || !self.cons(i - 2) {
            return false;
        }
        !matches!(self.b[i], 'w' | 'x' | 'y')
    }

    /// Whether `b[..=k]` ends with `s`; if so, sets `j` just before it. A match of the whole
    /// word sets `j` to "-1", represented by `usize::MAX` and never used as an index then.
    fn ends(&mut self, s: &str) -> bool {
        // Suffixes are ASCII, so their byte length is their length in characters.
        let l = s.len();
        if l > self.k + 1 {
            return false;
        }
        let o = self.k + 1 - l;
        if !self.b[o..=self.k]
            .iter()
            .zip(s.bytes())
            .all(|(&c, b)| c == char::from(b))
        {
            return false;
        }
        self.j = (self.k as isize - l as isize) as usize;
        true
    }

    /// Replaces `b[j+1..=k]` with `s`.
    fn set_to(&mut self, s: &str) {
        let o = self.j.wrapping_add(1);
        self.b.truncate(o);
        self.b.extend(s.chars());
        self.k = (o + s.len()).wrapping_sub(1);
    }

    fn replace_if_measure(&mut self, s: &str) {
        if self.j != usize::MAX && self.m() > 0 {
            self.set_to(s);
        }
    }

    /// Plurals and -ed / -ing.
    fn step1ab(&mut self) {
        if self.b[self.k] == 's' {
            if self.ends("sses") {
                self.k -= 2;
            } else if self.ends("ies") {
                self.set_to("i");
            } else if self.b[self.k - 1] != 's' {
                self.k -= 1;
            }
        }
        if self.ends("eed") {
            if self.j != usize::MAX && self.m() > 0 {
                self.k -= 1;
            }
        } else if (self.ends("ed") || self.ends("ing"))
            && self.j != usize::MAX
            && self.vowel_in_stem()
        {
            self.k = self.j;
            if self.ends("at") {
                self.set_to("ate");
            } else if self.ends("bl") {
                self.set_to("ble");
            } else if self.ends("iz") {
                self.set_to("ize");
            } else if self.double_consonant(self.k) {
                let ch = self.b[self.k];
                if !matches!(ch, 'l' | 's' | 'z') {
                    self.k -= 1;
                }
            } else {
                self.j = self.k;
                if self.m() == 1 && self.cvc(self.k) {
                    self.set_to("e");
                }
            }
        }
    }

    /// Terminal y to i when there is another vowel in the stem.
    fn step1c(&mut self) {
        if self.ends("y") && self.j != usize::MAX && self.vowel_in_stem() {
            self.b[self.k] = 'i';
        }
    }

    /// Double suffixes to single ones.
    fn step2(&mut self) {
        if self.k == 0 {
            return;
        }
        const RULES: &[(char, &[(&str, &str)])] = &[
            ('a', &[("ational", "ate"), ("tional", "tion")]),
            ('c', &[("enci", "ence"), ("anci", "ance")]),
            ('e', &[("izer", "ize")]),
            (
                'l',
                &[
                    ("bli", "ble"),
                    ("alli", "al"),
                    ("entli", "ent"),
                    ("eli", "e"),
                    ("ousli", "ous"),
                ],
            ),
            (
                'o',
                &[("ization", "ize"), ("ation", "ate"), ("ator", "ate")],
            ),
            (
                's',
                &[
                    ("alism", "al"),
                    ("iveness", "ive"),
                    ("fulness", "ful"),
                    ("ousness", "ous"),
                ],
            ),
            ('t', &[("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")]),
            ('g', &[("logi", "log")]),
        ];
        self.apply_first(RULES, self.b[self.k - 1]);
    }

    /// -ic-, -full, -ness etc.
    fn step3(&mut self) {
        const RULES: &[(char, &[(&str, &str)])] = &[
            ('e', &[("icate", "ic"), ("ative", ""), ("alize", "al")]),
            ('i', &[("iciti", "ic")]),
            ('l', &[("ical", "ic"), ("ful", "")]),
            ('s', &[("ness", "")]),
        ];
        self.apply_first(RULES, self.b[self.k]);
    }

    /// Applies the first rule of the group keyed by `key` whose suffix matches.
    fn apply_first(&mut self, rules: &[(char, &[(&str, &str)])], key: char) {
        if let Some((_, group)) = rules.iter().find(|(c, _)| *c == key) {
            for (suffix, replacement) in group.iter() {
                if self.ends(suffix) {
                    self.replace_if_measure(replacement);
                    return;
                }
            }
        }
    }

    /// -ant, -ence etc. in context <c>vcvc<v>.
    fn step4(&mut self) {
        if self.k == 0 {
            return;
        }
        let matched = match self.b[self.k - 1] {
            'a' => self.ends("al"),
            'c' => self.ends("ance") || self.ends("ence"),
            'e' => self.ends("er"),
            'i' => self.ends("ic"),
            'l' => self.ends("able") || self.ends("ible"),
            'n' => self.ends("ant") || self.ends("ement") || self.ends("ment") || self.ends("ent"),
            'o' => {
                (self.ends("ion") && self.j != usize::MAX && matches!(self.b[self.j], 's' | 't'))
                    || self.ends("ou")
            }
            's' => self.ends("ism"),
            't' => self.ends("ate") || self.ends("iti"),
            'u' => self.ends("ous"),
            'v' => self.ends("ive"),
            'z' => self.ends("ize"),
            _ => false,
        };
        if matched && self.j != usize::MAX && self.m() > 1 {
            self.k = self.j;
        }
    }

    /// A final -e if m() > 1, and -ll to -l if m() > 1.
    fn step5(&mut self) {
        self.j = self.k;
        if self.b[self.k] == 'e' {
            let a = self.m();
            if a > 1 || (a == 1 && !self.cvc(self.k - 1)) {
                self.k -= 1;
            }
        }
        if self.b[self.k] == 'l' && self.double_consonant(self.k) && self.m() > 1 {
            self.k -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    fn stem(word: &str) -> String {
        let mut buf: Vec<char> = word.chars().collect();
        super::stem(&mut buf);
        buf.into_iter().collect()
    }

    #[test]
    fn porter_vocabulary() {
        // Pairs from Martin Porter's published voc.txt / output.txt (the reference C/Java
        // implementation that Lucene's PorterStemmer follows).
        let pairs = [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("ties", "ti"),
            ("caress", "caress"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agre"),
            ("disabled", "disabl"),
            ("matting", "mat"),
            ("mating", "mate"),
            ("meeting", "meet"),
            ("milling", "mill"),
            ("messing", "mess"),
            ("meetings", "meet"),
            ("happy", "happi"),
            ("sky", "sky"),
            ("relational", "relat"),
            ("conditional", "condit"),
            ("rational", "ration"),
            ("valenci", "valenc"),
            ("digitizer", "digit"),
            ("conformabli", "conform"),
            ("radicalli", "radic"),
            ("differentli", "differ"),
            ("vileli", "vile"),
            ("analogousli", "analog"),
            ("vietnamization", "vietnam"),
            ("predication", "predic"),
            ("operator", "oper"),
            ("feudalism", "feudal"),
            ("decisiveness", "decis"),
            ("hopefulness", "hope"),
            ("callousness", "callous"),
            ("formaliti", "formal"),
            ("sensitiviti", "sensit"),
            ("sensibiliti", "sensibl"),
            ("triplicate", "triplic"),
            ("formative", "form"),
            ("formalize", "formal"),
            ("electriciti", "electr"),
            ("electrical", "electr"),
            ("hopeful", "hope"),
            ("goodness", "good"),
            ("revival", "reviv"),
            ("allowance", "allow"),
            ("inference", "infer"),
            ("airliner", "airlin"),
            ("gyroscopic", "gyroscop"),
            ("adjustable", "adjust"),
            ("defensible", "defens"),
            ("irritant", "irrit"),
            ("replacement", "replac"),
            ("adjustment", "adjust"),
            ("dependent", "depend"),
            ("adoption", "adopt"),
            ("homologou", "homolog"),
            ("communism", "commun"),
            ("activate", "activ"),
            ("angulariti", "angular"),
            ("homologous", "homolog"),
            ("effective", "effect"),
            ("bowdlerize", "bowdler"),
            ("probate", "probat"),
            ("rate", "rate"),
            ("cease", "ceas"),
            ("controll", "control"),
            ("roll", "roll"),
            ("generalizations", "gener"),
            ("oscillators", "oscil"),
            ("abilities", "abil"),
            ("archaeology", "archaeolog"),
            ("is", "is"),
            ("ion", "ion"),
            ("ies", "i"),
            ("sses", "ss"),
            ("eed", "eed"),
            ("ing", "ing"),
        ];
        for (word, expected) in pairs {
            assert_eq!(stem(word), expected, "stem({word})");
        }
    }
}
