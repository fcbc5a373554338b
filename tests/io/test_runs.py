import clirkit
import pytest


def test_run_round_trip_canonical_order(tmp_path):
    run = {"q1": {"a": 1.0, "b": 1.0, "c": 3.5}, "q2": {"z": -1.0}}
    p = tmp_path / "run.trec"
    clirkit.write_run(p, run, tag="t")
    lines = p.read_text().splitlines()
    assert lines[0] == "q1 Q0 c 1 3.5 t"
    assert lines[1].split()[2] == "b"  # tie: doc id descending
    assert clirkit.read_run(p) == {"q1": {"c": 3.5, "b": 1.0, "a": 1.0}, "q2": {"z": -1.0}}
    assert list(clirkit.read_run(p)["q1"]) == ["c", "b", "a"]


def test_malformed_run_names_file_and_line(tmp_path):
    p = tmp_path / "bad.trec"
    p.write_text("q1 Q0 a 1 1.0 t\nq1 Q0 b 2 oops t\n")
    with pytest.raises(clirkit.ParseError, match=r"bad.trec:2: score 'oops'"):
        clirkit.read_run(p)


def test_qrels_beir_and_trec(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert clirkit.read_qrels(p) == {"q1": {"d1": 1}}


def test_missing_file_is_oserror(tmp_path):
    with pytest.raises(OSError, match="nope.trec"):
        clirkit.read_run(tmp_path / "nope.trec")


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"q1": {"a b": 1.0}}, 'document id "a b" contains white space'),
        ({"q1": {"a\nq9 Q0 forged 1 9 x": 1.0}}, "document id"),
        ({"q 1": {"a": 1.0}}, 'query id "q 1" contains white space'),
        ({"q1": {"": 1.0}}, "document id is empty"),
        ({"q1": {"a": float("nan")}}, "score NaN of document 'a' for query 'q1' is not finite"),
        ({"q1": {"a": float("inf")}}, "score inf of document 'a'"),
    ],
)
def test_runs_refuse_what_they_could_not_read_back(tmp_path, run, message):
    p = tmp_path / "run.trec"
    with pytest.raises(clirkit.InvalidInputError, match=message):
        clirkit.write_run(p, run)
    assert not p.exists()
