"""End-to-end evaluation speed, clirkit vs pytrec_eval (pytrec-eval-terrier) and ranx, side by side.

Each system parses the qrels and run FILES and computes nDCG@20, MAP, recall@1000 and P@10 (clirkit also
Judged@20, which neither peer has), on a synthetic run of Q queries x D documents (benches/synthetic/eval_data.py).
Every system runs in its own long-lived worker process (peers from the peers venv). Each worker first
runs the whole pipeline once untimed (ranx: numba JIT warm-up; the same courtesy for the others). Then,
in each of `--repeat` rounds, the workers run once each, one after the other, so that every round
measures all systems under about the same machine load (this 2-core VM is shared and its load swings).
Reported per system: the median wall time and the median CPU time (user + system, all threads) of its
runs, and per peer the median over rounds of the per-round ratio peer / clirkit.

    python benches/eval/eval_vs_peers.py [--queries 5000] [--docs 1000] [--repeat 3]
        [--peers-python /work/venv-peers/bin/python] [--json benches/out/eval_vs_peers.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benches/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "synthetic"))

CLIRKIT_MEASURES = ["ndcg_cut.20", "map", "recall.1000", "P.10", "judged.20"]
TREC_MEASURES = {"ndcg_cut.20", "map", "recall.1000", "P.10"}
RANX_MEASURES = ["ndcg@20", "map", "recall@1000", "precision@10"]
RANX_KEYS = {"ndcg@20": "ndcg_cut_20", "map": "map", "recall@1000": "recall_1000", "precision@10": "P_10"}


def run_clirkit(qrels: str, run: str) -> dict:
    from clirkit import evaluation

    return evaluation.evaluate(qrels, run, CLIRKIT_MEASURES)


def run_pytrec_eval(qrels_path: str, run_path: str) -> dict:
    import pytrec_eval

    qrels: dict = {}
    with open(qrels_path) as f:
        for line in f:
            qid, _, doc, rel = line.split()
            qrels.setdefault(qid, {})[doc] = int(rel)
    run: dict = {}
    with open(run_path) as f:
        for line in f:
            qid, _, doc, _, score, _ = line.split()
            run.setdefault(qid, {})[doc] = float(score)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)
    keys = next(iter(per_query.values())).keys()
    return {
        k: pytrec_eval.compute_aggregated_measure(k, [v[k] for v in per_query.values()]) for k in sorted(keys)
    }


def run_ranx(qrels_path: str, run_path: str) -> dict:
    from ranx import Qrels, Run, evaluate

    qrels = Qrels.from_file(qrels_path, kind="trec")
    run = Run.from_file(run_path, kind="trec")
    scores = evaluate(qrels, run, RANX_MEASURES)
    return {RANX_KEYS[k]: float(v) for k, v in scores.items()}


SYSTEMS = {"clirkit": run_clirkit, "pytrec_eval": run_pytrec_eval, "ranx": run_ranx}


def cpu_seconds() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def worker(system: str, qrels: str, run: str) -> None:
    """Warm up, then run once per line read from stdin, answering one JSON line each time."""
    fn = SYSTEMS[system]
    t = time.perf_counter()
    fn(qrels, run)  # warm-up (ranx compiles its numba kernels here)
    print(json.dumps({"first": time.perf_counter() - t}), flush=True)
    for _ in sys.stdin:
        t, c = time.perf_counter(), cpu_seconds()
        values = fn(qrels, run)
        wall, cpu = time.perf_counter() - t, cpu_seconds() - c
        print(json.dumps({"wall": wall, "cpu": cpu, "values": values}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peers-python", default="/work/venv-peers/bin/python")
    ap.add_argument("--work", default=os.path.join(HERE, ".work"))
    ap.add_argument("--json", default=os.path.join(HERE, "out", "eval_vs_peers.json"))
    ap.add_argument("--systems", default="clirkit,pytrec_eval,ranx")
    a = ap.parse_args()

    from eval_data import generate

    qrels, run = generate(a.work, a.queries, a.docs, seed=0)
    systems = a.systems.split(",")
    workers = {}
    results: dict = {}
    for system in systems:
        python = sys.executable if system == "clirkit" else a.peers_python
        cmd = [python, os.path.abspath(__file__), "worker", system, qrels, run]
        workers[system] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = json.loads(workers[system].stdout.readline())["first"]
        results[system] = {"first": first, "wall": [], "cpu": []}
        print(f"{system:<12} warm-up (first call) {first:.3f} s", flush=True)
    for round_no in range(a.repeat):
        for system in systems:
            w = workers[system]
            w.stdin.write("go\n")
            w.stdin.flush()
            r = json.loads(w.stdout.readline())
            results[system]["wall"].append(r["wall"])
            results[system]["cpu"].append(r["cpu"])
            results[system]["values"] = r["values"]
            print(
                f"round {round_no + 1} {system:<12} wall {r['wall']:8.3f} s  cpu {r['cpu']:8.3f} s",
                flush=True,
            )
    for w in workers.values():
        w.stdin.close()
        w.wait()
    for system, r in results.items():
        r["median_wall"] = statistics.median(r["wall"])
        r["median_cpu"] = statistics.median(r["cpu"])
        print(
            f"{system:<12} median wall {r['median_wall']:8.3f} s  median cpu {r['median_cpu']:8.3f} s  {r['values']}"
        )
    base = results.get("clirkit")
    if base:
        for system, r in results.items():
            if system == "clirkit":
                continue
            wall_ratio = statistics.median(p / c for p, c in zip(r["wall"], base["wall"]))
            cpu_ratio = statistics.median(p / c for p, c in zip(r["cpu"], base["cpu"]))
            r["ratio_wall"], r["ratio_cpu"] = wall_ratio, cpu_ratio
            print(
                f"clirkit vs {system}: {wall_ratio:.1f}x faster (wall, median of per-round ratios), "
                f"{cpu_ratio:.1f}x less CPU time"
            )
        if "pytrec_eval" in results:
            ours, theirs = base["values"], results["pytrec_eval"]["values"]
            worst = max(abs(ours[k] - theirs[k]) for k in theirs)
            print(f"max |clirkit - pytrec_eval| over the shared measures: {worst:.2e}")
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(
            {"queries": a.queries, "docs": a.docs, "cpu_count": os.cpu_count(), "results": results},
            f,
            indent=2,
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
