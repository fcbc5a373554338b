"""The example experiments on ../shared (skipped without it): the NeuCLIR-layout example's BM25 rows
reproduce ../shared/README.md, and the PosIR report converts spans and aggregates per language."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from clirkit.experiment import Experiment
from clirkit.experiment.posir import convert_spans
from clirkit.experiment.toml_source import ExperimentError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(
    tmp_path: Path, name: str, drop_sections: tuple[str, ...] = (), shared_root: Path | None = None
) -> Path:
    """The example with some ``[section]`` tables dropped and its ../../shared paths made absolute."""
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    for section in drop_sections:
        text = re.sub(rf"\n\[{re.escape(section)}\]\n(?:(?!\n\[).)*", "\n", text, flags=re.S)
    assert shared_root is not None
    text = text.replace("../../shared", str(shared_root))
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


NEURAL = ("systems.e5", "systems.splade", "fusion.rrf")


def test_neuclir_layout_bm25_rows_reproduce_the_readme(tmp_path, shared):
    root = shared("data", "xquad-clir").parent.parent
    path = _example(tmp_path, "xquad-clir-neuclir.toml", NEURAL, root)
    text = path.read_text(encoding="utf-8")
    assert 'topic_fields = ["topic_title", "topic_description"]' in text  # NeuCLIRBench's queries
    path.write_text(text.replace('"topic_title", "topic_description"', '"topic_title"'), encoding="utf-8")
    exp = Experiment(path, tmp_path / "work", quiet=True)
    results = exp.run(log=io.StringIO())
    ndcg = {
        task: round(v, 4) for task in results.columns if (v := results.value("bm25", task, "ndcg_cut_20"))
    }
    assert ndcg["mono/zh"] == 0.9665 and ndcg["mono/ru"] == 0.9569 and ndcg["mono/ar"] == 0.9390
    assert ndcg["clir-dt/zh"] == ndcg["clir-dt/ru"] == ndcg["clir-dt/ar"] == 0.9653
    assert ndcg["mlir-dt"] == 0.9607
    assert ndcg["clir-qt/zh"] == ndcg["mono/zh"]  # the topics' translations are human: QT is mono here
    # NeuCLIRBench's Avg: the three DT languages and the MLIR-DT column
    assert results.value("bm25", "Avg", "ndcg_cut_20") == pytest.approx(
        sum(
            results.value("bm25", c, "ndcg_cut_20")
            for c in ("clir-dt/zh", "clir-dt/ru", "clir-dt/ar", "mlir-dt")
        )
        / 4
    )
    # BM25 runs where query and documents share a language; no BM25 row for clir or native mlir
    assert "clir/zh" not in exp.plan.runs["bm25"] and "mlir" not in exp.plan.runs["bm25"]
    assert set(exp.plan.runs["bm25-rm3"]) == set(exp.plan.runs["bm25"])
    # mono and clir-qt ask the same questions of the same documents: one artifact serves both
    assert exp.plan.runs["bm25"]["mono/zh"] is exp.plan.runs["bm25"]["clir-qt/zh"]
    rows = json.loads((tmp_path / "work" / "results.json").read_text())
    assert {r["measure"] for r in rows} >= {"ndcg_cut_20", "map", "recall_100", "recall_1000", "judged_20"}
    # title + description (the example as written): xquad-clir's descriptions repeat the titles, which
    # doubles every query term's weight and leaves BM25's ranking as it was
    (tmp_path / "td").mkdir()
    path = _example(tmp_path / "td", "xquad-clir-neuclir.toml", NEURAL, root)
    both = Experiment(path, tmp_path / "td" / "work", quiet=True)
    query = both.tasks[0].queries[0][1]
    title = query[: (len(query) - 1) // 2]
    assert query == f"{title} {title}"
    again = both.run(log=io.StringIO())
    for task in ("mono/zh", "clir-dt/ru", "mlir-dt"):
        assert round(again.value("bm25", task, "ndcg_cut_20"), 4) == ndcg[task]


def test_posir_report_over_xquad_pos(tmp_path, shared):
    root = shared("data", "xquad-pos").parent.parent
    path = _example(tmp_path, "xquad-pos-position.toml", (), root)
    text = path.read_text().replace('languages = ["ar", "de", "el", "en", "es", "hi", "ru", "th", "tr", "vi", "zh"]',
                                    'languages = ["de", "en"]')  # fmt: skip
    text = re.sub(r'tokenizer = ".*"\n', 'length_unit = "chars"\n', text)
    path.write_text(text)
    Experiment(path, tmp_path / "work", quiet=True).run(log=io.StringIO())
    report = json.loads((tmp_path / "work" / "posir.json").read_text())
    assert [a["system"] for a in report["aggregated"]] == ["bm25", "bm25-lucene-defaults"]
    assert {(t["system"], t["task"], t["language"]) for t in report["per_domain"]} == {
        (s, f"mono/{lang}", lang) for s in ("bm25", "bm25-lucene-defaults") for lang in ("de", "en")
    }
    psi = {(r["system"], r["language"]): r["psi"]["all"] for r in report["per_language"]}
    # the aggregate PSI is the mean of the per-language PSIs
    assert report["aggregated"][0]["psi"]["all"] == pytest.approx(
        (psi[("bm25", "de")] + psi[("bm25", "en")]) / 2
    )
    overall = [r for r in report["aggregated"][0]["bins"] if r["bucket"] == "all"]
    # every query with a hit (a run leaves out the few whose words all are stopwords)
    assert len(overall) == 20 and 2 * 1190 - 5 <= sum(r["queries"] for r in overall) <= 2 * 1190
    assert 0 <= report["aggregated"][0]["psi"]["all"] < 1
    text = (tmp_path / "work" / "posir.txt").read_text()
    assert (
        text.startswith("# bm25: PSI and mean ndcg_cut_10 per language")
        and "# bm25: mean ndcg_cut_10" in text
    )


def test_convert_spans(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"_id": "d1", "text": "0123456789"})
        + "\n"
        + json.dumps({"_id": "d2", "text": "ab"})
        + "\n"
    )
    spans = tmp_path / "spans.tsv"
    spans.write_text("query-id\tcorpus-id\tspan_start\tspan_end\tanswer\nq1\td1\t2\t4\tx\nq2\td2\t0\t1\ty\n")
    out = tmp_path / "positions.tsv"
    assert convert_spans(spans, corpus, out) == 2
    assert out.read_text() == (
        "query-id\tcorpus-id\tspan_start\tspan_end\tdoc_chars\nq1\td1\t2\t4\t10\nq2\td2\t0\t1\t2\n"
    )
    spans.write_text("query-id\tcorpus-id\tspan_start\tspan_end\nq1\td1\t2\t40\n")
    with pytest.raises(
        ExperimentError, match=r"spans.tsv:2: span 2-40 lies outside document 'd1' \(10 chars\)"
    ):
        convert_spans(spans, corpus, out)
    spans.write_text("query-id\tcorpus-id\tspan_start\tspan_end\nq1\td9\t2\t4\n")
    with pytest.raises(ExperimentError, match=r"spans.tsv:2: document 'd9' is not in"):
        convert_spans(spans, corpus, out)


@pytest.mark.slow
def test_neuclir_example_equals_the_separate_cli_commands(tmp_path, shared):
    """The whole example (BM25, e5, RRF); mono/zh recomputed with index/encode/search/fuse/eval."""
    from clirkit.cli import main as cli

    root = shared("data", "xquad-clir").parent.parent
    model = shared("models", "multilingual-e5-small-int8")
    data = root / "data" / "xquad-clir"
    results = Experiment(
        _example(tmp_path, "xquad-clir-neuclir.toml", (), root), tmp_path / "work", quiet=True
    ).run(log=io.StringIO())
    cli_dir = tmp_path / "cli"
    cli_dir.mkdir()
    queries = cli_dir / "queries.jsonl"
    with open(data / "topics.jsonl", encoding="utf-8") as f, open(queries, "w", encoding="utf-8") as out:
        for line in f:
            topic = json.loads(line)
            title = next(t["topic_title"] for t in topic["topics"] if t["lang"] == "zho")
            out.write(
                json.dumps({"_id": topic["topic_id"], "text": title, "lang": "zh"}, ensure_ascii=False) + "\n"
            )
    c = str(cli_dir)
    steps = [
        ["index", "bm25", "--corpus", str(data / "docs" / "zh.jsonl"), "--index", f"{c}/bm25", "--lang", "zh",
         "--fields", "text", "--quiet"],
        ["search", "bm25", "--index", f"{c}/bm25", "--queries", str(queries), "--output", f"{c}/bm25.trec", "--quiet"],
        ["encode", "--model", str(model), "--corpus", str(data / "docs" / "zh.jsonl"), "--fields", "text",
         "--max-length", "512", "--output", f"{c}/docs", "--quiet"],
        ["encode", "--model", str(model), "--queries", str(queries), "--max-length", "512", "--output", f"{c}/q",
         "--quiet"],
        ["index", "dense", "--embeddings", f"{c}/docs.npy", "--ids", f"{c}/docs.ids.txt", "--index", f"{c}/dense"],
        ["search", "dense", "--index", f"{c}/dense", "--queries", f"{c}/q.npy", "--qids", f"{c}/q.ids.txt",
         "--output", f"{c}/e5.trec"],
        ["fuse", f"{c}/bm25.trec", f"{c}/e5.trec", "--k", "60", "--output", f"{c}/rrf.trec"],
    ]  # fmt: skip
    for step in steps:
        assert cli(step) == 0, step
    from clirkit.evaluation import evaluate

    for system in ("bm25", "e5", "rrf"):
        expected = evaluate(str(data / "qrels" / "zh.txt"), f"{c}/{system}.trec", ["nDCG@20", "Judged@20"])
        for key, value in expected.items():
            assert results.value(system, "mono/zh", key) == value, (system, key)


def _planned_scifact_example(tmp_path, shared, capsys, name: str) -> tuple[list[list[str]], str]:
    """``clirkit experiment plan examples/NAME`` (a SciFact example): its stages as ``[state, kind,
    digest, label]`` (every one to run) and the file's text."""
    from clirkit.cli import main as cli

    root = shared("data", "beir-scifact").parent.parent
    for model in ("multilingual-e5-small-int8", "splade-tiny-en", "all-MiniLM-L6-v2-int8"):
        shared("models", model)
    path = _example(tmp_path, name, (), root)
    assert cli(["experiment", "plan", str(path), "--workdir", str(tmp_path / "work")]) == 0
    lines = capsys.readouterr().out.splitlines()
    stages = [line.split(maxsplit=3) for line in lines[:-1]]
    assert all(state == "run" for state, *_ in stages)
    assert lines[-1] == f"{len(stages)} stages: 0 cached, {len(stages)} to run"
    return stages, path.read_text()


def test_three_families_example_plans_every_family_and_their_fusion(tmp_path, shared, capsys):
    """``clirkit experiment plan examples/scifact-three-families.toml``: BM25 (+RM3), e5 dense, splade
    impact and MiniLM multi-vector runs on SciFact, the neural families' RRF and a second one with
    BM25+RM3, one evaluation each."""
    stages, text = _planned_scifact_example(tmp_path, shared, capsys, "scifact-three-families.toml")
    kinds = [kind for _, kind, *_ in stages]
    assert sorted(set(kinds)) == [
        "bm25-index", "dense-index", "encode", "encode-queries", "encode-query-tokens", "encode-tokens",
        "eval", "fuse", "impact-index", "multivector-index", "search", "sparse-encode",
        "sparse-encode-queries",
    ]  # fmt: skip
    # Plain BM25 and BM25+RM3 (whose index keeps document vectors) have an index each.
    assert kinds.count("bm25-index") == 2
    searches = sorted(label for _, kind, _, label in stages if kind in ("search", "fuse"))
    systems = ("bm25", "bm25-rm3", "e5", "minilm-mv", "rrf", "rrf-with-bm25-rm3", "splade")
    assert searches == [f"{s} scifact" for s in systems]
    assert kinds.count("eval") == 7
    # NeuCLIRBench's fusion: the three neural families, no BM25 leg; the one with BM25+RM3 is named so
    assert '[fusion.rrf]\ninputs = ["e5", "splade", "minilm-mv"]' in text and "rm3 = true" in text
    assert '[fusion.rrf-with-bm25-rm3]\ninputs = ["bm25-rm3", "e5", "splade", "minilm-mv"]' in text


def test_one_pass_example_encodes_the_corpus_once_for_dense_and_multi_vector(tmp_path, shared, capsys):
    """``examples/scifact-three-families-one-pass.toml``, the successor for issue 31's encoding measure: the
    MiniLM dense and multi-vector systems read ONE ``encode-heads`` stage of the documents file (no
    ``encode`` / ``encode-tokens`` stage), splade its own; the multi-vector system is the one of
    scifact-three-families.toml at 256 tokens, and the fusions name the three families."""
    stages, text = _planned_scifact_example(tmp_path, shared, capsys, "scifact-three-families-one-pass.toml")
    kinds = [kind for _, kind, *_ in stages]
    assert "encode" not in kinds and "encode-tokens" not in kinds
    heads = [label for _, kind, _, label in stages if kind == "encode-heads"]
    assert heads == ["encode dense+multivector beir-scifact/corpus.jsonl"]
    assert kinds.count("sparse-encode") == 1
    # Queries: the dense family's and the multi-vector family's, each once.
    assert kinds.count("encode-queries") == kinds.count("encode-query-tokens") == 1
    searches = sorted(label for _, kind, _, label in stages if kind in ("search", "fuse"))
    systems = ("bm25", "bm25-rm3", "minilm", "minilm-mv", "rrf", "rrf-with-bm25-rm3", "splade")
    assert searches == [f"{s} scifact" for s in systems]
    assert '[fusion.rrf]\ninputs = ["minilm", "splade", "minilm-mv"]' in text

    def table(source: str, name: str) -> str:
        return re.search(rf"\n\[systems\.{name}\]\n(?:(?!\n\[).)*", source, flags=re.S).group(0)

    one_pass, original = (
        (EXAMPLES / name).read_text(encoding="utf-8")
        for name in ("scifact-three-families-one-pass.toml", "scifact-three-families.toml")
    )
    assert table(one_pass, "minilm-mv") == table(original, "minilm-mv").replace("= 180", "= 256")
