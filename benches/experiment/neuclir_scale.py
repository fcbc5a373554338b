"""A NeuCLIR-shaped experiment at scale through clirkit's experiment runner (issue 28): the synthetic
zh/fa/ru corpus of ``synthetic/gen_neuclir_corpus.rs`` (``docs-LANG.jsonl.zst``), synthetic topics and
qrels, BM25 per language and BM25+RM3, an impact system over precomputed SPLADE-like vectors (the
generator's ``--sparse``), a dense system over precomputed float16 embeddings (d = 384, PQ 192, refine
100), the RRF of the three, nDCG@20 and Judged@20 per language (``mono``) and on all documents with
English topics (``mlir``). Records each stage's time and peak RSS, the disk of the store by stage kind,
the whole run's peak RSS (``/usr/bin/time -v``) and a rerun (every stage cached) through
``clirkit experiment run``.

Topics and qrels: every P-th document is a seed (the generator's ``--seed-every``), seed k belongs to
topic k mod T; a topic's entry in a language is the title of its first seed there, and its seeds in
that language are relevant (the one whose title is the query 2, the others 1); the English entry joins
the three languages' titles (MLIR). Seeds' embeddings are their topic's centre plus noise, as are the
queries'; everything else is a clustered unit vector (``synthetic/gen_vectors.py``).

    python benches/experiment/neuclir_scale.py --out /work/scratch/neuclir1m --quick   # 1M documents
    python benches/experiment/neuclir_scale.py --out /data/neuclir10m                  # 10M documents

The driver runs the stages in this process through ``Experiment`` (what ``clirkit experiment run``
calls), each stage's action wrapped to reset and read the peak RSS (Linux ``VmHWM``) around it; those
resets also reset the peak ``/usr/bin/time`` reports for the driver, so the run's peak is the largest
stage's (``largest_stage_peak_rss_mib``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "synthetic"))
from bench_common import peak_rss_mib, refuse_foreign, reset_peak_rss  # noqa: E402
from clirkit.experiment.store import WORKDIR_MARKER  # noqa: E402
from gen_vectors import CHUNK, unit_rows  # noqa: E402

LANGS = ("zh", "fa", "ru")
ISO3 = {"zh": "zho", "fa": "fas", "ru": "rus", "en": "eng"}
REPO = HERE.parent.parent


#: Disk per million documents, from the 1M run (benches/results/experiment.md): the generated inputs,
#: and the experiment's store (mono and MLIR indexes of every system, runs). Both grow linearly.
INPUT_GIB_PER_MILLION = 2.0
STORE_GIB_PER_MILLION = 6.9
GENERATED = "generated.json"


def check_disk(out: Path, docs: int, data_ready: bool) -> None:
    """Refuse before anything is written when the file system under ``out`` cannot hold the run."""
    millions = docs / 1e6
    need = STORE_GIB_PER_MILLION * millions + (0 if data_ready else INPUT_GIB_PER_MILLION * millions)
    probe = out
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free / 2**30
    if free < need:
        raise SystemExit(
            f"{out}: {docs:,} documents need about {need:.0f} GiB free (store {STORE_GIB_PER_MILLION * millions:.0f} GiB"
            + ("" if data_ready else f", inputs {INPUT_GIB_PER_MILLION * millions:.0f} GiB")
            + f", scaled from the 1M run); {free:.0f} GiB is free there. Free space or pass --skip-disk-check."
        )


def generated_params(data: Path) -> dict | None:
    marker = data / GENERATED
    return json.loads(marker.read_text())["params"] if marker.exists() else None


def generate(data: Path, docs: int, topics: int, seed_every: int, sparse: int, generator: str) -> dict:
    """The corpus, sparse vectors, ids and seeds (the Rust generator), once per parameters."""
    params = {"docs": docs, "seed_every": seed_every, "sparse": sparse}
    marker = data / GENERATED
    if generated_params(data) == params:
        return json.loads(marker.read_text())
    refuse_foreign(data, GENERATED)
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    started = time.perf_counter()
    argv = [generator, "--out", str(data), "--docs", str(docs), "--queries", "1", "--split-langs",
            "--sparse", str(sparse), "--seed-every", str(seed_every), "--threads", "2"]  # fmt: skip
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    record = {"params": params, "generator_seconds": round(time.perf_counter() - started, 1)}
    marker.write_text(json.dumps(record))
    return record


def seeds_by_topic(data: Path, topics: int) -> dict[int, dict[str, list[tuple[str, int, str]]]]:
    """topic -> language -> [(doc id, row in its language's file, title)]."""
    out: dict[int, dict[str, list]] = {}
    for k, line in enumerate((data / "seeds.tsv").read_text(encoding="utf-8").splitlines()):
        doc, lang, row, title = line.split("\t")
        out.setdefault(k % topics, {}).setdefault(lang, []).append((doc, int(row), title))
    return out


def write_topics_and_qrels(data: Path, seeds: dict) -> None:
    (data / "qrels").mkdir(exist_ok=True)
    qrels: dict[str, list[str]] = {lang: [] for lang in (*LANGS, "mlir")}
    with open(data / "topics.jsonl", "w", encoding="utf-8") as f:
        for topic, by_lang in sorted(seeds.items()):
            entries = [
                {"lang": ISO3[lang], "topic_title": docs[0][2]} for lang, docs in sorted(by_lang.items())
            ]
            english = " ".join(docs[0][2] for _, docs in sorted(by_lang.items()))
            entries.append({"lang": "eng", "topic_title": english, "source": "original"})
            f.write(json.dumps({"topic_id": f"t{topic}", "topics": entries}) + "\n")
            for lang, docs in by_lang.items():
                for n, (doc, _, _) in enumerate(docs):
                    line = f"t{topic} 0 {doc} {2 if n == 0 else 1}\n"
                    qrels[lang].append(line)
                    qrels["mlir"].append(line)
    for name, lines in qrels.items():
        (data / "qrels" / f"{name}.txt").write_text("".join(lines), encoding="utf-8")


def write_embeddings(data: Path, seeds: dict, dim: int, seed: int) -> None:
    """Per language ``emb-LANG.npy`` (float16, its documents' rows in file order) + ids; per query
    language ``qemb-LANG.npy`` + ids (English: every topic)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    clusters = rng.standard_normal(size=(1024, dim), dtype=np.float32)
    centres = rng.standard_normal(size=(len(seeds), dim), dtype=np.float32)
    planted: dict[str, dict[int, int]] = {lang: {} for lang in LANGS}
    for topic, by_lang in seeds.items():
        for lang, docs in by_lang.items():
            for _, row, _ in docs:
                planted[lang][row] = topic
    for lang in LANGS:
        ids_path = data / f"docs-{lang}.ids.txt"
        n = sum(1 for _ in open(ids_path, "rb"))
        shutil.copyfile(ids_path, data / f"emb-{lang}.ids.txt")
        with open(data / f"emb-{lang}.npy", "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": "<f2", "fortran_order": False, "shape": (n, dim)}
            )
            for first in range(0, n, CHUNK):
                rows = unit_rows(rng, clusters, min(CHUNK, n - first), 0.6)
                for row, topic in planted[lang].items():
                    if first <= row < first + len(rows):
                        v = centres[topic] + 0.3 * rng.standard_normal(dim, dtype=np.float32)
                        rows[row - first] = v / np.linalg.norm(v)
                f.write(rows.astype(np.float16).tobytes())
    for lang in (*LANGS, "en"):
        qids = [f"t{t}" for t, by_lang in sorted(seeds.items()) if lang == "en" or lang in by_lang]
        q = np.stack([centres[int(t[1:])] + 0.3 * rng.standard_normal(dim, dtype=np.float32) for t in qids])
        np.save(data / f"qemb-{lang}.npy", (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32))
        (data / f"qemb-{lang}.ids.txt").write_text("".join(t + "\n" for t in qids), encoding="utf-8")


def write_query_vectors(data: Path, seeds: dict) -> None:
    """Per query language ``qvec-LANG.jsonl``: each topic's words weighted 1 (English: all of them)."""
    for lang in (*LANGS, "en"):
        with open(data / f"qvec-{lang}.jsonl", "w", encoding="utf-8") as f:
            for topic, by_lang in sorted(seeds.items()):
                titles = [d[0][2] for lg, d in sorted(by_lang.items()) if lang in ("en", lg)]
                if titles:
                    words = {w: 1.0 for title in titles for w in title.split()}
                    f.write(json.dumps({"id": f"t{topic}", "vector": words}) + "\n")


def experiment_file(out: Path, hits: int, threads: int) -> Path:
    docs = ", ".join(f'{lang} = "data/docs-{lang}.jsonl.zst"' for lang in LANGS)
    qrels = ", ".join(f'{name} = "data/qrels/{name}.txt"' for name in (*LANGS, "mlir"))
    vectors = ", ".join(f'{lang} = "data/vectors-{lang}.jsonl.zst"' for lang in LANGS)
    qvectors = ", ".join(f'{lang} = "data/qvec-{lang}.jsonl"' for lang in (*LANGS, "en"))
    emb = ", ".join(f'{lang} = "data/emb-{lang}"' for lang in LANGS)
    qemb = ", ".join(f'{lang} = "data/qemb-{lang}"' for lang in (*LANGS, "en"))
    text = f"""[experiment]
name = "neuclir-scale"
hits = {hits}
threads = {threads}

[collections.neuclir]
format = "neuclir"
docs = {{ {docs} }}
topics = "data/topics.jsonl"
qrels = {{ {qrels} }}

[[tasks]]
collection = "neuclir"
setting = "mono"
languages = ["zh", "fa", "ru"]

[[tasks]]
collection = "neuclir"
setting = "mlir"

[systems.bm25]
kind = "bm25"

[systems.bm25-rm3]
kind = "bm25"
rm3 = true

[systems.splade]
kind = "impact"
vectors = {{ {vectors} }}
query_vectors = {{ {qvectors} }}

[systems.dense]
kind = "dense"
embeddings = {{ {emb} }}
query_embeddings = {{ {qemb} }}
pq = 192
refine = 100

[fusion.rrf]
inputs = ["bm25", "splade", "dense"]

[evaluation]
measures = ["nDCG@20", "Judged@20"]
"""
    path = out / "neuclir-scale.toml"
    path.write_text(text, encoding="utf-8")
    return path


def drive(toml: Path, work: Path, report: Path) -> None:
    """Run the experiment here, every stage's action wrapped to record its time and peak RSS."""
    from clirkit.experiment import Experiment

    exp = Experiment(toml, work, quiet=True)
    stages: list[dict] = []

    def wrapped(action):
        def run(stage, out, ctx):
            reset_peak_rss()
            started = time.perf_counter()
            action(stage, out, ctx)
            stages.append({"kind": stage.kind, "label": stage.label,
                           "seconds": round(time.perf_counter() - started, 1),
                           "peak_rss_mib": round(peak_rss_mib(), 1)})  # fmt: skip
            report.write_text(json.dumps({"stages": stages}, indent=1))

        return run

    for stage in exp.plan.stages:
        stage.action = wrapped(stage.action)
    results = exp.run(log=sys.stderr)
    table = [
        {"system": system, "task": task, "measure": m, "value": results.value(system, task, m)}
        for system in ("bm25", "bm25-rm3", "splade", "dense", "rrf")
        for task in ("mono/zh", "mono/fa", "mono/ru", "mlir")
        for m in ("ndcg_cut_20", "judged_20")
    ]
    report.write_text(json.dumps({"stages": stages, "results": table}, indent=1))


def timed(argv: list[str]) -> dict:
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mib": round(int(match.group(1)) / 1024, 1) if match else None,
    }


def store_disk(work: Path) -> dict[str, float]:
    """MiB of the store by stage kind."""
    sizes: dict[str, float] = {}
    store = work / "store"
    for kind in sorted(p for p in store.iterdir() if p.is_dir()) if store.exists() else []:
        total = sum(f.stat().st_size for f in kind.rglob("*") if f.is_file())
        sizes[kind.name] = round(total / 2**20, 1)
    return sizes


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--docs", type=int, default=10_000_000)
    ap.add_argument("--quick", action="store_true", help="1M documents")
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--sparse", type=int, default=64, help="terms per SPLADE-like document vector")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--hits", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--generator", default=str(REPO / "target/release/gen_neuclir_corpus"),
                    help="the built gen_neuclir_corpus binary")  # fmt: skip
    ap.add_argument("--skip-disk-check", action="store_true", help="run even when free disk looks too small")
    ap.add_argument("--drive", nargs=3, metavar=("TOML", "WORK", "REPORT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.drive:
        drive(*(Path(p) for p in args.drive))
        return {}
    docs = 1_000_000 if args.quick else args.docs
    out = args.out.resolve()
    data = out / "data"
    seed_every = max(1, docs // (args.topics * 9))  # about 3 seeds per topic and language
    work = out / "work"
    refuse_foreign(work, WORKDIR_MARKER)
    if not args.skip_disk_check:
        ready = generated_params(data) == {"docs": docs, "seed_every": seed_every, "sparse": args.sparse}
        check_disk(out, docs, ready)
    generated = generate(data, docs, args.topics, seed_every, args.sparse, args.generator)
    started = time.perf_counter()
    seeds = seeds_by_topic(data, args.topics)
    write_topics_and_qrels(data, seeds)
    write_embeddings(data, seeds, args.dim, seed=0)
    write_query_vectors(data, seeds)
    prepare = round(time.perf_counter() - started, 1)
    toml = experiment_file(out, args.hits, args.threads)
    shutil.rmtree(work, ignore_errors=True)
    report = out / "stages.json"
    me = [sys.executable, str(Path(__file__).resolve())]
    whole = timed([*me, "--out", str(out), "--drive", str(toml), str(work), str(report)])
    rerun = timed([sys.executable, "-m", "clirkit.cli", "experiment", "run", str(toml), "--workdir", str(work),
                   "--quiet"])  # fmt: skip
    inputs = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    result = {
        "docs": docs,
        "generated": generated,
        "prepare_seconds": prepare,
        "run": whole,
        "rerun": rerun,
        "inputs_mib": round(inputs / 2**20, 1),
        "store_mib_by_kind": store_disk(work),
        **json.loads(report.read_text()),
    }
    # The whole run's peak is its largest stage's: the per-stage VmHWM resets also reset what
    # /usr/bin/time reads for the driver process.
    result["largest_stage_peak_rss_mib"] = max((s["peak_rss_mib"] for s in result["stages"]), default=None)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
