"""Input identity is content-based (report finding F7): an edit that keeps the size and restores the
modification time (``cp -p``, ``touch -r``) reruns exactly the stages that read the file; an unchanged
file is not hashed again."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
from clirkit.experiment import Experiment
from clirkit.experiment import data as experiment_data
from conftest import SAMPLE, sample_experiment_head


def setup(tmp_path: Path) -> Path:
    coll = tmp_path / "sample"
    shutil.copytree(SAMPLE, coll)
    text = sample_experiment_head("ident", ["en"]).replace(str(SAMPLE), str(coll))
    text += '\n[systems.bm25]\nkind = "bm25"\nfields = ["text"]\n'
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_same_size_edit_with_restored_mtime_reruns_the_stages_reading_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = setup(tmp_path)
    work = tmp_path / "work"
    Experiment(path, work, quiet=True).run(log=io.StringIO())
    assert Experiment(path, work, quiet=True).plan.counts()[1] == 0
    corpus = tmp_path / "sample" / "corpus.jsonl"
    before = os.stat(corpus)
    data = corpus.read_bytes()
    corpus.write_bytes(data.replace(b"Panthers", b"Panthars"))  # the same size
    os.utime(corpus, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(corpus).st_size == before.st_size and os.stat(corpus).st_mtime_ns == before.st_mtime_ns
    exp = Experiment(path, work, quiet=True)
    stale = {s.kind for s in exp.plan.stages if not exp.plan.cached(s)}
    assert stale == {"bm25-index", "search", "eval"}
    # restoring the old bytes (and mtime) finds the old stages again
    corpus.write_bytes(data)
    os.utime(corpus, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert Experiment(path, work, quiet=True).plan.counts()[1] == 0


def test_unchanged_files_are_hashed_once_across_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = setup(tmp_path)
    Experiment(path, tmp_path / "work", quiet=True)
    assert (tmp_path / "cache" / "clirkit" / "file-digests.json").is_file()
    experiment_data._DIGESTS.clear()  # a new process: only the file remembers
    hashed = []
    real = experiment_data.hashlib.sha256
    # a file's content is hashed by sha256() fed in blocks; digests of keys pass their bytes at once
    monkeypatch.setattr(
        experiment_data.hashlib, "sha256", lambda *a: real(*a) if a else (hashed.append(1), real())[1]
    )
    Experiment(path, tmp_path / "work", quiet=True)
    assert hashed == []


BASE_NODES = """
[systems.bm25]
kind = "bm25"
fields = ["text"]
{bm25}
[systems.b2]
kind = "bm25"
k1 = 1.2
fields = ["text"]

[fusion.f]
inputs = ["bm25", "b2"]
{fusion}
[rerank.r]
input = "f"
backend = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
{rerank}
"""


def digests(tmp_path: Path, bm25: str = "", fusion: str = "", rerank: str = "") -> dict[str, str]:
    text = sample_experiment_head("opts", ["en"]) + BASE_NODES.format(bm25=bm25, fusion=fusion, rerank=rerank)
    path = tmp_path / "opts.toml"
    path.write_text(text, encoding="utf-8")
    plan = Experiment(path, tmp_path / "work", quiet=True).plan
    return {f"{s.kind} {s.label}": s.digest for s in plan.stages}


@pytest.mark.parametrize(
    "change, affected",
    [
        ({"bm25": "k1 = 1.5"}, {"search bm25", "fuse", "rerank", "eval bm25", "eval f", "eval r"}),
        ({"bm25": "b = 0.7"}, {"search bm25", "fuse", "rerank", "eval bm25", "eval f", "eval r"}),
        ({"bm25": "hits = 50"}, {"search bm25", "fuse", "rerank", "eval bm25", "eval f", "eval r"}),
        ({"fusion": "k = 10"}, {"fuse", "rerank", "eval f", "eval r"}),
        ({"fusion": "depth = 50"}, {"fuse", "rerank", "eval f", "eval r"}),
        ({"fusion": "top = 50"}, {"fuse", "rerank", "eval f", "eval r"}),
        ({"fusion": 'method = "combsum"'}, {"fuse", "rerank", "eval f", "eval r"}),
        ({"fusion": "weights = [1.0, 2.0]"}, {"fuse", "rerank", "eval f", "eval r"}),
        ({"rerank": "max_words = 5"}, {"rerank", "eval r"}),
        ({"rerank": "depth = 7"}, {"rerank", "eval r"}),
        ({"rerank": "window = 10\nstride = 5"}, {"rerank", "eval r"}),
    ],
)
def test_every_option_change_reruns_exactly_the_affected_stages(tmp_path, change, affected):
    before = digests(tmp_path)
    after = digests(tmp_path, **change)
    changed = {label for label in before if after.get(label) != before[label]}

    def kind_of(label: str) -> str:
        kind, rest = label.split(" ", 1)
        if kind in ("search", "eval"):
            node = rest.split()[1] if kind == "eval" else rest.split()[0]
            return f"{kind} {node}"
        return kind

    assert {kind_of(label) for label in changed} == affected


def test_another_clirkit_version_reruns_every_stage(tmp_path, monkeypatch):
    from clirkit.experiment import stage as experiment_stage

    path = setup(tmp_path)
    work = tmp_path / "work"
    Experiment(path, work, quiet=True).run(log=io.StringIO())
    assert Experiment(path, work, quiet=True).plan.counts()[1] == 0
    monkeypatch.setattr(experiment_stage, "CLIRKIT_VERSION", "999.0.0")
    exp = Experiment(path, work, quiet=True)
    assert exp.plan.counts() == (0, len(exp.plan.stages))
