#!/usr/bin/env python3
"""Learned-sparse search side by side: clirkit's ImpactIndex vs BMP (``pip install bmp``: safe mode and its
approximate ``alpha``/``beta``) vs Seismic (``pip install pyseismic-lsr``), single-threaded search, alternating
runs, every engine fed the SAME integer impacts.

The common vectors. BMP keeps document impacts in a byte (a larger one wraps mod 256) and its searcher
rescales every query so that its largest weight is 32 (``ceil(w * 32 / max w)`` in f32, BMP's
``MAX_TERM_WEIGHT``), so the vectors all engines index and search are: documents' impacts clipped to 1..255
(SciFact: ``round(w * 100)``, clirkit's default quantization, then clipped; the synthetic set: the ×100
integers of ``impact_vs_pisa.py``'s generator, clipped), and queries already scaled as BMP's searcher scales
them (BMP's own rescaling is then the identity). clirkit indexes them with ``quantize=1``; Seismic gets them
as float32 (its f16 document values hold every integer up to 255 exactly), so every exact score is the same
integer dot product in every engine. The counts of clipped impacts are printed.

Data sets:
- SciFact encoded with ``../shared/models/splade-tiny-en`` by clirkit's own sparse encoder
  (``benches/encoders/sparse_cache.py``, cached under ``--work``/sparse so reruns do not re-encode); nDCG@10
  against SciFact's test qrels is reported per row.
- The synthetic SPLADE-like set of ``impact_vs_pisa.py`` (its generator: Zipfian terms over a 30522-term
  vocabulary, 100-200 terms per document, 20-40 per query), 1M documents by default, ``--quick`` 50,000.

What it reports, per data set: each engine's build time (the engine's own calls; clirkit's includes reading
the JSONL file, BMP's and Seismic's are the calls fed from Python) and index size on disk; QPS at k=10 and
k=1000 for the exact engines (clirkit exact, BMP safe mode: ``alpha = beta = 1``), from ``--rounds`` timed
passes over the whole query set per engine and k, the engines' passes alternating (the order rotated each
round), the median pass; Accuracy@10 of every row against clirkit's exact top 10 (the share of the exact top
10 found, a document tied with the exact 10th score counting as found); BMP-safe's disagreements with exact
(queries whose top-10 scores or documents differ beyond ties), counted and listed; then a sweep of each
engine's knobs at k=10 (BMP: ``alpha``, ``beta``; Seismic: ``query_cut``, ``heap_factor``; clirkit: the
settings :func:`clirkit_sweep` lists, plus the settings clirkit's calibration, what ``--target-accuracy``
runs, picks per structure for each target) and, per engine, the best QPS reaching Accuracy@10 >= 0.97 and
>= 0.99; then clirkit's own audit of its best approximate row per target (every query re-run exactly)
beside this script's independent comparison of the same row with the exact run, per query.

Every engine runs in a worker process of its own (``--python``, default this interpreter: a venv with
numpy, bmp, pyseismic-lsr and clirkit importable, e.g. PYTHONPATH=python with a ``devbuild --bench``
module); builds use ``--build-threads``, searches one thread (thread pools capped by the environment and by
each API's thread argument). Indexes are kept under ``--work`` and reused when present (``--rebuild`` to
build again).

    PYTHONPATH=python /work/venv-bench-sparse/bin/python benches/impact/vs_bmp_seismic.py --quick
    PYTHONPATH=python /work/venv-bench-sparse/bin/python benches/impact/vs_bmp_seismic.py \\
        --sets scifact,synthetic --work /work/scratch/sparse-exact --json results.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent  # benches/impact/
BENCHES = HERE.parent
REPO = BENCHES.parent
sys.path.insert(0, str(BENCHES))
sys.path.insert(0, str(HERE))
import bench_common as bc  # noqa: E402

DOC_IMPACT_MAX = 255  # BMP stores document impacts in a u8
BMP_MAX_TERM_WEIGHT = 32  # bmp::query::MAX_TERM_WEIGHT: its searcher scales a query's largest weight to this
ENGINES = ("clirkit", "bmp", "seismic")
TARGETS = (0.97, 0.99)  # the Accuracy@10 levels engines are compared at
SCIFACT = "beir-scifact"
SPLADE = "splade-tiny-en"


# ---------------------------------------------------------------------------------------------------
# The sweeps: one list of settings per engine (keyword arguments of the engine's search call).


CLIRKIT_LAMBDAS = (2000, 8000, 32000)  # the sweep's postings_per_term unless --clirkit-lambdas says


def clirkit_sweep(lambdas: tuple[int, ...] = CLIRKIT_LAMBDAS) -> list[dict]:
    """clirkit's settings for the sweep: exact search (no argument, ``ImpactIndex.batch_search``) is the
    reference row; then the approximate search's settings (:func:`clirkit_approximate_sweep`)."""
    return [{}] + clirkit_approximate_sweep(lambdas)


# ---------------------------------------------------------------------------------------------------
# clirkit's approximate search (``ImpactIndex.approximate``): its sweep and its structure, built once
# per ``postings_per_term`` in the serving worker before any timed pass.


def clirkit_approximate_sweep(lambdas: tuple[int, ...] = CLIRKIT_LAMBDAS) -> list[dict]:
    """``postings_per_term`` (each term's postings of highest impact kept; build time: ``lambdas``),
    ``query_terms`` (the query's heaviest terms walked; 0 = all) and ``candidates`` (documents re-scored
    exactly)."""
    return [
        {"postings_per_term": lam, "query_terms": qt, "candidates": c}
        for lam in lambdas
        for qt in (0, 12)
        for c in (100, 400, 1600, 3200)
    ]


class ClirkitApproximate:
    """The approximate structures of one opened clirkit index, one per ``postings_per_term`` asked,
    kept (a 1M-document structure takes about a gigabyte; the sweep's rows then need no rebuild when
    the alternating passes move between them)."""

    def __init__(self, index) -> None:
        self.index, self.built = index, {}

    def ready(self, params: dict):
        lam = params["postings_per_term"]
        if lam not in self.built:
            self.built[lam] = self.index.approximate(postings_per_term=lam, threads=2)
        return self.built[lam]

    @staticmethod
    def settings(params: dict):
        from clirkit.impact import ApproximateSettings

        return ApproximateSettings(query_terms=params["query_terms"], candidates=params["candidates"])

    def search(self, prepared, k: int, params: dict):
        settings = self.settings(params)
        return self.ready(params).batch_search(prepared, k, settings=settings, threads=1, quiet=True)

    def audit(self, prepared, k: int, params: dict) -> dict:
        """clirkit's own audit of ``params`` re-running every query exactly (``ApproximateImpactIndex.audit``
        with n = the number of queries): its mean Accuracy@10, score gaps and per-query Accuracy@10."""
        report = self.ready(params).audit(
            prepared, len(prepared), k=k, settings=self.settings(params), threads=2
        )
        return {
            "accuracy10": report.accuracy_at_10,
            "min_accuracy10": report.min_accuracy_at_10,
            "score_gap": report.score_gap,
            "max_score_gap": report.max_score_gap,
            "per_query": {q.query: q.accuracy_at_10 for q in report.queries},
        }

    def calibrate(self, prepared, target: float, postings_per_term: int) -> dict:
        """The search settings ``ApproximateImpactIndex.calibrate`` picks for ``target`` (its default
        sample of 50 queries, seed 0) on the structure of ``postings_per_term``."""
        structure = self.ready({"postings_per_term": postings_per_term})
        chosen = structure.calibrate(prepared, target, k=10, threads=2).settings
        return {
            "postings_per_term": postings_per_term,
            "query_terms": chosen.query_terms,
            "candidates": chosen.candidates,
        }


def bmp_sweep() -> list[dict]:
    """BMP's ``alpha`` (stop when the best remaining block bound is below alpha × the k-th score) and
    ``beta`` (keep the top beta share of the query's terms); alpha = beta = 1 is its safe mode."""
    return [{"alpha": a, "beta": b} for b in (1.0, 0.8) for a in (1.0, 0.95, 0.9, 0.85, 0.8, 0.7, 0.6)]


def seismic_sweep() -> list[dict]:
    """Seismic's ``query_cut`` (the query's heaviest terms searched) and ``heap_factor`` (a block is
    scanned when its summary's score exceeds heap_factor × the k-th score)."""
    return [{"query_cut": c, "heap_factor": h} for c in (5, 10, 20, 40) for h in (0.7, 0.8, 0.9, 1.0)]


SWEEPS = {"clirkit": clirkit_sweep, "bmp": bmp_sweep, "seismic": seismic_sweep}
SAFE = {"clirkit": {}, "bmp": {"alpha": 1.0, "beta": 1.0}}  # the exact rows timed at every k


def label(engine: str, params: dict) -> str:
    if not params:
        return f"{engine} exact"
    if engine == "bmp" and params == SAFE["bmp"]:
        return "bmp safe"
    return engine + " " + " ".join(f"{k}={v}" for k, v in params.items())


# ---------------------------------------------------------------------------------------------------
# The common integer vectors.


def bmp_query_scale(vector: dict[str, float]) -> dict[str, int]:
    """A query's weights as BMP's searcher turns them into integers: ``ceil(w * (32 / max w))`` in f32."""
    import numpy as np

    weights = {t: np.float32(w) for t, w in vector.items() if w > 0}
    if not weights:
        return {}
    scale = np.float32(BMP_MAX_TERM_WEIGHT) / max(weights.values())
    return {t: int(np.ceil(w * scale)) for t, w in weights.items()}


def write_common(source: Path, target: Path, doc_factor: float | None, queries: bool) -> dict:
    """Write ``source``'s vectors as the common integers (documents: ``round(w * doc_factor)`` when
    given, then clipped to 1..255; queries: BMP's scaling), atomically; counts of what changed."""
    from decimal import ROUND_HALF_UP, Decimal

    counts = {"vectors": 0, "clipped": 0, "dropped_zero": 0, "empty": 0}
    tmp = target.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in bc.iter_jsonl(source):
            counts["vectors"] += 1
            vector: dict[str, int]
            if queries:
                vector = bmp_query_scale(r["vector"])
            else:
                vector = {}
                for t, w in r["vector"].items():
                    v = (
                        int(Decimal(repr(w * doc_factor)).to_integral_value(ROUND_HALF_UP))
                        if doc_factor
                        else int(w)
                    )
                    if v <= 0:
                        counts["dropped_zero"] += 1
                        continue
                    if v > DOC_IMPACT_MAX:
                        counts["clipped"] += 1
                        v = DOC_IMPACT_MAX
                    vector[t] = v
            if not vector:
                counts["empty"] += 1
                continue
            f.write(json.dumps({"id": bc.doc_id(r), "contents": "", "vector": vector}) + "\n")
    tmp.rename(target)
    (target.parent / (target.name + ".counts.json")).write_text(json.dumps(counts))
    return counts


def prepare_scifact(work: Path, shared: Path, python: str) -> dict:
    """SciFact's splade-tiny-en vectors (encoded once by ``benches/encoders/sparse_cache.py`` into
    ``work/sparse``), as common integers."""
    cache = work / "sparse"
    raw = {part: cache / f"{SCIFACT}.{part}.vectors.jsonl" for part in ("docs", "queries")}
    if not all(p.exists() for p in raw.values()):
        script = BENCHES / "encoders" / "sparse_cache.py"
        cmd = [python, str(script), "--shared", str(shared), "--cache", str(cache), "--threads", "2"]
        subprocess.run(cmd, check=True)
    out = work / "scifact"
    out.mkdir(parents=True, exist_ok=True)
    docs, queries = out / "docs.jsonl", out / "queries.jsonl"
    counts = {}
    for path, src, is_q in ((docs, raw["docs"], False), (queries, raw["queries"], True)):
        if not path.exists():
            write_common(src, path, None if is_q else 100.0, is_q)
        counts["queries" if is_q else "docs"] = json.loads((out / (path.name + ".counts.json")).read_text())
    qrels = shared / "data" / SCIFACT / "qrels" / "test.tsv"
    return {"name": "scifact", "dir": out, "docs": docs, "queries": queries, "qrels": qrels, "counts": counts}


def prepare_synthetic(work: Path, num_docs: int, num_queries: int, seed: int) -> dict:
    """``impact_vs_pisa.py``'s synthetic SPLADE-like vectors (×100 integers), as common integers."""
    import impact_vs_pisa

    out = work / f"zipf{num_docs}-q{num_queries}-s{seed}"
    out.mkdir(parents=True, exist_ok=True)
    raw_docs, raw_queries = out / "raw.docs.jsonl", out / "raw.queries.jsonl"
    if not raw_docs.exists():
        impact_vs_pisa.generate(raw_docs.with_suffix(".tmp"), num_docs, 100, 200, seed, "d")
        raw_docs.with_suffix(".tmp").rename(raw_docs)
    if not raw_queries.exists():
        impact_vs_pisa.generate(raw_queries.with_suffix(".tmp"), num_queries, 20, 40, seed + 1, "q")
        raw_queries.with_suffix(".tmp").rename(raw_queries)
    docs, queries = out / "docs.jsonl", out / "queries.jsonl"
    counts = {}
    for path, src, is_q in ((docs, raw_docs, False), (queries, raw_queries, True)):
        if not path.exists():
            write_common(src, path, None, is_q)
        counts["queries" if is_q else "docs"] = json.loads((out / (path.name + ".counts.json")).read_text())
    name = f"synthetic {num_docs}"
    return {"name": name, "dir": out, "docs": docs, "queries": queries, "qrels": None, "counts": counts}


# ---------------------------------------------------------------------------------------------------
# Workers: one process per engine. `build` is one call; `serve` answers JSON commands on stdin.


def read_queries(path: Path) -> list[tuple[str, dict[str, int]]]:
    return [(bc.doc_id(r), r["vector"]) for r in bc.iter_jsonl(path)]


def build_engine(engine: str, docs: Path, index: Path, threads: int, options: dict) -> dict:
    """Build ``engine``'s index of ``docs`` at ``index``; the seconds spent in the engine's calls."""
    spent = 0.0
    if engine == "clirkit":
        from clirkit import ImpactIndex

        t0 = time.perf_counter()
        ImpactIndex.build(docs, index, quantize=1, threads=threads, quiet=True)
        spent = time.perf_counter() - t0
    elif engine == "bmp":
        import bmp

        index.mkdir(parents=True)
        t0 = time.perf_counter()
        indexer = bmp.Indexer(str(index / "index.bmp"), bsize=options.get("bsize", 32), compress_range=False)
        spent += time.perf_counter() - t0
        for r in bc.iter_jsonl(docs):
            doc, vector = bc.doc_id(r), r["vector"]
            t0 = time.perf_counter()
            indexer.add_document(doc, vector)
            spent += time.perf_counter() - t0
        t0 = time.perf_counter()
        indexer.finish()
        spent += time.perf_counter() - t0
    else:
        import numpy as np
        import seismic

        string = seismic.get_seismic_string()
        dataset = seismic.SeismicDataset()
        for r in bc.iter_jsonl(docs):
            doc, vector = bc.doc_id(r), r["vector"]
            terms = np.array(list(vector), dtype=string)
            values = np.array(list(vector.values()), dtype=np.float32)
            t0 = time.perf_counter()
            dataset.add_document(doc, terms, values)
            spent += time.perf_counter() - t0
        t0 = time.perf_counter()
        built = seismic.SeismicIndex.build_from_dataset(dataset, num_threads=threads, **options)
        spent += time.perf_counter() - t0
        index.mkdir(parents=True)
        built.save(str(index / "index"))
    return {"build_seconds": spent}


class Engine:
    """An opened index of one engine: ``search(queries, k, params)`` returns per query its ranked
    (doc id, score) list."""

    def __init__(self, engine: str, index: Path) -> None:
        self.engine = engine
        if engine == "clirkit":
            from clirkit import ImpactIndex

            self.index = ImpactIndex.open(index)
            self.approximate = ClirkitApproximate(self.index)
        elif engine == "bmp":
            import bmp

            self.index = bmp.Searcher(str(index / "index.bmp"))
        else:
            import seismic

            saved = [p for p in index.iterdir() if p.name.startswith("index")]
            self.index = seismic.SeismicIndex.load(str(saved[0]))
            self.string = seismic.get_seismic_string()

    def prepare(self, queries: list[tuple[str, dict[str, int]]]) -> object:
        """The queries as the engine's search call takes them (converted once, outside the timing)."""
        if self.engine == "clirkit":
            return [(q, [(t, float(w)) for t, w in v.items()]) for q, v in queries]
        if self.engine == "bmp":
            return [(q, {t: float(w) for t, w in v.items()}) for q, v in queries]
        import numpy as np

        ids = np.array([q for q, _ in queries], dtype=self.string)
        terms = [np.array(list(v), dtype=self.string) for _, v in queries]
        values = [np.array(list(v.values()), dtype=np.float32) for _, v in queries]
        return ids, terms, values

    def search(self, prepared, k: int, params: dict) -> object:
        if self.engine == "clirkit":
            if params:
                return self.approximate.search(prepared, k, params)
            return self.index.batch_search(prepared, k=k, threads=1, quiet=True, **params)
        if self.engine == "bmp":
            alpha, beta = params.get("alpha", 1.0), params.get("beta", 1.0)
            return [(q, self.index.search(v, k=k, alpha=alpha, beta=beta)) for q, v in prepared]
        ids, terms, values = prepared
        return self.index.batch_search(
            queries_ids=ids, query_components=terms, query_values=values, k=k, num_threads=1, **params
        )

    def ranked(self, result, queries: list[tuple[str, dict[str, int]]]) -> dict[str, list[list]]:
        """The result as {qid: [[doc id, score], ...]} in the engine's rank order."""
        if self.engine == "clirkit":
            return {q: [[d, s] for d, s in result[q]] if q in result else [] for q, _ in queries}
        if self.engine == "bmp":
            return {q: [[d, float(s)] for d, s in zip(*hits)] for q, hits in result}
        return {q: [[d, float(s)] for _, s, d in hits] for (q, _), hits in zip(queries, result)}


def serve(engine: str, spec: dict) -> None:
    """Answer one JSON command per stdin line: ``{"k", "params", "passes", "hits"}`` → the seconds of
    each timed pass over the whole query set and, when asked, the ranked hits of a further pass."""
    queries = read_queries(Path(spec["queries"]))
    searcher = Engine(engine, Path(spec["index"]))
    prepared = searcher.prepare(queries)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        k, params = command["k"], command["params"]
        if command.get("op") == "audit":  # clirkit approximate only: its own audit of every query
            print(json.dumps(searcher.approximate.audit(prepared, k, params)), flush=True)
            continue
        if command.get("op") == "calibrate":  # clirkit approximate only: the settings for a target
            chosen = searcher.approximate.calibrate(prepared, command["target"], params["postings_per_term"])
            print(json.dumps({"params": chosen}), flush=True)
            continue
        if engine == "clirkit" and params:  # the approximate structure, built outside the timed passes
            searcher.approximate.ready(params)
        times = []
        for _ in range(command["passes"]):
            t0 = time.perf_counter()
            searcher.search(prepared, k, params)
            times.append(time.perf_counter() - t0)
        out: dict = {"times": times}
        if command["hits"]:
            out["hits"] = searcher.ranked(searcher.search(prepared, k, params), queries)
        print(json.dumps(out), flush=True)


class Worker:
    """A serving worker process of one engine, kept open for alternating passes."""

    def __init__(self, python: str, engine: str, spec: dict) -> None:
        cmd = [python, __file__, "--worker", "serve", "--engine", engine, "--spec", json.dumps(spec)]
        self.engine = engine
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=bc.thread_env(1)
        )
        self._read()

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.engine} worker ended (exit status {self.proc.wait()})")
        return json.loads(line)

    def run(self, k: int, params: dict, passes: int, hits: bool) -> dict:
        return self.ask({"k": k, "params": params, "passes": passes, "hits": hits})

    def ask(self, command: dict) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()


# ---------------------------------------------------------------------------------------------------
# Comparing runs.


def accuracy_at_10(run: dict[str, list[list]], exact: dict[str, list[list]]) -> float:
    """Mean share of each query's exact top 10 found in the run's top 10; a document whose exact score
    ties the exact 10th counts as found (the order among equal scores is each engine's own)."""
    shares = []
    for q, truth in exact.items():
        if not truth:
            continue
        want = min(10, len(truth))
        tenth = truth[want - 1][1]
        eligible = {d for d, s in truth if s >= tenth}
        got = sum(1 for d, _ in run.get(q, [])[:10] if d in eligible)
        shares.append(min(got, want) / want)
    return sum(shares) / len(shares) if shares else float("nan")


def disagreements(run: dict[str, list[list]], exact: dict[str, list[list]]) -> list[str]:
    """Queries whose top 10 differs from exact beyond ties: other scores, or a document that is
    neither in the exact top 10 nor tied with its 10th score. One line per query, saying how."""
    out = []
    for q, truth in exact.items():
        mine = run.get(q, [])[:10]
        want = truth[:10]
        exact_scores = [round(s) for _, s in want]
        scores = [round(s) for _, s in mine]
        tenth = want[-1][1] if want else math.inf
        eligible = {d for d, s in truth if s >= tenth}
        strangers = [d for d, _ in mine if d not in eligible]
        if scores != exact_scores or strangers:
            out.append(f"{q}: scores {scores} vs exact {exact_scores}; not in exact top 10: {strangers}")
    return out


def strict_accuracy(run: dict[str, list[list]], exact: dict[str, list[list]]) -> dict[str, float]:
    """Per query, the share of the exact top 10's documents (clirkit exact's canonical order, ties not
    counted as found: what clirkit's audit computes) that the run's top 10 holds; 1 when exact finds
    nothing. Computed here from the two runs' hits, independently of the audit."""
    out = {}
    for q, truth in exact.items():
        want = {d for d, _ in truth[:10]}
        got = {d for d, _ in run.get(q, [])[:10]}
        out[q] = len(want & got) / len(want) if want else 1.0
    return out


def ndcg10(qrels: Path, run: dict[str, list[list]]) -> float:
    from clirkit.evaluation import evaluate

    as_dict = {q: {d: float(s) for d, s in hits[:10]} for q, hits in run.items() if hits}
    return evaluate(qrels, as_dict, ["ndcg_cut.10"])["ndcg_cut_10"]


def index_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ---------------------------------------------------------------------------------------------------
# The driver.


def build_all(data: dict, args) -> dict[str, dict]:
    built = {}
    for engine in args.engines:
        index = data["dir"] / f"{engine}.idx"
        record = index.with_suffix(".build.json")
        if args.rebuild or not record.exists():
            import shutil

            if index.exists():
                shutil.rmtree(index)
            spec = {"docs": str(data["docs"]), "index": str(index), "threads": args.build_threads}
            spec["options"] = json.loads(args.seismic_build) if engine == "seismic" else {}
            cmd = [args.python, __file__, "--worker", "build", "--engine", engine, "--spec", json.dumps(spec)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=bc.thread_env(args.build_threads))
            if proc.returncode != 0:
                raise RuntimeError(f"{engine} build failed:\n{proc.stderr[-3000:]}")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result["index_bytes"] = index_bytes(index)
            result["build_threads"] = args.build_threads
            record.write_text(json.dumps(result))
        built[engine] = json.loads(record.read_text()) | {"index": str(index)}
    return built


def alternate(
    workers: dict[str, Worker], rows: list[tuple[str, dict]], k: int, rounds: int
) -> dict[str, list]:
    """``rounds`` timed passes of every (engine, params) row at k, the rows' order rotated each round."""
    times: dict[str, list] = {label(e, p): [] for e, p in rows}
    for r in range(rounds):
        for e, p in rows[r % len(rows) :] + rows[: r % len(rows)]:
            times[label(e, p)] += workers[e].run(k, p, 1, False)["times"]
    return times


def compare(data: dict, args) -> dict:
    nq = bc.count_lines(data["queries"])
    load_before = os.getloadavg()
    built = build_all(data, args)
    workers = {
        e: Worker(args.python, e, {"queries": str(data["queries"]), "index": built[e]["index"]})
        for e in args.engines
    }
    report: dict = {"set": data["name"], "queries": nq, "counts": data["counts"], "build": built}
    try:
        exact = workers["clirkit"].run(max(args.ks), {}, 0, True)["hits"]
        # The exact tier, every k, alternating rounds.
        safe_rows = [(e, SAFE[e]) for e in args.engines if e in SAFE]
        report["exact"] = {}
        for k in args.ks:
            for e, p in safe_rows:  # warm-up pass each
                workers[e].run(k, p, 1, False)
            times = alternate(workers, safe_rows, k, args.rounds)
            report["exact"][str(k)] = {name: nq / bc.median(t) for name, t in times.items()}
        # Accuracy, nDCG and disagreements of every sweep row at k=10; sweep passes alternate engines.
        sweep_rows = [
            (e, p)
            for e in args.engines
            for p in (
                (clirkit_sweep(args.clirkit_lambdas) if e == "clirkit" else SWEEPS[e]())
                if args.sweep
                else [SAFE.get(e, {})]
            )
        ]
        rows: dict[str, dict] = {}
        runs: dict[str, dict] = {}

        def measure(e: str, p: dict) -> None:
            run = workers[e].run(10, p, 0, True)["hits"]
            row: dict = {"engine": e, "params": p, "accuracy10": accuracy_at_10(run, exact)}
            if data["qrels"] is not None:
                row["ndcg10"] = ndcg10(data["qrels"], run)
            if e != "clirkit" and e in SAFE and p == SAFE[e]:
                row["disagreements"] = disagreements(run, exact)
            rows[label(e, p)], runs[label(e, p)] = row, run

        for e, p in sweep_rows:
            measure(e, p)
        if args.sweep and args.calibrate and "clirkit" in args.engines:
            # What `--target-accuracy` would search with: clirkit's calibration per structure and
            # target, its chosen settings timed beside the sweep's rows.
            report["calibrated"] = []
            lambdas = sorted({p["postings_per_term"] for e, p in sweep_rows if e == "clirkit" and p})
            for lam in lambdas:
                for target in TARGETS:
                    command = {"op": "calibrate", "k": 10, "params": {"postings_per_term": lam}}
                    chosen = workers["clirkit"].ask(command | {"target": target})["params"]
                    report["calibrated"].append({"target": target, "label": label("clirkit", chosen)})
                    if ("clirkit", chosen) not in sweep_rows:
                        sweep_rows.append(("clirkit", chosen))
                        measure("clirkit", chosen)
        times = alternate(workers, sweep_rows, 10, args.sweep_rounds)
        for name, t in times.items():
            rows[name]["qps10"] = nq / bc.median(t)
        report["rows"] = rows
        # clirkit's audit of its best approximate row per target, against this script's own comparison.
        report["audits"] = []
        for target in TARGETS if "clirkit" in args.engines else ():
            best = best_at(rows, "clirkit", target, approximate=True)
            if best is None:
                continue
            name, row = best
            audit = workers["clirkit"].ask({"op": "audit", "k": 10, "params": row["params"]})
            mine = strict_accuracy(runs[name], exact)
            differ = [q for q, a in mine.items() if abs(a - audit["per_query"].get(q, math.nan)) > 1e-9]
            audit.pop("per_query")
            report["audits"].append(
                audit
                | {"target": target, "label": name, "independent10": sum(mine.values()) / len(mine)}
                | {"queries_differing": differ}
            )
    finally:
        for w in workers.values():
            w.close()
    report["load"] = {"before": load_before, "after": os.getloadavg()}
    return report


def best_at(rows: dict, engine: str, target: float, approximate: bool = False) -> tuple[str, dict] | None:
    """The row of ``engine`` of highest QPS reaching ``target`` (``approximate``: not its exact row)."""
    reached = [
        (n, r)
        for n, r in rows.items()
        if r["engine"] == engine and r["accuracy10"] >= target and not (approximate and not r["params"])
    ]
    return max(reached, key=lambda nr: nr[1]["qps10"]) if reached else None


def print_report(report: dict, args) -> None:
    built, c = report["build"], report["counts"]
    print(f"\n## {report['set']}: {c['docs']['vectors']} docs, {report['queries']} queries")
    print(
        f"common integers: {c['docs']['clipped']} document impacts clipped to {DOC_IMPACT_MAX}, "
        f"{c['docs']['dropped_zero']} rounded to 0 and left out; queries scaled to max {BMP_MAX_TERM_WEIGHT}"
    )
    print(f"load (1/5/15 min) before {report['load']['before']}, after {report['load']['after']}\n")
    print(f"| engine | build s ({args.build_threads} threads) | index MiB |")
    print("|---|---|---|")
    for e, b in built.items():
        print(f"| {e} | {b['build_seconds']:.1f} | {b['index_bytes'] / 2**20:.1f} |")
    print("\nExact tier, 1 thread, alternating runs (median pass):\n")
    names = list(next(iter(report["exact"].values())))
    print("| k | " + " | ".join(f"{n} QPS" for n in names) + " | clirkit / BMP safe |")
    print("|---" * (len(names) + 2) + "|")
    for k, qps in report["exact"].items():
        ratio = qps["clirkit exact"] / qps["bmp safe"] if "bmp safe" in qps else float("nan")
        print(f"| {k} | " + " | ".join(f"{qps[n]:.1f}" for n in names) + f" | {ratio:.2f}x |")
    rows = report["rows"]
    for name, row in rows.items():
        if "disagreements" in row:
            d = row["disagreements"]
            print(
                f"\n{name}: top 10 differs from exact (beyond ties) on {len(d)}/{report['queries']} queries"
            )
            for line in d[: args.show_disagreements]:
                print(f"  {line}")
    print("\nSweep at k=10, 1 thread:\n")
    ndcg = any("ndcg10" in r for r in rows.values())
    print("| setting | QPS | Accuracy@10 |" + (" nDCG@10 |" if ndcg else ""))
    print("|---|---|---|" + ("---|" if ndcg else ""))
    for name, r in rows.items():
        extra = f" {r['ndcg10']:.4f} |" if ndcg else ""
        print(f"| {name} | {r['qps10']:.1f} | {r['accuracy10']:.4f} |{extra}")
    print("\nBest QPS per engine reaching an Accuracy@10 target (k=10):\n")
    print("| engine | >= 0.97 | >= 0.99 |")
    print("|---|---|---|")
    for e in args.engines:
        cells = []
        for target in TARGETS:
            best = best_at(rows, e, target)
            cells.append(f"{best[1]['qps10']:.1f} ({best[0]})" if best else "not reached")
        print(f"| {e} | " + " | ".join(cells) + " |")
    for c in report.get("calibrated", []):
        row = rows[c["label"]]
        print(
            f"\nclirkit calibrated for Accuracy@10 >= {c['target']}: {c['label']}: "
            f"{row['qps10']:.1f} QPS, Accuracy@10 {row['accuracy10']:.4f} over all queries"
        )
    for a in report.get("audits", []):
        print(
            f"\nclirkit's audit of {a['label']} (best row at >= {a['target']}), every query re-run exactly: "
            f"Accuracy@10 {a['accuracy10']:.4f} (min {a['min_accuracy10']:.4f}), score gap "
            f"{a['score_gap']:.4%} (max {a['max_score_gap']:.4%}); this script's own comparison of the "
            f"same row with the exact run (ties not counted as found): {a['independent10']:.4f}; "
            f"queries where the two differ: {len(a['queries_differing'])} {a['queries_differing'][:10]}"
        )
    sys.stdout.flush()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", choices=["build", "serve"], help=argparse.SUPPRESS)
    p.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    p.add_argument("--sets", default="scifact,synthetic", help="comma-separated: scifact, synthetic")
    p.add_argument("--quick", action="store_true", help="50,000 synthetic documents, 100 queries, 1 round")
    p.add_argument("--docs", type=int, default=1_000_000, help="synthetic documents")
    p.add_argument("--queries", type=int, default=200, help="synthetic queries")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--ks", default="10,1000")
    p.add_argument("--rounds", type=int, default=3, help="timed passes per exact row and k")
    p.add_argument("--sweep-rounds", type=int, default=1, help="timed passes per sweep row")
    p.add_argument(
        "--no-sweep",
        dest="sweep",
        action="store_false",
        help="only the exact rows (clirkit exact, BMP safe) in the k=10 table",
    )
    p.add_argument(
        "--no-calibrate",
        dest="calibrate",
        action="store_false",
        help="skip clirkit's calibrated rows (the settings `--target-accuracy` picks per structure)",
    )
    p.add_argument(
        "--clirkit-lambdas",
        default=",".join(map(str, CLIRKIT_LAMBDAS)),
        help="the postings_per_term values of clirkit's approximate sweep (a structure each, kept in memory)",
    )
    p.add_argument("--build-threads", type=int, default=2)
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--seismic-build", default="{}", help="JSON of SeismicIndex.build_from_dataset options")
    p.add_argument(
        "--shared", type=Path, default=Path(os.environ.get("CLIRKIT_SHARED", REPO.parent / "shared"))
    )
    p.add_argument("--work", type=Path, default=BENCHES / ".work" / "vs_bmp_seismic")
    p.add_argument("--python", default=sys.executable, help="interpreter of the workers")
    p.add_argument(
        "--encoder-python",
        help="interpreter that encodes SciFact when its vectors are not cached yet (needs clirkit's "
        "encoders extra: onnxruntime, tokenizers; default --python)",
    )
    p.add_argument("--rebuild", action="store_true", help="build the indexes again even when present")
    p.add_argument("--show-disagreements", type=int, default=10)
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    if args.worker:
        spec = json.loads(args.spec)
        if args.worker == "build":
            out = build_engine(
                args.engine, Path(spec["docs"]), Path(spec["index"]), spec["threads"], spec["options"]
            )
            print(json.dumps(out))
        else:
            serve(args.engine, spec)
        return 0
    if args.quick:
        args.docs, args.queries, args.rounds = min(args.docs, 50_000), min(args.queries, 100), 1
    args.ks = [int(k) for k in args.ks.split(",")]
    args.clirkit_lambdas = tuple(int(n) for n in args.clirkit_lambdas.split(","))
    args.engines = [e for e in args.engines.split(",") if e]
    if "clirkit" not in args.engines:
        p.error("--engines must include clirkit (its exact search is the reference)")
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"# vs_bmp_seismic {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; load {os.getloadavg()}", flush=True)
    reports = []
    for name in args.sets.split(","):
        if name == "scifact":
            data = prepare_scifact(args.work, args.shared, args.encoder_python or args.python)
        elif name == "synthetic":
            data = prepare_synthetic(args.work, args.docs, args.queries, args.seed)
        else:
            p.error(f"unknown set {name!r} (scifact, synthetic)")
        report = compare(data, args)
        print_report(report, args)
        reports.append(report)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
