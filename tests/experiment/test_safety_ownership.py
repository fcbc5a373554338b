"""An experiment never touches what it does not own (report findings F1, F3, F14, F19): the working
directory and the store carry a clirkit marker, a non-empty directory without it is refused naming it
with every user file left byte-identical, only ``tmp/KIND-DIGEST.PID`` entries are ever cleaned, stale
outputs of removed nodes go, and two concurrent runs of one experiment build each stage once."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clirkit import ClirkitError
from clirkit.experiment import Experiment
from clirkit.experiment.store import STORE_MARKER, WORKDIR_MARKER, ArtifactStore
from conftest import sample_experiment_head


def experiment_file(tmp_path: Path, extra: str = "", systems: str = "") -> Path:
    text = sample_experiment_head("own", ["en"]) + (
        systems
        or '\n[systems.bm25]\nkind = "bm25"\nfields = ["text"]\n\n[systems.bm25b]\nkind = "bm25"\nk1 = 1.2\n'
        'fields = ["text"]\n'
    )
    path = tmp_path / "exp.toml"
    path.write_text(text + extra, encoding="utf-8")
    return path


def tree_hashes(root: Path) -> dict[str, str]:
    """Every file under ``root`` (links as their target text) with a hash of its bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[key] = "link:" + os.readlink(path)
        elif path.is_file():
            out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[key] = "dir"
    return out


def user_tree(root: Path) -> Path:
    (root / "tmp" / "photos").mkdir(parents=True)
    (root / "tmp" / "photos" / "cat.jpg").write_bytes(b"\xff\xd8 cat")
    (root / "tmp" / "bm25-0123456789abcdef0123.1").mkdir()  # named like clirkit's, but not clirkit's
    (root / "store" / "tmp" / "data").mkdir(parents=True)
    (root / "store" / "tmp" / "data" / "f").write_text("x")
    (root / "table.md").write_text("my notes\n")
    (root / "runs" / "bm25").mkdir(parents=True)
    (root / "runs" / "bm25" / "mlir").write_text("my run\n")
    return root


def run(path: Path, work: Path) -> Experiment:
    exp = Experiment(path, work, quiet=True)
    exp.run(log=io.StringIO())
    return exp


def test_store_that_is_a_user_directory_is_refused_untouched(tmp_path):
    victim = user_tree(tmp_path / "victim")
    before = tree_hashes(victim)
    path = experiment_file(tmp_path)
    path.write_text(
        path.read_text().replace('name = "own"', f'name = "own"\nstore = "{victim}"'), encoding="utf-8"
    )
    with pytest.raises(ClirkitError, match=str(victim)):
        run(path, tmp_path / "work")
    assert tree_hashes(victim) == before


def test_workdir_that_is_a_user_directory_is_refused_untouched(tmp_path):
    proj = user_tree(tmp_path / "proj")
    before = tree_hashes(proj)
    with pytest.raises(ClirkitError, match=f"{proj}.*not an experiment workdir"):
        run(experiment_file(tmp_path), proj)
    assert tree_hashes(proj) == before


def test_marked_workdir_is_reused_and_only_clirkit_temporaries_are_cleaned(tmp_path):
    path = experiment_file(tmp_path)
    work = tmp_path / "work"
    run(path, work)
    assert (work / WORKDIR_MARKER).is_file() and (work / "store" / STORE_MARKER).is_file()
    tmp = work / "store" / "tmp"
    tmp.mkdir(exist_ok=True)
    dead = tmp / "bm25-0123456789abcdef0123.999999999"  # clirkit's name, a process that is gone
    dead.mkdir()
    mine = tmp / "photos"  # not a name clirkit gives: kept
    mine.mkdir()
    (mine / "cat.jpg").write_bytes(b"cat")
    run(path, work)
    assert not dead.exists()
    assert (mine / "cat.jpg").read_bytes() == b"cat"


def test_empty_existing_workdir_is_accepted(tmp_path):
    (tmp_path / "empty").mkdir()
    run(experiment_file(tmp_path), tmp_path / "empty")
    assert (tmp_path / "empty" / "table.md").is_file()


def test_outputs_of_removed_nodes_and_significance_are_removed(tmp_path):
    work = tmp_path / "work"
    path = experiment_file(
        tmp_path, extra='\n[fusion.rrf]\ninputs = ["bm25", "bm25b"]\n\n[evaluation]\nbaseline = "bm25"\n'
    )
    run(path, work)
    assert (work / "significance.json").is_file() and (work / "runs" / "rrf").is_dir()
    keep = work / "runs" / "notes.txt"
    keep.write_text("mine")
    run(experiment_file(tmp_path), work)
    assert not (work / "significance.json").exists()
    assert not (work / "runs" / "rrf").exists()
    assert (work / "runs" / "bm25").is_dir() and keep.read_text() == "mine"


def test_abandoned_partial_stage_is_removed(tmp_path):
    path = experiment_file(tmp_path)
    work = tmp_path / "work"
    run(path, work)
    store = ArtifactStore(work / "store")
    old = store.partial("0123456789abcdef0123")  # a digest no stage of the file has any more
    (old / "embeddings.part").write_bytes(b"\0" * 100)
    run(path, work)
    assert not old.exists()


def test_concurrent_runs_build_each_stage_once(tmp_path):
    path = experiment_file(tmp_path)
    work = tmp_path / "work"
    code = (
        "import io, sys; from clirkit.experiment import Experiment\n"
        f"e = Experiment({str(path)!r}, {str(work)!r}, quiet=True); e.run(log=io.StringIO()); print(e.ran)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    stages = len(Experiment(path, work, quiet=True).plan.stages)
    assert sum(int(o.split()[-1]) for o in outs) == stages  # each stage built by exactly one run


def test_root_as_store_is_refused_before_anything_is_written(tmp_path):
    path = experiment_file(tmp_path)
    path.write_text(path.read_text().replace('name = "own"', 'name = "own"\nstore = "/"'), encoding="utf-8")
    before = sorted(os.listdir("/tmp"))
    with pytest.raises(ClirkitError, match="/: not an experiment store made by clirkit"):
        run(path, tmp_path / "work")
    assert not (tmp_path / "work" / "store").exists()
    assert set(before) <= set(os.listdir("/tmp"))  # nothing of /tmp removed
