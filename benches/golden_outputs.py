"""Byte-for-byte guard on clirkit's outputs: BM25 index files and runs, flat and PQ dense runs,
RRF output and `clirkit eval` text, on the embedded sample and (next to ../shared) on SciFact.

Every output is produced through the `clirkit` command exactly as a user would, hashed with
sha256 and compared with `benches/golden/outputs.sha256`, recorded at the commit before the
architecture clean-up (dbbef63). Refactors, speed work and new features must leave every hash
unchanged; an index manifest (`meta.json`) is compared by its recorded keys, so a later round may
add keys to it (and files to its `files` record, each then hashed here too) but never change one.

    python benches/golden_outputs.py            # check (exit 1 on any difference)
    python benches/golden_outputs.py --write    # re-record (only when an output is meant to change)
    python benches/golden_outputs.py --only sample

Dense inputs are generated here from integer arithmetic (bit-exact on every machine), not by an
ONNX model, so the hashes depend on clirkit alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = ROOT / "benches" / "golden" / "outputs.sha256"
SHARED = ROOT.parent / "shared" / "data"
SAMPLE = ROOT / "python" / "clirkit" / "data" / "sample"
MEASURES = [
    "ndcg_cut.10",
    "ndcg_cut.20",
    "map",
    "recall.100",
    "recall.1000",
    "P.10",
    "judged.20",
    "recip_rank",
]


def collections() -> Dict[str, Dict[str, Path]]:
    found = {
        "sample": {
            "corpus": SAMPLE / "corpus.jsonl",
            "queries": SAMPLE / "queries.jsonl",
            "qrels": SAMPLE / "qrels.tsv",
        }
    }
    scifact = SHARED / "beir-scifact"
    if scifact.is_dir():
        found["scifact"] = {
            "corpus": scifact / "corpus.jsonl",
            "queries": scifact / "queries.jsonl",
            "qrels": scifact / "qrels" / "test.tsv",
        }
    return found


def clirkit(*args: str) -> str:
    cmd = [sys.executable, "-m", "clirkit.cli", *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr}")
    return done.stdout


def ids_of(path: Path) -> List[str]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                out.append(str(rec.get("_id", rec.get("id"))))
    return out


def vectors(n: int, dim: int, salt: int) -> np.ndarray:
    """Clustered vectors from integer hashing: the same bits on every machine and numpy."""
    i = np.arange(n, dtype=np.uint64)[:, None]
    j = np.arange(dim, dtype=np.uint64)[None, :]
    cluster = (i * np.uint64(2654435761) + np.uint64(salt)) % np.uint64(97)

    def hashed(x: np.ndarray) -> np.ndarray:
        x = (x ^ (x >> np.uint64(31))) * np.uint64(0x9E3779B97F4A7C15)
        x = x ^ (x >> np.uint64(29))
        return ((x >> np.uint64(40)) & np.uint64(0xFFFF)).astype(np.float32) / np.float32(
            65536.0
        ) - np.float32(0.5)

    centre = hashed(cluster * np.uint64(1_000_003) + j)
    noise = hashed((i * np.uint64(7919) + np.uint64(salt)) * np.uint64(1_000_033) + j)
    return (centre + np.float32(0.35) * noise).astype(np.float32)


def produce(name: str, files: Dict[str, Path], work: Path) -> Dict[str, Path]:
    """Run every stage on one collection; returns output name -> file."""
    out: Dict[str, Path] = {}
    corpus, queries, qrels = files["corpus"], files["queries"], files["qrels"]
    lang = ["--lang-field", "lang"] if name == "sample" else ["--lang", "en"]
    bm25 = work / "bm25"
    clirkit("index", "bm25", "--corpus", str(corpus), "--index", str(bm25), *lang, "--quiet")
    for f in sorted(bm25.iterdir()):
        out[f"bm25-index/{f.name}"] = f
    for k in ("10", "1000"):
        run = work / f"bm25.k{k}.trec"
        clirkit(
            "search",
            "bm25",
            "--index",
            str(bm25),
            "--queries",
            str(queries),
            "--output",
            str(run),
            "--k",
            k,
            "--quiet",
        )
        out[f"bm25.k{k}.trec"] = run

    doc_ids, qids = ids_of(corpus), ids_of(queries)
    dim = 64
    np.save(work / "docs.npy", vectors(len(doc_ids), dim, 1))
    np.save(work / "queries.npy", vectors(len(qids), dim, 2))
    (work / "docs.ids.txt").write_text("".join(f"{d}\n" for d in doc_ids), encoding="utf-8")
    (work / "queries.ids.txt").write_text("".join(f"{q}\n" for q in qids), encoding="utf-8")
    dense_runs = []
    for kind, extra in (
        ("flat", []),
        ("pq", ["--pq", str(dim // 2)]),
        ("pq-norefine", ["--pq", str(dim // 2)]),
    ):
        index = work / f"dense-{kind}"
        if not index.exists():
            clirkit(
                "index",
                "dense",
                "--embeddings",
                str(work / "docs.npy"),
                "--ids",
                str(work / "docs.ids.txt"),
                "--index",
                str(index),
                *extra,
                "--quiet",
            )
        refine = ["--refine", "0"] if kind == "pq-norefine" else []
        run = work / f"dense-{kind}.trec"
        clirkit(
            "search",
            "dense",
            "--index",
            str(index),
            "--queries",
            str(work / "queries.npy"),
            "--qids",
            str(work / "queries.ids.txt"),
            "--output",
            str(run),
            "--k",
            "100",
            *refine,
            "--quiet",
        )
        out[f"dense-{kind}.trec"] = run
        dense_runs.append(run)
    for f in sorted((work / "dense-pq").iterdir()):
        out[f"dense-pq-index/{f.name}"] = f

    fused = work / "rrf.trec"
    clirkit(
        "fuse",
        "--method",
        "rrf",
        "--k",
        "60",
        str(work / "bm25.k1000.trec"),
        *map(str, dense_runs),
        "--output",
        str(fused),
    )
    out["rrf.trec"] = fused
    for run_name in ("bm25.k1000.trec", "rrf.trec"):
        text = clirkit(
            "eval",
            "--qrels",
            str(qrels),
            "--run",
            str(out[run_name]),
            *sum((["-m", m] for m in MEASURES), []),
        )
        report = work / f"eval.{run_name}.txt"
        report.write_text(text, encoding="utf-8")
        out[f"eval.{run_name}.txt"] = report
    per_query = clirkit(
        "eval",
        "--qrels",
        str(qrels),
        "--run",
        str(out["bm25.k10.trec"]),
        "-q",
        "-m",
        "ndcg_cut.10",
        "-m",
        "P.5",
    )
    (work / "eval.per-query.txt").write_text(per_query, encoding="utf-8")
    out["eval.per-query.txt"] = work / "eval.per-query.txt"
    return out


def digest(name: str, path: Path) -> str:
    if path.name == "meta.json":
        # Manifests are compared by the keys recorded here (later rounds may add keys); the
        # corpus path a build records depends on where the checkout lives, so only its name counts,
        # and the manifest's checksum of its own text (which holds that path) is left out.
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta.pop("checksum", None)
        if isinstance(meta.get("build"), dict) and "corpus" in meta["build"]:
            meta["build"]["corpus"] = Path(meta["build"]["corpus"]).name
        return "json:" + json.dumps(meta, sort_keys=True)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_expected() -> Dict[str, str]:
    table = {}
    if EXPECTED.is_file():
        for line in EXPECTED.read_text(encoding="utf-8").splitlines():
            if line.strip():
                key, value = line.split("  ", 1)
                table[key] = value
    return table


def recorded_alike(key: str, old: object, new: object) -> bool:
    """Whether a manifest key holds what was recorded; `files` may list new files besides."""
    if key == "files" and isinstance(old, dict) and isinstance(new, dict):
        return all(new.get(name) == digest for name, digest in old.items())
    return old == new


def compare(key: str, want: str, got: str) -> Optional[str]:
    if want.startswith("json:") and got.startswith("json:"):
        old, new = json.loads(want[5:]), json.loads(got[5:])
        changed = [k for k in old if not recorded_alike(k, old[k], new.get(k, object()))]
        return f"manifest keys changed: {changed}" if changed else None
    return None if want == got else "bytes differ"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="record the current outputs as expected")
    parser.add_argument("--only", help="one collection (sample or scifact)")
    parser.add_argument("--keep", help="keep the outputs in this directory")
    args = parser.parse_args()
    expected = read_expected()
    got: Dict[str, str] = {}
    for name, files in collections().items():
        if args.only and name != args.only:
            continue
        work = Path(args.keep) / name if args.keep else Path(tempfile.mkdtemp(prefix=f"golden-{name}-"))
        work.mkdir(parents=True, exist_ok=True)
        for key, path in produce(name, files, work).items():
            got[f"{name}/{key}"] = digest(key, path)
    if args.write:
        merged = {**expected, **got}
        EXPECTED.parent.mkdir(parents=True, exist_ok=True)
        EXPECTED.write_text("".join(f"{k}  {merged[k]}\n" for k in sorted(merged)), encoding="utf-8")
        print(f"recorded {len(got)} outputs in {EXPECTED.relative_to(ROOT)}")
        return 0
    failures = []
    for key, value in sorted(got.items()):
        want = expected.get(key)
        problem = "not recorded" if want is None else compare(key, want, value)
        print(f"{'ok  ' if problem is None else 'FAIL'} {key}{'' if problem is None else ': ' + problem}")
        if problem:
            failures.append(key)
    missing = sorted(k for k in expected if k not in got and (not args.only or k.startswith(args.only + "/")))
    for key in missing:
        collection = key.split("/", 1)[0]
        if collection in collections():
            print(f"FAIL {key}: no longer produced")
            failures.append(key)
    print(
        f"{len(got) - len(failures)} of {len(got)} outputs identical"
        + (f"; {len(failures)} differ" if failures else "")
    )
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
