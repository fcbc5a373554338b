"""RRF fusion speed: clirkit vs ranx, side by side in one process, on the same run files.

Three runs x Q queries x D documents (default 5,000 x 1,000), overlapping candidate sets, no
score ties (so both tools see the same ranks). Measured:

- fuse only: clirkit ``fuse_native`` on runs already loaded (``NativeRun``) vs ranx on runs
  already loaded (``ranx.Run``), after warm-up calls that JIT-compile ranx's numba code: ranx's
  ``fuse(runs, method="rrf")`` as written (its defaults: a min-max normalization pass first), and
  ``fuse(..., norm=None)``, which skips that pass (RRF does not need it: the faster setting for
  ranx). Both the first call on the loaded runs (memory not yet reused: page faults for the
  result) and a repeated call are reported: the median of ``--repeat`` clirkit calls, ranx's
  second ``norm=None`` call;
- loading: ``NativeRun.read`` vs ``ranx.Run.from_file``;
- file to file: ``clirkit.fuse(paths, output=...)`` (parse + fuse + write) vs ranx load + fuse +
  ``save``.

ranx runs in a subprocess (its runs take several GB). The fused results are checked against each
other (same documents per query, scores within 1e-9 relative) before any number is printed.
Needs ranx (``/work/venv-peers``) and clirkit importable together.

    python benches/fusion/fusion_vs_ranx.py [--queries 5000] [--docs 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import numpy as np

WORK = Path(__file__).resolve().parents[1] / ".work"


def make_runs(n_queries: int, n_docs: int) -> List[Path]:
    """Write three runs (cached under benches/.work); each query's runs draw from 2*D shared
    candidates, so documents overlap between runs as in real fusion."""
    WORK.mkdir(exist_ok=True)
    paths = [WORK / f"rrf_{n_queries}x{n_docs}_run{r}.trec" for r in range(3)]
    if all(p.exists() for p in paths):
        return paths
    rng = np.random.default_rng(42)
    for r, path in enumerate(paths):
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="ascii") as f:
            for q in range(n_queries):
                picks = rng.permutation(2 * n_docs)[:n_docs]
                # A bijection mod 10^8 keeps doc ids distinct and scattered.
                ids = ((q * 2 * n_docs + picks) * 2654435761) % 100_000_000
                scores = n_docs - np.arange(n_docs) + rng.random(n_docs) * 0.5
                f.write(
                    "".join(
                        f"q{q} Q0 d{i} {k + 1} {s:.4f} run{r}\n" for k, (i, s) in enumerate(zip(ids, scores))
                    )
                )
        tmp.rename(path)
    return paths


def timed(
    fn: Callable[[], object],
    repeat: int = 1,
    cpu: Optional[List[float]] = None,
    calls: Optional[List[Tuple[float, float]]] = None,
):
    """Median wall time of ``repeat`` calls (and, into ``cpu``, the median process CPU time:
    all threads, a measure less sensitive to other jobs on the machine; into ``calls``, every
    call's (wall, CPU)). The previous call's result is freed before the next call is timed."""
    times, cpu_times, result = [], [], None
    for _ in range(repeat):
        result = None
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - t)
        cpu_times.append(time.process_time() - c)
    if cpu is not None:
        cpu.append(statistics.median(cpu_times))
    if calls is not None:
        calls.extend(zip(times, cpu_times))
    return statistics.median(times), result


def ranx_worker(paths: List[str], out: str) -> None:
    """Time ranx in its own process (its runs take several GB); print the timings as JSON."""
    import ranx

    tiny = ranx.Run({"q": {"a": 2.0, "b": 1.0}})
    ranx.fuse(runs=[tiny, tiny], method="rrf", norm=None, params={"k": 60})  # numba JIT warm-up
    ranx.fuse(runs=[tiny, tiny], method="rrf", params={"k": 60})
    t_load, runs = timed(lambda: [ranx.Run.from_file(p, kind="trec") for p in paths])
    # The call as the issue names it, with ranx's defaults (min-max normalization first).
    default_calls: List[Tuple[float, float]] = []
    timed(lambda: ranx.fuse(runs=runs, method="rrf", params={"k": 60}), 1, calls=default_calls)
    # norm=None: RRF needs no score normalization, so ranx is spared its default min-max pass.
    # Two calls: the first (as a one-off fusion pays it) and a repeated one.
    calls: List[Tuple[float, float]] = []
    _, fused = timed(lambda: ranx.fuse(runs=runs, method="rrf", norm=None, params={"k": 60}), 2, calls=calls)
    runs.clear()
    t_save, _ = timed(lambda: fused.save(out, kind="trec"))
    print(
        json.dumps(
            {
                "load": t_load,
                "fuse_default": default_calls[0][0],
                "fuse_default_cpu": default_calls[0][1],
                "fuse": calls[0][0],
                "fuse_cpu": calls[0][1],
                "fuse_again": calls[1][0],
                "fuse_again_cpu": calls[1][1],
                "save": t_save,
                "version": importlib.metadata.version("ranx"),
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="clirkit repetitions (median reported)")
    ap.add_argument("--ranx-worker", nargs=4, metavar=("RUN1", "RUN2", "RUN3", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ranx_worker:
        ranx_worker(args.ranx_worker[:3], args.ranx_worker[3])
        return

    import clirkit
    from clirkit.fusion import NativeRun, fuse, fuse_native

    paths = make_runs(args.queries, args.docs)
    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores; clirkit {clirkit.__version__}")
    print("# load average (1, 5, 15 min) before: %.2f %.2f %.2f" % os.getloadavg())
    print(
        f"# 3 runs x {args.queries} queries x {args.docs} docs "
        f"({sum(p.stat().st_size for p in paths) / 1e6:.0f} MB of run files)"
    )

    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        t_load_ck, loaded = timed(lambda: [NativeRun.read(str(p)) for p in paths], args.repeat)
        fuse_cpu: List[float] = []
        fuse_calls: List[Tuple[float, float]] = []
        t_fuse_ck, fused = timed(
            lambda: fuse_native(loaded, method="rrf", k=60), args.repeat, fuse_cpu, fuse_calls
        )
        loaded.clear()
        del fused
        out = Path(tmp) / "clirkit.trec"
        t_e2e_ck, _ = timed(
            lambda: fuse([str(p) for p in paths], method="rrf", k=60, output=out), args.repeat
        )

        # Printed before ranx starts: its worker takes minutes and several GB.
        print(
            f"# clirkit: load {t_load_ck:.3f} s, fuse (first call) {fuse_calls[0][0]:.3f} s, "
            f"file to file {t_e2e_ck:.3f} s",
            flush=True,
        )
        ranx_out = Path(tmp) / "ranx.trec"
        worker = subprocess.run(
            [sys.executable, __file__, "--ranx-worker", *map(str, paths), str(ranx_out)],
            check=True,
            capture_output=True,
            text=True,
        )
        rx = json.loads(worker.stdout.strip().splitlines()[-1])
        ours = dict(NativeRun.read(str(out)).to_list())
        theirs = dict(NativeRun.read(str(ranx_out)).to_list())

    # Same fused documents and scores (ties may be listed in another order by ranx).
    assert ours.keys() == theirs.keys()
    for q in ours:
        a, b = dict(ours[q]), dict(theirs[q])
        assert a.keys() == b.keys(), q
        assert all(abs(a[d] - b[d]) <= 1e-9 * abs(a[d]) for d in a), q
    print(
        f"checked: identical fused documents and scores (rel. 1e-9) on all {len(ours)} queries; "
        f"ranx {rx['version']}"
    )

    rows = [
        ('fuse rrf, first call; ranx fuse(runs, method="rrf")', fuse_calls[0][0], rx["fuse_default"]),
        ("  same, CPU time of all threads", fuse_calls[0][1], rx["fuse_default_cpu"]),
        ("fuse rrf, first call; ranx norm=None", fuse_calls[0][0], rx["fuse"]),
        ("  same, CPU time of all threads", fuse_calls[0][1], rx["fuse_cpu"]),
        ("fuse rrf, repeated (median / 2nd call)", t_fuse_ck, rx["fuse_again"]),
        ("  same, CPU time of all threads", fuse_cpu[0], rx["fuse_again_cpu"]),
        ("load 3 run files", t_load_ck, rx["load"]),
        ("file to file (load + fuse + write)", t_e2e_ck, rx["load"] + rx["fuse"] + rx["save"]),
    ]
    print("# clirkit fuse calls (wall s, CPU s): " + ", ".join(f"({w:.3f}, {c:.3f})" for w, c in fuse_calls))
    print("# load average (1, 5, 15 min) after: %.2f %.2f %.2f" % os.getloadavg())
    print(f"{'step':52} {'clirkit s':>10} {'ranx s':>10} {'ranx/clirkit':>13}")
    for name, ours_s, theirs_s in rows:
        print(f"{name:52} {ours_s:10.3f} {theirs_s:10.3f} {theirs_s / ours_s:12.1f}x")


if __name__ == "__main__":
    main()
