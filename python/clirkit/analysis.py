"""Per-language text analysis, the same terms clirkit's indexes hold.

Each language's chain reproduces the Lucene analyzer Anserini/Pyserini use for it (standard
tokenizer, lowercasing, the language's stopwords and stemmer; CJK bigrams for Chinese, Japanese
and Korean; dictionary word segmentation for Thai), so BM25 over these terms ranks as Lucene does.
"""

from __future__ import annotations

from clirkit import _native


def analyze(text: str, lang: str) -> list[str]:
    """The index terms of ``text`` under the analyzer of ``lang`` (an ISO 639-1 code).

    Raises ``UnknownLanguageError`` (a ``ClirkitError``) naming the supported
    codes when ``lang`` has no analyzer.
    """
    return _native.analyze(text, lang)


def analyzer_id(lang: str) -> str:
    """The identifier of ``lang``'s analysis chain and its version, e.g. ``"en/lucene-porter/1"``.

    Indexes record it, so that queries are never analyzed differently from the documents.
    """
    return _native.analyzer_id(lang)


def supported_languages() -> list[str]:
    """The language codes that have an analyzer, sorted."""
    return _native.supported_languages()
