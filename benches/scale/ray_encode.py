"""Ray Data encoding (``clirkit encode --ray``) against ``clirkit encode`` on the same corpus and model:
the same vectors (max abs difference) and the time of each, run one after the other on this machine.

    python benches/scale/ray_encode.py [--corpus ../shared/data/beir-scifact/corpus.jsonl]
        [--model ../shared/models/multilingual-e5-small-int8] [--shards 8] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(SHARED / "data" / "beir-scifact" / "corpus.jsonl"))
    ap.add_argument("--model", default=str(SHARED / "models" / "multilingual-e5-small-int8"))
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--work", default=None, help="scratch directory (default: a temporary one, removed)")
    args = ap.parse_args()
    load_before = os.getloadavg()
    work = Path(args.work or tempfile.mkdtemp(prefix="ray_encode_"))
    work.mkdir(parents=True, exist_ok=True)
    cli = [
        sys.executable,
        "-m",
        "clirkit.cli",
        "encode",
        "--model",
        args.model,
        "--corpus",
        args.corpus,
        "--quiet",
    ]
    try:
        single = timed(cli + ["--output", str(work / "single"), "--restart"])
        shutil.rmtree(work / "shards", ignore_errors=True)
        ray_time = timed(cli + ["--output", str(work / "shards"), "--ray", "--shards", str(args.shards)])
        want = np.load(work / "single.npy")
        state = json.loads((work / "shards" / "encode.json").read_text())
        got = np.concatenate(
            [np.load(work / "shards" / f"shard-{s:04d}.npy") for s in range(len(state["shards"]))]
        )
        ids = [
            line
            for s in range(len(state["shards"]))
            for line in (work / "shards" / f"shard-{s:04d}.ids.txt").read_text().split("\n")
            if line
        ]
        same_ids = ids == (work / "single.ids.txt").read_text().split()
        print(
            json.dumps(
                {
                    "rows": int(want.shape[0]),
                    "same_ids_in_order": same_ids,
                    "max_abs_diff": float(np.max(np.abs(got - want))),
                    "clirkit_encode_s": round(single, 1),
                    "ray_data_encode_s": round(ray_time, 1),
                    "ratio_ray_over_single": round(ray_time / single, 2),
                    "cpus": os.cpu_count(),
                    "load_before": load_before,
                    "load_after": os.getloadavg(),
                }
            )
        )
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
