"""A record-length cap on every line reader (report finding F10): a small gzip file holding one line
of tens of MiB stops the build at that line, naming file and line, instead of allocating it whole;
the limit is configurable (``--max-record-bytes``, ``CLIRKIT_MAX_RECORD_BYTES``, the Python call)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest
from clirkit import BM25Index, ParseError
from clirkit._native import max_record_bytes, set_max_record_bytes
from clirkit.cli import main as cli


def bomb(path, megabytes: int) -> None:
    """A gzip corpus: a good line, then one document of ``megabytes`` MiB of text on one line."""
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b'{"_id": "a", "text": "fine"}\n{"_id": "b", "text": "')
        chunk = b"a" * (1 << 20)
        for _ in range(megabytes):
            f.write(chunk)
        f.write(b'"}\n')


def test_default_cap_stops_a_65_mib_line_of_a_small_gzip(tmp_path, capsys):
    corpus = tmp_path / "bomb.jsonl.gz"
    bomb(corpus, 65)
    assert corpus.stat().st_size < 1 << 20
    assert max_record_bytes() == 64 << 20
    assert cli(["index", "bm25", "--corpus", str(corpus), "--index", str(tmp_path / "idx"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{corpus}:2: record longer than 64 MiB" in err
    assert not (tmp_path / "idx").exists()


def test_cap_is_configurable(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b", "text": "' + "x" * 5000 + '"}\n')
    argv = ["index", "bm25", "--corpus", str(corpus), "--index", str(tmp_path / "idx"), "--quiet"]
    assert cli(["--max-record-bytes", "1000", *argv]) == 2
    assert f"{corpus}:2: record longer than 1000 bytes" in capsys.readouterr().err
    try:
        set_max_record_bytes(100_000)
        assert cli(argv) == 0
        set_max_record_bytes(1000)
        with pytest.raises(ParseError, match=r"c\.jsonl:2: record longer"):
            BM25Index.build(str(corpus), str(tmp_path / "idx2"))
        with pytest.raises(ValueError):
            set_max_record_bytes(0)
    finally:
        set_max_record_bytes(64 << 20)
    env = {**os.environ, "CLIRKIT_MAX_RECORD_BYTES": "2000"}
    code = f"from clirkit import BM25Index; BM25Index.build({str(corpus)!r}, {str(tmp_path / 'idx3')!r})"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "record longer than 2000 bytes" in done.stderr
