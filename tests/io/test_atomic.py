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


def test_a_symlink_is_replaced_in_one_rename(tmp_path, monkeypatch):
    link = tmp_path / "run.trec"
    _atomic.replace_symlink(link, "a/run.trec")
    assert os.readlink(link) == "a/run.trec"
    # A stale temporary of this process (a crash between the link and the rename) is replaced too.
    os.symlink("stale", tmp_path / f"run.trec.tmp-{os.getpid()}")
    renames = []
    real_replace = os.replace
    monkeypatch.setattr(_atomic.os, "replace", lambda src, dst: renames.append(dst) or real_replace(src, dst))
    _atomic.replace_symlink(link, "b/run.trec")
    assert os.readlink(link) == "b/run.trec" and renames == [str(link)]
    # Already pointing there: left alone.
    _atomic.replace_symlink(link, "b/run.trec")
    assert renames == [str(link)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.trec"]


def test_the_digest_cache_goes_through_the_synced_writer(tmp_path, monkeypatch):
    from clirkit.experiment import data

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CLIRKIT_DIGEST_CACHE", raising=False)
    written = []
    real = data.write_json_atomic
    monkeypatch.setattr(
        data, "write_json_atomic", lambda path, value: written.append(path) or real(path, value)
    )
    (tmp_path / "input.txt").write_text("some input", encoding="utf-8")
    size, digest = data.content_digest(str(tmp_path / "input.txt"))
    assert size == 10 and len(digest) == 64
    assert written == [str(tmp_path / "cache" / "clirkit" / "file-digests.json")]
