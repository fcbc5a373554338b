"""The stage-key audit (issue 32 item 2, "option changes on every node kind re-run exactly the affected
stages"): for every key the experiment reader accepts in a node's table (``docs/experiment-keys.md``,
generated from the reader), changing it changes the digest of exactly the stages it first reaches and of
everything downstream of them, and of nothing else; a key that reaches no stage's output is listed in
:data:`OUT_OF_KEY` with the reason. One plan holds every node kind (BM25, RM3, dense with a model and
from embeddings, flat, PQ, IVF and sharded; impact with a model and from vectors, exact and approximate;
multi-vector with a model and from token files; a run file; fusion; each rerank backend; evaluation), so
a change that leaks into another node's stages is seen. Plans only: nothing is built or searched (the
model directories are stand-ins whose content identity is what the keys hold)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from clirkit.experiment import Experiment
from clirkit.experiment.config.keys import tables
from clirkit.experiment.stage import Stage
from conftest import SAMPLE, sample_experiment_head

SERVER = {"model": "m", "base_url": "http://127.0.0.1:9/v1"}


def base_nodes(tmp: Path) -> dict[str, dict[str, Any]]:
    """Every node kind, by table name (``systems.NAME``, ``fusion.NAME``, ``rerank.NAME``, ``evaluation``)."""
    f = files(tmp)
    return {
        "systems.bm25": {"kind": "bm25", "fields": ["text"]},
        "systems.rm3": {"kind": "bm25", "fields": ["title", "text"], "rm3": True},
        "systems.dense": {"kind": "dense", "model": f["dense-model"], "fields": ["text"]},
        "systems.dense_flat": {"kind": "dense", "embeddings": f["emb"], "query_embeddings": f["qemb"]},
        "systems.dense_pq": {"kind": "dense", "embeddings": f["emb"], "query_embeddings": f["qemb"], "pq": 4},
        "systems.dense_ivf": {
            "kind": "dense",
            "embeddings": f["emb"],
            "query_embeddings": f["qemb"],
            "ivf": 2,
        },
        "systems.dense_sharded": {
            "kind": "dense",
            "embeddings": f["emb"],
            "query_embeddings": f["qemb"],
            "pq": 4,
            "shards": 2,
        },
        "systems.impact": {"kind": "impact", "model": f["impact-model"], "fields": ["text"]},
        "systems.impact_pre": {
            "kind": "impact",
            "vectors": f["vectors"],
            "query_vectors": f["qvectors"],
            "approximate": {"candidates": 100},
        },
        "systems.impact_sharded": {
            "kind": "impact",
            "vectors": f["vectors"],
            "query_vectors": f["qvectors"],
            "shards": 2,
        },
        "systems.mv": {"kind": "multivector", "model": f["mv-model"], "fields": ["text"]},
        "systems.mv_pre": {
            "kind": "multivector",
            "tokens": f["tokens"],
            "query_tokens": f["qtokens"],
            "keep_vectors": True,
        },
        "systems.given": {"kind": "run", "run": f["run"]},
        "fusion.rrf": {"inputs": ["bm25", "rm3"]},
        "fusion.mix": {"inputs": ["bm25", "dense"], "method": "interpolate", "alpha": 0.3},
        "rerank.llm": {"input": "rrf", "backend": "openai", **SERVER, "passage_tokens": 100},
        "rerank.ql": {"input": "bm25", "backend": "query-likelihood", **SERVER, "passage_tokens": 100},
        "rerank.yn": {"input": "bm25", "backend": "yes-no", **SERVER, "passage_tokens": 100},
        "rerank.ce": {"input": "bm25", "backend": "cross-encoder", "model": f["ce-model"]},
        "rerank.pw": {"input": "dense", "backend": "pointwise", "model": f["pw-model"]},
        "evaluation": {"measures": ["nDCG@10"]},
    }


def files(tmp: Path) -> dict[str, str]:
    """Stand-in models (each its own content) and precomputed inputs over the sample's ids, written once
    in ``tmp``."""
    listing = tmp / "files.json"
    if listing.is_file():
        return json.loads(listing.read_text())
    out: dict[str, str] = {}
    ids = [json.loads(line)["_id"] for line in (SAMPLE / "corpus.jsonl").read_text().splitlines() if line]
    qids = [json.loads(line)["_id"] for line in (SAMPLE / "queries.jsonl").read_text().splitlines() if line]
    for name in ("dense", "dense2", "impact", "impact2", "mv", "mv2", "ce", "ce2", "pw", "pw2"):
        model = tmp / f"{name}-model"
        model.mkdir()
        (model / "config.json").write_text("{}")
        (model / "model.onnx").write_text(f"stand-in {name}")
        out[f"{name}-model"] = str(model)
    rng = np.random.default_rng(0)
    for name, rows in (("emb", ids), ("emb2", ids[::-1]), ("qemb", qids), ("qemb2", qids[::-1])):
        np.save(tmp / f"{name}.npy", rng.standard_normal((len(rows), 8)).astype(np.float32))
        (tmp / f"{name}.ids.txt").write_text("".join(i + "\n" for i in rows))
        out[name] = str(tmp / name)
    for name, rows in (
        ("vectors", ids),
        ("vectors2", ids[:-1]),
        ("qvectors", qids),
        ("qvectors2", qids[:-1]),
    ):
        path = tmp / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"id": i, "vector": {"w": 1}}) + "\n" for i in rows))
        out[name] = str(path)
    for name, rows in (("tokens", ids), ("tokens2", ids[:-1]), ("qtokens", qids), ("qtokens2", qids[:-1])):
        np.save(tmp / f"{name}.tokens.npy", rng.standard_normal((2 * len(rows), 8)).astype(np.float32))
        np.save(tmp / f"{name}.offsets.npy", np.arange(0, 2 * len(rows) + 1, 2, dtype=np.int64))
        (tmp / f"{name}.ids.txt").write_text("".join(i + "\n" for i in rows))
        out[name] = str(tmp / name)
    for name, score in (("run", 1.0), ("run2", 2.0)):
        path = tmp / f"{name}.trec"
        path.write_text(f"{qids[0]} Q0 {ids[0]} 1 {score} given\n")
        out[name] = str(path)
    tokenizer = tmp / "tokenizer.json"
    tokenizer.write_text("{}")
    out["tokenizer"] = str(tokenizer)
    listing.write_text(json.dumps(out))
    return out


def toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def plan_of(tmp: Path, nodes: dict[str, dict[str, Any]], head: dict[str, Any], collection: dict[str, Any]):
    text = sample_experiment_head("keys", ["en"])
    for key, value in head.items():
        if key == "name":
            text = text.replace('name = "keys"\n', f"name = {toml_value(value)}\n")
            continue
        text = text.replace('name = "keys"\n', f'name = "keys"\n{key} = {toml_value(value)}\n')
    for key, value in collection.items():
        text = text.replace('lang_field = "lang"\n', f'lang_field = "lang"\n{key} = {toml_value(value)}\n')
    for table, keys in nodes.items():
        text += f"\n[{table}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items())
    path = tmp / "keys.toml"
    path.write_text(text, encoding="utf-8")
    return Experiment(path, tmp / "work", quiet=True).plan


#: ``(table, key)`` -> (a new value, the stage kinds it first reaches: every stage of those kinds for
#: ``experiment``, ``collection`` and ``evaluation``, else those feeding the table's node). A value
#: ``"@name"`` is the path of :func:`files`' ``name``; a key ``a.b`` is key ``b`` of the table ``a``.
CASES: dict[tuple[str, str], tuple[Any, tuple[str, ...]]] = {}


def reaching(table: str, kinds: tuple[str, ...], **values: Any) -> None:
    """Cases: each of ``values`` (key = new value) set in ``table`` first reaches stages of ``kinds``."""
    for key, value in values.items():
        CASES[(table, key.replace("__", "."))] = (value, kinds)


SEARCH, INDEX = ("search",), ("dense-index",)
reaching("experiment", SEARCH, hits=50)
reaching("collection", SEARCH, drop_self_hits=True)
reaching("collection", ("eval",), measures=["nDCG@10", "R@100"])
reaching("evaluation", ("eval",), measures=["nDCG@10", "R@100"])
reaching("systems.bm25", SEARCH, k1=1.5, b=0.7, hits=50)
reaching("systems.bm25", ("bm25-index",), fields=["title", "text"], memory_mb=64, keep_first_duplicate=True)
reaching("systems.bm25", ("bm25-index", "search"), rm3=True)
reaching("systems.rm3", SEARCH, fb_docs=5, fb_terms=5, original_weight=0.7, filter_terms=False)
reaching("systems.dense_flat", INDEX, embeddings="@emb2", pq=8)
reaching("systems.dense_flat", SEARCH, query_embeddings="@qemb2")
reaching("systems.dense_pq", SEARCH, refine=10)
reaching("systems.dense_pq", INDEX, nbits=8, ivf=2, metric="l2", train_size=100, seed=1, no_vectors=True)
reaching("systems.dense_pq", INDEX, vector_dtype="float16")
reaching("systems.dense_ivf", SEARCH, nprobe=2)
reaching("systems.dense_pq", INDEX, shards=5)
reaching("systems.dense_sharded", INDEX, shards=3)
reaching("systems.impact", ("impact-index",), quantize=50)
reaching("systems.impact", SEARCH, approximate={})
reaching("systems.impact_pre", ("impact-index",), vectors="@vectors2", quantize=50)
reaching("systems.impact_pre", SEARCH, query_vectors="@qvectors2")
reaching("systems.impact_pre", ("impact-index",), shards=4)
reaching("systems.impact_sharded", ("impact-index",), shards=3)
reaching(
    "systems.impact_pre",
    SEARCH,
    **{
        f"approximate__{k}": v for k, v in (("postings_per_term", 10), ("query_terms", 5), ("candidates", 50))
    },
    **{f"approximate__{k}": v for k, v in (("target_accuracy", 0.9), ("calibration_sample", 10))},
    **{f"approximate__{k}": v for k, v in (("audit", 5), ("seed", 3))},
)
reaching("systems.mv_pre", ("multivector-index",), tokens="@tokens2", nbits=4, centroids=8, kmeans_sample=100)
reaching("systems.mv_pre", ("multivector-index",), kmeans_iterations=2, seed=1, keep_vectors=False)
reaching("systems.mv_pre", SEARCH, query_tokens="@qtokens2", ncells=2, centroid_score_threshold=0.3)
reaching("systems.mv_pre", SEARCH, ndocs=64, rerank=32, refine=True, exact=True)
reaching("systems.given", ("run",), run="@run2")
reaching("fusion.rrf", ("fuse",), inputs=["bm25", "dense"], method="combsum", k=10, weights=[1.0, 2.0])
reaching("fusion.rrf", ("fuse",), depth=50, norm="zscore", top=50)
reaching("fusion.mix", ("fuse",), alpha=0.5)
reaching("rerank.llm", ("rerank",), input="bm25", depth=7, fields=["text"], template="rankzephyr")
reaching("rerank.llm", ("rerank",), temperature=0.5, max_tokens=100, max_words=5, window=10, stride=5)
reaching("rerank.yn", ("rerank",), instruction="Judge it")
for _node in ("rerank.ce", "rerank.pw"):
    reaching(_node, ("rerank",), model=f"@{_node.split('.')[1]}2-model", max_length=128, batch_size=8)
# The server keys every server backend takes, on each of them.
for _node in ("rerank.llm", "rerank.ql", "rerank.yn"):
    reaching(_node, ("rerank",), model="m2", base_url="http://127.0.0.1:10/v1", extra_body={"seed": 1})
    reaching(_node, ("rerank",), passage_tokens=120, query_tokens=50, tokenizer="@tokenizer")
# The keys every system encoding with a model of its own takes, for each such kind: (node, its documents'
# encode stage, its queries' encode stage).
for _node, _docs, _queries in (
    ("systems.dense", "encode", "encode-queries"),
    ("systems.impact", "sparse-encode", "sparse-encode-queries"),
    ("systems.mv", "encode-tokens", "encode-query-tokens"),
):
    both = (_docs, _queries)
    reaching(_node, both, model=f"@{_node.split('.')[1]}2-model")
    reaching(_node, both, input_values={"query": {"task_id": 1}, "passage": {"task_id": 2}})
    reaching(_node, (_docs,), fields=["title", "text"], passage_prefix="passage: ")
    reaching(_node, (_queries,), query_prefix="query: ")
    reaching(_node, SEARCH, hits=50)
    if _node == "systems.impact":  # queries have their own maximum length; no passages, one dtype
        reaching(_node, (_docs,), max_length=64)
        reaching(_node, (_queries,), query_max_length=32)
    else:
        reaching(_node, both, max_length=64)
        reaching(_node, (_docs, "search"), passages=[64, 32])
        reaching(_node, (_docs,), dtype="float16")

#: Keys that reach no stage's output, with why (a change to one re-runs nothing), and a value to set
#: them to (None: not set here, the reason says where it is used).
OUT_OF_KEY: dict[tuple[str, str], tuple[Any, str]] = {
    ("experiment", "name"): ("renamed", "names the experiment in its tables; no stage reads it"),
    ("experiment", "threads"): (2, "how many threads work; every output is byte-identical for any count"),
    ("experiment", "store"): ("elsewhere", "where artifacts are kept, not what they hold"),
    ("systems.dense", "batch_size"): (
        8,
        "texts per model call; the vectors are bit-identical for any (test_encoders.py)",
    ),
    ("systems.impact", "batch_size"): (
        8,
        "texts per model call; the vectors are bit-identical for any (test_encoders.py)",
    ),
    ("systems.mv", "batch_size"): (
        8,
        "texts per model call; the vectors are bit-identical for any (test_encoders.py)",
    ),
    **{
        (node, "memory_mb"): (64, "postings held before spilling; the impact index is byte-identical for any")
        for node in ("systems.impact", "systems.impact_pre")
    },
    **{
        (node, "memory_mb"): (64, "rows read at a time; the dense index is byte-identical for any")
        for node in ("systems.dense", "systems.dense_flat", "systems.dense_pq", "systems.dense_ivf")
    },
    **{
        (node, "ray"): (
            True,
            "where the shards are built and searched (threads here or Ray); the index and run are byte-identical",
        )
        for node in ("systems.dense_sharded", "systems.impact_sharded")
    },
    **{
        (node, key): (
            value,
            "how the server is asked (RERANK_TRANSPORT_KEYS): a window it fails leaves the "
            "stage uncommitted, so no answer depends on it",
        )
        for node in ("rerank.llm", "rerank.ql", "rerank.yn")
        for key, value in (("concurrency", 2), ("timeout", 5.0), ("retries", 1), ("max_response_mb", 2.0))
    },
    ("evaluation", "baseline"): ("bm25", "significance tests, computed from the eval stages on every run"),
    ("evaluation", "test"): ("perm", "significance tests, computed from the eval stages on every run"),
    ("evaluation", "correction"): (
        "bonferroni",
        "significance tests, computed from the eval stages on every run",
    ),
    ("evaluation", "alpha"): (0.01, "significance tests, computed from the eval stages on every run"),
    ("evaluation", "averages"): (["macro", "query-weighted"], "table averages, computed on every run"),
    ("evaluation", "subsample"): ({"queries": 2}, "correlation subsamples, computed on every run"),
    ("evaluation", "correlations"): (None, "table correlations, computed from the eval stages on every run"),
    ("evaluation", "average"): (None, "named table averages, computed from the eval stages on every run"),
    ("evaluation", "external"): (None, "external scores read beside the table on every run"),
}

#: Keys that choose what a node is rather than an option of it: another value is another node (its
#: ``kind``, ``backend``, the task ``settings`` it runs on, ``runs`` for ``run``), each in the key of its
#: stages as the stage's kind, parameters or input identity.
STRUCTURAL = {"kind", "settings", "backend", "runs"}

#: Tables whose keys select the data (which files, languages and fields of a collection, the tasks) and
#: reach stages through the content identity of the documents, queries and qrels they select (tested by
#: tests/experiment/test_safety_identity.py), and the [posir] report, computed from runs when the tables
#: are written (no stage reads it).
DATA_TABLES = ("[collections.NAME]", "[[tasks]]", "[posir]", "top level", "[evaluation.")


def resolved(value: Any, tmp: Path) -> Any:
    if isinstance(value, str) and value.startswith("@"):
        return files(tmp)[value[1:]]
    return value


def changed_plan(tmp: Path, table: str, key: str, value: Any):
    nodes = base_nodes(tmp)
    head: dict[str, Any] = {}
    collection: dict[str, Any] = {}
    value = resolved(value, tmp)
    if table == "experiment":
        head[key] = value
    elif table == "collection":
        collection[key] = value
    elif "." in key:
        outer, inner = key.split(".", 1)
        nodes[table] = {**nodes[table], outer: {**nodes[table].get(outer, {}), inner: value}}
    else:
        nodes[table] = {**nodes[table], key: value}
    return plan_of(tmp, nodes, head, collection)


def downstream(stages: list[Stage], first: set[int]) -> set[int]:
    """``first`` and every stage reading one of them, by position."""
    index = {id(s): n for n, s in enumerate(stages)}
    out = set(first)
    for n, stage in enumerate(stages):  # inputs come first
        if any(index[id(i)] in out for i in stage.inputs):
            out.add(n)
    return out


def feeding(plan: Any, node: str) -> set[int]:
    """Positions of the stages ``node``'s runs are made from (its runs included)."""
    index = {id(s): n for n, s in enumerate(plan.stages)}
    out: set[int] = set()
    todo = list(plan.runs[node].values())
    while todo:
        stage = todo.pop()
        if index[id(stage)] not in out:
            out.add(index[id(stage)])
            todo.extend(stage.inputs)
    return out


def describe(stages: list[Stage], positions: set[int]) -> list[str]:
    return sorted(f"{stages[n].kind} {stages[n].label}" for n in positions)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("keys")
    return tmp, plan_of(tmp, base_nodes(tmp), {}, {})


@pytest.mark.parametrize("table, key", sorted(CASES), ids=lambda v: str(v))
def test_each_option_reruns_exactly_the_stages_it_reaches(base, table, key):
    tmp, before = base
    value, kinds = CASES[(table, key)]
    after = changed_plan(tmp, table, key, value)
    assert [s.kind for s in after.stages] == [s.kind for s in before.stages], (
        "the change added or merged stages"
    )
    changed = {n for n, (a, b) in enumerate(zip(before.stages, after.stages)) if a.digest != b.digest}
    if table in ("experiment", "collection", "evaluation"):
        scope = set(range(len(after.stages)))
    else:
        scope = feeding(after, table.split(".", 1)[1]) | feeding(before, table.split(".", 1)[1])
    first = {n for n in scope if after.stages[n].kind in kinds}
    assert first, f"{table}.{key}: no stage of kinds {kinds} in its node"
    expected = downstream(after.stages, first)
    assert describe(after.stages, changed) == describe(after.stages, expected)


@pytest.mark.parametrize("table, key", sorted(k for k, v in OUT_OF_KEY.items() if v[0] is not None), ids=str)
def test_options_out_of_the_key_rerun_nothing(base, table, key):
    tmp, before = base
    after = changed_plan(tmp, table, key, OUT_OF_KEY[(table, key)][0])
    assert [s.digest for s in after.stages] == [s.digest for s in before.stages]


def test_every_key_the_reader_accepts_is_audited(tmp_path):
    """A key added to the reader fails here until it is given a case or a reason."""
    node_of = {
        '[systems.NAME], kind = "bm25"': ["systems.bm25", "systems.rm3"],
        '[systems.NAME], kind = "dense"': [
            "systems.dense",
            "systems.dense_flat",
            "systems.dense_pq",
            "systems.dense_ivf",
            "systems.dense_sharded",
        ],
        '[systems.NAME], kind = "impact"': ["systems.impact", "systems.impact_pre", "systems.impact_sharded"],
        '[systems.NAME], kind = "multivector"': ["systems.mv", "systems.mv_pre"],
        '[systems.NAME], kind = "run"': ["systems.given"],
        "[fusion.NAME]": ["fusion.rrf", "fusion.mix"],
        "[rerank.NAME], every backend": ["rerank.llm"],
        '[rerank.NAME], backend = "openai"': ["rerank.llm"],
        '[rerank.NAME], backend = "query-likelihood"': ["rerank.ql"],
        '[rerank.NAME], backend = "yes-no"': ["rerank.yn"],
        '[rerank.NAME], backend = "cross-encoder"': ["rerank.ce"],
        '[rerank.NAME], backend = "pointwise"': ["rerank.pw"],
        "[evaluation]": ["evaluation"],
        "[experiment]": ["experiment"],
    }
    audited = {(t, k.split(".")[0]) for t, k in CASES} | set(OUT_OF_KEY)
    missing = []
    for table, keys in tables():
        if table.startswith(DATA_TABLES) and table != "[evaluation]":
            continue
        assert table in node_of, f"a table the audit does not know: {table}"
        for key in keys:
            if key in STRUCTURAL:
                continue
            if not any((node, key) in audited for node in node_of[table]):
                missing.append(f"{table} {key}")
    assert missing == []
    approximate = {k.split(".", 1)[1] for t, k in CASES if k.startswith("approximate.")}
    from clirkit.experiment.systems.impact import APPROXIMATE_KEYS

    assert approximate == set(APPROXIMATE_KEYS)
