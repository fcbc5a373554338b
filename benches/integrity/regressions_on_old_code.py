"""Issue 32's findings F1-F23 (``../shared/reports/probe-experiments-and-new-kinds.md``) reproduced on the
code before the fixes and on this checkout: each reproduction must show the finding on the old code and
not on this one (fails before, passes now).

    python benches/integrity/regressions_on_old_code.py                      # old = fe85fe4, built here
    python benches/integrity/regressions_on_old_code.py --old-tree DIR       # a built checkout of it
    python benches/integrity/regressions_on_old_code.py --only F4 F23e       # some checks

The old code is ``fe85fe4``, the commit the report probed (its Python files are those of the installed
package the report ran) and the parent of the first issue-32 fix (``5c8a720``). Without ``--old-tree`` it
is checked out into a temporary git worktree and its extension built with cargo (``CARGO_TARGET_DIR``,
default ``target/``; minutes), which is removed at the end. Each check runs the report's reproduction (or
a smaller variant, said in its line) through ``clirkit``'s command line or Python API in a subprocess
whose ``PYTHONPATH`` is the tree's ``python/``, each tree in its own scratch directory; fake model servers
(HTTP 500, ``Infinity`` log-probabilities, fixed answers) run in this process. The data are the report's
``mini`` collection (SciFact's first 30 test queries, their judged documents and the first 400 documents)
from ``../shared`` (``--shared``); F14 also encodes with ``../shared/models/multilingual-e5-small-int8``.

Prints a markdown table (finding, what is checked, old, now) and exits 1 unless every finding shows on
the old code and none on this checkout.
"""

from __future__ import annotations

import argparse
import gzip
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple, Optional

REPO = Path(__file__).resolve().parents[2]
OLD_COMMIT = "fe85fe4"
CLI = "import sys; from clirkit.cli import main; sys.exit(main(sys.argv[1:]))"


class Tree:
    """A checkout whose ``python/`` holds a built ``clirkit``; runs its CLI and Python in subprocesses."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {**os.environ, "PYTHONPATH": str(root / "python")}
        self.env.pop("CLIRKIT_MAX_RECORD_BYTES", None)

    def cli(self, *args: object, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-c", CLI, *map(str, args)]
        return subprocess.run(argv, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout)

    def py(self, code: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-c", code]
        return subprocess.run(argv, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout)

    def start_cli(self, *args: object, cwd: Path) -> subprocess.Popen:
        argv = [sys.executable, "-c", CLI, *map(str, args)]
        return subprocess.Popen(
            argv, cwd=cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )


class Outcome(NamedTuple):
    fixed: bool  # True: the reproduction behaves as the issue asks; False: the finding shows
    detail: str


class Server:
    """An HTTP server on 127.0.0.1 answering every POST with ``answer(path, request) -> (status, body)``."""

    def __init__(self, answer: Callable[[str, dict], tuple[int, str]]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", 0))
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    request = {}
                status, body = answer(self.path, request)
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def fixed_body(body: str) -> Callable[[str, dict], tuple[int, str]]:
    return lambda path, request: (200, body)


def failing(path: str, request: dict) -> tuple[int, str]:
    return 500, '{"error": "down"}'


def likelihood_with_infinity(path: str, request: dict) -> tuple[int, str]:
    """Query likelihood's echo: -1 per prompt character, the last ``Infinity`` when the prompt has "cell"."""
    prompt = request.get("prompt", "")
    values = ["-1"] * len(prompt)
    if "cell" in prompt and values:
        values[-1] = "Infinity"
    offsets = ", ".join(str(i) for i in range(len(prompt)))
    return 200, (
        '{"choices": [{"logprobs": {"text_offset": ['
        + offsets
        + '], "token_logprobs": ['
        + ", ".join(values)
        + "]}}]}"
    )


# ---------------------------------------------------------------------------------------------- data


def make_mini(shared: Path, out: Path) -> None:
    """The report's ``mini/`` (mkmini.py): 30 SciFact test queries, their judged and the first 400 documents."""
    src = shared / "data" / "beir-scifact"
    (out / "qrels").mkdir(parents=True)
    rows = [line.rstrip("\n").split("\t") for line in open(src / "qrels" / "test.tsv", encoding="utf-8")][1:]
    qids = list(dict.fromkeys(r[0] for r in rows))[:30]
    judged = {r[1] for r in rows if r[0] in qids}
    with open(src / "corpus.jsonl", encoding="utf-8") as f:
        docs = [d for i, d in enumerate(map(json.loads, f)) if i < 400 or d["_id"] in judged]
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(d) + "\n" for d in docs)
    with open(out / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines("\t".join(r) + "\n" for r in rows if r[0] in qids)
    with (
        open(src / "queries.jsonl", encoding="utf-8") as f,
        open(out / "queries.jsonl", "w", encoding="utf-8") as o,
    ):
        o.writelines(line for line in f if json.loads(line)["_id"] in qids)


BASE = '[experiment]\nthreads = 1\nhits = 100\n{extra}\n[collections.mini]\npath = "{mini}"\n\n[systems.bm25]\nkind = "bm25"\n'


def base_toml(mini: Path, extra: str = "") -> str:
    return BASE.format(mini=mini, extra=extra)


def rerank_toml(mini: Path, url: str, extra: str = "") -> str:
    return (
        f'[experiment]\nthreads = 1\nhits = 20\n[collections.mini]\npath = "{mini}"\n[systems.bm25]\nkind = "bm25"\n'
        f'[rerank.llm]\ninput = "bm25"\nbackend = "openai"\nmodel = "m"\nbase_url = "{url}"\ndepth = 20\n'
        f"{extra}"
    )


def traceback_free(p: subprocess.CompletedProcess) -> bool:
    return "Traceback (most recent call last)" not in p.stderr


def last_line(p: subprocess.CompletedProcess) -> str:
    lines = [line for line in (p.stderr or p.stdout).strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


def plan_to_run(tree: Tree, toml: Path, cwd: Path, workdir: Optional[Path] = None) -> str:
    args = ["experiment", "plan", toml] + (["--workdir", workdir] if workdir else [])
    p = tree.cli(*args, cwd=cwd)
    summary = [line for line in p.stdout.splitlines() if "to run" in line]
    return summary[-1].strip() if summary else last_line(p)


def bm25_index(tree: Tree, cwd: Path, mini: Path) -> Path:
    index = cwd / "bm25-idx"
    if not index.exists():
        tree.cli("index", "bm25", "--corpus", mini / "corpus.jsonl", "--index", index, "--quiet", cwd=cwd)
    return index


def bm25_run(tree: Tree, cwd: Path, mini: Path, k: int = 20) -> Path:
    run = cwd / f"bm25-{k}.trec"
    if not run.exists():
        index = bm25_index(tree, cwd, mini)
        tree.cli("search", "bm25", "--index", index, "--queries", mini / "queries.jsonl", "--output", run,
                 "--k", k, "--quiet", cwd=cwd)  # fmt: skip
    return run


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -------------------------------------------------------------------------------------------- checks


def f1(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    photo = cwd / "victim" / "tmp" / "photos" / "cat.jpg"
    photo.parent.mkdir(parents=True)
    photo.write_bytes(b"cat")
    toml = write(cwd / "store.toml", base_toml(mini, 'store = "victim"'))
    p = tree.cli("experiment", "run", toml, "--quiet", cwd=cwd)
    kept = photo.is_file() and photo.read_bytes() == b"cat"
    return Outcome(kept and p.returncode != 0, f"rc {p.returncode}, photos/ {'kept' if kept else 'deleted'}")


def f2(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    keep = cwd / "keep" / "mini.trec"
    keep.parent.mkdir()
    keep.write_text("my run\n")
    text = f'[experiment]\nthreads = 1\n[collections.mini]\npath = "{mini}"\n[systems."../../keep"]\nkind = "bm25"\n'
    p = tree.cli("experiment", "run", write(cwd / "trav.toml", text), "--quiet", cwd=cwd)
    intact = not keep.is_symlink() and keep.read_text() == "my run\n"
    return Outcome(
        intact and p.returncode != 0, f"rc {p.returncode}, keep/mini.trec {'kept' if intact else 'replaced'}"
    )


def f3(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    (cwd / "proj").mkdir()
    notes = write(cwd / "proj" / "table.md", "my notes\n")
    p = tree.cli("experiment", "run", write(cwd / "base.toml", base_toml(mini)), "--workdir", cwd / "proj", "--quiet",
                 cwd=cwd)  # fmt: skip
    intact = notes.read_text() == "my notes\n"
    return Outcome(
        intact and p.returncode != 0, f"rc {p.returncode}, table.md {'kept' if intact else 'overwritten'}"
    )


def f4(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    server = Server(failing)
    try:
        toml = write(cwd / "rr.toml", rerank_toml(mini, server.url))
        p = tree.cli("experiment", "run", toml, "--quiet", cwd=cwd)
    finally:
        server.close()
    plan = plan_to_run(tree, toml, cwd)
    fixed = p.returncode != 0 and " 0 to run" not in plan
    return Outcome(fixed, f"HTTP 500: rc {p.returncode}; then plan: {plan}")


def f5(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    fld = cwd / "fld"
    (fld / "qrels").mkdir(parents=True)
    shutil.copy(mini / "qrels" / "test.tsv", fld / "qrels")
    with (
        open(mini / "corpus.jsonl", encoding="utf-8") as f,
        open(fld / "corpus.jsonl", "w", encoding="utf-8") as o,
    ):
        for d in map(json.loads, f):
            o.write(
                json.dumps({"_id": d["_id"], "headline": d["title"], "body": d["text"], "lang": "en"}) + "\n"
            )
    with (
        open(mini / "queries.jsonl", encoding="utf-8") as f,
        open(fld / "queries.jsonl", "w", encoding="utf-8") as o,
    ):
        o.writelines(json.dumps(dict(json.loads(line), lang="en")) + "\n" for line in f)
    text = (
        f'[experiment]\nthreads = 1\n[collections.c]\npath = "{fld}"\nlang_field = "lang"\n[[tasks]]\ncollection = "c"\n'
        'setting = "mlir"\n[[tasks]]\ncollection = "c"\nsetting = "mono"\nlanguages = ["en"]\n[systems.bm25]\n'
        'kind = "bm25"\nfields = ["headline", "body"]\n'
    )
    p = tree.cli("experiment", "run", write(cwd / "fields.toml", text), "--workdir", cwd / "fields.work", "--quiet",
                 cwd=cwd)  # fmt: skip
    table = (
        (cwd / "fields.work" / "table.md").read_text() if (cwd / "fields.work" / "table.md").is_file() else ""
    )
    values = [
        cell.strip()
        for line in table.splitlines()
        if line.startswith("| bm25")
        for cell in line.split("|")[2:-1]
    ]
    fixed = p.returncode == 0 and len(values) >= 2 and len(set(values)) == 1 and values[0] != "0.0000"
    return Outcome(fixed, f"rc {p.returncode}, nDCG@10 per task (mlir, mono/en): {', '.join(values) or '-'}")


def f6(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    server = Server(fixed_body('{"choices": [{"message": {"content": "[2] > [1]"}}]}'))
    try:
        toml = write(cwd / "rr.toml", rerank_toml(mini, server.url))
        p = tree.cli("experiment", "run", toml, "--quiet", cwd=cwd)
    finally:
        server.close()
    write(toml, rerank_toml(mini, server.url, "max_words = 5\n"))
    plan = plan_to_run(tree, toml, cwd)
    return Outcome(
        p.returncode == 0 and " 0 to run" not in plan, f"run rc {p.returncode}; max_words = 5 added: {plan}"
    )


def f7(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    own = cwd / "mini"
    shutil.copytree(mini, own)
    toml = write(cwd / "base.toml", base_toml(own))
    p = tree.cli("experiment", "run", toml, "--quiet", cwd=cwd)
    corpus = own / "corpus.jsonl"
    before = os.stat(corpus)
    docs = [json.loads(line) for line in open(corpus, encoding="utf-8")]
    with open(corpus, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(dict(d, text=d["text"].replace("a", "q"))) + "\n" for d in docs)
    os.utime(corpus, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(corpus).st_size == before.st_size
    plan = plan_to_run(tree, toml, cwd)
    return Outcome(p.returncode == 0 and " 0 to run" not in plan, f"same size, mtime restored: {plan}")


def impact_search(
    tree: Tree, cwd: Path, vectors: str, queries: str, name: str
) -> tuple[subprocess.CompletedProcess, str]:
    write(cwd / f"{name}.jsonl", vectors)
    write(cwd / f"{name}.tsv", queries)
    p = tree.cli(
        "index", "impact", "--vectors", f"{name}.jsonl", "--index", f"{name}-idx", "--quiet", cwd=cwd
    )
    if p.returncode != 0:
        return p, ""
    s = tree.cli("search", "impact", "--index", f"{name}-idx", "--queries", f"{name}.tsv", "--output", f"{name}.trec",
                 "--quiet", cwd=cwd)  # fmt: skip
    run = (cwd / f"{name}.trec").read_text() if (cwd / f"{name}.trec").is_file() else ""
    return s, run


def f8(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    p, run = impact_search(
        tree, cwd, '{"id": 123456789012345678901234567890, "vector": {"apple": 1}}\n', "q1\tapple\n", "v"
    )
    docid = run.split()[2] if run.split() else last_line(p)
    return Outcome(docid == "123456789012345678901234567890", f"docid {docid}")


def rerank_cli(
    tree: Tree, cwd: Path, mini: Path, backend: str, url: str, *extra: object
) -> subprocess.CompletedProcess:
    run = bm25_run(tree, cwd, mini, 5)
    return tree.cli("rerank", "--backend", backend, "--run", run, "--queries", mini / "queries.jsonl", "--corpus",
                    mini / "corpus.jsonl", "--output", cwd / f"{backend}.trec", "--base-url", url, "--model", "m",
                    "--depth", 5, "--retries", 0, *extra, cwd=cwd)  # fmt: skip


def f9(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    server = Server(likelihood_with_infinity)
    try:
        p = rerank_cli(tree, cwd, mini, "query-likelihood", server.url, "--cache", cwd / "ql.sqlite")
    finally:
        server.close()
    infinite = cached_infinities(cwd / "ql.sqlite")
    return Outcome(p.returncode == 3 and infinite == 0, f"rc {p.returncode}, {infinite} +inf scores cached")


def cached_infinities(cache: Path) -> int:
    """How many scores of an answer cache are +inf (0 when it has no ``scores`` table)."""
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
        (count,) = db.execute("SELECT count(*) FROM scores WHERE score > 1e308").fetchone()
        db.close()
    except sqlite3.Error:
        count = 0
    return count


def f10(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    # The report's bomb is a 128 KiB zstd of one 4 GiB line; here a gzip of one 80 MiB line, past the
    # default 64 MiB cap (the old code reads it whole, so 4 GiB would exhaust this shared machine).
    with gzip.open(cwd / "bomb.jsonl.gz", "wb", compresslevel=9) as f:
        f.write(b'{"_id": "x", "text": "hello", "pad": "')
        block = b"a" * (1 << 20)
        for _ in range(80):
            f.write(block)
        f.write(b'"}\n')
    p = tree.cli("index", "bm25", "--corpus", "bomb.jsonl.gz", "--index", "bomb-idx", "--quiet", cwd=cwd)
    fixed = p.returncode == 2 and "longer than" in p.stderr
    return Outcome(fixed, f"one 80 MiB line: rc {p.returncode}: {last_line(p)}")


def f11(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    server = Server(fixed_body('{"choices":[{"logprobs":{"top_logprobs":[{"yes":Infinity,"no":-1}]}}]}'))
    try:
        p = rerank_cli(tree, cwd, mini, "yes-no", server.url)
    finally:
        server.close()
    written = (cwd / "yes-no.trec").is_file()
    fixed = p.returncode == 3 and written and traceback_free(p)
    return Outcome(
        fixed,
        f"yes = Infinity: rc {p.returncode}, output {'written' if written else 'missing'}: {last_line(p)}",
    )


def f12(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    cache = write(cwd / "c.sqlite", "not a database " * 100)
    server = Server(fixed_body('{"choices":[{"logprobs":{"top_logprobs":[{"yes":-0.1,"no":-3}]}}]}'))
    try:
        p = rerank_cli(tree, cwd, mini, "yes-no", server.url, "--cache", cache)
    finally:
        server.close()
    fixed = traceback_free(p) and p.returncode == 2 and "c.sqlite" in p.stderr
    return Outcome(fixed, f"cache of random bytes: rc {p.returncode}: {last_line(p)}")


def f13(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    impact_search(tree, cwd, '{"id": "d1", "vector": {"apple": 1}}\n', "q1\tapple\n", "v")
    postings = cwd / "v-idx" / "postings.bin"
    data = bytearray(postings.read_bytes())
    data[16] = 9
    postings.write_bytes(bytes(data))
    p = tree.cli("verify", "v-idx", cwd=cwd)
    return Outcome(p.returncode != 0, f"version byte 16 set to 9: verify rc {p.returncode}: {last_line(p)}")


def f14(tree: Tree, cwd: Path, mini: Path, shared: Path) -> Outcome:
    model = shared / "models" / "multilingual-e5-small-int8"
    text = base_toml(mini) + (
        f'\n[systems.e5]\nkind = "dense"\nmodel = "{model}"\nmax_length = 128\n\n[fusion.rrf]\ninputs = ["bm25", "e5"]\n'
    )
    toml = write(cwd / "k.toml", text)
    first = tree.start_cli("experiment", "run", toml, "--quiet", cwd=cwd)
    time.sleep(2)
    second = tree.start_cli("experiment", "run", toml, "--quiet", cwd=cwd)
    errors = [p.communicate(timeout=1800)[1] for p in (first, second)]
    codes = [first.returncode, second.returncode]
    shown = next((e.strip().splitlines()[-1][:160] for e in errors if e.strip() and "error" in e), "")
    return Outcome(codes == [0, 0], f"two runs 2 s apart: rc {codes[0]} and {codes[1]} {shown}".strip())


def f15(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    write(cwd / "sp.jsonl", '{"id": "a b", "vector": {"apple": 1}}\n')
    p = tree.cli("index", "impact", "--vectors", "sp.jsonl", "--index", "sp-idx", "--quiet", cwd=cwd)
    return Outcome(
        p.returncode == 2 and "sp.jsonl:1" in p.stderr, f'impact id "a b": rc {p.returncode}: {last_line(p)}'
    )


def f16(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    gz = cwd / "queries.jsonl.gz"
    gz.write_bytes(gzip.compress((mini / "queries.jsonl").read_bytes()))
    text = base_toml(mini).replace(f'path = "{mini}"', f'path = "{mini}"\nqueries = "{gz}"')
    p = tree.cli("experiment", "run", write(cwd / "gz.toml", text), "--quiet", cwd=cwd)
    return Outcome(
        p.returncode == 0, f"queries.jsonl.gz: rc {p.returncode} {'' if p.returncode == 0 else last_line(p)}"
    )


def f17(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    write(cwd / "v.jsonl", '{"id": "d1", "vector": {"apple": 1}}\n')
    p = tree.cli("index", "impact", "--vectors", "v.jsonl", "--index", "q-idx", "--quantize", "-1", cwd=cwd)
    fixed = p.returncode == 2 and traceback_free(p) and "--quantize" in p.stderr
    return Outcome(fixed, f"--quantize -1: rc {p.returncode}: {last_line(p)}")


def f18(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    text = (
        base_toml(mini)
        + '\n[systems.b2]\nkind = "bm25"\nk1 = 1.2\n\n[fusion.f]\ninputs = ["bm25", "b2"]\nmethod = "interpolate"\n'
    )
    toml = write(cwd / "interp.toml", text)
    p = tree.cli("experiment", "plan", toml, cwd=cwd)
    fixed = p.returncode != 0 and "alpha" in p.stderr and "interp.toml:" in p.stderr
    return Outcome(fixed, f"interpolate without alpha: plan rc {p.returncode}: {last_line(p)}")


def f19(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    extra = '\n[systems.b2]\nkind = "bm25"\nk1 = 1.2\n\n[fusion.rrf]\ninputs = ["bm25", "b2"]\n\n[evaluation]\nbaseline = "bm25"\n'
    toml = write(cwd / "sig.toml", base_toml(mini) + extra)
    tree.cli("experiment", "run", toml, "--workdir", "w", "--quiet", cwd=cwd)
    had = (cwd / "w" / "significance.json").is_file()
    write(toml, base_toml(mini))
    p = tree.cli("experiment", "run", toml, "--workdir", "w", "--quiet", cwd=cwd)
    stale = [name for name in ("significance.json", "runs/rrf") if (cwd / "w" / name).exists()]
    fixed = had and p.returncode == 0 and not stale
    return Outcome(fixed, f"baseline and rrf removed: {', '.join(stale) + ' left' if stale else 'none left'}")


TOKENS = """
import numpy as np, sys
from clirkit.multivector import MultiVectorIndex
rng = np.random.default_rng(0)
t = rng.standard_normal((60, 8)).astype(np.float32)
t /= np.linalg.norm(t, axis=1, keepdims=True)
offsets = np.arange(0, 61, 5).astype(np.uint64)
ids = [f"d{{i}}" for i in range(12)]
q = rng.standard_normal((8, 8)).astype(np.float32)
q /= np.linalg.norm(q, axis=1, keepdims=True)
try:
    index = MultiVectorIndex.build(t * {scale}, offsets, ids, "mv", seed=0)
    scores, found = index.search(q * {qscale}, np.array([0, 4, 8], dtype=np.uint64), k=5)
except Exception as e:
    print("refused:", type(e).__name__, str(e)[:120]); sys.exit(0)
print("finite hits per query (k = 5 of 12 documents):", [int((np.isfinite(s) & (f >= 0)).sum()) for s, f in zip(scores, found)])
"""


def f20(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    p = tree.py(TOKENS.format(scale="1e20", qscale="1"), cwd=cwd)
    out = p.stdout.strip() or last_line(p)
    return Outcome(out.startswith("refused:") and "norm" in out, f"document tokens of norm 1e20: {out}")


def f20b(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    p = tree.py(TOKENS.format(scale="1.5e19", qscale="1.5e19"), cwd=cwd)
    out = p.stdout.strip() or last_line(p)
    return Outcome(
        out.startswith("refused:") and "overflows" in out, f"documents and queries of norm 1.5e19: {out}"
    )


def f21(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    p, run = impact_search(
        tree,
        cwd,
        '{"id": "d1", "vector": {"apple": 1, "apple": 2}}\n{"id": "d2", "vector": {"apple": 2}}\n',
        "q1\tapple\n",
        "dup",
    )
    scores = {line.split()[2]: line.split()[4] for line in run.splitlines()}
    return Outcome(len(scores) == 2 and scores["d1"] == scores["d2"], f"scores {scores or last_line(p)}")


def f22(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    code = (
        "from clirkit.impact import ImpactIndex\n"
        'open(\'v.jsonl\', \'w\').write(\'{"id": "d1", "vector": {"apple": 1}}\\n\')\n'
        "index = ImpactIndex.build('v.jsonl', 'i22')\n"
        "try:\n    index.search({'apple': '1'}); print('accepted')\n"
        "except Exception as e:\n    print('refused:', str(e)[:100])\n"
    )
    p = tree.py(code, cwd=cwd)
    s, _ = impact_search(
        tree, cwd, '{"id": "d1", "vector": {"apple": 1}}\n', "q1\tapple\nq1\tbanana\t5\n", "w22"
    )
    api = p.stdout.strip() or last_line(p)
    fixed = api.startswith("refused") and s.returncode == 2
    return Outcome(
        fixed, f"search({{'apple': '1'}}) {api.split(':')[0]}; q1 plain then weighted rows: rc {s.returncode}"
    )


def f23a(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    (cwd / "trunc.jsonl.gz").write_bytes(gzip.compress(b'{"_id": "a", "text": "x"}\n' * 100)[:-20])
    p = tree.cli("index", "bm25", "--corpus", "trunc.jsonl.gz", "--index", "t-idx", "--quiet", cwd=cwd)
    return Outcome(p.returncode != 0 and "[Errno 0]" not in p.stderr, f"truncated gzip: {last_line(p)}")


def f23b(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    write(cwd / "a.jsonl", '{"_id": "a", "text": "apple pie"}\n')
    write(cwd / "b.jsonl", '{"_id": "b", "text": "banana pie"}\n')
    for name in ("a", "b"):
        tree.cli("index", "bm25", "--corpus", f"{name}.jsonl", "--index", f"{name}-idx", "--store-docvectors", "--quiet",
                 cwd=cwd)  # fmt: skip
    p = tree.cli("index", "merge", "a-idx", "b-idx", "--index", "m-idx", cwd=cwd)
    flag_ok = "--store-docvectors" in p.stderr and "--docvectors " not in p.stderr.replace(
        "--store-docvectors", ""
    )
    return Outcome(p.returncode != 0 and flag_ok, f"merge of docvector indexes: {last_line(p)}")


def f23c(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    index = bm25_index(tree, cwd, mini)
    p = tree.cli("search", "bm25", "--index", index, "--queries", mini / "queries.jsonl", "--output", "x.trec",
                 "--fb-docs", 5, cwd=cwd)  # fmt: skip
    return Outcome(p.returncode == 2, f"--fb-docs without --rm3: rc {p.returncode}: {last_line(p)}")


def f23d(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    write(cwd / "dup.jsonl", "".join(f'{{"_id": "d{i % 3}", "text": "word {i}"}}\n' for i in range(6)))
    p = tree.cli("index", "bm25", "--corpus", "dup.jsonl", "--index", "sh-idx", "--shards", 2, "--keep-first-duplicate",
                 "--quiet", cwd=cwd)  # fmt: skip
    return Outcome(
        p.returncode == 2 and ".building" not in p.stderr,
        f"--shards 2 --keep-first-duplicate: {last_line(p)}",
    )


SHARDED_DENSE = """
import numpy as np, shutil, sys
from clirkit.distributed.dense import build_sharded_dense, split_rows, ShardedDenseIndex
rng = np.random.default_rng(0)
x = rng.standard_normal((300, 8)).astype(np.float32)
np.save("e.npy", x)
ids = [f"d{i}" for i in range(300)]
for name, seed in (("a", 0), ("b", 5)):
    build_sharded_dense(split_rows("e.npy", ids, 2), name, pq=4, seed=seed, ray=None)
shutil.rmtree("a/codebook")
shutil.move("b/codebook", "a/codebook")
try:
    ShardedDenseIndex.open("a"); print("opened")
except Exception as e:
    print(str(e)[:300])
"""


def f23e(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    p = tree.py(SHARDED_DENSE, cwd=cwd)
    v = tree.cli("verify", "a", cwd=cwd)
    opened = p.stdout.strip() or last_line(p)
    said = opened + " " + v.stdout + v.stderr
    fixed = "codebook" in opened and "shard 0" not in said and v.returncode != 0
    return Outcome(fixed, f"open: {opened[:150]}; verify: {last_line(v)[:150]}")


def f23f(tree: Tree, cwd: Path, mini: Path) -> Outcome:
    write(cwd / "big.jsonl", '{"id": "d", "vector": {"a": 1e300}}\n')
    p = tree.cli("index", "impact", "--vectors", "big.jsonl", "--index", "big-idx", "--quiet", cwd=cwd)
    digits = max((len(w) for w in p.stderr.replace(".", " ").split() if w.isdigit()), default=0)
    return Outcome(p.returncode == 2 and digits < 30, f"weight 1e300: longest number printed {digits} digits")


CHECKS: dict[str, tuple[str, Callable[..., Outcome]]] = {
    "F1": ("store = DIR deletes DIR/tmp/* (data loss)", f1),
    "F2": ('system "../../keep" replaces keep/mini.trec', f2),
    "F3": ("--workdir of a user's directory overwritten", f3),
    "F4": ("a failed rerank stage is committed (rc 0, cached)", f4),
    "F5": ("mono task drops the fields a system names", f5),
    "F6": ("rerank max_words not in the stage key", f6),
    "F7": ("same-size edit with restored mtime reuses stages", f7),
    "F8": ("impact ids rewritten through f64", f8),
    "F9": ("query likelihood caches +Infinity", f9),
    "F10": ("a record-length cap on the line reader", f10),
    "F11": ("yes-no Infinity: traceback, no output", f11),
    "F12": ("answer-cache errors are tracebacks", f12),
    "F13": ("verify passes a corrupt header version", f13),
    "F14": ("two concurrent runs over an encoding stage", f14),
    "F15": ("impact ids no run can hold are accepted", f15),
    "F16": ("gzip queries crash the experiment's reader", f16),
    "F17": ("bad numbers are tracebacks", f17),
    "F18": ("configuration errors only mid-run", f18),
    "F19": ("stale significance.json and runs/ kept", f19),
    "F20": ("multi-vector token norm >= 1e20: empty run", f20),
    "F20b": ("a MaxSim past f32 (variant): infinite scores", f20b),
    "F21": ("duplicate JSON key sums the weights", f21),
    "F22": ("string weights and merged TSV rows accepted", f22),
    "F23a": ("decompression errors read [Errno 0]", f23a),
    "F23b": ("merge names --docvectors, not --store-docvectors", f23b),
    "F23c": ("--fb-docs without --rm3 exits 1, not 2", f23c),
    "F23d": ("--shards --keep-first-duplicate names .building", f23d),
    "F23e": ("a swapped dense codebook reads 'shard 0'", f23e),
    "F23f": ("huge weights print a 300-digit number", f23f),
}


def build_old(root: Path, commit: str, target: Path) -> Path:
    """Check ``commit`` out into a worktree under ``root`` and build its extension there."""
    tree = root / "old"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit], check=True,
                   capture_output=True)  # fmt: skip
    env = {**os.environ, "CARGO_TARGET_DIR": str(target), "CARGO_PROFILE_RELEASE_LTO": "false",
           "CARGO_PROFILE_RELEASE_CODEGEN_UNITS": "16", "CARGO_PROFILE_RELEASE_INCREMENTAL": "true"}  # fmt: skip
    subprocess.run(["cargo", "build", "--release", "-p", "clirkit-py", "--features", "pyo3/extension-module", "--quiet"],
                   cwd=tree, env=env, check=True)  # fmt: skip
    shutil.copy(target / "release" / "lib_native.so", tree / "python" / "clirkit" / "_native.abi3.so")
    return tree


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old-tree", type=Path, help="a checkout of the old commit with its extension built")
    ap.add_argument("--old-commit", default=OLD_COMMIT)
    ap.add_argument(
        "--shared", type=Path, default=Path(os.environ.get("CLIRKIT_SHARED", REPO.parent / "shared"))
    )
    ap.add_argument("--only", nargs="+", help="checks to run (F1 ... F23f)")
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = ap.parse_args()
    if not (args.shared / "data" / "beir-scifact").is_dir():
        sys.exit(f"{args.shared}/data/beir-scifact not found: give --shared DIR (the shared data)")
    names = args.only or list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        sys.exit(f"unknown checks {unknown}; known: {', '.join(CHECKS)}")
    scratch = Path(tempfile.mkdtemp(prefix="clirkit-regressions-"))
    try:
        old_root = args.old_tree
        if old_root is None:
            target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
            old_root = build_old(scratch, args.old_commit, target)
        trees = {"old": Tree(old_root.resolve()), "now": Tree(REPO)}
        mini = scratch / "mini"
        make_mini(args.shared, mini)
        rows, good = [], True
        for name in names:
            what, check = CHECKS[name]
            cells = []
            for label, tree in trees.items():
                cwd = scratch / label / name
                cwd.mkdir(parents=True)
                started = time.time()
                try:
                    extra = (args.shared,) if check is f14 else ()
                    outcome = check(tree, cwd, mini, *extra)
                except Exception as err:  # a check that cannot run is a failure of this script
                    outcome = Outcome(label == "old", f"check failed: {type(err).__name__}: {err}")
                    good = False
                outcome = outcome._replace(detail=outcome.detail.replace(f"{cwd}/", ""))
                wanted = outcome.fixed == (label == "now")
                good &= wanted
                verdict = ("passes" if outcome.fixed else "fails") + ("" if wanted else " (UNEXPECTED)")
                cells.append(f"{verdict}: {outcome.detail}")
                print(
                    f"{name} {label} {verdict} ({time.time() - started:.0f} s): {outcome.detail}",
                    file=sys.stderr,
                )
            rows.append(f"| {name} | {what} | {cells[0]} | {cells[1]} |")
        head = [
            f"| finding | reproduction | {args.old_commit} (before the fixes) | this checkout |",
            "|---|---|---|---|",
        ]
        table = "\n".join(head + rows) + "\n"
        print(table)
        if args.markdown:
            args.markdown.write_text(table, encoding="utf-8")
        return 0 if good else 1
    finally:
        if args.old_tree is None and (scratch / "old").exists():
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(scratch / "old")],
                           capture_output=True)  # fmt: skip
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
