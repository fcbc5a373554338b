#!/usr/bin/env python3
"""Seeded synthetic BEIR collection with a Zipfian vocabulary, for BM25 speed benchmarks.

Writes ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
``meta.json`` (every parameter, counts and SHA-256 of both files) into ``--out``.

Model (all draws from one ``numpy.random.Generator(PCG64(seed))``, so a seed gives byte-identical files):

* Vocabulary ranks follow a Zipf-Mandelbrot law, p(r) ~ 1 / (r + offset) ** exponent, over
  ``--vocab`` content words plus the 33 English function words of Lucene's stopword list, which take the
  top ranks as they do in real English text (about a quarter of all tokens). Every engine's English analyzer
  removes them, as it would in real text.
* Content words are pronounceable pseudo-words built from the rank (frequent words are short, as in real
  language): two or more consonant-vowel syllables plus a final consonant, over letters chosen so that no
  English stemmer (Porter, Porter2/Snowball) changes them and none is an English stopword. Every system
  under test therefore sees the same terms.
* Document lengths (title excluded) are log-normal (median ``--doc-median`` tokens, shape ``--doc-sigma``),
  clipped to [``--doc-min``, ``--doc-max``]: right-skewed like web passages. Titles have 2-8 tokens.
* Queries draw 2-9 tokens (1 + Poisson(3), at least 2) from the same distribution, function words included.
* With ``--langs zh,fa,ru`` (NeuCLIR-shaped; ``--lang-shares`` defaults to NeuCLIR-1's 3.18M / 2.23M /
  4.63M split) every document and query draws a language and takes its words from that language's own
  vocabulary (the content words with a prefix letter per language, no function words), and records carry a
  ``lang`` field. ``--doc-median 300`` gives NeuCLIR's lengths.

Run ``python benches/synthetic/gen_zipf_corpus.py --out benches/.work/zipf1m --docs 1000000 --queries 5000``, or for
the NeuCLIR-shaped corpus ``... --langs zh,fa,ru --doc-median 300 --vocab 300000``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# Lucene's EnglishAnalyzer stopword set, ordered by frequency in English text (most frequent first).
FUNCTION_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "this",
    "are",
    "at",
    "or",
    "an",
    "but",
    "they",
    "their",
    "there",
    "if",
    "will",
    "such",
    "these",
    "then",
    "into",
    "no",
]
# A stemmer-proof alphabet: no suffix of the Porter/Porter2 algorithms (s, e, y, i, l, n, c, ...) can be
# formed, and words always end with a consonant.
CONSONANTS = "bdfgkmptvz"
VOWELS = "aou"
SYLLABLES = [c + v for c in CONSONANTS for v in VOWELS]
MIN_SYLLABLES = 2


def content_word(index: int) -> str:
    """The ``index``-th pseudo-word (0-based): shortest words first, bijective in ``index``."""
    n_final = len(CONSONANTS)
    n_syll = len(SYLLABLES)
    syllables = MIN_SYLLABLES
    block = n_syll**syllables * n_final
    while index >= block:
        index -= block
        syllables += 1
        block = n_syll**syllables * n_final
    index, final = divmod(index, n_final)
    parts = []
    for _ in range(syllables):
        index, s = divmod(index, n_syll)
        parts.append(SYLLABLES[s])
    return "".join(reversed(parts)) + CONSONANTS[final]


def vocabulary(n_content: int) -> np.ndarray:
    """Words by rank: the function words, then ``n_content`` pseudo-words."""
    words = list(FUNCTION_WORDS) + [content_word(i) for i in range(n_content)]
    return np.array(words, dtype=object)


# One prefix letter per language, outside the pseudo-words' alphabet, so vocabularies never overlap.
LANGUAGE_PREFIXES = "xhjwqcrs"
NEUCLIR_SHARES = {"zh": 3.18, "fa": 2.23, "ru": 4.63}


def language_vocabularies(n_content: int, langs: Sequence[str]) -> np.ndarray:
    """Per language (rows), its words by rank: the content words with the language's prefix."""
    if len(langs) > len(LANGUAGE_PREFIXES):
        raise ValueError(f"at most {len(LANGUAGE_PREFIXES)} languages")
    base = [content_word(i) for i in range(n_content)]
    return np.array([[p + w for w in base] for p in LANGUAGE_PREFIXES[: len(langs)]], dtype=object)


def _language_texts(
    rng: np.random.Generator, words: np.ndarray, cdf: np.ndarray, lang_of: np.ndarray, lengths: np.ndarray
) -> list[str]:
    """Texts whose tokens come from each document's language's vocabulary."""
    ranks = draw_ranks(rng, cdf, int(lengths.sum()))
    ends = np.cumsum(lengths)
    tokens = words[np.repeat(lang_of, lengths), ranks]
    return [" ".join(tokens[s:e]) for s, e in zip((ends - lengths).tolist(), ends.tolist())]


def zipf_cdf(n_words: int, exponent: float, offset: float) -> np.ndarray:
    """Cumulative Zipf-Mandelbrot probabilities over ranks 1..n_words."""
    ranks = np.arange(1, n_words + 1, dtype=np.float64)
    weights = 1.0 / np.power(ranks + offset, exponent)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return cdf


def draw_ranks(rng: np.random.Generator, cdf: np.ndarray, count: int) -> np.ndarray:
    """``count`` 0-based word ranks (inverse-CDF sampling: stable across numpy versions)."""
    idx = np.searchsorted(cdf, rng.random(count), side="right")
    return np.minimum(idx, len(cdf) - 1).astype(np.int64)


def doc_lengths(
    rng: np.random.Generator, n: int, median: float, sigma: float, lo: int, hi: int
) -> np.ndarray:
    lengths = np.exp(np.log(median) + sigma * rng.standard_normal(n))
    return np.clip(np.rint(lengths), lo, hi).astype(np.int64)


def _texts(words: np.ndarray, ranks: np.ndarray, lengths: np.ndarray) -> list[str]:
    ends = np.cumsum(lengths)
    starts = ends - lengths
    tokens = words[ranks]
    return [" ".join(tokens[s:e]) for s, e in zip(starts.tolist(), ends.tolist())]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_queries(out: Path, rows) -> Path:
    """Writes ``queries.jsonl.tmp``: each row (a dict) after an id ``q<i>`` zero-padded to the count."""
    rows = list(rows)
    width = len(str(len(rows) - 1))
    tmp = out / "queries.jsonl.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps({"_id": f"q{i:0{width}d}", **row}) + "\n" for i, row in enumerate(rows))
    return tmp


def _commit(out: Path, corpus_tmp: Path, queries_tmp: Path) -> None:
    corpus_tmp.replace(out / "corpus.jsonl")
    queries_tmp.replace(out / "queries.jsonl")


def generate(
    out: Path,
    docs: int,
    queries: int,
    seed: int = 42,
    vocab: int = 1_000_000,
    exponent: float = 1.0,
    offset: float = 2.7,
    doc_median: float = 50.0,
    doc_sigma: float = 0.55,
    doc_min: int = 5,
    doc_max: int = 1000,
    chunk: int = 50_000,
    quiet: bool = False,
    langs: Sequence[str] = (),
    lang_shares: Sequence[float] = (),
) -> dict[str, object]:
    """Write the collection into ``out`` and return its ``meta.json`` content."""
    if docs < 1 or queries < 1 or vocab < 1:
        raise ValueError("--docs, --queries and --vocab must be positive")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.Generator(np.random.PCG64(seed))
    if langs:
        return generate_multilingual(
            out, rng, docs, queries, langs, lang_shares, vocab, exponent, offset,
            (doc_median, doc_sigma, doc_min, doc_max), chunk, quiet,
        )  # fmt: skip
    words = vocabulary(vocab)
    cdf = zipf_cdf(len(words), exponent, offset)
    width = len(str(docs - 1))
    started = time.perf_counter()
    n_tokens = 0
    corpus_tmp = out / "corpus.jsonl.tmp"
    with corpus_tmp.open("w", encoding="utf-8") as f:
        for first in range(0, docs, chunk):
            n = min(chunk, docs - first)
            text_len = doc_lengths(rng, n, doc_median, doc_sigma, doc_min, doc_max)
            title_len = rng.integers(2, 9, size=n)
            texts = _texts(words, draw_ranks(rng, cdf, int(text_len.sum())), text_len)
            titles = _texts(words, draw_ranks(rng, cdf, int(title_len.sum())), title_len)
            n_tokens += int(text_len.sum() + title_len.sum())
            f.writelines(
                json.dumps({"_id": f"d{first + i:0{width}d}", "title": t, "text": x}) + "\n"
                for i, (t, x) in enumerate(zip(titles, texts))
            )
            if not quiet:
                print(f"\r{first + n:,}/{docs:,} docs", end="", file=sys.stderr, flush=True)
    if not quiet:
        print(file=sys.stderr)
    query_len = np.maximum(2, 1 + rng.poisson(3.0, size=queries))
    query_texts = _texts(words, draw_ranks(rng, cdf, int(query_len.sum())), query_len)
    _commit(out, corpus_tmp, _write_queries(out, ({"text": t} for t in query_texts)))
    meta: dict[str, object] = {
        "generator": "benches/synthetic/gen_zipf_corpus.py",
        "seed": seed,
        "docs": docs,
        "queries": queries,
        "vocab_content_words": vocab,
        "function_words": len(FUNCTION_WORDS),
        "zipf_exponent": exponent,
        "zipf_offset": offset,
        "doc_median_tokens": doc_median,
        "doc_sigma": doc_sigma,
        "doc_min": doc_min,
        "doc_max": doc_max,
        "tokens": n_tokens,
        "mean_query_tokens": float(query_len.mean()),
        "corpus_sha256": _sha256(out / "corpus.jsonl"),
        "queries_sha256": _sha256(out / "queries.jsonl"),
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def generate_multilingual(
    out: Path,
    rng: np.random.Generator,
    docs: int,
    queries: int,
    langs: Sequence[str],
    lang_shares: Sequence[float],
    vocab: int,
    exponent: float,
    offset: float,
    lengths: tuple[float, float, int, int],
    chunk: int,
    quiet: bool,
) -> dict[str, object]:
    """The NeuCLIR-shaped collection: a language per document and query, a ``lang`` field."""
    shares = np.array(lang_shares or [NEUCLIR_SHARES.get(lang, 1.0) for lang in langs], dtype=np.float64)
    if len(shares) != len(langs) or (shares <= 0).any():
        raise ValueError("--lang-shares needs one positive share per language")
    shares /= shares.sum()
    words = language_vocabularies(vocab, langs)
    cdf = zipf_cdf(vocab, exponent, offset)
    width = len(str(docs - 1))
    started = time.perf_counter()
    n_tokens = 0
    per_lang = np.zeros(len(langs), dtype=np.int64)
    corpus_tmp = out / "corpus.jsonl.tmp"
    with corpus_tmp.open("w", encoding="utf-8") as f:
        for first in range(0, docs, chunk):
            n = min(chunk, docs - first)
            lang_of = rng.choice(len(langs), size=n, p=shares)
            text_len = doc_lengths(rng, n, *lengths)
            title_len = rng.integers(2, 9, size=n)
            texts = _language_texts(rng, words, cdf, lang_of, text_len)
            titles = _language_texts(rng, words, cdf, lang_of, title_len)
            n_tokens += int(text_len.sum() + title_len.sum())
            per_lang += np.bincount(lang_of, minlength=len(langs))
            f.writelines(
                json.dumps({"_id": f"d{first + i:0{width}d}", "lang": langs[lg], "title": t, "text": x})
                + "\n"
                for i, (lg, t, x) in enumerate(zip(lang_of.tolist(), titles, texts))
            )
            if not quiet:
                print(f"\r{first + n:,}/{docs:,} docs", end="", file=sys.stderr, flush=True)
    if not quiet:
        print(file=sys.stderr)
    query_lang = rng.choice(len(langs), size=queries, p=shares)
    query_len = np.maximum(2, 1 + rng.poisson(3.0, size=queries))
    query_texts = _language_texts(rng, words, cdf, query_lang, query_len)
    rows = ({"lang": langs[lg], "text": t} for lg, t in zip(query_lang.tolist(), query_texts))
    _commit(out, corpus_tmp, _write_queries(out, rows))
    meta: dict[str, object] = {
        "generator": "benches/synthetic/gen_zipf_corpus.py",
        "docs": docs,
        "queries": queries,
        "languages": dict(zip(langs, per_lang.tolist())),
        "vocab_content_words_per_language": vocab,
        "zipf_exponent": exponent,
        "zipf_offset": offset,
        "doc_median_tokens": lengths[0],
        "doc_sigma": lengths[1],
        "doc_min": lengths[2],
        "doc_max": lengths[3],
        "tokens": n_tokens,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def main(argv: Sequence[str] = ()) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=5_000)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--vocab", type=int, default=1_000_000, help="number of content words")
    p.add_argument("--exponent", type=float, default=1.0, help="Zipf-Mandelbrot exponent")
    p.add_argument("--offset", type=float, default=2.7, help="Zipf-Mandelbrot rank offset")
    p.add_argument("--doc-median", type=float, default=50.0, help="median text length in tokens")
    p.add_argument("--doc-sigma", type=float, default=0.55, help="log-normal shape of text lengths")
    p.add_argument("--doc-min", type=int, default=5)
    p.add_argument("--doc-max", type=int, default=1000)
    p.add_argument(
        "--langs", default="", help="comma-separated languages (e.g. zh,fa,ru): a lang field per record"
    )
    p.add_argument(
        "--lang-shares", default="", help="comma-separated share per language (default NeuCLIR-1's)"
    )
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(list(argv) or None)
    meta = generate(
        a.out,
        a.docs,
        a.queries,
        a.seed,
        a.vocab,
        a.exponent,
        a.offset,
        a.doc_median,
        a.doc_sigma,
        a.doc_min,
        a.doc_max,
        quiet=a.quiet,
        langs=[lang for lang in a.langs.split(",") if lang],
        lang_shares=[float(x) for x in a.lang_shares.split(",") if x],
    )
    print(json.dumps(meta, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
