"""Same-hour A/B of an experiment's stages under two clirkit checkouts: ``examples/scifact-three-families.toml``
(or ``--experiment``) run from scratch under checkout A and checkout B, alternated A B B A, each run in a
process of its own with that checkout's ``python/`` first on the path and a fresh work directory (``--order``
changes the sequence: ``AB`` for a quick trial that the script works); each stage's seconds are printed per
run, with the encoding stages (kinds ``encode*`` / ``sparse-encode*``, ``encode-heads`` among them) summed,
and the sums and ratios at the end.

``--docs N`` runs on the first N documents of the collection (a BEIR folder written under ``--scratch``:
those documents, every query, the qrels of those documents), with every other setting of the experiment
file unchanged; say so wherever the figures are quoted. Model and collection paths in the file are made
absolute. The prepared CPU graphs (``clirkit.encoders.graph_cache``) are built by a warm-up run of each
checkout first, so neither side pays for preparing them; every run writes a new store.

    python benches/encoders/experiment_encoding_ab.py --a /tmp/old-main --b . --docs 1000
    python benches/encoders/experiment_encoding_ab.py --a /tmp/old-main --b . --docs 300 --order AB \
        --experiment examples/scifact-three-families.toml

Both checkouts need a built native module (``devbuild``); the Python running this script only starts
the runs (``--python``, default this interpreter)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import io, json, sys, time
from clirkit.experiment import Experiment
exp = Experiment(sys.argv[1], sys.argv[2], quiet=True)
t = time.monotonic()
exp.run(log=io.StringIO())
print(json.dumps({"total": time.monotonic() - t,
                  "stages": [[kind, label, seconds] for kind, label, seconds in exp.timings]}))
"""


def subset(collection: Path, docs: int, scratch: Path) -> Path:
    """A BEIR folder with the first ``docs`` documents of ``collection``, all its queries and the qrels
    of those documents."""
    target = scratch / f"{collection.name}-{docs}"
    (target / "qrels").mkdir(parents=True, exist_ok=True)
    kept = set()
    with (
        open(collection / "corpus.jsonl", encoding="utf-8") as src,
        open(target / "corpus.jsonl", "w", encoding="utf-8") as dst,
    ):
        for line, _ in zip(src, range(docs)):
            dst.write(line)
            kept.add(str(json.loads(line)["_id"]))
    (target / "queries.jsonl").write_bytes((collection / "queries.jsonl").read_bytes())
    lines = (collection / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    body = [line for line in lines[1:] if line.split("\t")[1] in kept]
    (target / "qrels" / "test.tsv").write_text("\n".join([lines[0], *body]) + "\n", encoding="utf-8")
    return target


def absolute_file(experiment: Path, scratch: Path, docs: int | None) -> Path:
    """The experiment file with its ``path`` and ``model`` values absolute (the collection replaced by
    its first ``docs`` documents when asked)."""
    text = experiment.read_text(encoding="utf-8")

    def absolute(match: re.Match[str]) -> str:
        value = (experiment.parent / match.group(2)).resolve()
        if match.group(1) == "path" and docs:
            value = subset(value, docs, scratch)
        return f'{match.group(1)} = "{value}"'

    text = re.sub(r'^(path|model) = "([^"]+)"', absolute, text, flags=re.M)
    out = scratch / experiment.name
    out.write_text(text, encoding="utf-8")
    return out


def run(python: str, checkout: Path, experiment: Path, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout / "python")}
    done = subprocess.run(
        [python, "-c", CHILD, str(experiment), str(work)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"run under {checkout} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def encoding(result: dict) -> float:
    return sum(s for kind, _, s in result["stages"] if kind.startswith(("encode", "sparse-encode")))


def kind_lines(results: dict[str, list[dict]]) -> list[str]:
    """Per stage kind, the seconds of A's and B's runs summed and their ratio; a kind that only one side
    runs (``encode`` and ``encode-tokens`` under A, one shared ``encode-heads`` under B) says so instead
    of a ratio."""
    by_kind: dict[str, list[float | None]] = {}
    for side, name in enumerate("AB"):
        for result in results[name]:
            for kind, _, seconds in result["stages"]:
                sums = by_kind.setdefault(kind, [None, None])
                sums[side] = (sums[side] or 0.0) + seconds
    lines = []
    for kind, (a, b) in sorted(by_kind.items()):
        if a is None or b is None:
            ratio = f"{'B' if a is None else 'A'} only"
        else:
            ratio = f"A/B {a / max(b, 1e-9):.2f}x"
        lines.append(f"  {kind:<22} A {a or 0.0:8.1f} s  B {b or 0.0:8.1f} s  {ratio}")
    return lines


def run_order(text: str) -> str:
    """``--order``: the checkouts' runs in sequence, a string of A and B naming each at least once."""
    order = text.strip().upper()
    if set(order) - {"A", "B"} or not {"A", "B"} <= set(order):
        raise argparse.ArgumentTypeError(f"{text!r}: a sequence of A and B runs naming each, e.g. ABBA or AB")
    return order


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="checkout A (the before)")
    ap.add_argument("--b", type=Path, required=True, help="checkout B (the after)")
    ap.add_argument("--experiment", type=Path, default=REPO / "examples" / "scifact-three-families.toml")
    ap.add_argument("--docs", type=int, default=None, help="first N documents only")
    ap.add_argument("--scratch", type=Path, default=None)
    ap.add_argument(
        "--order", type=run_order, default="ABBA", help="the runs in sequence (default ABBA; AB for a trial)"
    )
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    if args.scratch is not None:
        args.scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="exp-ab-", dir=args.scratch) as tmp:
        scratch = Path(tmp)
        experiment = absolute_file(args.experiment.resolve(), scratch, args.docs)
        checkouts = {"A": args.a.resolve(), "B": args.b.resolve()}
        for name, checkout in checkouts.items():  # prepared graphs cached before anything is timed
            warm = absolute_file(args.experiment.resolve(), scratch / f"warm-{name}", 20)
            run(args.python, checkout, warm, scratch / f"warm-{name}" / "work")
        results: dict[str, list[dict]] = {"A": [], "B": []}
        for i, name in enumerate(args.order):
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            result = run(args.python, checkouts[name], experiment, scratch / f"run-{i}")
            results[name].append(result)
            print(f"run {i + 1} {name} ({checkouts[name]}), load before {load}: {result['total']:.1f} s, "
                  f"encoding {encoding(result):.1f} s", flush=True)  # fmt: skip
            for kind, label, seconds in result["stages"]:
                print(f"    {seconds:8.1f} s  {kind:<22} {label}")
        print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for what, measure in (("encoding stages", encoding), ("whole run", lambda r: r["total"])):
            a = sum(measure(r) for r in results["A"])
            b = sum(measure(r) for r in results["B"])
            runs = f"sums of {args.order.count('A')} and {args.order.count('B')} runs"
            print(f"{what}: A {a:.1f} s, B {b:.1f} s ({runs}): A/B = {a / b:.2f}x")
        for line in kind_lines(results):
            print(line)


if __name__ == "__main__":
    main()
