"""Shared fixtures: the embedded sample, and ../shared (tests that need it skip cleanly without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SAMPLE = REPO / "python" / "clirkit" / "data" / "sample"


def sample_experiment_head(name: str, languages) -> str:
    """The start of an experiment file over the embedded sample: each of ``languages``' questions
    against every document (the ``mlir`` setting), absolute paths."""
    quoted = ", ".join(f'"{lang}"' for lang in languages)
    return (
        f'[experiment]\nname = "{name}"\n\n[collections.sample]\npath = "{SAMPLE}"\nqrels = "qrels.tsv"\n'
        f'lang_field = "lang"\n\n[[tasks]]\ncollection = "sample"\nsetting = "mlir"\nlanguages = [{quoted}]\n'
    )


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    import clirkit

    return Path(clirkit.__file__).parent / "data" / "sample"


def shared_path(*parts: str) -> Path:
    """A path under ../shared, skipping the test when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


@pytest.fixture(scope="session")
def shared():
    return shared_path
