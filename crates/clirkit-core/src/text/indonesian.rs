//! Lucene's `IndonesianStemmer` with derivational stemming on (as `IndonesianAnalyzer` runs it):
//! Tala's rule-based stemmer for Bahasa Indonesia ("A Study of Stemming Effects on Information
//! Retrieval in Bahasa Indonesia", 2003). Particles and possessive pronouns are removed first,
//! then a first-order prefix (meng-, peng-, di-, ter-, ke-), a suffix and a second-order prefix
//! (ber-, per-, pe-), each only while the word keeps more than two syllables.

/// Which first- and second-order prefixes were removed: they decide which suffixes may follow.
#[derive(Default, Clone, Copy)]
struct Removed {
    ke: bool,
    peng: bool,
    di: bool,
    meng: bool,
    ter: bool,
    ber: bool,
    pe: bool,
}

struct Word<'a> {
    chars: &'a mut Vec<char>,
    /// Vowels counted as syllables, decremented with every removal as Lucene does.
    syllables: usize,
    removed: Removed,
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u')
}

impl Word<'_> {
    fn starts_with(&self, prefix: &str) -> bool {
        let n = prefix.chars().count();
        self.chars.len() >= n && self.chars[..n].iter().copied().eq(prefix.chars())
    }

    fn ends_with(&self, suffix: &str) -> bool {
        let n = suffix.chars().count();
        self.chars.len() >= n
            && self.chars[self.chars.len() - n..]
                .iter()
                .copied()
                .eq(suffix.chars())
    }

    fn vowel_at(&self, i: usize) -> bool {
        self.chars.get(i).copied().is_some_and(is_vowel)
    }

    fn drop_front(&mut self, n: usize) {
        self.chars.drain(..n);
        self.syllables -= 1;
    }

    fn drop_back(&mut self, n: usize) {
        self.chars.truncate(self.chars.len() - n);
        self.syllables -= 1;
    }

    fn remove_particle(&mut self) {
        if ["kah", "lah", "pun"].iter().any(|p| self.ends_with(p)) {
            self.drop_back(3);
        }
    }

    fn remove_possessive_pronoun(&mut self) {
        if self.ends_with("ku") || self.ends_with("mu") {
            self.drop_back(2);
        } else if self.ends_with("nya") {
            self.drop_back(3);
        }
    }

    /// Returns whether a prefix was removed.
    fn remove_first_order_prefix(&mut self) -> bool {
        // Nasal assimilation: "meny" + vowel and "peny" + vowel stand for an initial s, "pen" +
        // vowel for an initial t.
        if self.starts_with("meng") {
            self.removed.meng = true;
            self.drop_front(4);
        } else if self.starts_with("meny") && self.vowel_at(4) {
            self.removed.meng = true;
            self.chars[3] = 's';
            self.drop_front(3);
        } else if self.starts_with("men") || self.starts_with("mem") {
            self.removed.meng = true;
            self.drop_front(3);
        } else if self.starts_with("me") {
            self.removed.meng = true;
            self.drop_front(2);
        } else if self.starts_with("peng") {
            self.removed.peng = true;
            self.drop_front(4);
        } else if self.starts_with("peny") && self.vowel_at(4) {
            self.removed.peng = true;
            self.chars[3] = 's';
            self.drop_front(3);
        } else if self.starts_with("peny") {
            self.removed.peng = true;
            self.drop_front(4);
        } else if self.starts_with("pen") && self.vowel_at(3) {
            self.removed.peng = true;
            self.chars[2] = 't';
            self.drop_front(2);
        } else if self.starts_with("pen") || self.starts_with("pem") {
            self.removed.peng = true;
            self.drop_front(3);
        } else if self.starts_with("di") {
            self.removed.di = true;
            self.drop_front(2);
        } else if self.starts_with("ter") {
            self.removed.ter = true;
            self.drop_front(3);
        } else if self.starts_with("ke") {
            self.removed.ke = true;
            self.drop_front(2);
        } else {
            return false;
        }
        true
    }

    /// Returns whether a prefix was removed.
    fn remove_second_order_prefix(&mut self) -> bool {
        let len = self.chars.len();
        if self.starts_with("ber") || (len == 7 && self.starts_with("belajar")) {
            self.removed.ber = true;
            self.drop_front(3);
        } else if self.starts_with("be")
            && len > 4
            && !is_vowel(self.chars[2])
            && self.chars[3] == 'e'
            && self.chars[4] == 'r'
        {
            self.removed.ber = true;
            self.drop_front(2);
        } else if self.starts_with("per") || (len == 7 && self.starts_with("pelajar")) {
            self.drop_front(3);
        } else if self.starts_with("pe") {
            self.removed.pe = true;
            self.drop_front(2);
        } else {
            return false;
        }
        true
    }

    /// Returns whether a suffix was removed.
    fn remove_suffix(&mut self) -> bool {
        let r = self.removed;
        if self.ends_with("kan") && !r.ke && !r.peng && !r.pe {
            self.drop_back(3);
        } else if self.ends_with("an") && !r.di && !r.meng && !r.ter {
            self.drop_back(2);
        } else if self.ends_with("i") && !self.ends_with("si") && !r.ber && !r.ke && !r.peng {
            self.drop_back(1);
        } else {
            return false;
        }
        true
    }

    fn many_syllables(&self) -> bool {
        self.syllables > 2
    }
}

/// Stems a lowercased Indonesian word in place.
pub fn indonesian_stem(chars: &mut Vec<char>) {
    let syllables = chars.iter().copied().filter(|&c| is_vowel(c)).count();
    let mut word = Word {
        chars,
        syllables,
        removed: Removed::default(),
    };
    if word.many_syllables() {
        word.remove_particle();
    }
    if word.many_syllables() {
        word.remove_possessive_pronoun();
    }
    // Derivational: after a first-order prefix, a suffix and then (only if a suffix went) a
    // second-order prefix; otherwise a second-order prefix, then a suffix.
    if word.many_syllables() && word.remove_first_order_prefix() {
        if word.many_syllables() && word.remove_suffix() && word.many_syllables() {
            word.remove_second_order_prefix();
        }
    } else {
        if word.many_syllables() {
            word.remove_second_order_prefix();
        }
        if word.many_syllables() {
            word.remove_suffix();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stem(word: &str) -> String {
        let mut chars: Vec<char> = word.chars().collect();
        indonesian_stem(&mut chars);
        chars.into_iter().collect()
    }

    #[test]
    fn examples_from_the_paper() {
        // Lucene's TestIndonesianStemmer.testExamples.
        let cases = [
            ("bukukah", "buku"),
            ("adalah", "ada"),
            ("bukupun", "buku"),
            ("bukuku", "buku"),
            ("bukumu", "buku"),
            ("bukunya", "buku"),
            ("mengukur", "ukur"),
            ("menyapu", "sapu"),
            ("menduga", "duga"),
            ("menuduh", "uduh"),
            ("membaca", "baca"),
            ("merusak", "rusak"),
            ("pengukur", "ukur"),
            ("penyapu", "sapu"),
            ("penduga", "duga"),
            ("pembaca", "baca"),
            ("diukur", "ukur"),
            ("tersapu", "sapu"),
            ("kekasih", "kasih"),
            ("berlari", "lari"),
            ("belajar", "ajar"),
            ("bekerja", "kerja"),
            ("perjelas", "jelas"),
            ("pelajar", "ajar"),
            ("pekerja", "kerja"),
            ("tarikkan", "tarik"),
            ("ambilkan", "ambil"),
            ("mengambilkan", "ambil"),
            ("makanan", "makan"),
            ("janjian", "janji"),
            ("perjanjian", "janji"),
            ("tandai", "tanda"),
            ("dapati", "dapat"),
            ("mendapati", "dapat"),
            ("pantai", "panta"),
            ("gigi", "gigi"),
        ];
        for (word, expected) in cases {
            assert_eq!(stem(word), expected, "stem({word})");
        }
    }

    #[test]
    fn derivational_examples() {
        // Lucene's TestIndonesianStemmer.testIRExamples.
        let cases = [
            ("penyalahgunaan", "salahguna"),
            ("menyalahgunakan", "salahguna"),
            ("disalahgunakan", "salahguna"),
            ("pertanggungjawaban", "tanggungjawab"),
            ("mempertanggungjawabkan", "tanggungjawab"),
            ("dipertanggungjawabkan", "tanggungjawab"),
            ("pelaksanaan", "laksana"),
            ("pelaksana", "laksana"),
            ("melaksanakan", "laksana"),
            ("dilaksanakan", "laksana"),
            ("melibatkan", "libat"),
            ("terlibat", "libat"),
            ("penculikan", "culik"),
            ("menculik", "culik"),
            ("diculik", "culik"),
            ("penculik", "culik"),
            ("perubahan", "ubah"),
            ("peledakan", "ledak"),
            ("penanganan", "tangan"),
            ("kepolisian", "polisi"),
            ("kenaikan", "naik"),
            ("bersenjata", "senjata"),
            ("penyelewengan", "seleweng"),
            ("kecelakaan", "celaka"),
        ];
        for (word, expected) in cases {
            assert_eq!(stem(word), expected, "stem({word})");
        }
    }

    #[test]
    fn empty_and_short_words_are_kept() {
        assert_eq!(stem(""), "");
        assert_eq!(stem("di"), "di");
        assert_eq!(stem("kata"), "kata");
    }
}
