"""The OpenAI-compatible backend against a local fake server (127.0.0.1, random port) that
sometimes answers malformed permutations, fails with HTTP 500, or sleeps past the timeout.

The server's behaviour for a window depends only on the window's content, so a reference loop
in the test can replay what must happen: failed windows keep their order, repaired ones are
repaired, and a killed run resumed from the cache makes only the missing calls."""

from __future__ import annotations

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
from typing import Dict, List

import clirkit
import pytest
from clirkit import _native
from clirkit.rerank import rerank
from clirkit.rerankers import OpenAIChatBackend, rankgpt_messages

TIMEOUT = 1.0  # generous: a loaded CI machine must not time out honest answers


def window_of(messages: List[dict]):
    """(query, passages) back from a RankGPT prompt."""
    query = messages[-1]["content"].split("Search Query: ", 1)[1].split(". \nRank the", 1)[0]
    passages = [m["content"].split("] ", 1)[1] for m in messages[3:-1:2]]
    return query, passages


def fate(query: str, passages: List[str]) -> str:
    h = int(hashlib.sha256(json.dumps([query, passages]).encode()).hexdigest(), 16) % 10
    return {0: "http500", 1: "garbage", 2: "slow", 3: "repair", 4: "flaky"}.get(h, "ok")


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
    """A threaded fake /v1/chat/completions server. ``mode="faults"``: behaviour from ``fate``;
    ``mode="hold"``: all answers good, but after ``hold_after`` answers further requests wait."""

    def __init__(self, mode: str = "faults", hold_after: int = 0) -> None:
        self.mode, self.hold_after = mode, hold_after
        self.lock = threading.Lock()
        self.requests = 0
        self.passed = 0
        self.answered = 0
        self.attempts: Dict[str, int] = {}
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                query, passages = window_of(body["messages"])
                key = json.dumps([query, passages])
                with server.lock:
                    server.requests += 1
                    attempt = server.attempts.get(key, 0)
                    server.attempts[key] = attempt + 1
                    hold = server.mode == "hold" and server.passed >= server.hold_after
                    server.passed += 1
                if hold:
                    server.release.wait(30)
                    self.send_error(503)
                    return
                kind = fate(query, passages) if server.mode == "faults" else "ok"
                if kind == "http500" or (kind == "flaky" and attempt == 0):
                    self.send_error(500, "injected failure")
                    return
                if kind == "slow":
                    time.sleep(TIMEOUT * 2)  # the client has given up: no answer counts
                    return
                reply = {
                    "choices": [{"message": {"role": "assistant", "content": answer_for(kind, passages)}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 7},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                with server.lock:
                    server.answered += 1

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


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


def replay(run, queries_path, corpus_path):
    """What must come out: windows by fate, failed ones keeping their order; also the counts of
    failed, repaired windows and calls, and the repairs' (duplicates, out of range, missing)."""
    queries = _native.load_texts(str(queries_path), None, True)
    texts = _native.load_texts(str(corpus_path), None, False)
    out, failed, repaired, calls, fixed = {}, 0, 0, 0, [0, 0, 0]
    for q, docs in run.items():
        order = [d for d, _ in clirkit.NativeRun.from_dict({q: docs}).to_list()[0][1]]
        for start, end in _native.window_plan(len(order), **PLAN):
            window = order[start:end]
            _, passages = window_of(rankgpt_messages(queries[q], [texts[d] for d in window]))
            kind = fate(queries[q], passages)
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
    expected, failed, repaired, calls, fixed = replay(run, queries, corpus)
    assert failed > 0 and repaired > 0 and all(fixed)  # the fixture exercises every path
    server = FakeServer("faults")
    try:
        backend = lambda: OpenAIChatBackend(server.url, "fake-model", api_key="k", timeout=TIMEOUT,  # noqa: E731
                                            retries=1, backoff=0.01, concurrency=8)
        cache = tmp_path / "cache.sqlite"
        reranked, stats = rerank(run_path, queries, corpus, backend(), cache=cache, progress=False, **PLAN)
        assert {q: list(d) for q, d in reranked.items()} == expected
        assert stats.windows == 60 and stats.failures == failed and stats.repaired == repaired
        assert repair_totals(stats) == fixed
        assert stats.calls == calls == server.requests
        assert stats.prompt_tokens == 100 * server.answered and stats.completion_tokens == 7 * server.answered
        reasons = {f.reason.split(":")[0] for f in stats.failed_windows}
        assert reasons <= {"HTTP 500", "unparsable answer", "timed out after 1 s"} and len(reasons) == 3
        for q, docs in reranked.items():
            assert sorted(docs) == sorted(run[q])  # nothing lost

        # The rerun, through the CLI: served from the cache, repairs made again and reported.
        before = server.requests
        out, stats_path = tmp_path / "again.trec", tmp_path / "stats.json"
        cli = subprocess.run(
            [sys.executable, "-m", "clirkit.cli", "rerank", "--run", str(run_path), "--queries", str(queries),
             "--corpus", str(corpus), "--base-url", server.url, "--model", "fake-model", "--depth", "30",
             "--window", "10", "--stride", "5", "--cache", str(cache), "--output", str(out),
             "--stats", str(stats_path), "--quiet"],
            capture_output=True, text=True, timeout=120, check=True,
        )
        stats2 = json.loads(stats_path.read_text())
        assert server.requests == before and stats2["calls"] == 0 and stats2["cache_hits"] == 60
        assert stats2["failures"] == failed and stats2["repaired"] == repaired
        assert (stats2["duplicates_dropped"], stats2["out_of_range_dropped"], stats2["missing_appended"]) == fixed
        assert (f"{repaired} repaired ({fixed[0]} duplicate, {fixed[1]} out-of-range ids dropped, "
                f"{fixed[2]} missing appended)") in cli.stderr
        again = clirkit.read_run(out)
        assert {q: list(d) for q, d in again.items()} == {q: list(d) for q, d in reranked.items()}
    finally:
        server.close()


def test_killed_run_resumes_with_only_missing_calls(collection, tmp_path):
    run, run_path, queries, corpus = collection
    hold_after = 23
    server = FakeServer("hold", hold_after=hold_after)
    cache, out = tmp_path / "cache.sqlite", tmp_path / "reranked.trec"
    cmd = [sys.executable, "-m", "clirkit.cli", "rerank", "--run", str(run_path), "--queries", str(queries),
           "--corpus", str(corpus), "--backend", "openai", "--base-url", server.url, "--model", "fake-model",
           "--depth", "30", "--window", "10", "--stride", "5", "--cache", str(cache), "--concurrency", "4",
           "--timeout", "20", "--retries", "0", "--output", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        rows = 0
        while time.monotonic() < deadline and rows < hold_after:
            time.sleep(0.05)
            if cache.exists():
                with sqlite3.connect(cache) as db:
                    try:
                        rows = db.execute("SELECT COUNT(*) FROM windows").fetchone()[0]
                    except sqlite3.OperationalError:
                        rows = 0
        assert rows == hold_after, proc.stderr.read() if proc.poll() is not None else "timed out"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert not out.exists()

        server.mode = "ok"
        server.release.set()
        answered_before = server.answered
        subprocess.run(cmd, check=True, timeout=120)
        assert server.answered - answered_before == 60 - hold_after
        resumed = clirkit.read_run(out)
        server2 = FakeServer("ok")
        try:
            fresh, stats = rerank(run_path, queries, corpus, OpenAIChatBackend(server2.url, "fake-model"),
                                  progress=False, **PLAN)
        finally:
            server2.close()
        assert stats.calls == 60
        assert {q: list(d) for q, d in resumed.items()} == {q: list(d) for q, d in fresh.items()}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        server.close()
