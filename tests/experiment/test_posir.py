"""PosIR's aggregation, with every expected value computed by hand below: per language the bins are
query-weighted over its domains, PSI is taken per language and bucket, the aggregate PSI is the mean of
the per-language PSIs, a bucket's score is a mean over queries, and a document of exactly 512 tokens is
in Q1 (buckets closed at their upper edge; longer documents than the last edge join the last bucket)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirkit.experiment.posir import format_languages, report
from clirkit.experiment.toml_source import ExperimentError

# qid: (language, domain, doc tokens, relative position bin (0: first half, 1: second), nDCG@10)
QUERIES = {
    "a1": ("A", "A1", 512, 0, 1.0),  # exactly 512 tokens: Q1
    "a2": ("A", "A1", 100, 1, 0.5),
    "a3": ("A", "A1", 600, 0, 1.0),  # Q2
    "a4": ("A", "A2", 300, 1, 0.0),
    "a5": ("A", "A2", 200, 1, 0.0),
    "a6": ("A", "A2", 5000, 1, 0.5),  # beyond the last edge (1024): the last bucket, Q2
    "b1": ("B", "B1", 50, 0, 0.5),
    "b2": ("B", "B2", 400, 1, 1.0),
    "b3": ("B", "B2", 100, 0, 1.0),
}


def _run_for(qid: str, value: float) -> dict[str, float]:
    """One relevant document d-QID: rank 1 gives nDCG@10 1, rank 3 gives 0.5, absent 0."""
    if value == 1.0:
        return {f"d-{qid}": 2.0}
    if value == 0.5:
        return {"x": 3.0, "y": 2.5, f"d-{qid}": 2.0}
    return {"x": 1.0}


def _inputs(tmp_path: Path, tokens: bool = True):
    positions = tmp_path / "positions.tsv"
    lines = ["query-id\tcorpus-id\tspan_start\tspan_end\tdoc_chars" + ("\tdoc_tokens" if tokens else "")]
    for qid, (_, _, length, b, _) in QUERIES.items():
        span = "10\t20" if b == 0 else "80\t90"  # midpoints 0.15 and 0.85 of 100 characters
        lines.append(f"{qid}\td-{qid}\t{span}\t100" + (f"\t{length}" if tokens else ""))
    positions.write_text("\n".join(lines) + "\n")
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for qid, (_, domain, _, _, value) in QUERIES.items():
        runs.setdefault(domain, {})[qid] = _run_for(qid, value)
    languages = {domain: domain[0] for domain in runs}
    return positions, {"sys": runs}, languages


def test_posir_aggregation_by_hand(tmp_path: Path):
    positions, runs, languages = _inputs(tmp_path)
    (table,), details = report(positions, runs, languages, "nDCG@10", 2, [0, 512, 1024], 1, "tokens")
    by_lang = {r["language"]: r for r in details["per_language"]}
    a, b = by_lang["A"], by_lang["B"]
    assert a["domains"] == ["A1", "A2"] and b["domains"] == ["B1", "B2"]
    # A, Q1 (a1 at exactly 512 tokens, a2, a4, a5): bin 0 = {a1: 1} -> 1; bin 1 = {a2: .5, a4: 0, a5: 0}
    # query-weighted over A1 (.5, one query) and A2 (0, two queries) -> 1/6 (the domains' macro would be .25)
    q1 = [r for r in a["bins"] if r["bucket"] == "0-512"]
    assert [r["queries"] for r in q1] == [1, 3]
    assert [r["ndcg_cut_10"] for r in q1] == pytest.approx([1.0, 1 / 6])
    assert a["psi"]["0-512"] == pytest.approx(1 - (1 / 6) / 1)
    assert a["mean"]["0-512"] == pytest.approx((1 + 0.5 + 0 + 0) / 4)  # a query mean (bin means: 7/12)
    # A, Q2 (a3: 600 tokens, bin 0, 1; a6: 5000 tokens, bin 1, .5): PSI 1 - .5/1
    assert a["psi"]["512-1024"] == pytest.approx(0.5) and a["mean"]["512-1024"] == pytest.approx(0.75)
    # A, all: bin 0 = {a1, a3} -> 1; bin 1 = {a2, a4, a5, a6} -> 1/4
    assert a["psi"]["all"] == pytest.approx(0.75) and a["mean"]["all"] == pytest.approx(3 / 6)
    # B, Q1 only: bin 0 = {b1: .5, b3: 1} -> .75; bin 1 = {b2: 1} -> 1
    assert b["psi"]["0-512"] == pytest.approx(0.25) and b["mean"]["0-512"] == pytest.approx(2.5 / 3)
    assert "512-1024" not in b["psi"]
    # the aggregate: mean of the per-language PSIs; bucket scores are the languages' query means, averaged
    q1_all, q2_all = table.buckets
    assert (q1_all.label, q2_all.label) == ("0-512", "512-1024")  # no open fifth bucket
    assert q1_all.psi == pytest.approx((5 / 6 + 0.25) / 2)
    # (the PSI of the averaged curve (1 + .75) / 2, (1/6 + 1) / 2 would be 1/3)
    assert q1_all.psi != pytest.approx(1 - ((1 / 6 + 1) / 2) / ((1 + 0.75) / 2))
    assert q1_all.mean == pytest.approx((0.375 + 2.5 / 3) / 2)
    assert q1_all.means == pytest.approx([(1 + 0.75) / 2, (1 / 6 + 1) / 2])
    assert q1_all.counts == [1 + 2, 3 + 1]
    assert q2_all.psi == pytest.approx(0.5) and q2_all.mean == pytest.approx(0.75)
    assert table.overall.psi == pytest.approx((0.75 + 0.25) / 2)
    assert table.overall.mean == pytest.approx((0.5 + 5 / 6) / 2)
    assert table.length_unit == "tokens"
    # the per-domain tables stay in the report
    a2 = next(r for r in details["per_domain"] if r["task"] == "A2")
    assert a2["language"] == "A" and a2["queries"]["0-512"] == 2
    assert a2["mean"]["all"] == pytest.approx(0.5 / 3)
    text = format_languages(details, [table])
    assert "0.8333" in text and "0.5417" in text  # A's Q1 PSI and the mean of the two


def test_posir_min_queries_applies_to_the_language_curve(tmp_path: Path):
    positions, runs, languages = _inputs(tmp_path)
    (table,), details = report(positions, runs, languages, "nDCG@10", 2, [0, 512, 1024], 2, "tokens")
    by_lang = {r["language"]: r for r in details["per_language"]}
    # A's Q1 bin 0 has one query: only bin 1 counts, PSI 0; B's Q1 bin 1 has one query: bin 0 alone
    assert by_lang["A"]["psi"]["0-512"] == 0.0 and by_lang["B"]["psi"]["0-512"] == 0.0
    # A's Q2 bins hold one query each: no PSI; the aggregate leaves the language out
    assert by_lang["A"]["psi"]["512-1024"] is None and table.buckets[1].psi is None


def test_posir_length_unit_must_be_the_files(tmp_path: Path):
    positions, runs, languages = _inputs(tmp_path, tokens=False)
    with pytest.raises(ExperimentError, match="lengths are in chars, the report asks for tokens"):
        report(positions, runs, languages, "nDCG@10", 2, [0, 512, 1024], 1, "tokens")
    (table,), _ = report(positions, runs, languages, "nDCG@10", 2, [0, 512, 1024], 1, "chars")
    assert table.length_unit == "chars" and [b.label for b in table.buckets] == ["0-512"]


def test_the_language_of_a_task():
    from types import SimpleNamespace as NS

    from clirkit.experiment.posir import task_language

    # a task with a language (mono/de); a beir-group's datasets are the domains of the group's language;
    # a single BEIR dataset is in its collection's language
    assert (
        task_language(NS(language="de", group="mono"), NS(name="x", group="x", lang="en", lang_field="lang"))
        == "de"
    )
    assert (
        task_language(NS(language=None, group="zh"), NS(name="law", group="zh", lang="en", lang_field=None))
        == "zh"
    )
    assert (
        task_language(NS(language=None, group="s"), NS(name="s", group="s", lang="fr", lang_field=None))
        == "fr"
    )


def test_token_buckets_need_a_tokenizer(tmp_path: Path):
    from clirkit.experiment import load_config
    from conftest import sample_experiment_head

    spans = tmp_path / "spans.tsv"
    spans.write_text("query-id\tcorpus-id\tspan_start\tspan_end\n")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "a"}\n')
    head = sample_experiment_head("p", ["en"]) + '\n[systems.bm25]\nkind = "bm25"\n'
    path = tmp_path / "exp.toml"
    path.write_text(head + f'\n[posir]\nspans = "{spans}"\ncorpus = "{corpus}"\n')
    with pytest.raises(
        ExperimentError, match=r"posir.length_unit: token length buckets need tokenizer = .*chars"
    ):
        load_config(path)
    path.write_text(head + f'\n[posir]\nspans = "{spans}"\ncorpus = "{corpus}"\nlength_unit = "chars"\n')
    assert load_config(path).posir.length_unit == "chars"
