"""Coverage-guided fuzzing of the experiment-file reader (``clirkit.experiment.load_config``) with
atheris (``pip install atheris``): any bytes, written as an experiment file beside the embedded
sample collection, must load or be refused with a ``ClirkitError`` (or an ``OSError`` for a path it
names); any other exception is a finding. Then the tasks are built (queries read) the same way.

    python fuzz/experiment_file.py -max_total_time=60 -timeout=10 fuzz/experiment_file_seeds

The seeds are the files of ``examples/`` and the sample's ``demo.toml``; a file found to crash is
written by libFuzzer as ``crash-*`` in the working directory."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["clirkit.experiment", "tomllib", "clirkit.sources"]):
    from clirkit import ClirkitError
    from clirkit.experiment import load_config
    from clirkit.experiment.data import build_tasks

WORK = Path(tempfile.mkdtemp(prefix="clirkit-fuzz-"))
SAMPLE = Path(__file__).resolve().parents[1] / "python" / "clirkit" / "data" / "sample"
shutil.copytree(SAMPLE, WORK / "sample")  # the collection a file may name as path = "sample"
FILE = WORK / "exp.toml"


def one_input(data: bytes) -> None:
    FILE.write_bytes(data)
    try:
        config = load_config(FILE)
        build_tasks(config)
    except (ClirkitError, OSError):
        pass
    before = sorted(p.name for p in WORK.iterdir())
    if before != ["exp.toml", "sample"]:
        raise AssertionError(f"loading an experiment file wrote {before}")


def main() -> None:
    os.chdir(WORK)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
