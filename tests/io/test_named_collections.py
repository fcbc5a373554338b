"""Collections by name (clirkit.sources): ``irds:<id>`` through ir_datasets and ``hf:<repo>[@rev]``
through the Hugging Face Hub, from caches laid out here in each library's own layout (offline)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from clirkit import InvalidInputError, sources
from clirkit._extras import MissingExtraError
from clirkit.cli import main
from conftest import shared_path
from hub_layout import lay_snapshot, mteb_files, use_hub_cache

REV1 = "1" * 40
REV2 = "2" * 40
EXPERIMENT = """[experiment]
name = "named"
[collections.scifact]
path = "{name}"
[systems.bm25]
kind = "bm25"
[evaluation]
measures = ["nDCG@10", "R@100"]
"""


@pytest.fixture
def tiny_beir(tmp_path: Path) -> Path:
    """A three-document BEIR folder."""
    root = tmp_path / "tiny"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "Cats", "text": "cats purr"}\n'
        '{"_id": "d2", "title": "Dogs", "text": "dogs bark"}\n'
        '{"_id": "007", "title": "Birds", "text": "birds sing"}\n'
    )
    (root / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "purring cats"}\n{"_id": "q2", "text": "birds"}\n'
    )
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\t007\t2\n")
    return root


@pytest.fixture
def caches(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "clirkit-cache"))
    use_hub_cache(monkeypatch, tmp_path / "hf")
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    return tmp_path


def test_names_parse_with_revision_and_options():
    name = sources.parse_name("hf:mteb/scifact@abc#split=dev,query=title")
    assert (name.scheme, name.target, name.revision) == ("hf", "mteb/scifact", "abc")
    assert name.options == {"split": "dev", "query": "title"}
    assert sources.is_name("irds:beir/scifact/test") and not sources.is_name("corpus.jsonl")
    with pytest.raises(InvalidInputError, match="option 'color=red'"):
        sources.parse_name("irds:beir/scifact/test#color=red")
    with pytest.raises(InvalidInputError, match="no dataset id"):
        sources.parse_name("hf:")


def test_hub_plain_files_export_streams_and_keys_on_revision(caches, tiny_beir):
    pytest.importorskip("datasets")
    pytest.importorskip("huggingface_hub")
    files = {
        "corpus.jsonl": tiny_beir / "corpus.jsonl",
        "queries.jsonl": tiny_beir / "queries.jsonl",
        "qrels/test.tsv": tiny_beir / "qrels" / "test.tsv",
    }
    lay_snapshot(caches / "hf", "dataset", "org/tiny", REV1, files)
    folder = Path(sources.resolve_collection("hf:org/tiny"))
    lines = (folder / "corpus.jsonl").read_text().splitlines()
    assert lines[2] == '{"_id": "007", "title": "Birds", "text": "birds sing"}'
    assert (folder / "qrels" / "test.tsv").read_text().splitlines()[1:] == ["q1\td1\t1", "q2\t007\t2"]
    first = sources.identity_of(str(folder / "corpus.jsonl"))
    assert first == {
        "source": {"hf": "org/tiny", "revision": REV1, "dir": None, "split": "test", "query_field": "text"},
        "part": "corpus.jsonl",
    }
    # a second revision under its own ref: another identity, another export
    lay_snapshot(caches / "hf", "dataset", "org/tiny", REV2, files, ref="v2")
    second = Path(sources.resolve_part("hf:org/tiny@v2", "corpus"))
    assert second.parent != folder
    assert sources.identity_of(str(second))["source"]["revision"] == REV2
    assert sources.identity_of(str(tiny_beir / "corpus.jsonl")) is None


def test_hub_errors_name_the_collection(caches, tiny_beir):
    pytest.importorskip("datasets")
    pytest.importorskip("huggingface_hub")
    with pytest.raises(InvalidInputError, match="hf:org/absent"):
        sources.resolve_collection("hf:org/absent")
    lay_snapshot(caches / "hf", "dataset", "org/noqrels", REV1, {"corpus.jsonl": tiny_beir / "corpus.jsonl"})
    with pytest.raises(InvalidInputError, match="no qrels"):
        sources.resolve_part("hf:org/noqrels", "qrels")


def test_missing_extra_is_one_line(caches, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ir_datasets", None)
    with pytest.raises(MissingExtraError, match=r'pip install "clirkit\[irds\]"'):
        sources.resolve_collection("irds:beir/scifact/test")
    rc = main(["index", "bm25", "--corpus", "irds:beir/scifact/test", "--index", str(tmp_path / "i")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and 'pip install "clirkit[irds]"' in err


@pytest.fixture
def scifact_caches(caches) -> Path:
    """SciFact laid into an ir_datasets home (BEIR's source.zip) and a Hub dataset snapshot in MTEB's layout."""
    beir = shared_path("data", "beir-scifact")
    target = caches / "irds" / "beir" / "scifact"
    target.mkdir(parents=True)
    with zipfile.ZipFile(target / "source.zip", "w") as z:
        for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
            z.write(beir / name, f"scifact/{name}")
    lay_snapshot(caches / "hf", "dataset", "mteb/scifact", REV1, mteb_files(beir))
    lay_snapshot(caches / "hf", "dataset", "mteb/scifact", REV2, mteb_files(beir), ref="v2")
    return caches


def _table_values(out: str) -> list[str]:
    return [line.split()[-1] for line in out.splitlines() if line.startswith("bm25")]


@pytest.mark.shared
@pytest.mark.parametrize("name", ["irds:beir/scifact/test", "hf:mteb/scifact"])
def test_scifact_by_name_bm25_experiment_and_cli(scifact_caches, name, capsys):
    pytest.importorskip("ir_datasets" if name.startswith("irds") else "datasets")
    work = scifact_caches
    experiment = work / "named.toml"
    experiment.write_text(EXPERIMENT.format(name=name))
    assert main(["experiment", "run", str(experiment), "--workdir", str(work / "w"), "--quiet"]) == 0
    assert _table_values(capsys.readouterr().out) == ["0.6789", "0.9253"]

    index, run = work / "index", work / "run.trec"
    assert main(["index", "bm25", "--corpus", name, "--index", str(index), "--quiet"]) == 0
    assert (
        main(["search", "bm25", "--index", str(index), "--queries", name, "--output", str(run), "--quiet"])
        == 0
    )
    capsys.readouterr()
    assert main(["eval", "--qrels", name, "--run", str(run), "-m", "ndcg_cut.10", "-m", "recall.100"]) == 0
    out = capsys.readouterr().out.split()
    assert out[out.index("ndcg_cut_10") + 2] == "0.6789" and out[out.index("recall_100") + 2] == "0.9253"


@pytest.mark.shared
def test_store_key_changes_with_the_revision(scifact_caches):
    pytest.importorskip("datasets")
    from clirkit.experiment import Experiment

    digests = {}
    for revision in ("", "@v2", f"@{REV1}"):
        experiment = scifact_caches / "named.toml"
        experiment.write_text(EXPERIMENT.format(name=f"hf:mteb/scifact{revision}"))
        plan = Experiment(experiment, workdir=scifact_caches / "w").plan
        digests[revision] = [s.digest for s in plan.stages]
    assert digests[""] == digests[f"@{REV1}"]  # main is REV1: the same identity, the same stages
    assert digests[""] != digests["@v2"] and len(digests["@v2"]) == 3
