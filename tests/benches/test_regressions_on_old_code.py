"""benches/integrity/regressions_on_old_code.py: a check for every finding of the issue-32 report, and the
checks that need no shared data see each finding fixed on this checkout (the script's "now" column)."""

from __future__ import annotations

import re
from pathlib import Path

import clirkit
import pytest
from conftest import REPO, bench_module


@pytest.fixture(scope="module")
def script():
    return bench_module("integrity/regressions_on_old_code")


def test_every_finding_of_the_report_has_a_check(script):
    numbered = {int(re.match(r"F(\d+)", name).group(1)) for name in script.CHECKS}
    assert numbered == set(range(1, 24))
    # F23's six cosmetic items, each its own check
    assert {name for name in script.CHECKS if name.startswith("F23")} == {f"F23{c}" for c in "abcdef"}


@pytest.mark.parametrize("name", ["F8", "F13", "F20b", "F23e", "F23f"])
def test_checks_see_the_finding_fixed_here(script, name, tmp_path):
    here = script.Tree(REPO)
    here.env["PYTHONPATH"] = str(Path(clirkit.__file__).resolve().parent.parent)  # the clirkit under test
    outcome = script.CHECKS[name][1](here, tmp_path, tmp_path / "no-mini")
    assert outcome.fixed, outcome.detail
