//! Thai word segmentation with ICU4X's dictionary segmenter, like Lucene's `ThaiTokenizer`, which
//! uses the JDK's dictionary-based break iterator (Pyserini cannot run it: its bundled JVM lacks
//! the Thai dictionary). ICU4X's LSTM model was tried too: on XQuAD-R it ranked worse (BM25
//! nDCG@10 0.790 against 0.819) and segmented about a hundred times slower.

use icu_segmenter::options::WordBreakInvariantOptions;
use icu_segmenter::{WordSegmenter, WordSegmenterBorrowed};

fn segmenter() -> WordSegmenterBorrowed<'static> {
    WordSegmenter::new_dictionary(WordBreakInvariantOptions::default())
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
        thai_words(
            "ภาษาไทยเป็นภาษาราชการของประเทศไทย ABC 123",
            |w| words.push(w),
        );
        assert_eq!(
            words,
            [
                "ภาษา",
                "ไทย",
                "เป็น",
                "ภาษา",
                "ราชการ",
                "ของ",
                "ประเทศไทย",
                "ABC",
                "123"
            ]
        );
    }
}
