#!/usr/bin/env python3
"""Scale benchmark (issue 17): build and search a NeuCLIR-shaped BM25 index and PQ dense indexes of
synthetic data at a given size (10M by default), reporting time, peak RSS and disk per phase.

Phases (each generates its data, measures, and removes its files before the next, so the disk never holds
more than one phase; free disk is checked against an estimate first and a phase that does not fit is refused,
as is any step that would leave less than ``--min-free-gb`` free):

* ``bm25``: ``gen_neuclir_corpus`` (a Rust bin of the benches crate: ``cargo build --release -p
  clirkit-benches --bin gen_neuclir_corpus``) writes ``corpus.jsonl.zst`` -> ``clirkit index bm25
  --lang-field lang`` (reading the zstd stream) -> ``clirkit search bm25`` (``--queries`` queries, k=1000).
  With ``--pisa``, PISA (pyterrier-pisa, in ``--peers-python``) indexes the same corpus and runs the same
  queries at k=1000 with the same threads, before the corpus is removed.
* ``dense384`` / ``dense768``: ``gen_vectors.py`` (float16 .npy) -> ``clirkit index dense --pq d/2`` (4-bit,
  re-scoring vectors stored, ``--vector-dtype`` float32 or float16) -> ``clirkit search dense`` (k=100) ->
  10-recall@10 against exact search on the first ``--recall-queries`` queries (exact scores computed a chunk
  of the .npy at a time). With ``--faiss``, FAISS ``PQ{d/2}x4fs`` (in ``--peers-python``) trained on a 65,536
  sample and built with ``add`` in chunks of the memory-mapped .npy, searched with the same queries, k and
  threads (no re-scoring: FAISS would need the float vectors in memory), and its recall computed the same way.

Every command runs under ``/usr/bin/time -v``: peak RSS is the whole process's maximum resident set
(touched pages of mapped files included); the 1-minute load average is recorded before and after each step.
Results are appended as JSON lines to ``--results``.

Run ``python benches/scale/scale_10m.py --work /work/scratch/scale --docs 10000000 --vectors 10000000``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BENCHES = Path(__file__).resolve().parents[1]
GENERATOR = BENCHES.parent / "target" / "release" / "gen_neuclir_corpus"
# Disk per item, rounded up from the runs recorded in benches/RESULTS.md (bytes): zstd corpus, BM25 index and
# PISA index per NeuCLIR-shaped document; .npy (float16) and index (4-bit codes + re-scoring vectors) per
# vector dimension.
CORPUS_ZST_BYTES_PER_DOC = 1_300
BM25_INDEX_BYTES_PER_DOC = 700
PISA_INDEX_BYTES_PER_DOC = 1_000
NPY_BYTES_PER_DIM = 2
DENSE_INDEX_BYTES_PER_DIM = {"float32": 4.25, "float16": 2.25}
SAFETY_BYTES = 3 << 30


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def timed(cmd: list[str], log: Path) -> dict[str, float]:
    """Run ``cmd`` under ``/usr/bin/time -v``; its wall seconds, CPU seconds, peak RSS (MiB), load averages."""
    load_before = load_average()
    with open(log, "w") as err:
        done = subprocess.run(["/usr/bin/time", "-v", *cmd], stderr=err, stdout=subprocess.DEVNULL)
    text = log.read_text()
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{text[-3000:]}")

    def field(name: str) -> str:
        return re.search(rf"{re.escape(name)}: (.+)", text).group(1).strip()

    wall = 0.0
    for part in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":"):
        wall = wall * 60 + float(part)
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(float(field("User time (seconds)")) + float(field("System time (seconds)")), 1),
        "peak_rss_mib": round(int(field("Maximum resident set size (kbytes)")) / 1024, 1),
        "load_before": load_before,
        "load_after": load_average(),
    }


def disk(path: Path) -> int:
    """Bytes under ``path``."""
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else path.stat().st_size
    )


def need_free(args: argparse.Namespace, need: float, phase: str) -> None:
    """Refuse a phase needing more than ``--max-disk-gb`` or leaving less than ``--min-free-gb`` free."""
    free = shutil.disk_usage(args.work).free
    if need > args.max_disk_gb * 1e9:
        sys.exit(f"{phase}: needs about {need / 1e9:.1f} GB, over --max-disk-gb {args.max_disk_gb}")
    if free < need + SAFETY_BYTES + args.min_free_gb * 1e9:
        sys.exit(
            f"{phase}: needs about {need / 1e9:.1f} GB (+{SAFETY_BYTES / 2**30:.0f} GiB margin, and "
            f"{args.min_free_gb} GB left free), {free / 1e9:.1f} GB free under {args.work}; "
            "give a smaller size or free disk"
        )


def clirkit(args: argparse.Namespace) -> list[str]:
    return [args.python, "-m", "clirkit.cli"]


def bm25_phase(args: argparse.Namespace, report: dict) -> None:
    work = args.work / "bm25"
    per_doc = CORPUS_ZST_BYTES_PER_DOC + BM25_INDEX_BYTES_PER_DOC + PISA_INDEX_BYTES_PER_DOC * args.pisa
    need_free(args, args.docs * per_doc, "bm25")
    if not GENERATOR.exists():
        sys.exit(f"{GENERATOR} missing: cargo build --release -p clirkit-benches --bin gen_neuclir_corpus")
    data, index, run = work / "data", work / "index", work / "run.trec"
    corpus = data / "corpus.jsonl.zst"
    work.mkdir(parents=True, exist_ok=True)
    report["generate"] = timed(
        [str(GENERATOR), "--out", str(data), "--docs", str(args.docs), "--queries", str(args.queries),
         "--doc-median", "300", "--vocab", "300000", "--threads", str(args.threads)], work / "generate.log")  # fmt: skip
    report["corpus"] = json.loads((data / "meta.json").read_text())
    report["corpus_bytes"] = disk(corpus)
    report["build"] = timed(
        [*clirkit(args), "index", "bm25", "--corpus", str(corpus), "--index", str(index),
         "--lang-field", "lang", "--threads", str(args.threads), "--memory-mb", str(args.bm25_memory_mb),
         "--quiet"], work / "build.log")  # fmt: skip
    report["index_bytes"] = disk(index)
    report["search"] = timed(
        [*clirkit(args), "search", "bm25", "--index", str(index), "--queries", str(data / "queries.jsonl"),
         "--k", "1000", "--threads", str(args.threads), "--output", str(run), "--quiet"],
        work / "search.log")  # fmt: skip
    report["search"]["qps"] = round(args.queries / report["search"]["wall_s"], 1)
    shutil.rmtree(index)
    if args.pisa:
        pisa_index, pisa_run = work / "pisa", work / "pisa_run.trec"
        worker = [args.peers_python, __file__, "pisa-worker"]
        report["pisa_build"] = timed(
            [*worker, "index", str(corpus), str(pisa_index), str(args.threads)], work / "pisa_build.log"
        )
        report["pisa_index_bytes"] = disk(pisa_index)
        report["pisa_search"] = timed(
            [*worker, "search", str(data / "queries.jsonl"), str(pisa_index), str(args.threads), str(pisa_run)],
            work / "pisa_search.log",
        )  # fmt: skip
        report["pisa_search"]["qps"] = round(args.queries / report["pisa_search"]["wall_s"], 1)
    shutil.rmtree(work)


def pisa_worker(argv: list[str]) -> None:
    """PISA's side (run in the peers' Python): ``index CORPUS INDEX THREADS`` or ``search QUERIES INDEX THREADS
    RUN``. Documents are title + text, read from the zstd stream by ``zstd -dc``; no stemming or stopwords
    (the pseudo-words are stemmer-proof and hold no stopwords)."""
    from pyterrier_pisa import PisaIndex

    mode, path, index, threads = argv[0], argv[1], argv[2], int(argv[3])
    if mode == "index":
        reader = subprocess.Popen(["zstd", "-dc", path], stdout=subprocess.PIPE)
        docs = (
            {"docno": r["_id"], "text": r["title"] + " " + r["text"]} for r in map(json.loads, reader.stdout)
        )
        PisaIndex(index, stemmer="none", stops="none", threads=threads, overwrite=True).index(docs)
        if reader.wait() != 0:
            sys.exit("zstd -dc failed")
        return
    import pandas as pd

    with open(path) as f:
        queries = [json.loads(line) for line in f]
    frame = pd.DataFrame({"qid": [q["_id"] for q in queries], "query": [q["text"] for q in queries]})
    pisa = PisaIndex(index, stemmer="none", stops="none", threads=threads)
    res = pisa.bm25(num_results=1000, threads=threads).transform(frame)
    with open(argv[4], "w") as out:
        for qid, docno, rank, score in zip(res["qid"], res["docno"], res["rank"], res["score"]):
            out.write(f"{qid} Q0 {docno} {rank + 1} {score} pisa\n")


def exact_top10(npy: Path, queries: np.ndarray) -> np.ndarray:
    """Exact inner-product top 10 of each query, a chunk of the (float16) matrix at a time."""
    x = np.load(npy, mmap_mode="r")
    best_scores = np.full((len(queries), 10), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), 10), dtype=np.int64)
    step = 262_144
    for first in range(0, len(x), step):
        scores = queries @ np.asarray(x[first : first + step], dtype=np.float32).T
        scores = np.concatenate([best_scores, scores], axis=1)
        ids = np.concatenate([best_ids, np.broadcast_to(np.arange(first, first + scores.shape[1] - 10), (len(queries), scores.shape[1] - 10))], axis=1)  # fmt: skip
        top = np.argpartition(-scores, 9, axis=1)[:, :10]
        best_scores = np.take_along_axis(scores, top, axis=1)
        best_ids = np.take_along_axis(ids, top, axis=1)
    return best_ids


def recall_at_10(run: Path, truth: np.ndarray) -> float:
    """10-recall@10 of a TREC run whose doc ids are ``v{row}`` against exact top-10 row ids."""
    found: dict[str, list[int]] = {}
    with open(run) as f:
        for line in f:
            qid, _, doc, rank, *_ = line.split()
            if int(rank) <= 10:
                found.setdefault(qid, []).append(int(doc[1:]))
    hits = [len(set(found.get(f"q{i}", [])) & set(t.tolist())) for i, t in enumerate(truth)]
    return round(float(np.mean(hits)) / 10, 4)


def faiss_worker(argv: list[str]) -> None:
    """FAISS's side (run in the peers' Python): ``NPY QUERIES M THREADS RUN`` builds ``PQ{M}x4fs`` (trained on
    a seeded sample of 65,536 rows, then ``add`` a chunk of the mapped .npy at a time) and writes each query's
    top 100; the search's own wall time goes to stderr."""
    import faiss

    npy, queries_path, m, threads, run = argv[0], argv[1], int(argv[2]), int(argv[3]), argv[4]
    faiss.omp_set_num_threads(threads)
    x = np.load(npy, mmap_mode="r")
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(len(x), size=min(65_536, len(x)), replace=False))
    index = faiss.index_factory(x.shape[1], f"PQ{m}x4fs", faiss.METRIC_INNER_PRODUCT)
    index.train(np.asarray(x[sample], dtype=np.float32))
    step = 262_144
    for first in range(0, len(x), step):
        index.add(np.asarray(x[first : first + step], dtype=np.float32))
    queries = np.load(queries_path).astype(np.float32)
    t0 = time.perf_counter()
    scores, ids = index.search(queries, 100)
    seconds = time.perf_counter() - t0
    with open(run, "w") as out:
        for qi in range(len(queries)):
            for rank, (row, score) in enumerate(zip(ids[qi], scores[qi]), start=1):
                out.write(f"q{qi} Q0 v{row} {rank} {score} faiss\n")
    print(json.dumps({"search_wall_s": round(seconds, 2)}), file=sys.stderr)


def dense_phase(args: argparse.Namespace, dim: int, report: dict) -> None:
    work = args.work / f"dense{dim}"
    dtype = args.vector_dtype_384 if dim == 384 else args.vector_dtype_768
    need_free(
        args, args.vectors * dim * (NPY_BYTES_PER_DIM + DENSE_INDEX_BYTES_PER_DIM[dtype]), f"dense{dim}"
    )
    data, index, run = work / "data", work / "index", work / "run.trec"
    work.mkdir(parents=True, exist_ok=True)
    report["vector_dtype"] = dtype
    report["generate"] = timed(
        [args.python, str(BENCHES / "synthetic" / "gen_vectors.py"), "--out", str(data), "--n", str(args.vectors),
         "--dim", str(dim), "--queries", str(args.dense_queries)], work / "generate.log")  # fmt: skip
    report["npy_bytes"] = disk(data / "vectors.npy")
    report["build"] = timed(
        [*clirkit(args), "index", "dense", "--embeddings", str(data / "vectors.npy"), "--ids",
         str(data / "ids.txt"), "--index", str(index), "--pq", str(dim // 2), "--threads", str(args.threads),
         "--memory-mb", str(args.dense_memory_mb), "--vector-dtype", dtype, "--quiet"], work / "build.log")  # fmt: skip
    report["index_bytes"] = disk(index)
    report["search"] = timed(
        [*clirkit(args), "search", "dense", "--index", str(index), "--queries", str(data / "queries.npy"),
         "--qids", str(data / "qids.txt"), "--k", "100", "--threads", str(args.threads), "--output", str(run),
         "--quiet"], work / "search.log")  # fmt: skip
    report["search"]["qps"] = round(args.dense_queries / report["search"]["wall_s"], 1)
    shutil.rmtree(index)
    queries = np.load(data / "queries.npy")[: args.recall_queries]
    truth = exact_top10(data / "vectors.npy", queries)
    report["recall_10_at_10"] = recall_at_10(run, truth)
    report["recall_queries"] = len(queries)
    if args.faiss:
        faiss_run = work / "faiss_run.trec"
        report["faiss"] = timed(
            [args.peers_python, __file__, "faiss-worker", str(data / "vectors.npy"), str(data / "queries.npy"),
             str(dim // 2), str(args.threads), str(faiss_run)], work / "faiss.log")  # fmt: skip
        searched = re.search(r'\{"search_wall_s": ([0-9.]+)\}', (work / "faiss.log").read_text())
        report["faiss"]["search_wall_s"] = float(searched.group(1))
        report["faiss"]["qps"] = round(args.dense_queries / float(searched.group(1)), 1)
        report["faiss"]["recall_10_at_10"] = recall_at_10(faiss_run, truth)
    shutil.rmtree(work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="scratch directory (emptied phase by phase)")
    ap.add_argument("--phases", default="bm25,dense384,dense768")
    ap.add_argument("--docs", type=int, default=10_000_000)
    ap.add_argument("--queries", type=int, default=5_000)
    ap.add_argument("--vectors", type=int, default=10_000_000)
    ap.add_argument("--dense-queries", type=int, default=1_000)
    ap.add_argument("--recall-queries", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bm25-memory-mb", type=int, default=1024)
    ap.add_argument("--dense-memory-mb", type=int, default=256)
    ap.add_argument("--vector-dtype-384", choices=["float32", "float16"], default="float32")
    ap.add_argument("--vector-dtype-768", choices=["float32", "float16"], default="float16")
    ap.add_argument("--max-disk-gb", type=float, default=40.0, help="refuse a phase needing more")
    ap.add_argument("--min-free-gb", type=float, default=5.0, help="free disk a phase must leave")
    ap.add_argument("--pisa", action="store_true", help="PISA side by side in the bm25 phase")
    ap.add_argument("--faiss", action="store_true", help="FAISS PQ{M}x4fs side by side in the dense phases")
    ap.add_argument("--peers-python", default="/work/venvs/peers/bin/python", help="for PISA and FAISS")
    ap.add_argument("--python", default=sys.executable, help="the Python with clirkit installed")
    ap.add_argument(
        "--results", type=Path, default=None, help="JSON lines to append (default WORK/results.jsonl)"
    )
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    results = args.results or args.work / "results.jsonl"
    for phase in [p for p in args.phases.split(",") if p]:
        report: dict = {"phase": phase, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        if phase == "bm25":
            report |= {"docs": args.docs, "queries": args.queries}
            bm25_phase(args, report)
        elif phase.startswith("dense"):
            report |= {"vectors": args.vectors, "queries": args.dense_queries}
            dense_phase(args, int(phase[len("dense") :]), report)
        else:
            sys.exit(f"unknown phase {phase!r} (bm25, dense384, dense768)")
        report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        print(json.dumps(report), flush=True)
        with open(results, "a") as f:
            f.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["pisa-worker"]:
        pisa_worker(sys.argv[2:])
    elif sys.argv[1:2] == ["faiss-worker"]:
        faiss_worker(sys.argv[2:])
    else:
        main()
