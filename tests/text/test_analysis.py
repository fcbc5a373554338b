"""Per-language analysis: known terms (cases from Lucene's own tests), errors, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import clirkit
import pytest
from clirkit.cli import main

KNOWN_TERMS = [
    # Anserini's DefaultEnglishAnalyzer: possessive, 33 stopwords, Porter (not Porter2).
    (
        "en",
        "The quick brown foxes jumped over John's lazy dogs",
        ["quick", "brown", "fox", "jump", "over", "john", "lazi", "dog"],
    ),
    ("en", "generalizations oscillators", ["gener", "oscil"]),
    # Lucene's GermanAnalyzer: normalization + light stemmer.
    ("de", "Die Häuser der schönsten Kinder", ["haus", "schon", "kind"]),
    # SpanishAnalyzer (light stemmer, Lucene 9).
    ("es", "las naciones casas luces", ["nacion", "cas", "luz"]),
    # FrenchAnalyzer: elision + light stemmer.
    ("fr", "L'avion des chevaux", ["avion", "cheval"]),
    # GreekAnalyzer (TestGreekStemmer cases after GreekLowerCaseFilter).
    ("el", "ΚΑΘΕΣΤΩΤΟΣ γεγονότα ψηλότερος", ["καθεστ", "γεγον", "ψηλ"]),
    # TurkishAnalyzer: apostrophe filter, Turkish lowercase, Snowball.
    ("tr", "Türkiye'de İstanbul", ["türki", "istanbul"]),
    # RussianAnalyzer.
    ("ru", "книги", ["книг"]),
    # ArabicAnalyzer (TestArabicStemFilter, digits folded).
    ("ar", "والحسن ساهدون ٣", ["حسن", "ساهد", "3"]),
    # PersianAnalyzer: ZWNJ splits, Persian normalization, stopwords.
    ("fa", "کتاب\u200cها", ["كتاب"]),
    # HindiAnalyzer (TestHindiStemmer, TestHindiNormalizer).
    ("hi", "लडकों अँगरेज़ी", ["लडक", "अंगरेज"]),
    # BengaliAnalyzer (TestBengaliStemmer, TestBengaliNormalizer; digits folded, stopword removed).
    ("bn", "করেছিলাম মেয়েদেরকে স্বদেশ দুঃখ ১৯৭১ এই", ["কর", "মে", "সদেস", "দুখখ", "1971"]),
    # IndonesianAnalyzer (TestIndonesianStemmer, derivational stemming; "yang" is a stopword).
    ("id", "Mempertanggungjawabkan penyalahgunaan yang Bukunya", ["tanggungjawab", "salahguna", "buku"]),
    # CJKAnalyzer (TestCJKAnalyzer): bigrams, Latin inside, stopwords, width folding.
    ("zh", "一二三四The 五六七八九十", ["一二", "二三", "三四", "五六", "六七", "七八", "八九", "九十"]),
    ("zh", "ＡＢＣ　中", ["abc", "中"]),
    (
        "ja",
        "あいうえおabcかきくけこ",
        ["あい", "いう", "うえ", "えお", "abc", "かき", "きく", "くけ", "けこ"],
    ),
    ("ko", "한국어", ["한국", "국어"]),
    ("vi", "Tiếng Việt", ["tiếng", "việt"]),
]


@pytest.mark.parametrize("lang,text,expected", KNOWN_TERMS)
def test_known_terms(lang, text, expected):
    assert clirkit.analyze(text, lang) == expected


def test_thai_is_segmented_into_words():
    # เป็น and ของ are Thai stopwords; Thai digits fold to ASCII.
    terms = clirkit.analyze("ภาษาไทยเป็นภาษาราชการของประเทศไทย ๒๕๖๗", "th")
    assert terms == ["ภาษา", "ไทย", "ภาษา", "ราชการ", "ประเทศไทย", "2567"]


def test_unknown_language_lists_supported():
    with pytest.raises(clirkit.UnknownLanguageError, match=r"unknown language 'xx'.*en.*zh"):
        clirkit.analyze("text", "xx")


def test_language_code_forms():
    assert clirkit.analyze("کتاب\u200cها", "fas") == clirkit.analyze("کتاب\u200cها", "fa")
    assert clirkit.analyzer_id("zh-CN") == clirkit.analyzer_id("zh")


def test_supported_languages_and_ids():
    langs = clirkit.supported_languages()
    for lang in ["ar", "bn", "de", "el", "en", "es", "fa", "fr", "hi", "id", "ru", "th", "tr", "vi", "zh"]:
        assert lang in langs
    assert clirkit.analyzer_id("en") == "en/lucene-porter/1"
    assert len({clirkit.analyzer_id(lang) for lang in langs}) == len(langs)


@pytest.mark.parametrize("lang", ["en", "zh", "th", "ar", "hi", "bn", "id"])
def test_empty_and_long_text(lang):
    assert clirkit.analyze("", lang) == []
    assert clirkit.analyze(" \t\n.,;", lang) == []
    assert len(clirkit.analyze("token " * 100_000, lang)) == 100_000


def test_long_token_is_cut_like_lucene():
    assert [len(t) for t in clirkit.analyze("x" * 600, "vi")] == [255, 255, 90]


def test_sample_collection_analyzes_in_every_language(sample_dir):
    seen = set()
    with open(sample_dir / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            terms = clirkit.analyze(doc["text"], doc["lang"])
            assert terms, doc["_id"]
            seen.add(doc["lang"])
    assert len(seen) == 11


def test_cli_prints_terms(capsys):
    assert main(["analyze", "--lang", "en", "John's dogs", "the cats"]) == 0
    assert capsys.readouterr().out == "john dog\ncat\n"


def test_cli_unknown_language_is_an_error():
    proc = subprocess.run(
        [sys.executable, "-m", "clirkit.cli", "analyze", "--lang", "xx", "text"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "clirkit: error: unknown language 'xx'; supported languages:" in proc.stderr


def test_bengali_and_indonesian_match_recorded_lucene_terms():
    # Lucene 9.9.1's BengaliAnalyzer and IndonesianAnalyzer terms, recorded by
    # benches/text/analysis_parity.py --record: prose, every stopword, affix combinations, random words.
    reference = (
        Path(__file__).resolve().parents[2] / "benches/text/data/analysis_parity_bn_id.reference.jsonl"
    )
    with open(reference, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    assert {r["lang"] for r in records} == {"bn", "id"}
    for record in records:
        assert clirkit.analyze(record["text"], record["lang"]) == record["lucene"], record["text"][:60]
