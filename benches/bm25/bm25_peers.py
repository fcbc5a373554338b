#!/usr/bin/env python3
"""BM25 side by side: clirkit vs PISA (pyterrier-pisa), bm25s and Pyserini (Lucene), in one run.

For every dataset and system the driver starts separate worker processes (in that system's own Python
environment): one builds the index, one opens it and runs batch search at each k. Each worker reports:

* indexing: documents per second (reading the corpus file, analysis, inversion, writing the index), peak RSS
  of the indexing process (``VmHWM``) and the index size on disk;
* search: RSS after opening the index (``VmRSS``), batch-search queries per second at each k (median of
  repeated passes over the whole query set after one warm-up pass; each pass is one call of the system's
  batch-search API returning its result object), the same in process CPU time (all threads; "CPU QPS",
  steadier than wall time on a shared machine), peak RSS of the search process.

All systems use BM25 k1=0.9, b=0.4, the same thread count, English stemming and Lucene's English stopwords
where configurable; title and text are indexed as ``title + " " + text``. Runs are written as TREC files and,
where qrels exist, evaluated with pytrec_eval as a sanity check that every system really searched.

    python benches/bm25/bm25_peers.py --datasets scifact,zipf --zipf-dir benches/.work/zipf1m \
        --clirkit-python /work/venvs/bm25bench/bin/python

A system whose Python is missing or lacks its package is skipped with a note in the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # benches/
sys.path.insert(0, str(HERE))
import bench_common as bc

SYSTEMS = ("clirkit", "pisa", "bm25s", "pyserini")
K1, B = 0.9, 0.4
FIELDS = ("title", "text")


# --------------------------------------------------------------------------------------------------------
# Workers: each runs in the system's own environment and prints one JSON line as its last output line.
# --------------------------------------------------------------------------------------------------------


def index_worker(system: str, spec: dict) -> dict:
    corpus, index, threads = Path(spec["corpus"]), Path(spec["index"]), spec["threads"]
    info: dict = {}
    if system == "clirkit":
        from clirkit.bm25 import BM25Index

        t0 = time.perf_counter()
        BM25Index.build(str(corpus), str(index), lang="en", fields=FIELDS, threads=threads, quiet=True)
        seconds = time.perf_counter() - t0
    elif system == "pisa":
        from pyterrier_pisa import PisaIndex

        t0 = time.perf_counter()
        docs = ({"docno": bc.doc_id(r), "text": bc.joined_text(r, FIELDS)} for r in bc.iter_jsonl(corpus))
        PisaIndex(str(index), stemmer="porter2", threads=threads, overwrite=True).index(docs)
        seconds = time.perf_counter() - t0
    elif system == "bm25s":
        import bm25s
        import Stemmer

        t0 = time.perf_counter()
        ids, texts = [], []
        for r in bc.iter_jsonl(corpus):
            ids.append(bc.doc_id(r))
            texts.append(bc.joined_text(r, FIELDS))
        tokens = bm25s.tokenize(
            texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False
        )
        del texts
        retriever = bm25s.BM25(k1=K1, b=B, method="lucene", backend=spec["bm25s_backend"])
        retriever.index(tokens, show_progress=False)
        retriever.save(str(index))
        (index / "doc_ids.json").write_text(json.dumps(ids), encoding="utf-8")
        seconds = time.perf_counter() - t0
        info["backend"] = retriever.backend
    elif system == "pyserini":
        bc.start_pyserini_jvm()
        from jnius import autoclass

        # Anserini's BEIR "flat" collection indexes title + " " + text, as Pyserini's BEIR regressions do.
        # It reads every file of its input folder, hence a folder holding only the corpus.
        input_dir = index.parent / (index.name + "-input")
        input_dir.mkdir(parents=True, exist_ok=True)
        link = input_dir / "corpus.jsonl"
        if not link.exists():
            link.symlink_to(corpus.resolve())
        args = [
            "-collection",
            "BeirFlatCollection",
            "-generator",
            "DefaultLuceneDocumentGenerator",
            "-input",
            str(input_dir),
            "-index",
            str(index),
            "-threads",
            str(threads),
            "-language",
            "en",
        ]
        t0 = time.perf_counter()
        autoclass("io.anserini.index.IndexCollection").main(args)
        seconds = time.perf_counter() - t0
    else:
        raise ValueError(system)
    n_docs = bc.count_lines(corpus)
    return {
        "index_seconds": seconds,
        "docs": n_docs,
        "docs_per_s": n_docs / seconds,
        "index_peak_rss_mib": bc.peak_rss_mib(),
        "index_mib": bc.dir_size_mib(index),
        **info,
    }


def search_worker(system: str, spec: dict) -> dict:
    index, threads, ks = Path(spec["index"]), spec["threads"], spec["ks"]
    queries: list = [tuple(q) for q in json.loads(Path(spec["queries_json"]).read_text(encoding="utf-8"))]
    rss_start = bc.rss_mib()
    info: dict = {}
    t0 = time.perf_counter()
    if system == "clirkit":
        from clirkit.bm25 import BM25Index

        idx = BM25Index.open(str(index))

        def search(qs: Sequence, k: int):
            return idx.batch_search(list(qs), k=k, threads=threads, quiet=True)

        def to_run(res) -> bc.RunDict:
            return res.to_dict()
    elif system == "pisa":
        import pandas as pd
        from pyterrier_pisa import PisaIndex

        pisa = PisaIndex(str(index), stops="lucene", threads=threads)
        retrievers = {k: pisa.bm25(k1=K1, b=B, num_results=k, threads=threads) for k in ks}

        def search(qs: Sequence, k: int):
            frame = pd.DataFrame({"qid": [q for q, _ in qs], "query": [t for _, t in qs]})
            return retrievers[k].transform(frame)

        def to_run(res) -> bc.RunDict:
            run: bc.RunDict = {}
            for qid, docno, score in zip(res["qid"], res["docno"], res["score"]):
                run.setdefault(str(qid), {})[str(docno)] = float(score)
            return run
    elif system == "bm25s":
        import bm25s
        import numpy as np
        import Stemmer

        retriever = bm25s.BM25.load(str(index), mmap=spec["bm25s_mmap"], show_progress=False)
        if spec["bm25s_backend"] != retriever.backend:
            retriever.backend = spec["bm25s_backend"]
            if retriever.backend == "numba":
                retriever.compile(activate_numba=True, warmup=False)
        ids = np.array(json.loads((index / "doc_ids.json").read_text(encoding="utf-8")), dtype=object)
        stemmer = Stemmer.Stemmer("english")
        vocab = retriever.vocab_dict
        info["backend"] = retriever.backend
        info["mmap"] = spec["bm25s_mmap"]

        def search(qs: Sequence, k: int):
            tokenized = bm25s.tokenize(
                [t for _, t in qs], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
            )
            # bm25s refuses queries without an indexed term; those get no results (as in every other system).
            kept = [i for i, toks in enumerate(tokenized) if any(t in vocab for t in toks)]
            docs, scores = retriever.retrieve(
                [[t for t in tokenized[i] if t in vocab] for i in kept],
                k=k,
                n_threads=threads,
                show_progress=False,
            )
            return [qs[i][0] for i in kept], ids[docs], scores

        def to_run(res) -> bc.RunDict:
            kept_qids, docs, scores = res
            return {
                q: {str(d): float(s) for d, s in zip(dr, sr)} for q, dr, sr in zip(kept_qids, docs, scores)
            }
    elif system == "pyserini":
        bc.start_pyserini_jvm()
        from pyserini.search.lucene import LuceneSearcher

        searcher = LuceneSearcher(str(index))
        searcher.set_bm25(K1, B)

        def search(qs: Sequence, k: int):
            return searcher.batch_search([t for _, t in qs], [q for q, _ in qs], k=k, threads=threads)

        def to_run(res) -> bc.RunDict:
            return {q: {h.docid: float(h.score) for h in hits} for q, hits in res.items()}
    else:
        raise ValueError(system)
    load_seconds = time.perf_counter() - t0
    rss_loaded = bc.rss_mib()
    out = {
        "load_seconds": load_seconds,
        "rss_start_mib": rss_start,
        "rss_loaded_mib": rss_loaded,
        "queries": len(queries),
        "loadavg_1m_before_search": os.getloadavg()[0],
        **info,
    }
    search_peak = 0.0
    for k in ks:
        bc.reset_peak_rss()
        search(queries[: spec["warmup"]], k)
        cpu_times: list[float] = []

        def timed_search(k: int = k, cpu_times: list[float] = cpu_times):
            # Process CPU time (every thread) beside the wall time: steadier on a shared machine.
            start = time.process_time()
            res = search(queries, k)
            cpu_times.append(time.process_time() - start)
            return res

        times, res = bc.timed_passes(
            timed_search, spec["min_seconds"], spec["min_passes"], spec["max_passes"]
        )
        # The peak of searching and holding one pass's results, before this harness turns them into a run.
        search_peak = max(search_peak, bc.peak_rss_mib())
        bc.write_trec(Path(spec["run_prefix"] + f".k{k}.trec"), to_run(res), system)
        del res
        out[f"qps_k{k}"] = len(queries) / bc.median(times)
        out[f"passes_k{k}"] = len(times)
        out[f"pass_seconds_k{k}"] = [round(t, 4) for t in times]
        out[f"cpu_qps_k{k}"] = len(queries) / bc.median(cpu_times)
    out["search_peak_rss_mib"] = search_peak
    out["loadavg_1m_after_search"] = os.getloadavg()[0]
    return out


def worker_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="bm25_peers.py worker")
    p.add_argument("--system", choices=SYSTEMS, required=True)
    p.add_argument("--phase", choices=("index", "search"), required=True)
    p.add_argument("--spec", required=True, help="JSON")
    a = p.parse_args(argv)
    spec = json.loads(a.spec)
    result = index_worker(a.system, spec) if a.phase == "index" else search_worker(a.system, spec)
    print("\nRESULT " + json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------------------


def run_worker(python: str, system: str, phase: str, spec: dict, threads: int, timeout: int) -> dict:
    cmd = [
        python,
        str(Path(__file__).resolve()),
        "worker",
        "--system",
        system,
        "--phase",
        phase,
        "--spec",
        json.dumps(spec),
    ]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, check=False, capture_output=True, text=True, env=bc.thread_env(threads), timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"{phase} timed out after {timeout}s"}
    wall = time.perf_counter() - t0
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            result[f"{phase}_process_seconds"] = wall
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
    return {"error": f"{phase} failed (exit {proc.returncode}): " + " | ".join(tail)}


def probe(python: str | None, system: str) -> str | None:
    """None when ``system`` can run under ``python``, else why not."""
    module = {"clirkit": "clirkit.bm25", "pisa": "pyterrier_pisa", "bm25s": "bm25s", "pyserini": "pyserini"}[
        system
    ]
    if not python or not Path(python).exists():
        return f"python {python!r} not found"
    proc = subprocess.run([python, "-c", f"import {module}"], check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        return f"cannot import {module} with {python}: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
    return None


def datasets(args) -> dict[str, dict]:
    found = {}
    for name in args.datasets.split(","):
        if name == "scifact":
            d = args.shared / "data" / "beir-scifact"
            found[name] = {
                "corpus": d / "corpus.jsonl",
                "queries": d / "queries.jsonl",
                "qrels": d / "qrels" / "test.tsv",
            }
        elif name == "zipf":
            d = args.zipf_dir
            found[name] = {"corpus": d / "corpus.jsonl", "queries": d / "queries.jsonl", "qrels": None}
        else:
            raise SystemExit(f"unknown dataset {name!r} (scifact, zipf)")
        if not found[name]["corpus"].exists():
            raise SystemExit(
                f"{found[name]['corpus']} not found"
                + (" (run benches/synthetic/gen_zipf_corpus.py first)" if name == "zipf" else "")
            )
    return found


def fmt(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def ratio(ours: float | None, theirs: float | None) -> str:
    return "—" if not ours or not theirs else f"{ours / theirs:.2f}×"


def table(name: str, ds: dict, results: dict[str, dict], ks: Sequence[int], threads: int) -> str:
    ours = results.get("clirkit", {})
    lines = [
        f"### {name}: {ds['docs']:,} docs, {ds['queries']:,} queries, {threads} threads",
        "",
        (
            "Ratios are clirkit ÷ system (above 1× = clirkit faster for speed, bigger for memory). "
            "Load avg: the machine's 1-minute load average before and after that system's searches."
        ),
        "",
        "| system | index docs/s | clirkit ÷ | index peak RSS MiB | index MiB | RSS loaded MiB | clirkit ÷ |"
        + "".join(f" QPS k={k} | clirkit ÷ | CPU QPS k={k} | clirkit ÷ |" for k in ks)
        + " search peak RSS MiB | load avg |"
        + (" nDCG@10 | R@100 |" if ds["qrels"] else ""),
        "|---" * (7 + 4 * len(ks) + 2 + (2 if ds["qrels"] else 0)) + "|",
    ]
    for system, r in results.items():
        if "skipped" in r:
            lines.append(f"| {system} | skipped: {r['skipped']} |")
            continue
        label = system + (
            f" ({r['backend']} backend{', mmap' if r.get('mmap') else ''})" if "backend" in r else ""
        )
        row = [
            label,
            fmt(r.get("docs_per_s")),
            ratio(ours.get("docs_per_s"), r.get("docs_per_s")),
            fmt(r.get("index_peak_rss_mib")),
            fmt(r.get("index_mib")),
            fmt(r.get("rss_loaded_mib")),
            ratio(ours.get("rss_loaded_mib"), r.get("rss_loaded_mib")),
        ]
        for k in ks:
            for key in (f"qps_k{k}", f"cpu_qps_k{k}"):
                row += [fmt(r.get(key)), ratio(ours.get(key), r.get(key))]
        row.append(fmt(r.get("search_peak_rss_mib")))
        row.append(f"{fmt(r.get('loadavg_1m_before_search'), 1)}–{fmt(r.get('loadavg_1m_after_search'), 1)}")
        if ds["qrels"]:
            row += [fmt(r.get("ndcg_cut_10"), 4), fmt(r.get("recall_100"), 4)]
        lines.append("| " + " | ".join(row) + " |")
        for err in r.get("errors", []):
            lines.append(f"| {system} | error: {err} |")
    return "\n".join(lines)


def musts(name: str, results: dict[str, dict], k: int) -> list[str]:
    """The issue's targets, each with the measured numbers and PASS/FAIL."""
    ours = results.get("clirkit", {})
    checks = []

    def check(label: str, mine: float | None, theirs: float | None, target: float, higher: bool) -> None:
        if mine is None or theirs is None:
            checks.append(f"- {name}: {label}: not measured")
            return
        r = mine / theirs
        ok = r >= target if higher else r <= target
        checks.append(
            f"- {name}: {label}: {mine:,.1f} vs {theirs:,.1f} = {r:.2f}× "
            f"(target {'≥' if higher else '≤'} {target}×) {'PASS' if ok else 'FAIL'}"
        )

    q = f"qps_k{k}"
    check(f"search QPS k={k} vs PISA", ours.get(q), results.get("pisa", {}).get(q), 0.5, True)
    check(f"search QPS k={k} vs bm25s", ours.get(q), results.get("bm25s", {}).get(q), 5.0, True)
    check(
        "indexing docs/s vs Pyserini",
        ours.get("docs_per_s"),
        results.get("pyserini", {}).get("docs_per_s"),
        3.0,
        True,
    )
    check(
        "RSS after loading the index vs bm25s (MiB)",
        ours.get("rss_loaded_mib"),
        results.get("bm25s", {}).get("rss_loaded_mib"),
        1.0,
        False,
    )
    return checks


def parse_caps(text: str) -> dict[tuple[str | None, str], int]:
    """``system=N`` or ``dataset:system=N`` items -> {(dataset or None, system): N}."""
    caps = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        target, _, number = item.partition("=")
        dataset, _, system = target.rpartition(":")
        if not number.isdigit() or not system:
            raise SystemExit(f"--slow-max-queries: expected [dataset:]system=N, got {item!r}")
        caps[(dataset or None, system)] = int(number)
    return caps


def main(argv: Sequence[str]) -> int:
    if argv and argv[0] == "worker":
        return worker_main(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="scifact,zipf", help="comma-separated: scifact, zipf")
    p.add_argument(
        "--zipf-dir", type=Path, default=HERE / ".work" / "zipf1m", help="output folder of gen_zipf_corpus.py"
    )
    p.add_argument(
        "--shared", type=Path, default=HERE.parent.parent / "shared", help="the shared data folder"
    )
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ks", default="1000,10")
    p.add_argument("--max-queries", type=int, default=0, help="use only the first N queries (0 = all)")
    p.add_argument(
        "--slow-max-queries",
        default="bm25s=500,pyserini=500",
        help="per-system caps on the queries timed, for the systems that take minutes per pass "
        "(a prefix of the same query list; 'zipf:bm25s=100' caps one dataset only; '' = no caps)",
    )
    p.add_argument("--bm25s-backend", default="numpy", choices=("numpy", "numba"))
    p.add_argument(
        "--bm25s-mmap",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="load bm25s's index memory-mapped (its lean-memory mode)",
    )
    p.add_argument("--min-seconds", type=float, default=3.0, help="time each k for at least this long")
    p.add_argument("--min-passes", type=int, default=3)
    p.add_argument("--max-passes", type=int, default=50)
    p.add_argument("--warmup", type=int, default=200, help="queries in the untimed warm-up pass")
    p.add_argument("--workdir", type=Path, default=HERE / ".work" / "peers")
    p.add_argument("--reuse-indexes", action="store_true", help="skip indexing where an index already exists")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per worker process")
    p.add_argument("--clirkit-python", default=sys.executable)
    p.add_argument("--peers-python", default="/work/venv-peers/bin/python", help="for PISA and bm25s")
    p.add_argument("--pyserini-python", default="/work/venv-pyserini/bin/python")
    args = p.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    caps = parse_caps(args.slow_max_queries)
    pythons = {
        "clirkit": args.clirkit_python,
        "pisa": args.peers_python,
        "bm25s": args.peers_python,
        "pyserini": args.pyserini_python,
    }
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        raise SystemExit(f"unknown systems {sorted(unknown)} ({', '.join(SYSTEMS)})")
    skipped = {s: why for s in systems if (why := probe(pythons[s], s))}
    started = time.perf_counter()
    report: dict[str, dict] = {}
    sections = []
    for name, ds in datasets(args).items():
        work = args.workdir / name
        (work / "runs").mkdir(parents=True, exist_ok=True)
        queries = bc.read_queries(ds["queries"])
        if args.max_queries:
            queries = queries[: args.max_queries]
        ds["docs"] = bc.count_lines(ds["corpus"])
        ds["queries"] = len(queries)
        qrels = bc.read_qrels_tsv(ds["qrels"]) if ds["qrels"] else None
        results: dict[str, dict] = {}
        for system in systems:
            if system in skipped:
                results[system] = {"skipped": skipped[system]}
                print(f"[{name}] {system}: skipped ({skipped[system]})", file=sys.stderr)
                continue
            cap = caps.get((name, system), caps.get((None, system)))
            sys_queries = queries[:cap] if cap else queries
            qfile = work / f"queries.{system}.json"
            qfile.write_text(json.dumps(sys_queries), encoding="utf-8")
            index = work / f"index-{system}"
            spec = {
                "corpus": str(ds["corpus"]),
                "index": str(index),
                "threads": args.threads,
                "ks": ks,
                "queries_json": str(qfile),
                "run_prefix": str(work / "runs" / system),
                "min_seconds": args.min_seconds,
                "min_passes": args.min_passes,
                "max_passes": args.max_passes,
                "warmup": args.warmup,
                "bm25s_backend": args.bm25s_backend,
                "bm25s_mmap": args.bm25s_mmap,
            }
            r: dict = {"errors": []}
            if not (args.reuse_indexes and index.exists()):
                if index.exists():
                    subprocess.run(["rm", "-rf", str(index)], check=True)
                print(f"[{name}] {system}: indexing ...", file=sys.stderr, flush=True)
                r.update(run_worker(pythons[system], system, "index", spec, args.threads, args.timeout))
            print(f"[{name}] {system}: searching ...", file=sys.stderr, flush=True)
            if "error" in r:
                r["errors"].append(r.pop("error"))
            else:
                r.update(run_worker(pythons[system], system, "search", spec, args.threads, args.timeout))
                if "error" in r:
                    r["errors"].append(r.pop("error"))
            if len(sys_queries) != len(queries):
                r["note"] = f"{system} searched the first {len(sys_queries):,} queries (the others all)"
            run_file = work / "runs" / f"{system}.k{max(ks)}.trec"
            if qrels and run_file.exists() and not r["errors"]:
                r.update(bc.evaluate(qrels, bc.read_trec(run_file))["mean"])
            results[system] = r
            print(
                f"[{name}] {system}: "
                + json.dumps({k: v for k, v in r.items() if not k.startswith("pass_")}),
                file=sys.stderr,
                flush=True,
            )
        report[name] = {"dataset": {k: str(v) for k, v in ds.items()}, "results": results}
        section = table(name, ds, results, ks, args.threads)
        notes = [f"- {s}: {r['note']}" for s, r in results.items() if r.get("note")]
        section += "\n\n" + "\n".join(musts(name, results, max(ks)) + notes)
        sections.append(section)
    elapsed = time.perf_counter() - started
    text = "\n\n".join(sections) + f"\n\nTotal bench time: {elapsed / 60:.1f} min\n"
    print(text)
    args.workdir.mkdir(parents=True, exist_ok=True)
    (args.workdir / "results.md").write_text(text, encoding="utf-8")
    (args.workdir / "results.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
