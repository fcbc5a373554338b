"""Shared fixtures: the embedded sample, and ../shared (tests that need it skip cleanly without it)."""

from __future__ import annotations

import inspect
import io
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SAMPLE = REPO / "python" / "clirkit" / "data" / "sample"
BENCHES = REPO / "benches"


def sample_experiment_head(name: str, languages, hits: int | None = None) -> str:
    """The start of an experiment file over the embedded sample: each of ``languages``' questions
    against every document (the ``mlir`` setting), absolute paths; ``hits`` per query when given."""
    quoted = ", ".join(f'"{lang}"' for lang in languages)
    depth = f"hits = {hits}\n" if hits is not None else ""
    return (
        f'[experiment]\nname = "{name}"\n{depth}\n[collections.sample]\npath = "{SAMPLE}"\nqrels = "qrels.tsv"\n'
        f'lang_field = "lang"\n\n[[tasks]]\ncollection = "sample"\nsetting = "mlir"\nlanguages = [{quoted}]\n'
    )


def zstd_frame(data: bytes) -> bytes:
    """``data`` as a zstd frame of raw (stored) blocks: what any zstd reader decodes, made without a
    zstd library."""
    out = bytearray(b"\x28\xb5\x2f\xfd\x00\x58")  # magic; no checksum or size; a 2 MiB window
    chunks = [data[i : i + (1 << 17)] for i in range(0, len(data), 1 << 17)] or [b""]
    for i, chunk in enumerate(chunks):
        out += ((len(chunk) << 3) | (i == len(chunks) - 1)).to_bytes(3, "little") + chunk
    return bytes(out)


def bm25_system(name: str, **params: float) -> str:
    """A ``[systems.NAME]`` table of an experiment file: BM25 over the ``text`` field, with PARAMS (k1, b)."""
    settings = [f"{key} = {value}" for key, value in params.items()]
    return "\n".join([f"[systems.{name}]", 'kind = "bm25"', *settings, 'fields = ["text"]']) + "\n"


class Terminal(io.StringIO):
    """A stream that says it is a terminal, so progress bars draw on it (``clirkit._progress``)."""

    def isatty(self) -> bool:
        return True


#: The streams a progress bar is checked on: a terminal, a pipe, and a terminal with quiet asked for.
BAR_CASES = ("terminal", "piped", "quiet")


def bar_stream(case: str, monkeypatch) -> io.StringIO:
    """stderr for one of :data:`BAR_CASES`, set for the test."""
    import sys

    stream = io.StringIO() if case == "piped" else Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


def check_drawn(case: str, stream: io.StringIO, *texts: str) -> None:
    """On the terminal, every one of ``texts`` was drawn; in a pipe or when quiet, nothing at all."""
    drawn = stream.getvalue()
    if case == "terminal":
        missing = [text for text in texts if text not in drawn]
        assert not missing, (missing, drawn)
    else:
        assert drawn == "", (case, drawn)


def run_experiment(tmp_path: Path, head: str, systems: str, name: str = "exp"):
    """Runs the experiment file ``tmp_path/NAME.toml`` (``head``, ``systems``, nDCG@10; paths relative to
    ``tmp_path``) with its store in ``tmp_path/work``, quietly; returns the :class:`Experiment`."""
    from clirkit.experiment import Experiment

    path = tmp_path / f"{name}.toml"
    path.write_text(head + systems + '\n[evaluation]\nmeasures = ["nDCG@10"]\n', encoding="utf-8")
    exp = Experiment(path, tmp_path / "work", quiet=True)
    exp.run(log=io.StringIO())
    return exp


def search_command(kind: str, index: Path, queries: Path, output: Path) -> list[str]:
    """The ``cli`` arguments of ``clirkit search KIND``: INDEX searched for QUERIES into the run OUTPUT."""
    return ["search", kind, "--index", str(index), "--queries", str(queries), "--output", str(output)]


def check_search_bar_unless_quiet(command: list[str], output: Path, monkeypatch, drawn: str) -> None:
    """Runs the ``cli`` search ``command`` (writing ``output``) on a terminal, then again with
    ``--quiet``: the bar's text ``drawn`` shows only the first time, and both runs are the same."""
    import sys

    from clirkit.cli import main as cli

    runs = []
    for quiet in (False, True):
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        assert cli([*command, *(["--quiet"] if quiet else [])]) == 0
        assert (drawn in terminal.getvalue()) is not quiet
        runs.append(output.read_bytes())
    assert runs[0] == runs[1]


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    import clirkit

    return Path(clirkit.__file__).parent / "data" / "sample"


def bench_module(relative: str):
    """Loads a bench script (``"bm25/bm25_peers"``: ``benches/bm25/bm25_peers.py``) as a module, with
    ``benches/`` on the path as the scripts themselves put it (for ``bench_common`` and ``golden_outputs``)."""
    import importlib.util
    import sys

    path = BENCHES / f"{relative}.py"
    # The script's own folder too: worker processes it spawns import it again by name.
    for folder in (BENCHES, path.parent):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def shared_path(*parts: str) -> Path:
    """A path under ../shared, skipping the test when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


@pytest.fixture(scope="session")
def shared():
    return shared_path


def _reaches_shared(func, depth: int = 3) -> bool:
    """Whether ``func`` calls ``shared_path``/``shared``, itself or through module-level helpers."""
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    names = set(code.co_names) | {n for c in code.co_consts if inspect.iscode(c) for n in c.co_names}
    if names & {"shared_path", "shared"}:
        return True
    if depth == 0:
        return False
    module_globals = getattr(func, "__globals__", {})
    return any(
        inspect.isfunction(module_globals.get(name)) and _reaches_shared(module_globals[name], depth - 1)
        for name in names
    )


def pytest_collection_modifyitems(config, items):
    """Marks ``shared`` every test that reaches ../shared (itself, through a fixture or a module helper),
    so ``-m shared`` / ``-m 'not shared'`` select them without a hand-kept list."""
    for item in items:
        if item.get_closest_marker("shared"):
            continue
        fixturenames = getattr(item, "fixturenames", ())
        funcs = [getattr(item, "function", None)]
        for name in fixturenames:
            funcs.extend(fixturedef.func for fixturedef in item._fixtureinfo.name2fixturedefs.get(name, ()))
        if "shared" in fixturenames or any(_reaches_shared(f) for f in funcs if f is not shared):
            item.add_marker(pytest.mark.shared)
