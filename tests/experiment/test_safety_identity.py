"""Input identity is content-based (report finding F7): an edit that keeps the size and restores the
modification time (``cp -p``, ``touch -r``) reruns exactly the stages that read the file; an unchanged
file is not hashed again."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

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
