"""Shared fixtures: the embedded sample, and ../shared (tests that need it skip cleanly without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


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
