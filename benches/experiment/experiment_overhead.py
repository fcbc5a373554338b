"""Orchestration overhead of ``clirkit experiment``: what the experiment machinery adds to the work of
its stages, on the embedded sample (so it runs anywhere).

The experiment: ``clirkit demo``'s (11 tasks: each language's questions against all 227 sample
documents) with a second BM25 system (Lucene's k1/b next to Anserini's), the RRF of the two and the
evaluation of every run (67 stages).
Measured side by side in one process:

- ``hand``: the same work chained by hand through the Python API (one index, per language a query
  subset searched by both systems, fused, evaluated): the stages' own cost without orchestration;
- ``cold``: ``Experiment(...).run()`` in an empty working directory (load + plan + stages + tables);
  its overhead is the wall time minus the stages' own times (``Experiment.timings``);
- ``cached``: the same experiment again, every stage cached (load + plan + tables only).

    python benches/experiment/experiment_overhead.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import clirkit
from clirkit import BM25Index, evaluate, fuse
from clirkit.experiment import Experiment

SAMPLE = Path(clirkit.__file__).parent / "data" / "sample"
LANGS = ["ar", "de", "el", "en", "es", "hi", "ru", "th", "tr", "vi", "zh"]
SYSTEMS = {"bm25": (0.9, 0.4), "bm25-lucene": (1.2, 0.75)}
MEASURES = ["nDCG@10", "R@100", "MRR"]


def experiment_file(directory: Path) -> Path:
    """``clirkit demo``'s experiment plus a second BM25 system and the RRF of the two."""
    text = (SAMPLE / "demo.toml").read_text(encoding="utf-8").replace('path = "."', f'path = "{SAMPLE}"')
    k1, b = SYSTEMS["bm25-lucene"]
    text += f'\n[systems.bm25-lucene]\nkind = "bm25"\nk1 = {k1}\nb = {b}\nfields = ["text"]\n'
    text += f"\n[fusion.rrf]\ninputs = {json.dumps(list(SYSTEMS))}\n"
    path = directory / "overhead.toml"
    path.write_text(text, encoding="utf-8")
    return path


def by_hand(work: Path) -> float:
    started = time.perf_counter()
    index = BM25Index.build(
        SAMPLE / "corpus.jsonl", work / "index", lang_field="lang", fields=["text"], quiet=True
    )
    queries = [
        json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    qrels = str(SAMPLE / "qrels.tsv")
    for lang in LANGS:
        triples = [(q["_id"], q["text"], q["lang"]) for q in queries if q["lang"] == lang]
        runs = []
        for name, (k1, b) in SYSTEMS.items():
            path = work / f"{name}-{lang}.trec"
            index.batch_search(triples, 100, k1=k1, b=b, quiet=True).to_trec(path)
            runs.append(path)
            evaluate(qrels, str(path), MEASURES, per_query=True)
        fused = work / f"rrf-{lang}.trec"
        fuse([str(r) for r in runs], output=fused)
        evaluate(qrels, str(fused), MEASURES, per_query=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    hand, cold, cold_stages, cached = [], [], [], []
    stages = 0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp)
            (tmp_path / "hand").mkdir()
            hand.append(by_hand(tmp_path / "hand"))
            path = experiment_file(tmp_path)
            t = time.perf_counter()
            exp = Experiment(path, tmp_path / "work", quiet=True)
            exp.run(log=io.StringIO())
            cold.append(time.perf_counter() - t)
            cold_stages.append(sum(seconds for _, _, seconds in exp.timings))
            stages = len(exp.plan.stages)
            t = time.perf_counter()
            again = Experiment(path, tmp_path / "work", quiet=True)
            again.run(log=io.StringIO())
            cached.append(time.perf_counter() - t)
            assert again.ran == 0
    med = statistics.median
    overhead = [c - s for c, s in zip(cold, cold_stages)]
    print(f"clirkit {clirkit.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{args.repeat} repeats (medians); {stages} stages")  # fmt: skip
    print(f"hand-chained API calls      {med(hand):.3f} s")
    print(f"experiment, cold            {med(cold):.3f} s  ({med(cold) / med(hand):.2f}x hand)")
    print(f"  stages' own time          {med(cold_stages):.3f} s")
    print(
        f"  orchestration overhead    {med(overhead):.3f} s  ({1000 * med(overhead) / stages:.1f} ms per stage)"
    )
    print(f"experiment, all cached      {med(cached):.3f} s")


if __name__ == "__main__":
    main()
