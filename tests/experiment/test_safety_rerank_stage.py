"""Only complete, successful rerank stages are committed (report findings F4, F6): with a server that
fails some windows the experiment stops with an error naming them and commits no rerank stage; the
answers it got stay cached, so a rerun against a healthy server asks only the failed windows; every
option of a rerank node is in its stage key."""

from __future__ import annotations

import io
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from clirkit import ClirkitError
from clirkit.cli import main as cli
from clirkit.experiment import Experiment
from conftest import sample_experiment_head
from local_server import LocalServer, send_json

# One query's window answered HTTP 400, another's HTTP 500 (matched on the query line of the prompt).
FAILING = ("Search Query: How many points did the Panthers", "Search Query: How many career sacks")


class ChatServer(LocalServer):
    """A fake ``/chat/completions`` server answering "[1] > [2]", or failing windows whose prompt
    holds one of ``failing``; counts the requests per query text."""

    def __init__(self, failing=()) -> None:
        self.failing = failing
        self.asked: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                prompt = json.loads(body)["messages"][-1]["content"]
                server.asked.append(prompt)
                status = 200
                if server.failing and server.failing[0] in prompt:
                    status = 400
                elif server.failing and server.failing[1] in prompt:
                    status = 500
                send_json(self, {"choices": [{"message": {"content": "[2] > [1]"}}]}, status)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.serve(Server(("127.0.0.1", 0), Handler))


def experiment_file(tmp_path: Path, url: str, extra: str = "") -> Path:
    text = (
        sample_experiment_head("rr", ["en"])
        + f"""
[systems.bm25]
kind = "bm25"
fields = ["text"]

[rerank.llm]
input = "bm25"
backend = "openai"
model = "m"
base_url = "{url}"
depth = 5
window = 5
stride = 5
{extra}"""
    )
    path = tmp_path / "rr.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_failed_windows_fail_the_stage_and_a_rerun_asks_only_them(tmp_path, capsys):
    faulty = ChatServer(FAILING)
    work = tmp_path / "work"
    try:
        exp = Experiment(experiment_file(tmp_path, faulty.url), work, quiet=True)
        with pytest.raises(
            ClirkitError, match=r"rerank llm mlir/en: 2 of 20 windows failed .*HTTP 400.*HTTP 500"
        ):
            exp.run(log=io.StringIO())
        # the command line exits non-zero, naming the failed windows
        argv = ["experiment", "run", str(experiment_file(tmp_path, faulty.url)), "--workdir", str(work)]
        assert cli([*argv, "--quiet"]) == 2
        assert "2 of 20 windows failed" in capsys.readouterr().err
    finally:
        faulty.close()
    rerank = [s for s in exp.plan.stages if s.kind == "rerank"]
    assert rerank and not any(exp.plan.cached(s) for s in rerank)  # nothing committed
    assert not (work / "table.md").exists()


def test_rerun_against_a_healthy_server_asks_only_the_failed_windows(tmp_path):
    faulty = ChatServer(FAILING)
    port_url = faulty.url
    work = tmp_path / "work"
    path = experiment_file(tmp_path, port_url)
    try:
        with pytest.raises(ClirkitError, match="2 of 20 windows failed"):
            Experiment(path, work, quiet=True).run(log=io.StringIO())
        assert len([p for p in faulty.asked if not any(f in p for f in FAILING)]) == 18
        faulty.asked.clear()
        faulty.failing = ()  # the same server, healthy now
        exp = Experiment(path, work, quiet=True)
        exp.run(log=io.StringIO())
    finally:
        faulty.close()
    assert len(faulty.asked) == 2 and all(any(f in p for f in FAILING) for p in faulty.asked)
    assert {r["system"] for r in exp.rows} == {"bm25", "llm"}


def test_every_rerank_option_is_in_the_stage_key(tmp_path):
    base = Experiment(experiment_file(tmp_path, "http://127.0.0.1:9/v1"), tmp_path / "w", quiet=True)
    digest = {s.kind: s.digest for s in base.plan.stages}["rerank"]
    for extra in ["max_words = 5"]:
        other = Experiment(
            experiment_file(tmp_path, "http://127.0.0.1:9/v1", extra), tmp_path / "w", quiet=True
        )
        assert {s.kind: s.digest for s in other.plan.stages}["rerank"] != digest, extra
