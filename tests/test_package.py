"""The package's shape: subpackages keep the names they were split from, no silent old import paths,
one exception story, one ``threads`` convention."""

from __future__ import annotations

import importlib
import os

import clirkit
import numpy as np
import pytest
from clirkit import cli
from clirkit._threads import checked_threads, worker_count
from clirkit.commands import fuse as fuse_command

# The top-level shims deleted before the first release (ARCHITECTURE.md states the policy after it).
REMOVED = [
    "clirkit.encode_corpus",
    "clirkit.passages",
    "clirkit.seen_ids",
    "clirkit.quantization",
    "clirkit.rerankers",
]
# Old module (now a package) -> the names it exported.
BECAME_PACKAGES = {
    "clirkit.encoders": ["OnnxEncoder", "MODEL_FILES", "POOLINGS", "DEVICES"],
    "clirkit.dense": ["DenseIndex", "DenseRetriever", "fastscan_kernels", "load_matrix", "read_ids"],
    "clirkit.rerank": ["rerank", "RerankCache", "RerankStats", "FailedWindow"],
}
ERRORS = [name for name in clirkit.__all__ if name.endswith("Error")]


@pytest.mark.parametrize("old", REMOVED)
def test_no_old_import_path_is_kept_silently(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


@pytest.mark.parametrize("old, names", sorted(BECAME_PACKAGES.items()))
def test_a_module_split_into_a_package_keeps_its_names(old, names):
    module = importlib.import_module(old)
    assert set(names) <= set(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_the_lazy_dense_names_of_the_top_level_package():
    from clirkit.dense.index import DenseIndex
    from clirkit.dense.retriever import DenseRetriever

    assert clirkit.DenseIndex is DenseIndex and clirkit.DenseRetriever is DenseRetriever


@pytest.mark.parametrize("name", ERRORS)
def test_every_clirkit_error_is_a_value_error(name):
    assert len(ERRORS) == 7
    error = getattr(clirkit, name)
    assert issubclass(error, clirkit.ClirkitError) and issubclass(error, ValueError)


def test_a_native_error_is_caught_as_a_value_error(tmp_path):
    bad = tmp_path / "run.trec"
    bad.write_text("q1 Q0 d1 1 not-a-score tag\n")
    with pytest.raises(ValueError, match="run.trec:1"):
        clirkit.read_run(bad)


def test_the_cli_reports_bad_input_and_shows_a_bug(tmp_path, monkeypatch, capsys):
    runs = ["a.trec", "b.trec"]
    argv = ["fuse", *runs, "--output", str(tmp_path / "out.trec")]

    def bad_input(*args, **kwargs):
        raise clirkit.InvalidInputError("the runs disagree")

    monkeypatch.setattr(fuse_command, "fuse", bad_input)
    assert cli.main(argv) == 2
    assert "clirkit: error: the runs disagree" in capsys.readouterr().err

    def bug(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(fuse_command, "fuse", bug)
    with pytest.raises(KeyError, match="a bug"):
        cli.main(argv)


def test_threads_zero_is_all_cores_and_negative_is_refused(tmp_path, capsys):
    assert checked_threads(0) == 0 and checked_threads(3) == 3
    assert worker_count(0) == (os.cpu_count() or 1) and worker_count(2) == 2
    with pytest.raises(clirkit.InvalidInputError, match="threads"):
        checked_threads(-1)
    run = {"q1": {"d1": 1.0, "d2": 0.5}}
    assert clirkit.fuse([run, run], threads=0) == clirkit.fuse([run, run], threads=1)
    with pytest.raises(clirkit.InvalidInputError, match="threads"):
        clirkit.fuse([run, run], threads=-2)
    with pytest.raises(clirkit.InvalidInputError, match="threads"):
        clirkit.DenseIndex.build(np.eye(4, dtype=np.float32), ["a", "b", "c", "d"], threads=-1)
    clirkit.write_run(tmp_path / "a.trec", run)
    argv = ["fuse", str(tmp_path / "a.trec"), str(tmp_path / "a.trec"), "--output", str(tmp_path / "o.trec")]
    for threads in ("-1", "100000"):
        with pytest.raises(SystemExit) as usage_error:
            cli.main([*argv, "--threads", threads])
        assert usage_error.value.code == 2
        assert f"{threads} is not 0 (all cores) or a number of threads up to 1024" in capsys.readouterr().err
    with pytest.raises(clirkit.InvalidInputError, match="threads must be at most 1024"):
        checked_threads(100000)
    assert cli.main([*argv, "--threads", "0"]) == 0


# Private names of other libraries that their documentation makes part of their interface (a
# namedtuple's `_asdict`/`_fields`, `os._exit`) or that have no public spelling
# (`argparse._SubParsersAction`, the type `add_subparsers` returns).
FOREIGN_PRIVATE = {"_asdict", "_fields", "_exit", "_SubParsersAction"}


def private_names_crossing(package):
    """Each `_private` name (not a dunder) a module of ``package`` uses but does not define:
    imported from another module (`from clirkit.x import _f`, unless `_f` is a module), reached as an
    attribute of another object (`obj._f`) that the module never defines, or reached on `self`/`cls`
    (`self._f`) in a class that defines it neither itself nor in a base class of the same module (so
    inherited from a class of another module)."""
    import ast
    from pathlib import Path

    root = Path(package)
    modules = set()
    for path in root.rglob("*.py*"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))

    def private(name):
        return name.startswith("_") and not name.startswith("__") and name not in FOREIGN_PRIVATE

    def defined_in(tree):
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
        return names

    def class_names(cls, classes, seen=()):
        """What `cls` defines, itself or through its base classes of the same module."""
        names = defined_in(cls)
        for base in cls.bases:
            base = base.value if isinstance(base, ast.Subscript) else base
            if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
                names |= class_names(classes[base.id], classes, (*seen, cls.name))
        return names

    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        name = path.relative_to(root.parent)
        classes = {c.name: c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}

        on_self = set()
        for cls in classes.values():
            names = class_names(cls, classes)
            for node in ast.walk(cls):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    if node.value.id in ("self", "cls"):
                        on_self.add(id(node))
                        if private(node.attr) and node.attr not in names:
                            found.append(f"{name}:{node.lineno}: uses {ast.unparse(node)} in {cls.name}")
        module_names = defined_in(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == root.name:
                for alias in node.names:
                    if private(alias.name) and f"{node.module}.{alias.name}" not in modules:
                        found.append(f"{name}:{node.lineno}: imports {node.module}.{alias.name}")
            elif isinstance(node, ast.Attribute) and id(node) not in on_self:
                if private(node.attr) and node.attr not in module_names:
                    found.append(f"{name}:{node.lineno}: uses {ast.unparse(node)}")
    return sorted(set(found))


def test_no_private_name_crosses_a_module_border():
    assert private_names_crossing(os.path.dirname(clirkit.__file__)) == []


def test_the_private_name_check_finds_imports_and_attributes(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_helpers.py").write_text(
        "def _f():\n    pass\n\nclass Base:\n    def _hook(self):\n        pass\n"
    )
    (package / "ok.py").write_text(
        "from pkg import _helpers\nfrom pkg._helpers import Base\n\nclass Own(Base):\n"
        "    def _own(self):\n        return self._own\n\nclass Child(Own):\n"
        "    def run(self):\n        return self._own()\n"
    )
    (package / "bad.py").write_text(
        "from pkg._helpers import _f, Base\n\nclass Sub(Base):\n    def run(self, other):\n"
        "        return self._hook(), other._hook()\n\n"
        "class Other:\n    def _hook(self):\n        pass\n"
    )
    assert private_names_crossing(package) == [
        "pkg/bad.py:1: imports pkg._helpers._f",
        # Inherited from _helpers.Base, though another class of bad.py defines a `_hook` of its own.
        "pkg/bad.py:5: uses self._hook in Sub",
    ]
