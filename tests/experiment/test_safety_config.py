"""Names and numbers of an experiment file are checked when it is read (report findings F2, F17, F18):
a node or collection name that would be a path (``/``, ``..``, a leading dot, NUL, control characters,
too long) or collide with another on a case-insensitive file system is refused naming file, line and
key; so is every bad number, before any stage runs, and no user file is touched."""

from __future__ import annotations

import hashlib

import pytest
from clirkit import ClirkitError
from clirkit.cli import main as cli
from clirkit.experiment import Experiment, ExperimentError, load_results
from conftest import sample_experiment_head

SYSTEM = '\n[systems.bm25]\nkind = "bm25"\nfields = ["text"]\n'


def write(tmp_path, text: str):
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


BAD_NAMES = ["../../keep", "a/b", ".", "..", ".hidden", "a\\u0000b", "a\\nb", "a\\\\b", "x" * 300]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("section", ["systems", "fusion", "rerank", "collections"])
def test_names_that_would_be_paths_are_refused_at_load(tmp_path, section, name):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "mlir").mkdir()
    (keep / "mlir" / "en.trec").write_text("my run\n")
    digest = hashlib.sha256((keep / "mlir" / "en.trec").read_bytes()).hexdigest()
    head = sample_experiment_head("names", ["en"])
    node = {
        "systems": f'\n[systems."{name}"]\nkind = "bm25"\n' + SYSTEM,
        "fusion": SYSTEM
        + f'[systems.b2]\nkind = "bm25"\nk1 = 1.2\n[fusion."{name}"]\ninputs = ["bm25", "b2"]\n',
        "rerank": SYSTEM + f'[rerank."{name}"]\ninput = "bm25"\nbackend = "openai"\nmodel = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\n',
        "collections": SYSTEM,
    }[section]
    if section == "collections":
        head = head.replace("[collections.sample]", f'[collections."{name}"]').replace(
            'collection = "sample"', f'collection = "{name}"'
        )
    path = write(tmp_path, head + node)
    with pytest.raises(
        ExperimentError, match=rf"exp\.toml:\d+: {section}\..*(holds|starts with|longer than)"
    ):
        Experiment(path, tmp_path / "work", quiet=True).run()
    assert not (tmp_path / "work").exists()
    assert hashlib.sha256((keep / "mlir" / "en.trec").read_bytes()).hexdigest() == digest


def test_names_differing_only_in_case_are_refused(tmp_path):
    path = write(
        tmp_path, sample_experiment_head("case", ["en"]) + SYSTEM + '[systems.BM25]\nkind = "bm25"\n'
    )
    with pytest.raises(ExperimentError, match="differ only in case"):
        Experiment(path, tmp_path / "work", quiet=True)


@pytest.mark.parametrize(
    "extra, key",
    [
        ('[fusion.f]\ninputs = ["bm25", "b2"]\nmethod = "interpolate"\n', "fusion.f"),
        ('[fusion.f]\ninputs = ["bm25", "b2"]\nk = nan\n', "fusion.f.k"),
        ('[fusion.f]\ninputs = ["bm25", "b2"]\nweights = [1.0, inf]\n', "fusion.f.weights"),
        ('[systems.b3]\nkind = "bm25"\nk1 = nan\n', "systems.b3.k1"),
        ('[systems.b3]\nkind = "bm25"\nk1 = -5\n', "systems.b3.k1"),
        ('[systems.b3]\nkind = "bm25"\nb = inf\n', "systems.b3.b"),
        (
            '[rerank.r]\ninput = "bm25"\nbackend = "openai"\nmodel = "m"\nbase_url = "http://x/v1"\n'
            "window = 5\nstride = 10\n",
            "rerank.r",
        ),
    ],
)
def test_bad_numbers_are_refused_before_any_stage_runs(tmp_path, extra, key):
    text = sample_experiment_head("nums", ["en"]) + SYSTEM + '[systems.b2]\nkind = "bm25"\nk1 = 1.2\n' + extra
    with pytest.raises(ExperimentError, match=rf"exp\.toml:\d+: {key}"):
        Experiment(write(tmp_path, text), tmp_path / "work", quiet=True)


@pytest.mark.parametrize("key", ["threads", "hits"])
def test_huge_experiment_numbers_are_refused_at_load(tmp_path, key):
    text = sample_experiment_head("big", ["en"]).replace(
        'name = "big"', f'name = "big"\n{key} = 99999999999999999999'
    )
    with pytest.raises(ExperimentError, match=rf"exp\.toml:\d+: experiment\.{key}"):
        Experiment(write(tmp_path, text + SYSTEM), tmp_path / "work", quiet=True)


@pytest.mark.parametrize("report", ["{bad", "{}", "[1, 2]"])
def test_table_of_a_damaged_report_is_a_clean_error(tmp_path, capsys, report):
    (tmp_path / "report.json").write_text(report)
    with pytest.raises(ClirkitError, match="report.json: not a report clirkit wrote"):
        load_results(tmp_path)
    assert cli(["experiment", "table", str(tmp_path)]) == 2
    assert "report.json" in capsys.readouterr().err
