"""``docs/experiment-keys.md`` lists every key the experiment reader accepts: it is generated from the
reader's own key lists, and this test fails when the file is out of date (regenerate it with
``python -m clirkit.experiment.config.keys > docs/experiment-keys.md``). The README points to it."""

from __future__ import annotations

import pytest
from clirkit.experiment import ExperimentError
from clirkit.experiment.config import load_config
from clirkit.experiment.config.keys import reference_markdown, tables
from conftest import REPO, sample_experiment_head


def test_the_reference_equals_the_readers_key_lists():
    assert (REPO / "docs" / "experiment-keys.md").read_text(encoding="utf-8") == reference_markdown(), (
        "docs/experiment-keys.md is out of date: python -m clirkit.experiment.config.keys > docs/experiment-keys.md"
    )
    assert "docs/experiment-keys.md" in (REPO / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("table, keys", [t for t in tables() if t[0].startswith("[systems.NAME]")])
def test_a_system_kind_refuses_a_key_the_reference_does_not_list(tmp_path, table, keys):
    kind = table.split('"')[1]
    path = tmp_path / "e.toml"
    path.write_text(
        sample_experiment_head("k", ["en"]) + f'\n[systems.s]\nkind = "{kind}"\nnot_a_key = 1\n',
        encoding="utf-8",
    )
    with pytest.raises(
        ExperimentError, match=r"systems\.s\.not_a_key: unknown key; expected one of (.*)"
    ) as err:
        load_config(path)
    assert err.value.args[0].split("expected one of ")[1].split(", ") == list(keys)
