//! Thai word segmentation with ICU4X's dictionary segmenter (Lucene's `ThaiTokenizer` uses the
//! JDK's dictionary-based break iterator; Pyserini cannot run it on a JVM without the Thai
//! dictionary, so clirkit indexes Thai where Pyserini cannot).

use icu_segmenter::options::WordBreakInvariantOptions;
use icu_segmenter::{WordSegmenter, WordSegmenterBorrowed};

fn segmenter() -> WordSegmenterBorrowed<'static> {
    WordSegmenter::new_auto(WordBreakInvariantOptions::default())
}

/// Calls `emit` with each word of `text` that starts with a letter or digit, as Lucene's
/// `ThaiTokenizer` keeps them.
pub fn thai_words<'a>(text: &'a str, mut emit: impl FnMut(&'a str)) {
    let mut breaks = segmenter().segment_str(text);
    let Some(mut start) = breaks.next() else {
        return;
    };
    for end in breaks {
        let word = &text[start..end];
        if word.chars().next().is_some_and(char::is_alphanumeric) {
            emit(word);
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_thai_words() {
        let mut words = Vec::new();
        thai_words("การที่ได้ต้องแสดงว่างานดี ABC 123", |w| words.push(w));
        assert_eq!(
            words,
            [
                "การ",
                "ที่",
                "ได้",
                "ต้อง",
                "แสดง",
                "ว่า",
                "งาน",
                "ดี",
                "ABC",
                "123"
            ]
        );
    }
}
