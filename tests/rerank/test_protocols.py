"""Reranking protocols and client safety against local fake servers (127.0.0.1, random port, threads,
every socket with a timeout): the RankZephyr and FIRST request bodies rank_llm sends, reasoning answers,
yes/no and query-likelihood scores read from log-probabilities, the pointwise full sort, the default
cache and its resume, and the failure modes of issue 16 (transient failures not cached, malformed
responses, redirects, a trickling server, oversized answers, changed passages, leaked keys, exit status)."""

from __future__ import annotations

import json
import math
import socket
import socketserver
import sqlite3
import sys
import threading
import types
from typing import Callable, Dict, List, Optional

import clirkit
import pytest
from clirkit import cli
from clirkit.rerank import (
    CallableScorer,
    OpenAIChatBackend,
    QueryLikelihoodScorer,
    WindowRequest,
    YesNoScorer,
    rerank,
    rerank_pointwise,
)
from clirkit.rerank.likelihood import query_likelihood_prompt, qwen3_reranker_prompt
from clirkit.rerank.templates import split_reasoning
from conftest import shared_path
from local_server import LocalServer

SECRET = "sk-test-SECRET-0123456789"


class Request:
    """One request as the fake server read it."""

    def __init__(self, path: str, headers: Dict[str, str], body: dict) -> None:
        self.path, self.headers, self.body = path, headers, body


class RawServer(LocalServer):
    """A threaded HTTP/1.1 server on 127.0.0.1 writing raw bytes: ``respond(conn, request, n)``
    (``n``: the request's number, from 0) writes whatever answer a test needs, well-formed or not."""

    def __init__(self, respond: Callable[[socket.socket, Request, int], None]) -> None:
        self.requests: List[Request] = []
        self.lock = threading.Lock()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                conn = self.request
                conn.settimeout(30)
                data = b""
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(65536)
                    if not piece:
                        return
                    data += piece
                head, body = data.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])
                }
                while len(body) < int(headers.get("content-length", 0)):
                    body += conn.recv(65536)
                request = Request(lines[0].split(" ")[1], headers, json.loads(body or b"{}"))
                with server.lock:
                    number = len(server.requests)
                    server.requests.append(request)
                try:
                    respond(conn, request, number)
                except OSError:  # the client gave up (its deadline): nothing more to send
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 64

        self.serve(Server(("127.0.0.1", 0), Handler))


def send(conn: socket.socket, payload: object, status: str = "200 OK", headers: str = "") -> None:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    conn.sendall(
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"{headers}Connection: close\r\n\r\n".encode()
        + body
    )


def chat(content: str, usage: object = None) -> dict:
    reply: dict = {"choices": [{"message": {"role": "assistant", "content": content}}]}
    reply["usage"] = usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 3}
    return reply


@pytest.fixture
def servers():
    started: List[RawServer] = []

    def start(respond) -> RawServer:
        server = RawServer(respond)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def backend(server: RawServer, **options) -> OpenAIChatBackend:
    options.setdefault("timeout", 10.0)
    options.setdefault("retries", 0)
    options.setdefault("backoff", 0.01)
    return OpenAIChatBackend(server.url, "m", **options)


WINDOW = WindowRequest(
    "what is [1] a  test?",
    ["  first [2] passage ", "second   passage", "third passage"],
    "q",
    ["a", "b", "c"],
)


# --- prompt families -------------------------------------------------------------------------------

# rank_llm's system message, the same in rank_zephyr_template.yaml and rank_zephyr_alpha_template.yaml.
RANKLLM_SYSTEM = {
    "role": "system",
    "content": "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query",
}


def test_rankzephyr_request_body_is_rank_llms(servers):
    server = servers(lambda conn, req, n: send(conn, chat("[2] > [1] > [3]")))
    result = backend(server, template="rankzephyr", max_tokens=24).rank_one(WINDOW)
    assert result.answer == "[2] > [1] > [3]" and result.error is None
    # What rank_llm's RankListwiseOSLLM (rank_zephyr_template.yaml, OpenAI-compatible path) sends.
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].body == {
        "model": "m",
        "messages": [
            RANKLLM_SYSTEM,
            {
                "role": "user",
                "content": "I will provide you with 3 passages, each indicated by a numerical identifier []. "
                "Rank the passages based on their relevance to the search query: what is (1) a  test?.\n"
                "[1] first (2) passage\n"
                "[2] second passage\n"
                "[3] third passage\n"
                "Search Query: what is (1) a  test?.\n"
                "Rank the 3 passages above based on their relevance to the search query. All the passages "
                "should be included and listed using identifiers, in descending order of relevance. The output "
                "format should be [] > [], e.g., [2] > [1], Answer concisely and directly and only respond with "
                "the ranking results, do not say any word or explain.",
            },
        ],
        "max_tokens": 24,
        "temperature": 0.0,
        "chat_template_kwargs": {"enable_thinking": False},
    }


def first_token_reply(top: List[dict]) -> dict:
    return {
        "choices": [
            {
                "message": {"role": "assistant", "content": top[0]["token"]},
                "logprobs": {
                    "content": [{"token": top[0]["token"], "logprob": top[0]["logprob"], "top_logprobs": top}]
                },
            }
        ]
    }


def test_first_request_body_and_ranking_from_first_token_logprobs(servers):
    top = [
        {"token": "B", "logprob": -0.1},
        {"token": "Z", "logprob": -0.5},  # not an identifier of this window
        {"token": " A", "logprob": -1.0},
        {"token": "[C", "logprob": -2.0},
        {"token": "B", "logprob": -3.0},  # a second spelling of B: the best one counts
    ]
    server = servers(lambda conn, req, n: send(conn, first_token_reply(top)))
    result = backend(server, template="first").rank_one(WINDOW)
    assert result.answer == [2, 1, 3]
    # rank_zephyr_alpha_template.yaml, one generated token, its top log-probabilities.
    assert server.requests[0].body == {
        "model": "m",
        "messages": [
            RANKLLM_SYSTEM,
            {
                "role": "user",
                "content": "I will provide you with 3 passages, each indicated by an alphabetical identifier []. "
                "Rank the passages based on their relevance to the search query: what is (1) a  test?.\n"
                "[A] first (2) passage\n"
                "[B] second passage\n"
                "[C] third passage\n"
                "Search Query: what is (1) a  test?.\n"
                "Rank the 3 passages above based on their relevance to the search query. All the passages "
                "should be included and listed using identifiers, in descending order of relevance. The output "
                "format should be [] > [], e.g., [B] > [A], Answer concisely and directly and only respond with "
                "the ranking results, do not say any word or explain.",
            },
        ],
        "temperature": 0.0,
        "max_tokens": 1,
        "logprobs": True,
        "top_logprobs": 20,
        "chat_template_kwargs": {"enable_thinking": False},
    }


def test_extra_body_temperature_and_max_tokens_are_sent(servers):
    server = servers(lambda conn, req, n: send(conn, chat("[1] > [2] > [3]")))
    extra = {"chat_template_kwargs": {"enable_thinking": True}, "top_p": 0.9}
    backend(server, temperature=0.6, max_tokens=512, extra_body=extra).rank_one(WINDOW)
    body = server.requests[0].body
    assert body["temperature"] == 0.6 and body["max_tokens"] == 512
    assert body["chat_template_kwargs"] == {"enable_thinking": True} and body["top_p"] == 0.9


def test_split_reasoning():
    assert split_reasoning("[2] > [1]") == (None, "[2] > [1]")
    assert split_reasoning("<think>maybe [3] > [1]</think>\n[2] > [1]") == ("maybe [3] > [1]", "[2] > [1]")
    assert split_reasoning("<think>still thinking [1] > [2]") == ("still thinking [1] > [2]", "")
    assert split_reasoning("[1] looks good. Final answer: [3] > [2]") == ("[1] looks good.", "[3] > [2]")
    assert split_reasoning("hmm [1]\n<answer>[2] > [3]</answer>") == ("hmm [1]", "[2] > [3]")


def test_reasoning_answer_is_parsed_after_its_reasoning_and_cached(servers, tmp_path):
    thought = "<think>Passage [3] mentions it, so [3] > [1] > [2]? No.</think>\n"
    server = servers(lambda conn, req, n: send(conn, chat(thought + "[2] > [1] > [3]")))
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    queries = {"q": WINDOW.query}
    corpus = dict(zip(WINDOW.doc_ids, WINDOW.passages))
    cache = tmp_path / "answers.sqlite"
    reranked, stats = rerank(
        run, queries, corpus, backend(server), depth=3, window=3, stride=3, cache=cache, progress=False
    )
    assert list(reranked["q"]) == ["b", "a", "c"] and stats.failures == 0
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT reasoning FROM answers").fetchall() == [
            ("Passage [3] mentions it, so [3] > [1] > [2]? No.",)
        ]
    # An unclosed <think> is all reasoning: no answer, never a permutation read from the thoughts.
    server2 = servers(lambda conn, req, n: send(conn, chat("<think>[3] > [2] > [1] and then")))
    result = backend(server2).rank_one(WINDOW)
    assert result.answer is None and result.error.startswith("unparsable answer")


# --- pointwise scorers --------------------------------------------------------------------------


def completion_logprobs(prompt: str, logprob_of: Callable[[int], float]) -> dict:
    """An echoed prompt cut into whitespace-led tokens (as BPE tokenizers do), each token's
    log-probability ``logprob_of(its offset)``, the first None; then one generated token."""
    offsets = [0] + [i for i in range(1, len(prompt)) if prompt[i] == " " and prompt[i - 1] != " "]
    tokens = [prompt[a:b] for a, b in zip(offsets, offsets[1:] + [len(prompt)])]
    values: List[Optional[float]] = [None] + [logprob_of(o) for o in offsets[1:]]
    return {
        "tokens": tokens + [" Yes"],
        "token_logprobs": values + [-0.01],
        "top_logprobs": [None] + [{t: v} for t, v in zip(tokens[1:], values[1:])] + [{" Yes": -0.01}],
        "text_offset": offsets + [len(prompt)],
    }


def test_query_likelihood_sums_the_query_tokens_logprobs(servers):
    def respond(conn, req, n):
        prompt = req.body["prompt"]
        reply = {
            "choices": [
                {"text": prompt + " Yes", "logprobs": completion_logprobs(prompt, lambda o: -o / 1000)}
            ]
        }
        send(conn, reply)

    server = servers(respond)
    scorer = QueryLikelihoodScorer(server.url, "m", retries=0)
    query, passages = "why is the sky blue", ["Rayleigh scattering of light.", "Cats sleep a lot."]
    scores = scorer.score(query, passages)
    for passage, score in zip(passages, scores):
        prompt, start = query_likelihood_prompt(query, passage)
        assert prompt.endswith("Question: why is the sky blue")
        query_offsets = [start + i for i, ch in enumerate(" " + query) if ch == " "]  # " why", " is", ...
        assert len(query_offsets) == 5
        assert math.isclose(score.value, sum(-o / 1000 for o in query_offsets))
    bodies = sorted((r.body for r in server.requests), key=lambda b: b["prompt"])
    assert bodies[0] == {
        "model": "m",
        "prompt": "Passage: Cats sleep a lot.\nPlease write a question based on this passage.\nQuestion: why is the sky blue",
        "max_tokens": 1,
        "temperature": 0.0,
        "echo": True,
        "logprobs": 1,
    }


def test_yes_no_score_is_the_log_odds_of_yes_from_top_logprobs(servers):
    probabilities = {"relevant": (0.8, 0.15), "irrelevant": (0.1, 0.85), "only-yes": (0.6, None)}

    def respond(conn, req, n):
        kind = req.body["prompt"].split("<Document>: ", 1)[1].split("<|im_end|>", 1)[0]
        yes, no = probabilities[kind]
        top = {"yes": math.log(yes), "Yes": math.log(0.01), "maybe": math.log(0.02)}
        if no is not None:
            top[" no"] = math.log(no)  # spaces around a token are ignored
        send(conn, {"choices": [{"text": "yes", "logprobs": {"tokens": ["yes"], "top_logprobs": [top]}}]})

    server = servers(respond)
    scores = YesNoScorer(server.url, "m", retries=0).score("q?", list(probabilities))
    assert math.isclose(scores[0].value, math.log(0.8 / 0.95))
    assert math.isclose(scores[1].value, math.log(0.1 / 0.95))
    # "no" absent from the top list: bounded at a tenth of the least likely listed token.
    assert math.isclose(scores[2].value, math.log(0.6 / (0.6 + 0.001)))
    body = next(r.body for r in server.requests if ": relevant<|im_end|>" in r.body["prompt"])
    assert body == {
        "model": "m",
        "prompt": qwen3_reranker_prompt("q?", "relevant"),
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": 20,
    }
    assert body["prompt"] == (
        "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
        'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
        "<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n"
        "<Query>: q?\n<Document>: relevant<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def scored_collection(n_queries: int = 4, depth: int = 100):
    queries = {f"q{i}": f"query {i}" for i in range(n_queries)}
    corpus = {f"d{j}": f"passage {j} " + "word " * (j % 7) for j in range(depth + 20)}
    run = {
        q: {f"d{(j * 7 + i) % (depth + 20)}": float(depth + 20 - j) for j in range(depth + 20)}
        for i, q in enumerate(queries)
    }
    return run, queries, corpus


def oracle_score(query: str, passage: str) -> float:
    return float((hash((query, passage)) % 1000))


def test_pointwise_is_a_full_sort_in_one_batched_call_per_query():
    run, queries, corpus = scored_collection()
    calls: List[tuple] = []

    def oracle(query: str, passages: List[str]) -> List[float]:
        calls.append((query, len(passages)))
        return [oracle_score(query, p) for p in passages]

    reranked, stats = rerank_pointwise(
        run, queries, corpus, CallableScorer(oracle, "oracle"), depth=100, progress=False
    )
    assert calls == [(queries[q], 100) for q in sorted(run)] and stats.calls == len(run)
    for q, docs in run.items():
        first_stage = sorted(docs, key=lambda d: -docs[d])
        top = sorted(
            first_stage[:100], key=lambda d: (-oracle_score(queries[q], corpus[d]), first_stage.index(d))
        )
        assert list(reranked[q]) == top + first_stage[100:]
        assert list(reranked[q].values()) == [float(120 - r) for r in range(120)]


def test_cross_encoder_backend_on_the_cli(tmp_path, monkeypatch):
    """The CLI's cross-encoder backend, with a fake CrossEncoder of the encoders' interface."""
    made = {}

    class FakeCrossEncoder:
        def __init__(self, model_dir, max_length=512, batch_size=32):
            made.update(model_dir=model_dir, max_length=max_length, batch_size=batch_size)

        def score(self, query, passages):
            return [len(p) for p in passages]

    module = types.ModuleType("clirkit.encoders.cross_encoder")
    module.CrossEncoder = FakeCrossEncoder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "clirkit.encoders.cross_encoder", module)
    run_path, queries_path, corpus_path = files(tmp_path, *scored_collection(2, 30))
    out = tmp_path / "ce.trec"
    argv = ["rerank", "--backend", "cross-encoder", "--model-dir", "fake-dir", "--max-length", "256"]
    argv += ["--run", str(run_path), "--queries", str(queries_path), "--corpus", str(corpus_path)]
    assert cli.main([*argv, "--output", str(out), "--depth", "30", "--quiet"]) == 0
    assert made == {"model_dir": "fake-dir", "max_length": 256, "batch_size": 32}
    assert (tmp_path / "ce.trec.answers.sqlite").exists()


def test_cross_encoder_backend_sorts_by_a_real_cross_encoders_scores(tmp_path):
    pytest.importorskip("onnx")
    from clirkit.encoders import CrossEncoder
    from model_builders import with_head  # MiniLM with a one-logit head

    model_dir, _, _ = with_head(tmp_path / "ce", 1)
    run, queries, corpus = scored_collection(2, 12)
    run_path, queries_path, corpus_path = files(tmp_path, run, queries, corpus)
    out = tmp_path / "ce.trec"
    argv = ["rerank", "--backend", "cross-encoder", "--model-dir", str(model_dir), "--depth", "12", "--quiet"]
    argv += ["--run", str(run_path), "--queries", str(queries_path), "--corpus", str(corpus_path)]
    assert cli.main([*argv, "--output", str(out)]) == 0
    reranked = clirkit.read_run(out)
    model = CrossEncoder(model_dir)
    for q, docs in run.items():
        first_stage = sorted(docs, key=lambda d: -docs[d])
        scores = model.score(queries[q], [corpus[d] for d in first_stage[:12]])
        top = [first_stage[i] for i in sorted(range(12), key=lambda i: (-scores[i], i))]
        assert list(reranked[q])[:12] == top


# --- the CLI, its default cache and its exit status ------------------------------------------------


def files(tmp_path, run, queries, corpus):
    run_path, queries_path, corpus_path = (
        tmp_path / "run.trec",
        tmp_path / "queries.tsv",
        tmp_path / "corpus.tsv",
    )
    with open(run_path, "w") as f:
        for q, docs in run.items():
            for rank, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), start=1):
                f.write(f"{q} Q0 {d} {rank} {s} bm25\n")
    queries_path.write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    corpus_path.write_text("".join(f"{d}\t{t}\n" for d, t in corpus.items()))
    return run_path, queries_path, corpus_path


def rerank_cli(tmp_path, url: str, out_name: str, *extra: str, collection=None) -> int:
    run_path, queries_path, corpus_path = files(tmp_path, *(collection or scored_collection(3, 20)))
    argv = ["rerank", "--run", str(run_path), "--queries", str(queries_path), "--corpus", str(corpus_path)]
    argv += ["--base-url", url, "--model", "m", "--output", str(tmp_path / out_name), "--quiet"]
    argv += ["--retries", "0", "--timeout", "10", "--stats", str(tmp_path / (out_name + ".stats.json"))]
    return cli.main([*argv, *extra])


def stats_of(tmp_path, out_name: str) -> dict:
    return json.loads((tmp_path / (out_name + ".stats.json")).read_text())


def ql_respond(fail_from: Optional[int] = None):
    """A completions server for query likelihood; from request ``fail_from`` on, HTTP 500."""

    def respond(conn, req, n):
        if fail_from is not None and n >= fail_from:
            return send(conn, {"error": "overloaded"}, status="500 Internal Server Error")
        prompt = req.body["prompt"]
        send(conn, {"choices": [{"logprobs": completion_logprobs(prompt, lambda o: -len(prompt) / (o + 1))}]})

    return respond


def test_pointwise_run_stopped_midway_resumes_from_the_default_cache_with_only_missing_calls(
    servers, tmp_path
):
    failing = servers(ql_respond(fail_from=25))
    extra = ("--backend", "query-likelihood", "--depth", "20", "--concurrency", "1")
    assert rerank_cli(tmp_path, failing.url, "ql.trec", *extra) == 3
    assert stats_of(tmp_path, "ql.trec")["failures"] == 2  # 3 queries x 20: the 2nd and 3rd fail
    with sqlite3.connect(tmp_path / "ql.trec.answers.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 25
    healthy = servers(ql_respond())
    assert rerank_cli(tmp_path, healthy.url, "ql.trec", *extra) == 0
    assert len(healthy.requests) == 60 - 25 == stats_of(tmp_path, "ql.trec")["calls"]
    assert rerank_cli(tmp_path, healthy.url, "ql.trec", *extra) == 0 and len(healthy.requests) == 35
    # --no-cache asks for everything again and leaves no cache file.
    assert rerank_cli(tmp_path, healthy.url, "fresh.trec", *extra, "--no-cache") == 0
    assert len(healthy.requests) == 95 and not (tmp_path / "fresh.trec.answers.sqlite").exists()
    assert (tmp_path / "fresh.trec").read_text() == (tmp_path / "ql.trec").read_text()


def listwise_answer(req: Request) -> str:
    num = int(req.body["messages"][1]["content"].split("provide you with ", 1)[1].split(" ", 1)[0])
    return " > ".join(f"[{i}]" for i in range(num, 0, -1))


def test_transient_failures_are_not_cached_and_are_retried_on_the_next_run(servers, tmp_path):
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))
    dead_url = f"http://127.0.0.1:{refused.getsockname()[1]}/v1"  # bound, never listening: refused
    try:
        assert (
            rerank_cli(tmp_path, dead_url, "out.trec", "--depth", "10", "--window", "5", "--stride", "5") == 3
        )
    finally:
        refused.close()
    stats = stats_of(tmp_path, "out.trec")
    assert stats["failures"] == 6 and all("connection failed" in f["reason"] for f in stats["failed_windows"])
    cache = tmp_path / "out.trec.answers.sqlite"
    for status in ("401 Unauthorized", "429 Too Many Requests", "503 Service Unavailable"):
        server = servers(lambda conn, req, n, status=status: send(conn, {"error": "no"}, status=status))
        assert (
            rerank_cli(tmp_path, server.url, "out.trec", "--depth", "10", "--window", "5", "--stride", "5")
            == 3
        )
        assert len(server.requests) == 6  # every window asked again: nothing was cached
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 0
    healthy = servers(lambda conn, req, n: send(conn, chat(listwise_answer(req))))
    assert (
        rerank_cli(tmp_path, healthy.url, "out.trec", "--depth", "10", "--window", "5", "--stride", "5") == 0
    )
    assert len(healthy.requests) == 6
    # A definitive failure (HTTP 400: the request itself is wrong) is cached.
    bad = servers(lambda conn, req, n: send(conn, {"error": "bad request"}, status="400 Bad Request"))
    assert rerank_cli(tmp_path, bad.url, "bad.trec", "--depth", "10", "--window", "5", "--stride", "5") == 3
    assert rerank_cli(tmp_path, bad.url, "bad.trec", "--depth", "10", "--window", "5", "--stride", "5") == 3
    assert len(bad.requests) == 6 and stats_of(tmp_path, "bad.trec")["cache_hits"] == 6


MALFORMED = {
    "truncated body": lambda conn: conn.sendall(
        b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"choices": ['
    ),
    "bad status line": lambda conn: conn.sendall(b"HTTP/1.1 OK-ish\r\n\r\n{}"),
    "not HTTP": lambda conn: conn.sendall(b"garbage\r\n\r\n"),
    "not JSON": lambda conn: send(conn, b"<html>oops</html>"),
    "wrong shape": lambda conn: send(conn, {"choices": "none"}),
    "closed": lambda conn: None,
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_response_fails_its_window_not_the_run(servers, kind):
    def respond(conn, req, n):
        if "poison" in json.dumps(req.body):
            return MALFORMED[kind](conn)
        send(conn, chat(listwise_answer(req), usage="lots"))  # odd usage: counted as 0, not an error

    server = servers(respond)
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 2.0, "d": 1.0}}
    corpus = {"a": "poison", "b": "fine", "c": "fine too", "d": "also fine"}
    reranked, stats = rerank(
        run, {"q1": "x", "q2": "y"}, corpus, backend(server), depth=2, window=2, stride=2, progress=False
    )
    assert stats.failures == 1 and stats.failed_windows[0].qid == "q1"
    assert list(reranked["q1"]) == ["a", "b"] and list(reranked["q2"]) == ["d", "c"]
    assert stats.prompt_tokens == 0


def test_redirects_are_not_followed(servers):
    target = servers(lambda conn, req, n: send(conn, chat("[1] > [2] > [3]")))
    for status in ("301 Moved Permanently", "307 Temporary Redirect", "308 Permanent Redirect"):
        location = target.url.replace("127.0.0.1", "localhost") + "/chat/completions"
        redirecting = servers(
            lambda conn, req, n, s=status, to=location: send(
                conn, {}, status=s, headers=f"Location: {to}\r\n"
            )
        )
        result = backend(redirecting, api_key=SECRET).rank_one(WINDOW)
        assert result.answer is None and "redirect" in result.error and not result.transient
        assert redirecting.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert target.requests == []  # the key never reached the other host


def test_a_trickling_server_times_out_within_the_total_deadline(servers):
    body = json.dumps(chat("[1] > [2] > [3]")).encode()
    stop = threading.Event()

    def trickle(conn, req, n):
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        for byte in body:  # a byte every 0.3 s: each read is quick, the whole answer is not
            if stop.wait(0.3):
                return
            conn.sendall(bytes([byte]))

    server = servers(trickle)
    try:
        result = backend(server, timeout=1.5).rank_one(WINDOW)
    finally:
        stop.set()
    assert result.answer is None and result.error == "timed out after 1.5 s" and result.transient


def test_oversized_responses_fail_their_window(servers):
    big = {"choices": [{"message": {"content": "[1] > [2] > [3]" + " " * 3_000_000}}]}
    declared = servers(lambda conn, req, n: send(conn, big))

    def undeclared_respond(conn, req, n):  # no Content-Length: read until the connection closes
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        for _ in range(100):
            conn.sendall(b" " * 100_000)

    undeclared = servers(undeclared_respond)
    for server in (declared, undeclared):
        result = backend(server, max_response_bytes=1_000_000).rank_one(WINDOW)
        assert result.answer is None and "1000000-byte cap" in result.error
    assert backend(declared, max_response_bytes=4_000_000).rank_one(WINDOW).answer == "[1] > [2] > [3]"


def test_a_changed_passage_under_the_same_id_is_asked_again(servers, tmp_path):
    server = servers(lambda conn, req, n: send(conn, chat(listwise_answer(req))))
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    cache = tmp_path / "answers.sqlite"

    def once(corpus):
        return rerank(
            run, {"q": "x"}, corpus, backend(server), depth=3, window=3, stride=3, cache=cache, progress=False
        )[1]

    assert once({"a": "one", "b": "two", "c": "three"}).calls == 1
    assert once({"a": "one", "b": "two", "c": "three"}).calls == 0
    assert once({"a": "one", "b": "TWO, revised", "c": "three"}).calls == 1


def test_the_api_key_is_scrubbed_from_cache_stats_and_stderr(servers, tmp_path, capsys):
    def echo_key(conn, req, n):  # an error page that quotes the request's credentials back
        send(
            conn, {"error": f"invalid request from {req.headers['authorization']}"}, status="400 Bad Request"
        )

    server = servers(echo_key)
    assert (
        rerank_cli(
            tmp_path,
            server.url,
            "out.trec",
            "--api-key",
            SECRET,
            "--depth",
            "5",
            "--window",
            "5",
            "--stride",
            "5",
        )
        == 3
    )
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    stderr = capsys.readouterr().err
    assert "invalid request from Bearer ***" in stderr and SECRET not in stderr
    for path in tmp_path.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path
    with sqlite3.connect(tmp_path / "out.trec.answers.sqlite") as db:
        assert SECRET not in json.dumps(db.execute("SELECT * FROM answers").fetchall())


def test_failed_windows_give_a_summary_and_exit_status_3(servers, tmp_path, capsys):
    def some_fail(conn, req, n):
        if "query 1" in json.dumps(req.body):
            return send(conn, chat("I cannot rank these."))
        send(conn, chat(listwise_answer(req)))

    server = servers(some_fail)
    assert (
        rerank_cli(tmp_path, server.url, "out.trec", "--depth", "10", "--window", "5", "--stride", "5") == 3
    )
    stderr = capsys.readouterr().err
    assert "clirkit: error: 2 of 6 windows failed and kept their first-stage order" in stderr
    assert (tmp_path / "out.trec").exists()


# --- token budgets in prompts -------------------------------------------------------------------

CJK_AND_THAI = {
    "zh": "跨语言信息检索是一个研究领域，它关注用一种语言的查询检索另一种语言的文档。",
    "th": "การค้นคืนสารสนเทศข้ามภาษาเป็นสาขาวิชาที่ศึกษาการค้นหาเอกสารในภาษาหนึ่งด้วยคำค้นในอีกภาษาหนึ่ง",
    "en": "Cross-language information retrieval finds documents in one language for queries in another one.",
}


@pytest.mark.parametrize("with_tokenizer", [True, False])
def test_prompt_passages_and_queries_are_cut_to_their_token_budget(servers, tmp_path, with_tokenizer):
    pytest.importorskip("clirkit.encoders.truncation")
    tokenizer_path = (
        shared_path("models", "multilingual-e5-small-int8", "tokenizer.json") if with_tokenizer else None
    )
    server = servers(lambda conn, req, n: send(conn, chat(listwise_answer(req))))
    run = {"q": {lang: 3.0 - i for i, lang in enumerate(CJK_AND_THAI)}}
    collection = (run, {"q": CJK_AND_THAI["zh"] + " " + CJK_AND_THAI["en"]}, CJK_AND_THAI)
    extra = ["--template", "rankzephyr", "--depth", "3", "--window", "3", "--stride", "3"]
    extra += ["--passage-tokens", "12", "--query-tokens", "6"]
    extra += ["--tokenizer", str(tokenizer_path)] if tokenizer_path else []
    assert rerank_cli(tmp_path, server.url, "cut.trec", *extra, collection=collection) == 0
    content = server.requests[0].body["messages"][1]["content"]
    passages = [line.split("] ", 1)[1] for line in content.split("\n") if line[:3] in ("[1]", "[2]", "[3]")]
    query = content.split("search query: ", 1)[1].split(".\n", 1)[0]
    if tokenizer_path:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.no_truncation()

        def count(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)
    else:

        def count(text: str) -> int:  # the script-aware estimate: a character of CJK or Thai, or a word
            return sum(
                1 for ch in text if "\u0e00" <= ch <= "\u0e7f" or "\u4e00" <= ch <= "\u9fff" or ch == "，"
            ) + len([w for w in text.split() if w.isascii()])

    for passage, whole in zip(passages, CJK_AND_THAI.values()):
        assert 0 < count(passage) <= 12 and whole.startswith(passage) and passage != whole
    assert 0 < count(query) <= 6 and CJK_AND_THAI["zh"].startswith(query)
