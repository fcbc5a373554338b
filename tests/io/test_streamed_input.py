"""Compressed inputs (gzip, zstd) are read as streams by the one input layer: a file much larger than
the memory the reader may use is read with a bounded peak, and its records, errors and resume offsets
are those of the same file uncompressed."""

from __future__ import annotations

import gzip
import tracemalloc

import pytest
from clirkit import ParseError
from clirkit.datasets import iter_jsonl, iter_jsonl_from, iter_objects, open_input
from conftest import zstd_frame

PACK = {"gz": gzip.compress, "zst": zstd_frame}


def corpus_bytes(records: int, text_bytes: int = 1000) -> bytes:
    body = "x" * (text_bytes - 20)
    return "".join(f'{{"_id": "d{i}", "text": "{i} {body}"}}\n' for i in range(records)).encode()


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_a_large_compressed_input_is_read_with_bounded_memory(tmp_path, kind):
    data = corpus_bytes(48_000)  # 48 MB decompressed
    path = tmp_path / f"c.jsonl.{kind}"
    path.write_bytes(PACK[kind](data))
    del data
    tracemalloc.start()
    try:
        count = last = 0
        for record in iter_jsonl(path):
            count += 1
            last = record.id
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (count, last) == (48_000, "d47999")
    # The decoded file is 48 MB; a whole-file read (the earlier zstd path) peaks above that.
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB reading a 48 MB {kind} input"


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_compressed_records_errors_and_offsets_match_the_plain_file(tmp_path, kind):
    text = '\ufeff{"_id": 7, "text": "a"}\n\n{"_id": "d2", "title": "t", "text": "b"}\n'.encode()
    text += corpus_bytes(3000)  # several decoder chunks
    plain, packed = tmp_path / "c.jsonl", tmp_path / f"c.jsonl.{kind}"
    plain.write_bytes(text)
    packed.write_bytes(PACK[kind](text))
    assert list(iter_jsonl(packed)) == list(iter_jsonl(plain))
    assert [line for line, _ in iter_objects(packed)] == [line for line, _ in iter_objects(plain)]

    # Resuming after a record (a forward seek; the byte-order mark is dropped by the decoder, so
    # compressed offsets count from the text after it) gives the rest of the file.
    positions = list(iter_jsonl_from(packed))
    middle = positions[1500]
    rest = list(iter_jsonl_from(packed, offset=middle.end_offset, line=middle.line))
    assert [p.record for p in rest] == [p.record for p in positions[1501:]]
    with open_input(packed) as f:
        f.seek(middle.end_offset)
        f.seek(10)  # back: reopened and read on
        assert f.tell() == 10 and f.read(5) == text[13:18]

    bad = text + b'{"_id": "d9", "text": 5}\n'
    packed.write_bytes(PACK[kind](bad))
    with pytest.raises(ParseError, match=rf"c\.jsonl\.{kind}:3004: field 'text' of 'd9' must be a string"):
        list(iter_jsonl(packed))


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_a_damaged_stream_is_an_error_naming_the_file(tmp_path, kind):
    packed = tmp_path / f"c.jsonl.{kind}"
    whole = PACK[kind](corpus_bytes(2000))
    packed.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(OSError, match=rf"c\.jsonl\.{kind}"):
        list(iter_jsonl(packed))
