"""Synthetic evaluation data for the benchmarks: graded qrels and a TREC run of Q queries x D
documents with realistic score ties. Deterministic for a seed.

    python benches/synthetic/eval_data.py OUT_DIR [--queries 5000] [--docs 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random


def generate(out_dir: str, queries: int, docs: int, seed: int) -> tuple[str, str]:
    """Write OUT_DIR/qrels.trec and OUT_DIR/run.trec (skipped when already there)."""
    os.makedirs(out_dir, exist_ok=True)
    qrels_path = os.path.join(out_dir, f"qrels_{queries}.trec")
    run_path = os.path.join(out_dir, f"run_{queries}x{docs}.trec")
    if os.path.exists(qrels_path) and os.path.exists(run_path):
        return qrels_path, run_path
    rng = random.Random(seed)
    collection = 200_000
    with open(qrels_path + ".tmp", "w") as q, open(run_path + ".tmp", "w") as r:
        for qi in range(queries):
            qid = f"q{qi}"
            judged = rng.sample(range(collection), 40)
            q.writelines(f"{qid} 0 doc{d} {rng.choice((0, 0, 0, 1, 1, 2, 3))}\n" for d in judged)
            retrieved = set(rng.sample(judged, 25))
            while len(retrieved) < docs:
                retrieved.add(rng.randrange(collection))
            scored = sorted(((round(rng.uniform(0, 30), 4), d) for d in retrieved), reverse=True)
            lines = [f"{qid} Q0 doc{d} {rank} {s} bench\n" for rank, (s, d) in enumerate(scored, 1)]
            r.write("".join(lines))
    os.replace(qrels_path + ".tmp", qrels_path)
    os.replace(run_path + ".tmp", run_path)
    return qrels_path, run_path


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(*generate(a.out_dir, a.queries, a.docs, a.seed))
