"""Experiments end to end on the embedded sample: the table equals the separate CLI commands, a rerun
recomputes nothing, a parameter change recomputes only what depends on it, and a run killed at random
points resumes to the same table."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clirkit.cli import main as cli
from clirkit.experiment import Experiment, load_results
from conftest import SAMPLE, bm25_system, sample_experiment_head

LANGS = ("en", "de", "zh")


def _experiment_file(tmp_path: Path, fusion_k: int = 60, extra: str = "", langs=LANGS, mono=("de",)) -> Path:
    text = (
        sample_experiment_head("sample-fusion", langs)
        + f"""
{"" if not mono else f'[[tasks]]{chr(10)}collection = "sample"{chr(10)}setting = "mono"{chr(10)}languages = {json.dumps(list(mono))}'}

{bm25_system("bm25")}
{bm25_system("bm25-lucene", k1=1.2, b=0.75)}
[fusion.rrf]
inputs = ["bm25", "bm25-lucene"]
k = {fusion_k}
{extra}
[evaluation]
measures = ["nDCG@10", "R@100"]
baseline = "bm25"
averages = ["macro", "query-weighted"]
{'correlations = [["mlir/en", "mlir/de"]]' if {"en", "de"} <= set(langs) else ""}
"""
    )
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _run(path: Path, work: Path, **kw) -> Experiment:
    exp = Experiment(path, work, quiet=True, **kw)
    exp.run(log=io.StringIO())
    return exp


def test_table_equals_the_separate_cli_commands(tmp_path):
    exp = _run(_experiment_file(tmp_path), tmp_path / "work")
    results = exp.results
    assert results is not None
    cli_dir = tmp_path / "cli"
    cli_dir.mkdir()
    index = cli_dir / "index"
    assert cli(["index", "bm25", "--corpus", str(SAMPLE / "corpus.jsonl"), "--index", str(index),
                "--lang-field", "lang", "--fields", "text", "--quiet"]) == 0  # fmt: skip
    queries = [
        json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    for lang in LANGS:
        qfile = cli_dir / f"queries-{lang}.jsonl"
        qfile.write_text(
            "".join(json.dumps(q) + "\n" for q in queries if q["lang"] == lang), encoding="utf-8"
        )
        runs = {}
        for system, k1, b in (("bm25", "0.9", "0.4"), ("bm25-lucene", "1.2", "0.75")):
            runs[system] = cli_dir / f"{system}-{lang}.trec"
            assert cli(["search", "bm25", "--index", str(index), "--queries", str(qfile),
                        "--output", str(runs[system]), "--k1", k1, "--b", b, "--quiet"]) == 0  # fmt: skip
        runs["rrf"] = cli_dir / f"rrf-{lang}.trec"
        assert (
            cli(
                [
                    "fuse",
                    str(runs["bm25"]),
                    str(runs["bm25-lucene"]),
                    "--k",
                    "60",
                    "--output",
                    str(runs["rrf"]),
                ]
            )
            == 0
        )
        for system, run in runs.items():
            out = io.StringIO()
            sys_stdout, sys.stdout = sys.stdout, out
            try:
                cli(["eval", "--qrels", str(SAMPLE / "qrels.tsv"), "--run", str(run),
                     "-m", "nDCG@10", "-m", "R@100", "--json"])  # fmt: skip
            finally:
                sys.stdout = sys_stdout
            expected = json.loads(out.getvalue())
            for measure in ("ndcg_cut_10", "recall_100"):
                assert results.value(system, f"mlir/{lang}", measure) == expected[measure], (system, lang)
    # averages: macro over the group's tasks; results.json holds the same rows with numeric values
    rows = json.loads((tmp_path / "work" / "results.json").read_text())
    assert all(isinstance(r["value"], float) for r in rows)
    mean = sum(results.value("rrf", f"mlir/{lang}", "ndcg_cut_10") for lang in LANGS) / len(LANGS)
    assert results.value("rrf", "mlir/avg", "ndcg_cut_10") == pytest.approx(mean, abs=1e-15)
    assert results.value("rrf", "mlir/qavg", "ndcg_cut_10") is not None
    assert results.value("bm25", "mono/de", "ndcg_cut_10") is not None
    # rank correlation of the three systems' orderings on two columns, per measure
    from clirkit.experiment import kendall_tau, spearman

    (ndcg,) = [c for c in results.correlations if c["measure"] == "ndcg_cut_10"]
    x = [results.value(s, "mlir/en", "ndcg_cut_10") for s in ("bm25", "bm25-lucene", "rrf")]
    y = [results.value(s, "mlir/de", "ndcg_cut_10") for s in ("bm25", "bm25-lucene", "rrf")]
    assert ndcg["systems"] == 3 and ndcg["spearman"] == spearman(x, y).statistic
    assert ndcg["kendall_p"] == kendall_tau(x, y).pvalue


def test_rerun_recomputes_nothing_and_table_reprints(tmp_path, capsys):
    path = _experiment_file(tmp_path)
    first = _run(path, tmp_path / "work")
    assert first.ran == len(first.plan.stages) and first.reused == 0
    second = _run(path, tmp_path / "work")
    assert second.ran == 0 and second.reused == len(first.plan.stages)
    assert second.rows == first.rows
    assert cli(["experiment", "table", str(tmp_path / "work"), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### nDCG@10\n") and "| rrf |" in out
    assert cli(["experiment", "plan", str(path), "--workdir", str(tmp_path / "work")]) == 0
    assert capsys.readouterr().out.endswith(
        f"{len(first.plan.stages)} stages: {len(first.plan.stages)} cached, 0 to run\n"
    )
    assert load_results(tmp_path / "work").rows == first.rows
    pandas = pytest.importorskip("pandas")
    frame = second.dataframe()
    assert isinstance(frame, pandas.DataFrame) and list(frame.columns) == [
        "system",
        "task",
        "measure",
        "value",
    ]


def test_changing_fusion_k_recomputes_only_fusion_rerank_and_evaluation(tmp_path, shared):
    model = shared("models", "all-MiniLM-L6-v2-int8")
    rerank = f'\n[rerank.rrf-minilm]\ninput = "rrf"\nmodel = "{model}"\ndepth = 10\n'
    langs = ("en", "de")
    first = _run(_experiment_file(tmp_path, 60, rerank, langs, mono=()), tmp_path / "work")
    kinds_before = {s.digest: s.kind for s in first.plan.stages}
    second = _run(_experiment_file(tmp_path, 20, rerank, langs, mono=()), tmp_path / "work")
    recomputed = [s for s in second.plan.stages if s.digest not in kinds_before]
    assert second.ran == len(recomputed) > 0
    assert {s.kind for s in recomputed} == {"fuse", "rerank", "eval"}
    tasks = len(langs)
    # per task: the fused run, its reranking and their two evaluations
    assert len(recomputed) == 4 * tasks
    assert second.results is not None and first.results is not None
    assert second.results.value("bm25", "mlir/en", "ndcg_cut_10") == first.results.value(
        "bm25", "mlir/en", "ndcg_cut_10"
    )


def _stage_dirs(store: Path) -> list[Path]:
    kinds = [k for k in store.iterdir() if k.is_dir() and k.name not in ("tmp", "partial", "locks")]
    return [d for kind in kinds for d in kind.iterdir()]


def test_killed_at_random_points_the_rerun_gives_the_same_table(tmp_path):
    path = _experiment_file(tmp_path)
    reference = _run(path, tmp_path / "reference")
    total = len(reference.plan.stages)
    work = tmp_path / "killed"
    store = work / "store"
    rng = random.Random(12)
    points = sorted(rng.sample(range(1, total), 3))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable,
        "-m",
        "clirkit.cli",
        "experiment",
        "run",
        str(path),
        "--workdir",
        str(work),
        "--quiet",
    ]
    kills = 0
    for point in points:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if store.is_dir() and len(_stage_dirs(store)) >= point:
                time.sleep(rng.random() * 0.01)
                proc.send_signal(signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.001)
        proc.wait()
        # whatever is visible is complete: every stage directory has its manifest
        assert all((d / "stage.json").is_file() for d in _stage_dirs(store))
    assert kills >= 3
    resumed = _run(path, work)
    assert 0 < resumed.reused < total or resumed.reused == total
    assert resumed.rows == reference.rows
    assert (work / "table.md").read_text() == (tmp_path / "reference" / "table.md").read_text()
    assert not any((store / "tmp").iterdir())


def test_drop_self_hits_and_query_weighted_average(tmp_path):
    data = tmp_path / "data"
    (data / "qrels").mkdir(parents=True)
    docs = [("d1", "apples and pears"), ("d2", "apples apples"), ("q1", "apples")]
    (data / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in docs))
    (data / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "apples"}) + "\n")
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    text = f"""\
[collections.args]
path = "{data}"
drop_self_hits = true

[collections.plain]
path = "{data}"
group = "args"

[systems.bm25]
kind = "bm25"
"""
    path = tmp_path / "exp.toml"
    path.write_text(text)
    exp = _run(path, tmp_path / "work")
    dropped = (tmp_path / "work" / "runs" / "bm25" / "args.trec").read_text()
    kept = (tmp_path / "work" / "runs" / "bm25" / "plain.trec").read_text()
    assert " q1 " not in dropped and " q1 " in kept
    assert exp.results is not None and "args/avg" in exp.results.columns


def test_two_experiment_files_share_artifacts_through_one_store(tmp_path):
    first_file = _experiment_file(tmp_path)
    text = first_file.read_text().replace(
        'name = "sample-fusion"\n', 'name = "sample-fusion"\nstore = "store"\n'
    )
    first_file.write_text(text)
    first = _run(first_file, tmp_path / "first")
    second_file = tmp_path / "second.toml"
    # the same experiment plus one system: only that system's stages are new
    second_file.write_text(text + '\n[systems.bm25-b1]\nkind = "bm25"\nb = 1.0\nfields = ["text"]\n')
    second = _run(second_file, tmp_path / "second")
    assert first.store.root == second.store.root == tmp_path / "store"
    first_digests = {f.digest for f in first.plan.stages}
    new = [s for s in second.plan.stages if s.digest not in first_digests]
    assert second.ran == len(new) and {s.kind for s in new} == {"search", "eval"}
    assert len(new) == 2 * (len(LANGS) + 1)


def test_reranking_reuses_a_dense_systems_embeddings_with_the_same_result(tmp_path, shared):
    model = shared("models", "all-MiniLM-L6-v2-int8")
    rerank = f'\n[rerank.bm25-minilm]\ninput = "bm25"\nmodel = "{model}"\nfields = ["text"]\nmax_length = 32\ndepth = 10\n'
    dense = f'\n[systems.minilm]\nkind = "dense"\nmodel = "{model}"\nfields = ["text"]\nmax_length = 32\n'
    alone = _run(_experiment_file(tmp_path, extra=rerank, langs=("en",), mono=()), tmp_path / "alone")
    (tmp_path / "with-dense").mkdir()
    seeded = _run(
        _experiment_file(tmp_path / "with-dense", extra=rerank + dense, langs=("en",), mono=()),
        tmp_path / "w",
    )
    stage = seeded.plan.runs["bm25-minilm"]["mlir/en"]
    assert [s.kind for s in stage_seeds(seeded, stage)] == ["encode", "encode-queries"]
    assert stage.digest == alone.plan.runs["bm25-minilm"]["mlir/en"].digest
    # the same artifact key, and the same run whether embeddings were reused or computed
    assert (tmp_path / "w" / "runs" / "bm25-minilm" / "mlir" / "en.trec").read_text() == (
        tmp_path / "alone" / "runs" / "bm25-minilm" / "mlir" / "en.trec"
    ).read_text()


def stage_seeds(exp: Experiment, stage) -> list:
    from clirkit.experiment.stages import reusable_embeddings

    task = next(t for t in exp.tasks if t.label == "mlir/en")
    return reusable_embeddings(exp.plan.stages, exp.config.rerank["bm25-minilm"], task)


def test_a_stage_whose_files_did_not_fully_reach_the_disk_is_recomputed(tmp_path):
    path = _experiment_file(tmp_path)
    first = _run(path, tmp_path / "work")
    store = tmp_path / "work" / "store"
    damaged = next(
        f
        for d in _stage_dirs(store)
        if d.parent.name == "search"
        for f in d.rglob("*")
        if f.suffix == ".trec"
    )
    damaged.write_bytes(damaged.read_bytes()[:-10])  # what a power cut before the data reached disk leaves
    second = _run(path, tmp_path / "work")
    assert second.ran >= 1
    assert second.rows == first.rows


def test_bm25_rm3_system_equals_the_cli_and_keeps_plain_bm25s_stages(tmp_path):
    data = tmp_path / "data"
    (data / "qrels").mkdir(parents=True)
    docs = [(f"d{i}", f"apples pears{i % 3} plums{i}") for i in range(30)] + [("e1", "figs and dates")]
    (data / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in docs))
    (data / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "pears1 plums4"}) + "\n")
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td4\t1\n")
    plain = f'[collections.c]\npath = "{data}"\n\n[systems.bm25]\nkind = "bm25"\nfields = ["text"]\n'
    path = tmp_path / "exp.toml"
    path.write_text(plain)
    before = _run(path, tmp_path / "plain")
    rm3 = '\n[systems.bm25-rm3]\nkind = "bm25"\nfields = ["text"]\nrm3 = true\nfb_docs = 5\n'
    path.write_text(plain + rm3)
    exp = _run(path, tmp_path / "work")
    assert exp.plan.runs["bm25"]["c"].digest == before.plan.runs["bm25"]["c"].digest
    ours = (tmp_path / "work" / "runs" / "bm25-rm3" / "c.trec").read_text()
    index, run = tmp_path / "idx", tmp_path / "cli.trec"
    assert cli(["index", "bm25", "--corpus", str(data / "corpus.jsonl"), "--index", str(index),
                "--fields", "text", "--store-docvectors", "--quiet"]) == 0  # fmt: skip
    assert cli(["search", "bm25", "--index", str(index), "--queries", str(data / "queries.jsonl"),
                "--output", str(run), "--rm3", "--fb-docs", "5", "--quiet"]) == 0  # fmt: skip
    assert ours == run.read_text()
    path.write_text(plain + '\n[systems.bad]\nkind = "bm25"\nfb_terms = 5\n')
    with pytest.raises(Exception, match="set rm3 = true"):
        Experiment(path, tmp_path / "bad")


def test_bm25_rm3_filter_terms_false_equals_the_clis_no_term_filter(tmp_path):
    data = tmp_path / "data"
    (data / "qrels").mkdir(parents=True)
    # Two feedback documents hold "café", which only the unfiltered expansion adds to the query, so only
    # it retrieves c0.
    docs = [(f"d{i}", f"pears{i % 2} plums{i}" + (" café" if i in (1, 3) else "")) for i in range(12)]
    docs += [(f"f{j}", f"dates{j}") for j in range(20)] + [("c0", "café figs")]
    (data / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in docs))
    (data / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "pears1 plums3"}) + "\n")
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")
    systems = "".join(
        f'\n[systems.{name}]\nkind = "bm25"\nfields = ["text"]\nrm3 = true\nfb_docs = 4\n{extra}'
        for name, extra in (("filtered", ""), ("unfiltered", "filter_terms = false\n"))
    )
    path = tmp_path / "exp.toml"
    path.write_text(f'[collections.c]\npath = "{data}"\n{systems}')
    exp = _run(path, tmp_path / "work")
    runs = {n: (tmp_path / "work" / "runs" / n / "c.trec").read_text() for n in ("filtered", "unfiltered")}
    index, run = tmp_path / "idx", tmp_path / "cli.trec"
    assert cli(["index", "bm25", "--corpus", str(data / "corpus.jsonl"), "--index", str(index),
                "--fields", "text", "--store-docvectors", "--quiet"]) == 0  # fmt: skip
    assert cli(["search", "bm25", "--index", str(index), "--queries", str(data / "queries.jsonl"),
                "--output", str(run), "--rm3", "--fb-docs", "4", "--no-term-filter", "--quiet"]) == 0  # fmt: skip
    assert runs["unfiltered"] == run.read_text() != runs["filtered"]
    assert exp.plan.runs["unfiltered"]["c"].digest != exp.plan.runs["filtered"]["c"].digest
