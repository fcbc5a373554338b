"""The OpenAI-compatible backend against local fake servers (127.0.0.1, random port): one that
sometimes answers malformed permutations, fails with HTTP 500, or never answers (the client
times out); one that holds requests while the client is killed; one that counts requests in
flight; one that asks to wait with Retry-After.

The faulty server's behaviour for a window depends only on the window's content, so a reference
loop in the test can replay what must happen: failed windows keep their order, repaired ones are
repaired, and a killed run resumed from the cache makes only the missing calls."""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Dict, List, Set, Tuple

import clirkit
import pytest
from clirkit import _native
from clirkit.rerank import OpenAIChatBackend, WindowRequest, WindowResult, rankgpt_messages, rerank
from local_server import send_json

# Honest answers take milliseconds: seconds of margin even on a loaded 2-core machine. Only the
# windows meant to time out wait this long, all in one step, so the suite waits for them once.
TIMEOUT = 4.0


def window_of(messages: List[dict]):
    """(query, passages) back from a RankGPT prompt."""
    query = messages[-1]["content"].split("Search Query: ", 1)[1].split(". \nRank the", 1)[0]
    passages = [m["content"].split("] ", 1)[1] for m in messages[3:-1:2]]
    return query, passages


def as_served(query: str, texts: List[str]):
    """(query, passages) as the server sees them, passages cut and normalized by the prompt."""
    return window_of(rankgpt_messages(query, texts))


def window_key(query: str, passages: List[str]) -> str:
    return json.dumps([query, passages])


class Fates:
    """What the faulty server does with a window, from its content alone, so ``replay`` knows
    what must happen: the ``slow`` windows never get an answer (the client times out); the others
    get HTTP 500s, a 500 then an answer ("flaky"), garbage, an answer needing repair, or a good one."""

    def __init__(self, slow: Set[str]) -> None:
        self.slow = slow

    def __call__(self, query: str, passages: List[str]) -> str:
        key = window_key(query, passages)
        if key in self.slow:
            return "slow"
        h = int(hashlib.sha256(key.encode()).hexdigest(), 16) % 10
        return {0: "http500", 1: "garbage", 2: "repair", 3: "flaky"}.get(h, "ok")


def good_answer(passages: List[str]) -> str:
    order = sorted(range(len(passages)), key=lambda i: (len(passages[i]), i))
    return " > ".join(f"[{i + 1}]" for i in order)


def answer_for(kind: str, passages: List[str]) -> str:
    if kind == "garbage":
        return "I am sorry, I cannot rank these passages."
    if kind == "repair":
        return "[2] > [2] > [1] > [999]"
    return good_answer(passages)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # never refuse the client's concurrent connections


class FakeServer:
    """A threaded fake /v1/chat/completions server on 127.0.0.1 (random port) that answers every
    window with ``good_answer``; subclasses change that in ``respond``. Counts requests, attempts
    per window and answers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.answered = 0
        self.attempts: Dict[str, int] = {}
        self.closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                query, passages = window_of(body["messages"])
                key = window_key(query, passages)
                with server.lock:
                    server.requests += 1
                    attempt = server.attempts.get(key, 0)
                    server.attempts[key] = attempt + 1
                server.respond(self, query, passages, attempt)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def respond(self, handler: BaseHTTPRequestHandler, query: str, passages: List[str], attempt: int) -> None:
        self.answer(handler, good_answer(passages))

    def answer(self, handler: BaseHTTPRequestHandler, content: str) -> None:
        reply = {
            "choices": [{"message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7},
        }
        send_json(handler, reply)
        with self.lock:
            self.answered += 1

    def close(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class FaultyServer(FakeServer):
    """Treats each window as ``fates`` says."""

    def __init__(self, fates: Fates) -> None:
        self.fates = fates
        super().__init__()

    def respond(self, handler, query, passages, attempt):
        kind = self.fates(query, passages)
        if kind == "http500" or (kind == "flaky" and attempt == 0):
            handler.send_error(500, "injected failure")
        elif kind == "slow":
            self.closing.wait(60)  # no answer: the client gives up after its timeout
        else:
            self.answer(handler, answer_for(kind, passages))


class HoldingServer(FakeServer):
    """Answers the first ``hold_after`` requests, keeps the next ones waiting (the client is killed
    meanwhile) until ``release()``, then answers every request."""

    def __init__(self, hold_after: int) -> None:
        self.hold_after = hold_after
        self.passed = 0
        self.released = threading.Event()
        super().__init__()

    def respond(self, handler, query, passages, attempt):
        with self.lock:
            hold = self.passed >= self.hold_after and not self.released.is_set()
            self.passed += 1
        if hold:
            self.released.wait(30)
            handler.send_error(503)
        else:
            super().respond(handler, query, passages, attempt)

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        super().close()


class ConcurrencyServer(FakeServer):
    """Counts the requests in flight. Each waits until ``limit`` are in flight (or all ``total``
    have come), then a moment more: a client keeping to the limit reaches it exactly, however
    slow the machine, and one that does not goes past it."""

    def __init__(self, limit: int, total: int) -> None:
        self.limit, self.total = limit, total
        self.in_flight = self.most_in_flight = 0
        super().__init__()
        self.changed = threading.Condition(self.lock)

    def respond(self, handler, query, passages, attempt):
        with self.changed:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.in_flight >= self.limit or self.requests == self.total, 30)
        time.sleep(0.05)
        with self.changed:
            self.in_flight -= 1
        super().respond(handler, query, passages, attempt)


class RetryAfterServer(FakeServer):
    """Turns each window's first attempt away with the status and ``Retry-After`` value that
    ``refusals[query]`` gives, then answers; records when each attempt came (wall clock, as HTTP
    dates are)."""

    def __init__(self, refusals: Dict[str, Tuple[int, Callable[[], str]]]) -> None:
        self.refusals = refusals
        self.arrivals: Dict[str, List[float]] = {}
        super().__init__()

    def respond(self, handler, query, passages, attempt):
        with self.lock:
            self.arrivals.setdefault(query, []).append(time.time())
        if attempt:
            super().respond(handler, query, passages, attempt)
            return
        status, retry_after = self.refusals[query]
        handler.send_response(status)
        handler.send_header("Retry-After", retry_after())
        handler.send_header("Content-Length", "0")
        handler.end_headers()


@pytest.fixture
def collection(sample_dir, tmp_path):
    """12 queries x 30 candidates from the sample (depth 30, window 10, stride 5: 5 windows each)."""
    rng = random.Random(11)
    qrels = clirkit.read_qrels(sample_dir / "qrels.tsv")
    ids = [json.loads(line)["_id"] for line in open(sample_dir / "corpus.jsonl", encoding="utf-8")]
    run = {q: {d: float(30 - i) for i, d in enumerate(rng.sample(ids, 30))} for q in sorted(qrels)[:12]}
    run_path = tmp_path / "first.trec"
    clirkit.write_run(run_path, run)
    return run, run_path, sample_dir / "queries.jsonl", sample_dir / "corpus.jsonl"


PLAN = dict(depth=30, window=10, stride=5)


def first_stage(docs: Dict[str, float]) -> List[str]:
    return [d for d, _ in clirkit.NativeRun.from_dict({"q": docs}).to_list()[0][1]]


def texts_of(queries_path, corpus_path):
    return _native.load_texts(str(queries_path), None, True), _native.load_texts(
        str(corpus_path), None, False
    )


def slow_first_windows(run, queries_path, corpus_path, n_queries: int) -> Set[str]:
    """The first (bottom) windows of ``n_queries`` queries: all sent in the first step."""
    queries, texts = texts_of(queries_path, corpus_path)
    slow = set()
    for q in sorted(run)[:n_queries]:
        order = first_stage(run[q])
        start, end = _native.window_plan(len(order), **PLAN)[0]
        slow.add(window_key(*as_served(queries[q], [texts[d] for d in order[start:end]])))
    return slow


def replay(run, queries_path, corpus_path, fates: Fates):
    """What must come out: windows by fate, failed ones keeping their order; also the counts of
    failed, repaired windows and calls, and the repairs' (duplicates, out of range, missing)."""
    queries, texts = texts_of(queries_path, corpus_path)
    out, failed, repaired, calls, fixed = {}, 0, 0, 0, [0, 0, 0]
    for q, docs in run.items():
        order = first_stage(docs)
        for start, end in _native.window_plan(len(order), **PLAN):
            window = order[start:end]
            _, passages = as_served(queries[q], [texts[d] for d in window])
            kind = fates(queries[q], passages)
            calls += {"http500": 2, "garbage": 2, "slow": 2, "flaky": 2}.get(kind, 1)
            if kind in ("http500", "garbage", "slow"):
                failed += 1
                continue
            perm, fixes = _native.parse_permutation(answer_for(kind, passages), len(window))
            repaired += any(fixes)
            fixed = [total + n for total, n in zip(fixed, fixes)]
            order[start:end] = [window[p] for p in perm]
        out[q] = order
    return out, failed, repaired, calls, tuple(fixed)


def repair_totals(stats) -> tuple:
    return stats.duplicates_dropped, stats.out_of_range_dropped, stats.missing_appended


def test_faulty_server_completes_and_cache_replays(collection, tmp_path):
    run, run_path, queries, corpus = collection
    fates = Fates(slow_first_windows(run, queries, corpus, n_queries=2))
    expected, failed, repaired, calls, fixed = replay(run, queries, corpus, fates)
    assert failed > 0 and repaired > 0 and all(fixed)  # the fixture exercises every path
    server = FaultyServer(fates)
    try:
        backend = OpenAIChatBackend(
            server.url, "fake-model", api_key="k", timeout=TIMEOUT, retries=1, backoff=0.01, concurrency=8
        )
        cache = tmp_path / "cache.sqlite"
        reranked, stats = rerank(run_path, queries, corpus, backend, cache=cache, progress=False, **PLAN)
        assert {q: list(d) for q, d in reranked.items()} == expected
        assert stats.windows == 60 and stats.failures == failed and stats.repaired == repaired
        assert repair_totals(stats) == fixed
        assert stats.calls == calls == server.requests
        assert stats.prompt_tokens == 100 * server.answered and stats.completion_tokens == 7 * server.answered
        reasons = {f.reason.split(":")[0] for f in stats.failed_windows}
        assert reasons == {"HTTP 500", "unparsable answer", f"timed out after {TIMEOUT:g} s"}
        for q, docs in reranked.items():
            assert sorted(docs) == sorted(run[q])  # nothing lost

        # The rerun, through the CLI: definitive answers (good, repaired, unparsable) served from the
        # cache, repairs made again and reported; transient failures (HTTP 500, timeouts) asked again,
        # failing again here; the exit status says windows failed.
        transient = sum(1 for f in stats.failed_windows if not f.reason.startswith("unparsable"))
        assert 0 < transient < failed
        before = server.requests
        out, stats_path = tmp_path / "again.trec", tmp_path / "stats.json"
        cli = subprocess.run(
            rerank_command(
                run_path,
                queries,
                corpus,
                server.url,
                cache,
                out,
                stats_path,
                "--timeout",
                str(TIMEOUT),
                "--retries",
                "0",
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cli.returncode == 3, cli.stderr
        assert f"{failed} of 60 windows failed" in cli.stderr
        stats2 = json.loads(stats_path.read_text())
        assert server.requests - before == transient == stats2["calls"]
        assert stats2["cache_hits"] == 60 - transient
        assert stats2["failures"] == failed and stats2["repaired"] == repaired
        assert (
            stats2["duplicates_dropped"],
            stats2["out_of_range_dropped"],
            stats2["missing_appended"],
        ) == fixed
        assert (
            f"{repaired} repaired ({fixed[0]} duplicate, {fixed[1]} out-of-range ids dropped, "
            f"{fixed[2]} missing appended)"
        ) in cli.stderr
        again = clirkit.read_run(out)
        assert {q: list(d) for q, d in again.items()} == {q: list(d) for q, d in reranked.items()}
    finally:
        server.close()


def rerank_command(run_path, queries, corpus, url, cache, out, stats_path, *extra: str) -> List[str]:
    """`clirkit rerank` of the collection against the fake server at ``url`` (depth 30, window 10,
    stride 5), cached in ``cache`` (None: the default, beside ``out``), writing ``out`` and
    ``stats_path``; ``extra`` options appended."""
    return [
        sys.executable,
        "-m",
        "clirkit.cli",
        "rerank",
        "--run",
        str(run_path),
        "--queries",
        str(queries),
        "--corpus",
        str(corpus),
        "--base-url",
        url,
        "--model",
        "fake-model",
        "--depth",
        "30",
        "--window",
        "10",
        "--stride",
        "5",
        *(["--cache", str(cache)] if cache is not None else []),
        "--output",
        str(out),
        "--stats",
        str(stats_path),
        "--quiet",
        *extra,
    ]


def cached_windows(cache) -> int:
    """Rows committed to the cache file so far (0 while the run has not created its table)."""
    if not cache.exists():
        return 0
    with sqlite3.connect(cache) as db:
        try:
            return db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        except sqlite3.OperationalError:
            return 0


def test_killed_run_resumes_with_only_missing_calls(collection, tmp_path):
    run, run_path, queries, corpus = collection
    hold_after = 23
    server = HoldingServer(hold_after)
    out, stats_path = tmp_path / "reranked.trec", tmp_path / "stats.json"
    cache = tmp_path / "reranked.trec.answers.sqlite"  # the default cache, beside the output
    cmd = rerank_command(
        run_path,
        queries,
        corpus,
        server.url,
        None,
        out,
        stats_path,
        "--backend",
        "openai",
        "--concurrency",
        "4",
        "--timeout",
        "20",
        "--retries",
        "0",
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and cached_windows(cache) < hold_after:
            time.sleep(0.05)
        assert cached_windows(cache) == hold_after, (
            proc.stderr.read() if proc.poll() is not None else "timed out"
        )
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert not out.exists() and not stats_path.exists()
        cached = cached_windows(cache)
        assert cached == hold_after

        server.release()
        answered_before = server.answered
        subprocess.run(cmd, check=True, timeout=120)
        assert server.answered - answered_before == 60 - cached
        resumed_stats = json.loads(stats_path.read_text())
        assert resumed_stats["windows"] == 60 and resumed_stats["failures"] == 0
        assert resumed_stats["calls"] == 60 - cached and resumed_stats["cache_hits"] == cached
        resumed = clirkit.read_run(out)
        server2 = FakeServer()
        try:
            fresh, stats = rerank(
                run_path,
                queries,
                corpus,
                OpenAIChatBackend(server2.url, "fake-model"),
                progress=False,
                **PLAN,
            )
        finally:
            server2.close()
        assert stats.calls == 60
        assert {q: list(d) for q, d in resumed.items()} == {q: list(d) for q, d in fresh.items()}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        server.close()


def test_openai_backend_keeps_to_its_concurrency(collection):
    run, run_path, queries, corpus = collection
    concurrency = 3
    server = ConcurrencyServer(concurrency, total=len(run))
    try:
        backend = OpenAIChatBackend(server.url, "fake-model", concurrency=concurrency)
        _, stats = rerank(run_path, queries, corpus, backend, depth=10, window=10, stride=10, progress=False)
    finally:
        server.close()
    assert stats.calls == server.answered == len(run) and stats.failures == 0
    assert server.most_in_flight == concurrency


def window(query: str) -> WindowRequest:
    return WindowRequest(query, ["first passage", "second"], "q", ["d1", "d2"])


def test_retry_after_is_honoured_up_to_max_backoff():
    refusals = {
        "seconds": (429, lambda: "1"),
        "date": (503, lambda: email.utils.formatdate(time.time() + 2, usegmt=True)),  # 1 to 2 s ahead
        "hour": (429, lambda: "3600"),
    }
    server = RetryAfterServer(refusals)
    try:
        backend = OpenAIChatBackend(server.url, "fake-model", retries=1, backoff=0.01, max_backoff=30)
        results = [result for _, result in backend.rank([window("seconds"), window("date")])]
        assert [(r.answer is not None, r.calls) for r in results] == [(True, 2), (True, 2)]
        for query in ("seconds", "date"):
            first, second = server.arrivals[query]
            assert second - first >= 0.95, query  # not the 0.01 s backoff: the server's wait
        # An hour's Retry-After waits max_backoff; a daemon thread keeps a failure from hanging.
        bounded = OpenAIChatBackend(server.url, "fake-model", retries=1, backoff=0.01, max_backoff=0.2)
        outcome: List[WindowResult] = []
        worker = threading.Thread(
            target=lambda: outcome.append(bounded.rank_one(window("hour"))), daemon=True
        )
        worker.start()
        worker.join(30)
        assert outcome and outcome[0].answer is not None and outcome[0].calls == 2
    finally:
        server.close()
