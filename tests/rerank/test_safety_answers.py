"""Hostile model answers and hostile answer caches (report findings F9, F11, F12).

A local fake ``/completions`` server (127.0.0.1, random port) answers with log-probabilities that are
not log-probabilities (``Infinity``, ``1e308``, positive ones): each such answer fails its window and
is never cached. Caches that are not databases, of another layout, locked, or holding unreadable rows
give a clean :class:`clirkit.InvalidInputError` naming the file, a bounded wait, or a miss."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import pytest
from clirkit import InvalidInputError
from clirkit.rerank.backends import WindowResult
from clirkit.rerank.cache import RerankCache
from clirkit.rerank.likelihood import QueryLikelihoodScorer, YesNoScorer, yes_no_log_odds
from clirkit.rerank.pointwise import rerank_pointwise
from clirkit.rerank.templates import first_token_permutation

QUERIES = {"q1": "what do cells eat", "q2": "where is the river"}
CORPUS = {"d1": "cell walls and food", "d2": "the river runs north", "d3": "nothing in particular"}
RUN = {q: {"d1": 3.0, "d2": 2.0, "d3": 1.0} for q in QUERIES}


class _Server(ThreadingHTTPServer):
    daemon_threads = True


def _handler(reply: Callable[[str], object]):
    """A request handler answering each POST with ``reply(prompt)`` (JSON, Infinity allowed)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(reply(body["prompt"])).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def serve():
    """``serve(reply)`` starts a fake ``/completions`` server and gives its base URL."""
    started = []

    def start(reply) -> str:
        httpd = _Server(("127.0.0.1", 0), _handler(reply))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def echo_reply(bad: float):
    """A query-likelihood reply: every prompt character a token of log-probability -1, the last one
    ``bad`` when the prompt holds "cell"."""

    def reply(prompt: str):
        values = [-1.0] * len(prompt)
        if "cell" in prompt:
            values[-1] = bad
        logprobs = {"text_offset": list(range(len(prompt))), "token_logprobs": values}
        return {"choices": [{"logprobs": logprobs}]}

    return reply


@pytest.mark.parametrize("bad", [math.inf, 1e308, 0.5])
def test_query_likelihood_refuses_bad_logprobs_and_caches_none(serve, tmp_path, bad):
    url = serve(echo_reply(bad))
    scorer = QueryLikelihoodScorer(url, "m", retries=0)
    cache = tmp_path / "c.sqlite"
    _, stats = rerank_pointwise(RUN, QUERIES, CORPUS, scorer, depth=3, cache=cache, progress=False)
    # q1 ("cells") and d1 ("cell") hold "cell": every passage of q1, and d1 for q2, are bad answers.
    assert stats.failures == 2
    assert {f.qid for f in stats.failed_windows} == {"q1", "q2"}
    db = sqlite3.connect(cache)
    scores = [row[0] for row in db.execute("SELECT score FROM scores")]
    db.close()
    assert len(scores) == 2 and all(math.isfinite(s) and s <= 0 for s in scores)  # q2's d2 and d3 only


@pytest.mark.parametrize("yes", [math.inf, 1000.0, math.nan])
def test_yes_no_bad_logprob_is_a_failed_window_not_a_crash(serve, tmp_path, yes):
    url = serve(lambda prompt: {"choices": [{"logprobs": {"top_logprobs": [{"yes": yes, "no": -1}]}}]})
    scorer = YesNoScorer(url, "m", retries=0)
    run, stats = rerank_pointwise(
        RUN, QUERIES, CORPUS, scorer, depth=2, cache=tmp_path / "c.sqlite", progress=False
    )
    assert stats.failures == 2
    assert list(run["q1"]) == ["d1", "d2", "d3"]  # first-stage order kept
    assert len(RerankCache(tmp_path / "c.sqlite")) == 0


def test_yes_no_and_first_token_check_every_logprob():
    with pytest.raises(ValueError, match="not finite"):
        yes_no_log_odds({"yes": -0.1, "no": math.inf})
    with pytest.raises(ValueError, match="not finite"):
        yes_no_log_odds({"yes": 0.7, "no": -1})
    assert yes_no_log_odds({"yes": -0.5, "no": -0.5}) == pytest.approx(math.log(0.5))
    with pytest.raises(ValueError, match="identifier B"):
        first_token_permutation([{"token": "A", "logprob": -1}, {"token": "B", "logprob": math.inf}], 3)
    order = first_token_permutation([{"token": "A", "logprob": -1}, {"token": "B", "logprob": -0.5}], 3)
    assert order == [2, 1]


def test_cache_that_is_not_a_database_is_refused_unchanged(tmp_path):
    junk = tmp_path / "junk.sqlite"
    data = bytes(range(256)) * 64
    junk.write_bytes(data)
    with pytest.raises(InvalidInputError, match=str(junk)):
        RerankCache(junk)
    assert hashlib.sha256(junk.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    with pytest.raises(InvalidInputError, match="rerank cache"):
        RerankCache(tmp_path)  # a directory


def test_cache_of_an_older_layout_is_refused(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, answer TEXT)")
    db.commit()
    db.close()
    with pytest.raises(InvalidInputError, match=r"old\.sqlite.*another version"):
        RerankCache(path)


def test_unreadable_rows_are_misses(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = RerankCache(path)
    cache.put("k", WindowResult([2, 1]))
    cache.put_score("s", -1.5)
    cache.put_score("t", -2.5)
    db = sqlite3.connect(path)
    db.execute("UPDATE answers SET answer = '{not json' WHERE key = 'k'")
    db.execute("UPDATE scores SET score = 'abc' WHERE key = 's'")
    db.commit()
    db.close()
    assert cache.get("k") is None
    assert cache.get_scores(["s", "t"]) == {"t": -2.5}
    with pytest.raises(ValueError):
        cache.put_score("u", math.inf)
    cache.close()


def _hold_lock(path, seconds: float, ready: threading.Event) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    ready.set()
    time.sleep(seconds)
    db.execute("COMMIT")
    db.close()


def test_locked_cache_is_waited_for_then_refused_by_name(tmp_path):
    path = tmp_path / "c.sqlite"
    RerankCache(path).close()
    ready = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(path, 1.0, ready))
    holder.start()
    ready.wait()
    cache = RerankCache(path, lock_wait=20)
    cache.put("k", WindowResult([1, 2]))  # waits for the holder, does not lose the answer
    holder.join()
    assert cache.get("k").answer == [1, 2]
    cache.close()

    ready.clear()
    holder = threading.Thread(target=_hold_lock, args=(path, 3.0, ready))
    holder.start()
    ready.wait()
    cache = RerankCache(path, lock_wait=0.3)
    with pytest.raises(InvalidInputError, match=r"c\.sqlite.*locked"):
        cache.put("k2", WindowResult([1, 2]))
    holder.join()
    cache.close()
