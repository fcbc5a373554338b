"""CPU-time throughput of ``clirkit.analyze`` per language, one call per XQuAD-R sentence.

Measured in process CPU time (``time.process_time``), best of three passes over about 8 MiB of
text per language, so that other processes on a shared machine inflate the figures less than
they inflate wall-clock time. Usage::

    python benches/text/analysis_throughput.py [--corpus ../shared/data/xquad-r/corpus.jsonl] [--mib 8]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import clirkit

SHARED = Path(__file__).resolve().parents[3] / "shared"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=SHARED / "data/xquad-r/corpus.jsonl")
    parser.add_argument("--mib", type=float, default=8.0, help="text per language, MiB")
    args = parser.parse_args()

    by_lang: dict[str, list[str]] = {}
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            by_lang.setdefault(doc["lang"], []).append(doc["text"])

    print("| lang | MiB | terms | MiB/s (CPU) |")
    print("|---|---:|---:|---:|")
    for lang, sentences in sorted(by_lang.items()):
        size = sum(len(t.encode()) for t in sentences)
        texts = sentences * max(1, int(args.mib * 2**20) // size)
        mib = sum(len(t.encode()) for t in texts) / 2**20
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            terms = sum(len(clirkit.analyze(t, lang)) for t in texts)
            best = min(best, time.process_time() - start)
        print(f"| {lang} | {mib:.1f} | {terms} | {mib / best:.1f} |")


if __name__ == "__main__":
    main()
