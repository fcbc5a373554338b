"""Sliding-window reranking: the plan, permutation repair, and an oracle backend whose result
must equal a reference RankGPT-style loop written here (sliding_windows / receive_permutation);
batched across queries must equal one query at a time."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Sequence

import clirkit
import pytest
from clirkit import _native
from clirkit.rerank import (
    CallableBackend,
    PointwiseBackend,
    RerankCache,
    WindowRequest,
    WindowResult,
    rankgpt_messages,
    rerank,
)
from conftest import shared_path


# --- a reference RankGPT loop (after sunnweiwei/RankGPT rank_gpt.py) -------------------------
def clean_response(response: str) -> str:
    return "".join(c if c.isdigit() else " " for c in response).strip()


def remove_duplicate(response: List[int]) -> List[int]:
    out: List[int] = []
    for c in response:
        if c not in out:
            out.append(c)
    return out


def receive_permutation(hits: List[str], permutation: str, rank_start: int, rank_end: int) -> List[str]:
    response = remove_duplicate([int(x) - 1 for x in clean_response(permutation).split()])
    cut_range = copy.deepcopy(hits[rank_start:rank_end])
    original_rank = list(range(len(cut_range)))
    response = [ss for ss in response if ss in original_rank]
    response = response + [tt for tt in original_rank if tt not in response]
    for j, x in enumerate(response):
        hits[j + rank_start] = cut_range[x]
    return hits


def reference_sliding_windows(hits: List[str], llm, rank_end: int, window: int, step: int) -> List[str]:
    """RankGPT's sliding_windows; ``llm(window_hits) -> text``. Returns (order, calls).

    The loop condition is rank_llm's fix of RankGPT's (``while start_pos >= rank_start``, which
    never reranks the top when ``rank_end - window`` is not a multiple of ``step``, e.g. a query
    with 66 candidates); both give the same 9 windows for 100/20/10."""
    hits = list(hits)
    end_pos, start_pos = rank_end, rank_end - window
    calls = 0
    while end_pos > 0 and start_pos + step != 0:
        start_pos = max(start_pos, 0)
        hits = receive_permutation(hits, llm(hits[start_pos:end_pos]), start_pos, end_pos)
        calls += 1
        end_pos -= step
        start_pos -= step
    return hits, calls


def first_stage_order(docs: Dict[str, float]) -> List[str]:
    """A query's documents in canonical order (score descending, ties by id)."""
    return [d for d, _ in clirkit.NativeRun.from_dict({"q": docs}).to_list()[0][1]]


def oracle_text(labels: Dict[str, int], doc_ids: Sequence[str]) -> str:
    """RankGPT-style answer sorting a window by qrels label (ties keep their current order)."""
    order = sorted(range(len(doc_ids)), key=lambda i: -labels.get(doc_ids[i], 0))
    return " > ".join(f"[{i + 1}]" for i in order)


def run_oracle_check(
    run: Dict[str, Dict[str, float]], qrels, queries, corpus, depth=100, window=20, stride=10
):
    calls_per_query: Dict[str, int] = {}

    def oracle(batch: List[WindowRequest]) -> List[str]:
        for req in batch:
            calls_per_query[req.qid] = calls_per_query.get(req.qid, 0) + 1
        return [oracle_text(qrels.get(req.qid, {}), req.doc_ids) for req in batch]

    reranked, stats = rerank(
        run,
        queries,
        corpus,
        CallableBackend(oracle, identity="oracle"),
        depth=depth,
        window=window,
        stride=stride,
        progress=False,
    )
    for qid, docs in run.items():
        first_stage = first_stage_order(docs)
        n = min(depth, len(first_stage))
        expected, calls = reference_sliding_windows(
            first_stage, lambda ids, q=qid: oracle_text(qrels.get(q, {}), ids), n, window, stride
        )
        assert list(reranked[qid]) == expected, qid
        assert calls_per_query.get(qid, 0) == calls, qid
        scores = list(reranked[qid].values())
        assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    assert stats.calls == sum(calls_per_query.values()) and stats.failures == 0 and stats.repaired == 0
    return reranked, stats


# --- the plan and permutations ---------------------------------------------------------------
def test_window_plan_is_rankgpt():
    assert _native.window_plan(100) == [(s, s + 20) for s in range(80, -1, -10)]
    assert len(_native.window_plan(1000)) == 9
    assert _native.window_plan(15) == [(0, 15)]
    assert _native.window_plan(95, depth=95)[-1] == (0, 15)
    with pytest.raises(clirkit.InvalidInputError):
        _native.window_plan(100, window=10, stride=20)


def test_permutation_parsing_and_repair():
    assert _native.parse_permutation("[3] > [1] > [2]", 3) == ([2, 0, 1], (0, 0, 0))
    assert _native.parse_permutation("[2] > [2] > [9] > [0]", 3) == ([1, 0, 2], (1, 2, 2))
    assert _native.parse_permutation("I cannot rank these.", 3) is None
    for text in ["[2] > [2] > [9] > [1]", "3 1", "[1]"]:
        ids = [i for i in receive_permutation(["a", "b", "c"], text, 0, 3)]
        perm, _ = _native.parse_permutation(text, 3)
        assert [["a", "b", "c"][p] for p in perm] == ids


def test_prompt_is_rankgpt():
    messages = rankgpt_messages("q?", ["one two three", "four"], max_words=2)
    assert messages[0]["role"] == "system" and "RankGPT" in messages[0]["content"]
    assert messages[3] == {"role": "user", "content": "[1] one two"}
    assert messages[4] == {"role": "assistant", "content": "Received passage [1]."}
    assert messages[-1]["content"].startswith("Search Query: q?. \nRank the 2 passages above")


# --- the oracle on the embedded sample ---------------------------------------------------------
def sample_run(sample_dir: Path, n_queries: int, n_docs: int, seed: int = 1):
    rng = random.Random(seed)
    qrels = clirkit.read_qrels(sample_dir / "qrels.tsv")
    corpus_ids = [json.loads(line)["_id"] for line in open(sample_dir / "corpus.jsonl", encoding="utf-8")]
    qids = sorted(qrels)[:n_queries]
    run = {}
    for q in qids:
        docs = rng.sample(corpus_ids, n_docs)
        run[q] = {d: float(rng.randint(0, 9)) for d in docs}  # ties on purpose
    return run, qrels


def test_oracle_on_sample_equals_reference_loop(sample_dir):
    run, qrels = sample_run(sample_dir, 25, 60)
    reranked, stats = run_oracle_check(
        run, qrels, sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl", depth=50, window=10, stride=5
    )
    assert stats.calls == 25 * 9 and stats.windows == 25 * 9
    # The ranks past the depth keep their first-stage order.
    for q, docs in run.items():
        first_stage = first_stage_order(docs)
        assert list(reranked[q])[50:] == first_stage[50:]


def messy_backend(batch: List[WindowRequest]):
    """Deterministic answers from the window content, often needing repair or failing."""
    out = []
    for req in batch:
        h = sum(map(ord, "".join(req.doc_ids))) % 5
        n = len(req.doc_ids)
        out.append(
            [
                "[2] > [2] > [1] > [99]",
                list(range(n, 0, -1)),
                "no idea",
                None,
                " ".join(str(i) for i in sorted(range(1, n + 1), key=lambda i: req.passages[i - 1])),
            ][h]
        )
    return out


def test_batched_equals_one_by_one(sample_dir):
    run, _ = sample_run(sample_dir, 20, 45, seed=2)
    queries, corpus = sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl"
    plan = dict(depth=40, window=12, stride=5, progress=False)
    batched, stats = rerank(run, queries, corpus, CallableBackend(messy_backend, batch_size=7), **plan)
    assert stats.repaired > 0 and stats.failures > 0
    for q in run:
        single, _ = rerank({q: run[q]}, queries, corpus, CallableBackend(messy_backend, batch_size=1), **plan)
        assert list(single[q].items()) == list(batched[q].items())


def test_pointwise_backend_and_errors(sample_dir, tmp_path):
    run, _ = sample_run(sample_dir, 3, 30, seed=3)
    queries, corpus = sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl"
    backend = PointwiseBackend(lambda q, passages: [len(p) for p in passages], name="length")
    reranked, stats = rerank(run, queries, corpus, backend, depth=30, window=30, stride=30, progress=False)
    texts = _native.load_texts(str(corpus), None, False)
    for q in run:
        lengths = [len(texts[d]) for d in reranked[q]]
        assert lengths == sorted(lengths, reverse=True)
    assert stats.calls == 3
    with pytest.raises(ValueError, match="is not in the corpus"):
        rerank({"56beb4343aeaaa14008c925b-ar": {"nope": 1.0}}, queries, corpus, backend, progress=False)
    with pytest.raises(ValueError, match="has no text in the queries"):
        rerank({"nope": {"ar-0-0-0": 1.0}}, queries, corpus, backend, progress=False)


def test_cache_makes_reruns_free(sample_dir, tmp_path):
    run, qrels = sample_run(sample_dir, 10, 30, seed=4)
    queries, corpus = sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl"
    calls: List[int] = []

    def counting(batch):
        calls.append(len(batch))
        return messy_backend(batch)

    cache = tmp_path / "cache.sqlite"

    def cached_rerank(identity: str, retry_failed: bool = False):
        backend = CallableBackend(counting, identity=identity)
        options = dict(depth=30, window=10, stride=5, cache=cache, retry_failed=retry_failed, progress=False)
        return rerank(run, queries, corpus, backend, **options)

    first, s1 = cached_rerank("messy")
    again, s2 = cached_rerank("messy")
    assert s2.calls == 0 and s2.cache_hits == s1.windows == 50 and sum(calls) == 50
    assert again == first and (s2.failures, s2.repaired) == (s1.failures, s1.repaired)
    assert len(RerankCache(cache)) == 50
    # Another backend identity does not reuse those answers.
    _, s3 = cached_rerank("other")
    assert s3.cache_hits == 0
    # Failed windows are cached; retry_failed asks again for exactly those.
    _, s4 = cached_rerank("messy", retry_failed=True)
    failed_in_cache = sum(1 for f in s1.failed_windows if f.reason != "unparsable answer")
    assert s4.calls == failed_in_cache > 0


# --- SciFact: clirkit BM25 top 100, oracle backend ---------------------------------------------
def test_oracle_on_scifact_bm25_top100(tmp_path):
    data = shared_path("data", "beir-scifact")
    if importlib.util.find_spec("clirkit.commands.bm25") is None:
        pytest.skip("clirkit's BM25 (branch bm25) is not in this build")
    cli = [sys.executable, "-m", "clirkit.cli"]
    index, run_path = tmp_path / "index", tmp_path / "bm25.trec"
    subprocess.run(
        cli
        + ["index", "bm25", "--corpus", str(data / "corpus.jsonl"), "--index", str(index), "--lang", "en"],
        check=True,
        timeout=600,
    )
    qrels = clirkit.read_qrels(data / "qrels" / "test.tsv")
    all_queries = _native.load_texts(str(data / "queries.jsonl"), None, True)
    queries = {q: t for q, t in all_queries.items() if q in qrels}
    qfile = tmp_path / "queries.jsonl"
    qfile.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    subprocess.run(
        cli
        + [
            "search",
            "bm25",
            "--index",
            str(index),
            "--queries",
            str(qfile),
            "--output",
            str(run_path),
            "--k",
            "100",
        ],
        check=True,
        timeout=600,
    )
    run = clirkit.read_run(run_path)
    assert len(run) == len(queries) == 300 and all(len(d) <= 100 for d in run.values())
    full = [q for q, d in run.items() if len(d) == 100]
    assert len(full) >= 290  # BM25 returns only matching documents: a few queries have fewer
    calls: Dict[str, int] = {}

    def oracle(batch: List[WindowRequest]) -> List[str]:
        for req in batch:
            calls[req.qid] = calls.get(req.qid, 0) + 1
        return [oracle_text(qrels.get(req.qid, {}), req.doc_ids) for req in batch]

    rerank(run, qfile, data / "corpus.jsonl", CallableBackend(oracle, identity="oracle"), progress=False)
    assert all(calls[q] == 9 for q in full)
    _, stats = run_oracle_check(run, qrels, qfile, data / "corpus.jsonl")
    short = sum(len(_native.window_plan(len(run[q]))) for q in run if q not in full)
    assert stats.calls == 9 * len(full) + short


def test_pointwise_from_encoder_memoizes(sample_dir):
    import numpy as np

    encoded: List[str] = []

    class BagOfChars:
        """A stand-in encoder: normalized letter counts."""

        def _encode(self, texts):
            encoded.extend(texts)
            out = np.zeros((len(texts), 26))
            for i, t in enumerate(texts):
                for c in t.lower():
                    if "a" <= c <= "z":
                        out[i, ord(c) - 97] += 1
            return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

        encode_queries = encode_passages = _encode

    run, _ = sample_run(sample_dir, 2, 40, seed=5)
    queries, corpus = sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl"
    backend = PointwiseBackend.from_encoder(BagOfChars(), name="bag-of-chars")
    reranked, stats = rerank(run, queries, corpus, backend, depth=40, window=20, stride=10, progress=False)
    assert stats.calls == 2 * 3 and stats.failures == 0
    # Overlapping windows reuse embeddings: each passage and query is encoded once.
    assert len(encoded) == len(set(encoded))
    for q in run:
        assert sorted(reranked[q]) == sorted(run[q])


def test_rerank_cli_argument_errors(tmp_path, sample_dir):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "clirkit.cli",
            "rerank",
            "--run",
            str(tmp_path / "r.trec"),
            "--queries",
            "q",
            "--corpus",
            "c",
            "--backend",
            "openai",
            "--output",
            str(tmp_path / "o.trec"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "needs --base-url and --model" in res.stderr


def test_backend_that_skips_windows_cannot_hang_the_run(sample_dir):
    from clirkit.rerank import Backend

    class Forgetful(Backend):
        identity = "forgetful"

        def rank(self, requests):
            for i, _ in enumerate(requests):
                if i % 2 == 0:
                    yield i, WindowResult([1])

    run, _ = sample_run(sample_dir, 4, 30, seed=6)
    queries, corpus = sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl"
    reranked, stats = rerank(run, queries, corpus, Forgetful(), depth=30, window=10, stride=5, progress=False)
    assert stats.failures == 10 and {f.reason for f in stats.failed_windows} == {"backend gave no answer"}
    assert all(sorted(reranked[q]) == sorted(run[q]) for q in run)


def test_unconvertible_ids_fail_or_repair_only_their_window(sample_dir, tmp_path):
    run, _ = sample_run(sample_dir, 6, 10, seed=7)
    queries, corpus = sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl"
    qids = sorted(run)
    answers = {
        qids[0]: [10**30, 2, 1],  # past 64 bits: out of range, like any id past the window
        qids[1]: [-(10**30), 2.0, 1],  # hugely negative: out of range; an integral float is an id
        qids[2]: [float("nan"), 1],
        qids[3]: [None, 1],
        qids[4]: 3,  # not a sequence at all
        qids[5]: [2, 1],
    }
    backend = CallableBackend(lambda batch: [answers[req.qid] for req in batch], identity="malformed")
    cache = tmp_path / "cache.sqlite"

    def cached_rerank():
        return rerank(
            run, queries, corpus, backend, depth=10, window=10, stride=10, cache=cache, progress=False
        )

    reranked, stats = cached_rerank()
    first_stage = {q: first_stage_order(docs) for q, docs in run.items()}
    swapped = {q: [first_stage[q][1], first_stage[q][0]] + first_stage[q][2:] for q in run}
    assert {q: list(reranked[q]) for q in qids} == {
        qids[0]: swapped[qids[0]],
        qids[1]: swapped[qids[1]],
        qids[2]: first_stage[qids[2]],
        qids[3]: first_stage[qids[3]],
        qids[4]: first_stage[qids[4]],
        qids[5]: swapped[qids[5]],
    }
    assert stats.failures == 3 and stats.repaired == 3
    assert (stats.out_of_range_dropped, stats.missing_appended) == (2, 3 * 8)
    assert [(f.qid, f.reason) for f in stats.failed_windows] == [
        (qids[2], "malformed permutation: id nan is not an integer"),
        (qids[3], "malformed permutation: id None is not an integer"),
        (qids[4], "malformed permutation: 'int' object is not iterable"),
    ]
    # Every answer was cached in a form that replays the same way without the backend.
    again, stats2 = cached_rerank()
    assert again == reranked and stats2.calls == 0 and stats2.failures == 3 and stats2.repaired == 3
    # An answer cached before ids were checked (a huge id) replays as a repair too.
    store = RerankCache(cache)
    texts = _native.load_texts(str(queries), None, True)
    doc_texts = _native.load_texts(str(corpus), set(first_stage[qids[5]]), False)
    passages = [doc_texts[d] for d in first_stage[qids[5]]]
    key = RerankCache.key(backend.identity, texts[qids[5]], first_stage[qids[5]], passages)
    store.put(key, WindowResult([2**64, 2, 1]))
    store.close()
    third, stats3 = cached_rerank()
    assert third == reranked and stats3.calls == 0 and stats3.out_of_range_dropped == 3


# --- cache identity of callables ------------------------------------------------------------------
def first_is(k: int):
    """A closure: each window's k-th passage first."""

    def rank(batch: List[WindowRequest]):
        return [[k] for _ in batch]

    return rank


def nth_first(k: int, batch: List[WindowRequest]):
    return [[k] for _ in batch]


def test_callable_identity_tells_functions_apart(sample_dir, tmp_path):
    run, _ = sample_run(sample_dir, 3, 10, seed=8)
    queries, corpus = sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl"
    cache = tmp_path / "cache.sqlite"
    # Two lambdas of one function share module and qualified name, not their answers.
    reverse = lambda batch: [list(range(len(r.doc_ids), 0, -1)) for r in batch]  # noqa: E731
    swap = lambda batch: [[2, 1] for _ in batch]  # noqa: E731
    reversed_run, _ = rerank(
        run, queries, corpus, reverse, depth=10, window=10, stride=10, cache=cache, progress=False
    )
    swapped_run, stats = rerank(
        run, queries, corpus, swap, depth=10, window=10, stride=10, cache=cache, progress=False
    )
    assert stats.cache_hits == 0 and stats.calls == 3
    for q, docs in run.items():
        first_stage = first_stage_order(docs)
        assert list(reversed_run[q]) == first_stage[::-1]
        assert list(swapped_run[q]) == [first_stage[1], first_stage[0]] + first_stage[2:]
    # Same code, other captured values, defaults or partial arguments: other identities.
    identity = lambda fn: CallableBackend(fn).identity  # noqa: E731
    assert identity(first_is(2)) == identity(first_is(2)) != identity(first_is(3))
    by_default = [lambda batch, k=k: [[k] for _ in batch] for k in (2, 3)]
    assert identity(by_default[0]) != identity(by_default[1])
    assert identity(functools.partial(nth_first, 2)) != identity(functools.partial(nth_first, 3))
    assert identity(first_is(2)).startswith(f"callable:{__name__}.first_is.<locals>.rank#")
    # Explicit identities are kept as given.
    assert CallableBackend(swap, identity="swap-v1").identity == "callable:swap-v1"


def test_callable_identity_is_the_same_in_every_process(tmp_path):
    (tmp_path / "ranker_module.py").write_text(
        "def make(k, labels=frozenset({'alpha', 'beta', 'gamma'})):\n"
        "    def rank(batch):\n"
        "        return [[k] if r.qid in {'x', 'y', 'z'} else None for r in batch]\n"
        "    return rank\n"
    )
    show = (
        "from clirkit.rerank import CallableBackend; import ranker_module; "
        "print(CallableBackend(ranker_module.make(2)).identity)"
    )
    identities = set()
    for seed in ("1", "2", "3"):  # string hashes, hence set orders, differ between these
        env = dict(
            os.environ,
            PYTHONHASHSEED=seed,
            PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        )
        identities.add(
            subprocess.run(
                [sys.executable, "-c", show], env=env, capture_output=True, text=True, check=True, timeout=60
            ).stdout
        )
    assert len(identities) == 1 and "ranker_module.make.<locals>.rank#" in identities.pop()


class Scorer:
    def rank(self, batch: List[WindowRequest]):
        return [[1] for _ in batch]

    __call__ = rank


def test_callable_without_a_derivable_identity_needs_one_for_a_cache(sample_dir, tmp_path):
    run, _ = sample_run(sample_dir, 2, 10, seed=9)
    queries, corpus = sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl"
    scorer = Scorer()
    model_settings = ["model-a"]  # mutable: what it holds when answers are cached cannot be known
    closure = lambda batch: scorer.rank(batch) if model_settings else None  # noqa: E731
    plan = dict(depth=10, window=10, stride=10, progress=False)
    for fn, culprit in [
        (scorer, f"the callable is a {__name__}.Scorer"),
        (scorer.rank, f"the self bound to Scorer.rank is a {__name__}.Scorer"),
        (closure, "closure variable 'model_settings' of"),
    ]:
        with pytest.raises(ValueError, match="cannot derive a cache identity") as err:
            rerank(run, queries, corpus, fn, cache=tmp_path / "cache.sqlite", **plan)
        assert culprit in str(err.value) and "identity='...'" in str(err.value)
        _, stats = rerank(run, queries, corpus, fn, **plan)  # no cache, no identity needed
        assert stats.calls == 2
        _, stats = rerank(
            run,
            queries,
            corpus,
            CallableBackend(fn, identity="scorer-v1"),
            cache=tmp_path / "cache.sqlite",
            **plan,
        )
        assert stats.calls + stats.cache_hits == 2
