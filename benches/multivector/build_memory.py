"""Peak memory and time of a multi-vector index build over token files in several parts (issue 28 item 3):
the path that loads every part's token matrix and copies them into one (``load_tokens`` + ``np.concatenate``
+ ``MultiVectorIndex.build``, as the experiment and the CLI did before the build read files in place)
against ``clirkit index multivector --embeddings P1 P2 ...`` (``MultiVectorIndex.build_files``: the token
files read in place, a chunk at a time). Each build runs in its own process under ``/usr/bin/time -v``,
the two alternating ``--rounds`` times; every index written must equal the first byte for byte.

The token files are synthetic: ``--parts`` prefixes (``PREFIX.tokens.npy`` float32, ``.offsets.npy``,
``.ids.txt``, as ``clirkit encode --multivector`` writes them) of documents of 16 to 64 clustered unit
tokens, ``--tokens`` in all, generated a chunk at a time once per (tokens, dim, parts, seed) under ``--out``.

``--baseline-python DIR`` runs the copying path with the package in ``DIR`` (the ``python/`` folder of a
checkout from before the change, its native module built: e.g. ``git worktree add /tmp/old 1597319`` then
``devbuild`` there); without it the copying path runs with the clirkit this Python imports (its in-memory build,
which the copy feeds, is the same build as the streamed one with the matrix as the only part).

    python benches/multivector/build_memory.py --out /work/scratch/mvstream --tokens 3000000 --dim 128 \\
        --parts 3 --baseline-python /tmp/old/python
    python benches/multivector/build_memory.py --out /tmp/mvmem --quick        # 200k tokens, 2 parts
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benches/: bench_common
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "synthetic"))
from bench_common import refuse_foreign, timed_process  # noqa: E402
from gen_vectors import unit_rows  # noqa: E402

#: The copying path, run in a child process: every part loaded, the matrices concatenated, then built.
COPYING = """
import sys
import numpy as np
from clirkit.multivector import MultiVectorIndex, load_tokens
out, centroids, threads, prefixes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
matrices, lengths, ids = [], [], []
for prefix in prefixes:
    tokens, offsets, names = load_tokens(prefix)
    matrices.append(tokens)
    lengths.append(np.diff(offsets.astype(np.int64)))
    ids.extend(names)
offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths))]).astype(np.uint64)
tokens = np.concatenate(matrices)
del matrices
MultiVectorIndex.build(tokens, offsets, ids, out, centroids=centroids, threads=threads, quiet=True)
"""


def write_parts(data: Path, tokens: int, dim: int, parts: int, seed: int) -> list[Path]:
    """``parts`` token prefixes of about ``tokens / parts`` tokens each, written a chunk of documents at
    a time (never the whole matrix in memory)."""
    params = {"tokens": tokens, "dim": dim, "parts": parts, "seed": seed}
    prefixes = [data / f"part{p}" for p in range(parts)]
    if (data / "params.json").exists() and json.loads((data / "params.json").read_text()) == params:
        return prefixes
    refuse_foreign(data, "params.json")
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    rng = np.random.Generator(np.random.PCG64(seed))
    centres = rng.standard_normal(size=(256, dim), dtype=np.float32)
    doc = 0
    for p, prefix in enumerate(prefixes):
        target = tokens // parts + (tokens % parts if p == parts - 1 else 0)
        lengths, total = [], 0
        while total < target:
            lengths.append(int(min(rng.integers(16, 65), target - total)))
            total += lengths[-1]
        with open(f"{prefix}.tokens.npy", "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": "<f4", "fortran_order": False, "shape": (target, dim)}
            )
            for first in range(0, target, 65_536):
                f.write(unit_rows(rng, centres, min(65_536, target - first), 0.6).tobytes())
        np.save(f"{prefix}.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        Path(f"{prefix}.ids.txt").write_text(
            "".join(f"d{doc + i}\n" for i in range(len(lengths))), encoding="utf-8"
        )
        doc += len(lengths)
    (data / "params.json").write_text(json.dumps(params))
    return prefixes


def digest(index: Path) -> str:
    """One hash over every file of an index directory (names and bytes)."""
    h = hashlib.sha256()
    for path in sorted(index.iterdir()):
        h.update(path.name.encode())
        with open(path, "rb") as f:
            while block := f.read(1 << 24):
                h.update(block)
    return h.hexdigest()


def run(args: argparse.Namespace) -> dict:
    out = args.out.resolve()
    prefixes = write_parts(out / "data", args.tokens, args.dim, args.parts, args.seed)
    matrix_mib = args.tokens * args.dim * 4 / 2**20
    baseline = str(args.baseline_python.resolve()) if args.baseline_python else None

    def env(python: str | None) -> dict[str, str]:
        # Without a package folder, the children import clirkit as this process does (installed, or
        # through this environment's PYTHONPATH).
        return {**os.environ, "PYTHONPATH": python} if python else dict(os.environ)

    common = ["--centroids", str(args.centroids), "--threads", str(args.threads), "--quiet"]
    commands = {
        "copying": (
            [sys.executable, "-c", COPYING, "{index}", str(args.centroids), str(args.threads), *map(str, prefixes)],
            env(baseline),
        ),
        "in place": (
            [sys.executable, "-m", "clirkit.cli", "index", "multivector", "--embeddings",
             *map(str, prefixes), "--index", "{index}", *common],
            env(None),
        ),
    }  # fmt: skip
    rows, digests = [], set()
    for round_ in range(args.rounds):
        for name, (argv, child_env) in commands.items():
            index = out / f"index-{name.replace(' ', '-')}"
            if index.exists() and not (index / "meta.json").exists():
                raise SystemExit(f"{index} is not an index this script wrote: give another --out")
            shutil.rmtree(index, ignore_errors=True)
            measured = timed_process([a.replace("{index}", str(index)) for a in argv], env=child_env)
            digests.add(digest(index))
            rows.append({"round": round_ + 1, "path": name, **measured})
            print(
                f"round {round_ + 1} {name:8s} {measured['seconds']:8.1f} s {measured['peak_rss_mib']:9.1f} MiB"
            )
    if len(digests) != 1:
        raise SystemExit(f"the indexes differ: {len(digests)} distinct digests")
    result = {
        "tokens": args.tokens,
        "dim": args.dim,
        "parts": args.parts,
        "centroids": args.centroids,
        "threads": args.threads,
        "float32 matrix MiB": round(matrix_mib, 1),
        "baseline": baseline,
        "indexes identical": True,
        "runs": rows,
    }
    (out / "build_memory.json").write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the token files and the indexes")
    p.add_argument("--tokens", type=int, default=3_000_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--parts", type=int, default=3)
    p.add_argument("--centroids", type=int, default=1024)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2, help="alternations of the two builds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--baseline-python", type=Path, default=None, help="package folder for the copying path")
    p.add_argument("--quick", action="store_true", help="200k tokens in 2 parts, 256 centroids, 1 round")
    args = p.parse_args(argv)
    if args.quick:
        args.tokens, args.parts, args.centroids, args.rounds = 200_000, 2, 256, 1
    result = run(args)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
