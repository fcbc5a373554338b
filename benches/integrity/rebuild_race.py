"""Rebuild race: one process rebuilds a BM25 index and a dense index in a loop, alternating
between two builds (A and B) of different data under the same paths, while reader processes
open and search them. Every result set must equal build A's or build B's exactly.

    python benches/integrity/rebuild_race.py --seconds 60 --readers 1

Prints the counts (rebuilds, opens, results equal to A, to B, wrong, errors, panics); exits 1
unless wrong, errors and panics are all zero. Built from the embedded sample (BM25) and the
integer-hashed vectors of ``golden_outputs.py`` (dense, flat).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from golden_outputs import SAMPLE, ids_of, vectors  # noqa: E402

DIM = 16
QUERIES = 40


def _write_corpora(work: Path) -> None:
    """Corpus A (the sample) and corpus B (every third document left out), written once by the
    parent before any build (a child rewriting them would race the rebuilder's reads)."""
    rows = [
        line for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    (work / "a.jsonl").write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    (work / "b.jsonl").write_text("".join(r + "\n" for i, r in enumerate(rows) if i % 3), encoding="utf-8")


def _inputs(work: Path) -> Tuple[Path, Path, List[str], List[Tuple[str, Optional[str]]]]:
    """The two corpora, the doc ids and the queries."""
    corpus_a, corpus_b = work / "a.jsonl", work / "b.jsonl"
    queries = []
    for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()[:QUERIES]:
        record = json.loads(line)
        queries.append((record["text"], record.get("lang")))
    return corpus_a, corpus_b, ids_of(SAMPLE / "corpus.jsonl"), queries


def _build(kind: str, version: str, target: Path, work: Path) -> None:
    from clirkit import BM25Index
    from clirkit.dense import DenseIndex

    corpus_a, corpus_b, doc_ids, _ = _inputs_cached(work)
    if kind == "bm25":
        BM25Index.build(
            corpus_a if version == "A" else corpus_b, target, lang_field="lang", quiet=True, threads=1
        )
    else:
        salt = 1 if version == "A" else 3
        DenseIndex.build(vectors(len(doc_ids), DIM, salt), doc_ids, threads=1, quiet=True).save(target)


_CACHE: Dict[Path, tuple] = {}


def _inputs_cached(work: Path) -> tuple:
    if work not in _CACHE:
        _CACHE[work] = _inputs(work)
    return _CACHE[work]


def _search(kind: str, target: Path, work: Path) -> object:
    from clirkit import BM25Index
    from clirkit.dense import DenseIndex

    if kind == "bm25":
        index = BM25Index.open(target)
        return [index.search(q, 10, lang=lang) for q, lang in _inputs_cached(work)[3]]
    dense = DenseIndex.open(target)
    scores, ids = dense.search(vectors(QUERIES, DIM, 2), 10, threads=1)
    return scores.tobytes() + ids.tobytes()


def _difference(got: object, a: object, b: object) -> str:
    """Where a wrong result set first differs from both expected ones (for the log)."""
    if isinstance(got, list) and isinstance(a, list) and isinstance(b, list):
        for i, (g, x, y) in enumerate(zip(got, a, b)):
            if g != x and g != y:
                return f"query {i}: got {g[:3]}, A {x[:3]}, B {y[:3]}"
        return "each query matches A or B, but not all the same one (mixed builds)"
    return "dense results differ from both builds"


def _rebuilder(work: Path, stop_at: float, out: "multiprocessing.Queue") -> None:
    rebuilds: Counter = Counter()
    version = "B"
    while time.time() < stop_at:
        for kind in ("bm25", "dense"):
            _build(kind, version, work / kind, work)
            rebuilds[kind] += 1
        version = "A" if version == "B" else "B"
    out.put(("rebuilds", dict(rebuilds)))


def _reader(
    work: Path, expected: Dict[str, Tuple[object, object]], stop_at: float, out: "multiprocessing.Queue"
) -> None:
    from clirkit import IndexFormatError

    counts: Dict[str, Counter] = {"bm25": Counter(), "dense": Counter()}
    while time.time() < stop_at:
        for kind in ("bm25", "dense"):
            c = counts[kind]
            c["opens"] += 1
            try:
                got = _search(kind, work / kind, work)
            except IndexFormatError as err:
                c["errors"] += 1
                print(f"error ({kind}): {err}", file=sys.stderr)
                continue
            except BaseException as err:  # noqa: BLE001 - a Rust panic is a PanicException
                if isinstance(err, KeyboardInterrupt):
                    raise
                c["panics"] += 1
                print(f"panic ({kind}): {type(err).__name__}: {err}", file=sys.stderr)
                continue
            a, b = expected[kind]
            outcome = "A" if got == a else "B" if got == b else "wrong"
            c[outcome] += 1
            if outcome == "wrong":
                print(f"wrong ({kind}): {_difference(got, a, b)}", file=sys.stderr)
    out.put(("reads", {k: dict(v) for k, v in counts.items()}))


def run(seconds: float, readers: int = 1) -> Dict[str, Dict[str, int]]:
    """Race for `seconds`; returns per index kind the counts (rebuilds, opens, A, B, wrong, errors, panics)."""
    work = Path(tempfile.mkdtemp(prefix="rebuild-race-"))
    try:
        _write_corpora(work)
        expected = {}
        for kind in ("bm25", "dense"):
            _build(kind, "A", work / kind, work)
            a = _search(kind, work / kind, work)
            _build(kind, "B", work / kind, work)
            b = _search(kind, work / kind, work)
            assert a != b, f"builds A and B of {kind} must give different results"
            expected[kind] = (a, b)
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        stop_at = time.time() + seconds + 5  # the children start within the extra seconds
        procs = [ctx.Process(target=_rebuilder, args=(work, stop_at, out))]
        procs += [ctx.Process(target=_reader, args=(work, expected, stop_at, out)) for _ in range(readers)]
        for p in procs:
            p.start()
        results = [out.get(timeout=seconds + 600) for _ in procs]
        for p in procs:
            p.join()
        totals: Dict[str, Counter] = {"bm25": Counter(), "dense": Counter()}
        for what, data in results:
            if what == "rebuilds":
                for kind, n in data.items():
                    totals[kind]["rebuilds"] += n
            else:
                for kind, c in data.items():
                    totals[kind].update(c)
        crashed = sum(p.exitcode != 0 for p in procs)
        for kind in totals:
            totals[kind]["crashed_processes"] = crashed
        return {
            k: {
                f: v.get(f, 0)
                for f in ("rebuilds", "opens", "A", "B", "wrong", "errors", "panics", "crashed_processes")
            }
            for k, v in totals.items()
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--readers", type=int, default=1, help="reader processes (default 1)")
    args = parser.parse_args()
    totals = run(args.seconds, args.readers)
    bad = 0
    for kind, c in totals.items():
        print(f"{kind}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
        bad += c["wrong"] + c["errors"] + c["panics"] + c["crashed_processes"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
