"""Every ``clirkit rerank`` backend, template and option is a key of an experiment's ``[rerank.NAME]``
node, with the CLI's defaults: for each, the experiment's rerank stage writes the same run as
``clirkit rerank`` with the same settings, byte for byte, and sends the server the same requests (a
local fake server whose answers are a function of the request, :class:`local_server.ModelServer`)."""

from __future__ import annotations

import io
import json
import sys
import types
from pathlib import Path

import pytest
from clirkit.cli import main as cli
from clirkit.encoders.truncation import truncate_text
from clirkit.experiment import Experiment, ExperimentError
from clirkit.runs import read_run
from conftest import SAMPLE, sample_experiment_head, shared_path
from local_server import ModelServer

DEPTH = 12


@pytest.fixture
def server():
    started = ModelServer()
    yield started
    started.close()


def toml_value(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return "nan" if value != value else json.dumps(value)


def cli_arguments(options: dict) -> list[str]:
    argv = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if key == "model" and options.get("backend") in ("cross-encoder", "pointwise"):
            flag = "--model-dir"
        argv += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return argv


def experiment(tmp_path: Path, options: dict, lang: str = "en") -> Experiment:
    text = sample_experiment_head("rr", [lang]) + '\n[systems.first]\nkind = "bm25"\nfields = ["text"]\n'
    text += f'\n[rerank.second]\ninput = "first"\ndepth = {DEPTH}\n'
    text += "".join(f"{key} = {toml_value(value)}\n" for key, value in options.items())
    path = tmp_path / "rr.toml"
    path.write_text(text + '\n[evaluation]\nmeasures = ["nDCG@10"]\n', encoding="utf-8")
    return Experiment(path, tmp_path / "work", quiet=True)


def same_as_cli(tmp_path: Path, options: dict, server: ModelServer | None, lang: str = "en") -> Path:
    """Run the experiment, then ``clirkit rerank`` on its first-stage run with the same options;
    assert both runs are the same bytes and the server got the same requests. The first-stage run."""
    exp = experiment(tmp_path, options, lang)
    exp.run(log=io.StringIO())
    task = f"mlir/{lang}"
    first = exp.plan.runs["first"][task].output / "run.trec"
    reranked = exp.plan.runs["second"][task].output / "run.trec"
    asked = [] if server is None else list(server.bodies)
    if server is not None:
        server.bodies.clear()
    queries = tmp_path / "queries.jsonl"
    lines = (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries.write_text("".join(line + "\n" for line in lines if json.loads(line)["lang"] == lang), "utf-8")
    out = tmp_path / "cli.trec"
    argv = [
        "rerank",
        "--run",
        str(first),
        "--queries",
        str(queries),
        "--corpus",
        str(SAMPLE / "corpus.jsonl"),
    ]
    argv += ["--output", str(out), "--no-cache", "--quiet", "--depth", str(DEPTH), *cli_arguments(options)]
    assert cli(argv) == 0
    assert reranked.read_bytes() == out.read_bytes()
    assert reranked.read_bytes() != first.read_bytes()  # the reranker did reorder
    if server is not None:

        def canonical(bodies: list) -> list:
            return sorted(json.dumps(b, sort_keys=True, ensure_ascii=False) for b in bodies)

        assert asked and canonical(asked) == canonical(server.bodies)
    return first


@pytest.mark.parametrize(
    "options",
    [
        {"template": "rankgpt"},
        {"template": "rankzephyr"},
        {"template": "first"},
        {
            "template": "rankzephyr",
            "temperature": 0.5,
            "max_tokens": 64,
            "extra_body": {"chat_template_kwargs": {"enable_thinking": True}, "top_p": 0.9},
            "max_words": 7,
            "window": 6,
            "stride": 3,
        },
    ],
    ids=["rankgpt", "rankzephyr", "first", "options"],
)
def test_listwise_templates_and_options_equal_the_cli(tmp_path, server, options):
    same_as_cli(tmp_path, {"backend": "openai", "model": "m", "base_url": server.url, **options}, server)
    if "extra_body" in options:
        assert all(b["temperature"] == 0.5 and b["max_tokens"] == 64 for b in server.bodies)
        assert all(b["chat_template_kwargs"] == {"enable_thinking": True} for b in server.bodies)


@pytest.mark.parametrize(
    "options",
    [
        {"backend": "query-likelihood"},
        {"backend": "yes-no"},
        {"backend": "yes-no", "instruction": "Find the passage answering the question"},
        {"backend": "query-likelihood", "extra_body": {"top_k": 1}},
    ],
    ids=["query-likelihood", "yes-no", "yes-no-instruction", "extra-body"],
)
def test_completion_scorers_equal_the_cli_and_sort_the_whole_depth(tmp_path, server, options):
    first = same_as_cli(tmp_path, {**options, "model": "m", "base_url": server.url}, server)
    # every candidate of the top DEPTH scored: a full sort, not windows
    assert len(server.bodies) == sum(min(DEPTH, len(hits)) for hits in read_run(first).values())
    if "instruction" in options:
        assert all(options["instruction"] in b["prompt"] for b in server.bodies)
    if "extra_body" in options:
        assert all(b["top_k"] == 1 for b in server.bodies)


def test_token_budgets_cut_chinese_passages_as_the_cli_does(tmp_path, server):
    """Whitespace words never cut a Chinese passage; a token budget does (script-aware here)."""
    options = {"backend": "openai", "model": "m", "base_url": server.url, "passage_tokens": 6}
    same_as_cli(tmp_path, {**options, "query_tokens": 4}, server, lang="zh")
    passages = [m["content"] for b in server.bodies for m in b["messages"] if m["content"].startswith("[")]
    cut = [p.split(" ", 1)[1] for p in passages]
    assert cut and all(truncate_text(text, 6) == text for text in cut)  # 6 units: CJK characters, words
    assert sum(len(text) for text in cut) < len(cut) * 8  # the sample's Chinese documents are far longer


@pytest.mark.shared
def test_token_budgets_with_a_tokenizer_equal_the_cli(tmp_path, server):
    tokenizer = shared_path("models", "all-MiniLM-L6-v2-int8", "tokenizer.json")
    options = {"backend": "yes-no", "model": "m", "base_url": server.url, "passage_tokens": 5}
    same_as_cli(tmp_path, {**options, "tokenizer": str(tokenizer)}, server, lang="zh")


class FakeCrossEncoder:
    """Stands in for :class:`clirkit.encoders.CrossEncoder`: a score from a digest of the pair."""

    made: list[dict] = []

    def __init__(self, model_dir, max_length=512, batch_size=32) -> None:
        self.made.append({"max_length": max_length, "batch_size": batch_size})

    def score(self, query, passages):
        import hashlib

        return [int.from_bytes(hashlib.sha256((query + p).encode()).digest()[:3], "big") for p in passages]


@pytest.mark.parametrize("options", [{}, {"max_length": 128, "batch_size": 4}], ids=["defaults", "options"])
def test_cross_encoder_equals_the_cli_with_its_defaults(tmp_path, monkeypatch, options):
    module = types.ModuleType("clirkit.encoders.cross_encoder")
    module.CrossEncoder = FakeCrossEncoder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "clirkit.encoders.cross_encoder", module)
    model = tmp_path / "ce"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    FakeCrossEncoder.made = []
    same_as_cli(tmp_path, {"backend": "cross-encoder", "model": str(model), **options}, None)
    expected = {"max_length": options.get("max_length", 512), "batch_size": options.get("batch_size", 32)}
    assert FakeCrossEncoder.made == [expected, expected]  # the experiment's, then the CLI's


@pytest.mark.parametrize(
    "options, key, message",
    [
        ({"backend": "yes-no", "template": "first"}, "template", "does not apply to backend 'yes-no'"),
        ({"backend": "pointwise", "window": 5}, "window", "only to openai"),
        ({"backend": "openai", "extra_body": {"a": float("nan")}}, "extra_body", "JSON"),
        ({"backend": "openai", "template": "nope"}, "template", "not one of"),
        ({"backend": "openai", "temperature": -1}, "temperature", ">= 0"),
        ({"backend": "openai", "tokenizer": "rr.toml"}, "tokenizer", "passage_tokens"),
        ({"backend": "openai", "timeout": 0}, "timeout", "> 0"),
    ],
)
def test_bad_rerank_keys_name_the_key(tmp_path, options, key, message):
    server = {} if options["backend"] == "pointwise" else {"model": "m", "base_url": "http://127.0.0.1:9/v1"}
    if options["backend"] == "pointwise":
        (tmp_path / "model").mkdir()
        server = {"model": str(tmp_path / "model")}
    with pytest.raises(ExperimentError, match=rf"rerank\.second\.{key}: .*{message}"):
        experiment(tmp_path, {**options, **server})


def test_only_answer_changing_options_are_in_the_stage_key(tmp_path):
    base = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}

    def digest(**extra) -> str:
        return experiment(tmp_path, {**base, **extra}).plan.runs["second"]["mlir/en"].digest

    plain = digest()
    for changed in ({"template": "first"}, {"temperature": 0.1}, {"max_tokens": 9}, {"passage_tokens": 9},
                    {"extra_body": {"seed": 1}}, {"query_tokens": 3}, {"max_words": 9}):  # fmt: skip
        assert digest(**changed) != plain, changed
    for same in ({"concurrency": 2}, {"timeout": 5.0}, {"retries": 0}, {"max_response_mb": 1.0}):
        assert digest(**same) == plain, same
