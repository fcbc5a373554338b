"""The one synced atomic writer (python/clirkit/_atomic.py)."""

import os

import pytest
from clirkit import _atomic


def test_the_content_is_synced_before_the_rename(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("old", encoding="utf-8")
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(
            ("fsync", os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else fd)
        )
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(_atomic.os, "fsync", fsync)
    monkeypatch.setattr(_atomic.os, "replace", replace)
    _atomic.write_json_atomic(target, {"a": 1}, indent=1)
    assert [kind for kind, _ in events] == ["fsync", "replace"]
    assert events[1][1] == str(target)
    assert target.read_text(encoding="utf-8") == '{\n "a": 1\n}'
    assert os.listdir(tmp_path) == ["out.json"]


def test_a_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with _atomic.atomic_binary_output(target) as f:
            f.write(b"partial")
            raise RuntimeError("interrupted")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.bin"]
    _atomic.write_bytes_atomic(target, b"new")
    _atomic.write_text_atomic(tmp_path / "t.txt", "é\n")
    assert target.read_bytes() == b"new"
    assert (tmp_path / "t.txt").read_bytes() == "é\n".encode("utf-8")
