#!/usr/bin/env python3
"""BM25 + RM3 of clirkit against Pyserini's (Anserini's ``Rm3Reranker``), on SciFact and Cranfield.

Both index ``title + " " + text`` with the English analyzer and document vectors (clirkit
``store_docvectors``, Pyserini ``-storeDocvectors``), search with BM25 k1=0.9 b=0.4 and RM3
fb_docs=10, fb_terms=10, original_query_weight=0.5 at k=1000 (Pyserini's ``--bm25 --k1 0.9 --b 0.4
--rm3 --hits 1000``), and are compared on:

* nDCG@10, R@100 and R@1000: within 0.005 of Pyserini's;
* expansion terms: the same terms with weights within 1e-4 for >= 95% of queries (Pyserini's from
  ``get_feedback_terms``);
* RM3 batch-search speed (queries per second, same thread count, index already open and warm).

Pyserini runs in its own environment (``--pyserini-python``) in the same invocation. Exit status 1 when a
must fails.

    python benches/bm25/rm3_parity.py --pyserini-python /work/venvs/pyserini/bin/python
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # benches/
sys.path.insert(0, str(HERE))
import bench_common as bc

K1, B, K = 0.9, 0.4, 1000
FB_DOCS, FB_TERMS, ORIGINAL_WEIGHT = 10, 10, 0.5
MEASURES = ("ndcg_cut_10", "recall_100", "recall_1000")
LABELS = {"ndcg_cut_10": "nDCG@10", "recall_100": "R@100", "recall_1000": "R@1000"}
MAX_METRIC_GAP = 0.005
WEIGHT_TOLERANCE = 1e-4
MIN_SAME_EXPANSION = 0.95
# Pyserini 1.6.0 as quoted in issue 13 (nDCG@10, R@100).
PUBLISHED = {"scifact": (0.6457, 0.9147), "cranfield": (0.3688, 0.7351)}
COLLECTIONS = {"scifact": "beir-scifact", "cranfield": "cranfield"}


def pyserini_worker(argv: Sequence[str]) -> int:
    """Runs in Pyserini's environment: per job ``{input_dir, index, queries, run, terms}``, index with
    document vectors, RM3-search the queries (timed), and write the run and each query's feedback terms."""
    jobs, threads = bc.pyserini_worker_jobs(argv, "rm3_parity.py pyserini")
    from jnius import autoclass
    from pyserini.search.lucene import LuceneSearcher

    timings = {}
    for job in jobs:
        args = bc.anserini_index_args(job["input_dir"], job["index"], threads, "-storeDocvectors")
        with bc.output_to(Path(job["index"] + ".log")):
            autoclass("io.anserini.index.IndexCollection").main(args)
        searcher = LuceneSearcher(job["index"])
        searcher.set_bm25(K1, B)
        searcher.set_rm3(FB_TERMS, FB_DOCS, ORIGINAL_WEIGHT)
        queries = json.loads(Path(job["queries"]).read_text(encoding="utf-8"))
        texts, qids = [t for _, t in queries], [q for q, _ in queries]
        searcher.batch_search(texts[:20], qids[:20], k=K, threads=threads)  # warm the JVM
        t0 = time.perf_counter()
        hits = searcher.batch_search(texts, qids, k=K, threads=threads)
        timings[job["run"]] = time.perf_counter() - t0
        bc.write_trec(
            Path(job["run"]), {q: {h.docid: float(h.score) for h in hs} for q, hs in hits.items()}, "pyserini"
        )
        terms = {
            q: {t: float(w) for t, w in searcher.get_feedback_terms(text).items()} for q, text in queries
        }
        Path(job["terms"]).write_text(json.dumps(terms), encoding="utf-8")
    print("\nRESULT " + json.dumps({"search_s": timings}), flush=True)
    return 0


def same_expansion(ours: list, theirs: dict) -> bool:
    mine = dict(ours)
    return mine.keys() == theirs.keys() and all(
        abs(mine[t] - w) <= WEIGHT_TOLERANCE for t, w in theirs.items()
    )


def main(argv: Sequence[str]) -> int:
    if argv and argv[0] == "pyserini":
        return pyserini_worker(argv[1:])
    p = bc.measured_against_pyserini_parser(
        __doc__.split("\n\n")[0], HERE / ".work" / "rm3", "/work/venvs/pyserini/bin/python"
    )
    p.add_argument("--collections", default="scifact,cranfield")
    a = p.parse_args(argv)
    from clirkit.bm25 import RM3, BM25Index

    cases, jobs = [], []
    for name in [c for c in a.collections.split(",") if c]:
        d = a.shared / "data" / COLLECTIONS[name]
        qrels = bc.read_qrels_tsv(d / "qrels" / "test.tsv")
        queries = [q for q in bc.read_queries(d / "queries.jsonl") if q[0] in qrels]
        work = a.workdir / name
        subprocess.run(["rm", "-rf", str(work)], check=True)
        (work / "pyserini-input").mkdir(parents=True)
        docs = [
            (bc.doc_id(r), bc.joined_text(r, ("title", "text"))) for r in bc.iter_jsonl(d / "corpus.jsonl")
        ]
        with open(work / "pyserini-input" / "docs.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"id": i, "contents": t}) + "\n" for i, t in docs)
        (work / "queries.json").write_text(json.dumps(queries), encoding="utf-8")
        index = BM25Index.build(
            d / "corpus.jsonl",
            work / "index-clirkit",
            lang="en",
            threads=a.threads,
            quiet=True,
            store_docvectors=True,
        )
        rm3 = RM3(FB_DOCS, FB_TERMS, ORIGINAL_WEIGHT)
        index.batch_search(queries[:20], k=K, threads=a.threads, k1=K1, b=B, quiet=True, rm3=rm3)
        t0 = time.perf_counter()
        results = index.batch_search(queries, k=K, threads=a.threads, k1=K1, b=B, quiet=True, rm3=rm3)
        ours_s = time.perf_counter() - t0
        results.to_trec(work / "run-clirkit.trec")
        job = {
            "input_dir": str(work / "pyserini-input"),
            "index": str(work / "index-pyserini"),
            "queries": str(work / "queries.json"),
            "run": str(work / "run-pyserini.trec"),
            "terms": str(work / "terms-pyserini.json"),
        }
        jobs.append(job)
        cases.append((name, qrels, queries, results, ours_s, job, len(docs)))

    jobs_file = a.workdir / "pyserini-jobs.json"
    jobs_file.write_text(json.dumps(jobs), encoding="utf-8")
    cmd = [a.pyserini_python, str(Path(__file__).resolve()), "pyserini", "--jobs", str(jobs_file)]
    proc = subprocess.run(
        [*cmd, "--threads", str(a.threads)], capture_output=True, text=True, env=bc.thread_env(a.threads)
    )
    result = next((json.loads(ln[7:]) for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if result is None:
        print(proc.stderr[-2000:], file=sys.stderr)
        return 1

    failures, out = [], []
    for name, qrels, queries, results, ours_s, job, n_docs in cases:
        ours_m = bc.evaluate(qrels, results.to_dict(), MEASURES)["mean"]
        theirs_m = bc.evaluate(qrels, bc.read_trec(Path(job["run"])), MEASURES)["mean"]
        published = dict(zip(("ndcg_cut_10", "recall_100"), PUBLISHED[name]))
        out += [
            f"### {name} ({n_docs:,} docs, {len(queries)} queries; BM25 k1={K1} b={B} + RM3 "
            f"{FB_DOCS}/{FB_TERMS}/{ORIGINAL_WEIGHT}, k={K}, {a.threads} threads)",
            "",
            "| measure | clirkit | Pyserini 1.6.0 (measured) | Pyserini (issue 13) | gap | |",
            "|---|---|---|---|---|---|",
        ]
        for m in MEASURES:
            gap = abs(ours_m[m] - theirs_m[m])
            ok = gap <= MAX_METRIC_GAP
            failures += [] if ok else [f"{name} {LABELS[m]} differs by {gap:.4f}"]
            pub = f"{published[m]:.4f}" if m in published else "—"
            out.append(
                f"| {LABELS[m]} | {ours_m[m]:.4f} | {theirs_m[m]:.4f} | {pub} | {gap:.4f} | {'ok' if ok else 'FAIL'} |"
            )
        terms = json.loads(Path(job["terms"]).read_text(encoding="utf-8"))
        same = sum(same_expansion(results.expansion(q) or [], terms[q]) for q, _ in queries)
        share = same / len(queries)
        ok = share >= MIN_SAME_EXPANSION
        failures += [] if ok else [f"{name}: same expansion for only {share:.1%} of queries"]
        theirs_s = result["search_s"][job["run"]]
        out += [
            "",
            f"Same expansion terms, weights within {WEIGHT_TOLERANCE:g}: {same}/{len(queries)} queries "
            f"({share:.1%}) {'ok' if ok else 'FAIL'}",
            "",
            f"RM3 search ({len(queries)} queries, k={K}): clirkit {len(queries) / ours_s:,.0f} q/s, "
            f"Pyserini {len(queries) / theirs_s:,.0f} q/s ({theirs_s / ours_s:.1f}x)",
            "",
        ]
    print("\n".join(out))
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
