"""Byte-flip sweep: flip one byte of one index file at a time, then open, search and verify.

Every flip must be harmless (the same results as the intact index) or an ``IndexFormatError``
at open, search or verify time, and ``clirkit verify`` must refuse every flip that open or search
refuses. Counted per index and outcome; ``silent`` (results differ and nothing raised), ``panic``
(any other exception) and ``unverified`` (open or search refused it, verify passed) must be zero.
Sampling (``--samples``) always flips every header byte (the first 64 of each file) too.

    python benches/integrity/byte_flip_sweep.py --quick   # 40 sample docs, headers + 64 bytes per file
    python benches/integrity/byte_flip_sweep.py --docs 40           # every byte of indexes of 40 sample docs
    python benches/integrity/byte_flip_sweep.py --samples 2000      # 2,000 seeded bytes per file, whole sample
    python benches/integrity/byte_flip_sweep.py --scifact --samples 1000 --seed 1

The BM25 index, the dense indexes (flat, and PQ with stored vectors for re-scoring), an impact
index and a multi-vector index (with its full vectors, searched compressed, refined and exact) are
built from the embedded sample (or SciFact next to ../shared): dense and multi-vector vectors are
the seeded ones of ``golden_outputs.py``, impact weights each word's count in the document. Each flip XORs the byte with one bit (``1 << (offset % 8)``, so every bit
position is exercised), and the file is restored before the next flip.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from clirkit import BM25Index, IndexFormatError  # noqa: E402
from clirkit._native import verify_index  # noqa: E402
from clirkit.dense import DenseIndex  # noqa: E402
from clirkit.impact import ImpactIndex  # noqa: E402
from clirkit.multivector import MultiVectorIndex  # noqa: E402
from golden_outputs import SAMPLE, SHARED, ids_of, vectors  # noqa: E402

QUERIES = 20
OUTCOMES = ("harmless", "open", "search", "verify", "verify-differ", "unverified", "silent", "panic")
OUTCOME_HELP = """outcomes: harmless = same results, verify passes; open / search = IndexFormatError there
(and verify refuses the flip too); verify = same results, verify flags the file; verify-differ =
results differ, verify flags the file; unverified = open or search refused it but verify passed;
silent = results differ and nothing flags it; panic = anything but IndexFormatError. unverified,
silent and panic must be 0"""
#: Every checked file's header: magic, kind, version, lengths, CRC (always flipped, even sampling).
HEADER_LEN = 64


class Kind:
    """How to open an index of one kind and search it with fixed queries."""

    def __init__(self, open_index: Callable[[Path], object], query: Callable[[object], object]) -> None:
        self.open_index, self.query = open_index, query


def bm25_kind(queries: List[Tuple[str, Optional[str]]], k: int) -> Kind:
    return Kind(BM25Index.open, lambda index: [index.search(q, k, lang=lang) for q, lang in queries])


def dense_kind(queries: np.ndarray, k: int) -> Kind:
    def query(index: object) -> object:
        scores, ids = index.search(queries, k, threads=1)  # type: ignore[attr-defined]
        return scores.tobytes() + ids.tobytes()

    return Kind(DenseIndex.open, query)


def impact_kind(queries: List[Dict[str, float]], k: int) -> Kind:
    return Kind(ImpactIndex.open, lambda index: [index.search(q, k) for q in queries])  # type: ignore[attr-defined]


def multivector_kind(tokens: np.ndarray, offsets: np.ndarray, k: int) -> Kind:
    """Compressed search, refined with the full vectors, and exact: every file is read."""

    def query(index: object) -> object:
        found = b""
        for options in ({}, {"refine": True}, {"exact": True}):
            scores, ids = index.search(tokens, offsets, k, threads=1, **options)  # type: ignore[attr-defined]
            found += scores.tobytes() + ids.tobytes()
        return found

    return Kind(MultiVectorIndex.open, query)


def word_weights(text: str) -> Dict[str, float]:
    """A document's or query's impact vector: each lower-cased word's count."""
    return dict(Counter(text.lower().split()))


def token_matrices(count: int, dim: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """`count` items of 2 to 6 unit token vectors (seeded), and their offsets."""
    lengths = [2 + i % 5 for i in range(count)]
    tokens = vectors(sum(lengths), dim, seed)
    tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
    return tokens, np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)


def classify(path: Path, kind: Kind, expected: object) -> str:
    stage, got = "open", None
    try:
        index = kind.open_index(path)
        stage = "search"
        got = kind.query(index)
        del index
        stage = "verify"
        verify_index(str(path))
    except IndexFormatError:
        if stage == "verify":
            return "verify" if got == expected else "verify-differ"
        return stage if refused_by_verify(path) else "unverified"
    except Exception:  # noqa: BLE001 - a Rust panic surfaces as PanicException
        return "panic"
    except BaseException as err:  # PanicException derives from BaseException
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        return "panic"
    return "harmless" if got == expected else "silent"


def refused_by_verify(path: Path) -> bool:
    """Whether `clirkit verify` refuses the index (a flip that open or search refused)."""
    try:
        verify_index(str(path))
    except IndexFormatError:
        return True
    return False


def sweep_index(
    name: str,
    path: Path,
    kind: Kind,
    samples: Optional[int],
    rng: random.Random,
    log: Callable[[str], None],
) -> Dict[str, Counter]:
    expected = kind.query(kind.open_index(path))
    verify_index(str(path))
    per_file: Dict[str, Counter] = {}
    for file in sorted(p for p in path.iterdir() if p.is_file()):
        original = file.read_bytes()
        offsets = range(len(original))
        if samples is not None and samples < len(original):
            header = range(min(HEADER_LEN, len(original)))
            offsets = sorted(set(header) | set(rng.sample(range(len(original)), samples)))
        counts: Counter = Counter()
        for at in offsets:
            flipped = bytearray(original)
            flipped[at] ^= 1 << (at % 8)
            file.write_bytes(flipped)
            outcome = classify(path, kind, expected)
            counts[outcome] += 1
            if outcome in ("silent", "panic"):
                log(f"  {outcome.upper()}: {name}/{file.name} byte {at}")
        file.write_bytes(original)
        per_file[file.name] = counts
        log(f"{name}/{file.name}: {len(original)} bytes, {sum(counts.values())} flips, {dict(counts)}")
    return per_file


def build_indexes(
    corpus: Path, queries_file: Path, work: Path, lang_field: Optional[str]
) -> Dict[str, tuple]:
    lang = {"lang_field": lang_field} if lang_field else {"lang": "en"}
    bm25 = work / "bm25"
    BM25Index.build(corpus, bm25, quiet=True, threads=1, **lang)
    texts = []
    with open(queries_file, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                texts.append((record["text"], record.get("lang")))
    doc_ids = ids_of(corpus)
    dim = 16
    docs = vectors(len(doc_ids), dim, 1)
    qvecs = vectors(min(len(texts), QUERIES), dim, 2)
    DenseIndex.build(docs, doc_ids, threads=1, quiet=True).save(work / "dense-flat")
    DenseIndex.build(docs, doc_ids, pq=dim // 2, threads=1, quiet=True).save(work / "dense-pq")
    weights = work / "impact.jsonl"
    with open(corpus, encoding="utf-8") as f, open(weights, "w", encoding="utf-8") as out:
        for line in f:
            if line.strip():
                record = json.loads(line)
                text = " ".join(record.get(field) or "" for field in ("title", "text"))
                vector = word_weights(text) or {"empty": 1.0}
                out.write(json.dumps({"id": str(record["_id"]), "vector": vector}) + "\n")
    ImpactIndex.build(weights, work / "impact", quantize=10, threads=1, quiet=True)
    doc_tokens, doc_offsets = token_matrices(len(doc_ids), dim, 3)
    query_tokens, query_offsets = token_matrices(min(len(texts), QUERIES), dim, 4)
    MultiVectorIndex.build(
        doc_tokens, doc_offsets, doc_ids, work / "multivector", nbits=2, threads=1, keep_vectors=True
    )
    return {
        "bm25": (bm25, bm25_kind(texts[:QUERIES], 10)),
        "dense-flat": (work / "dense-flat", dense_kind(qvecs, 10)),
        "dense-pq": (work / "dense-pq", dense_kind(qvecs, 10)),
        "impact": (work / "impact", impact_kind([word_weights(t) for t, _ in texts[:QUERIES]], 10)),
        "multivector": (work / "multivector", multivector_kind(query_tokens, query_offsets, 10)),
    }


def run(
    scifact: bool,
    samples: Optional[int],
    seed: int,
    docs: Optional[int] = None,
    log: Callable[[str], None] = print,
) -> Dict[str, Counter]:
    if scifact:
        root = SHARED / "beir-scifact"
        corpus, queries, lang_field = root / "corpus.jsonl", root / "queries.jsonl", None
    else:
        corpus, queries, lang_field = SAMPLE / "corpus.jsonl", SAMPLE / "queries.jsonl", "lang"
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="byte-flip-"))
    totals: Dict[str, Counter] = {}
    if docs is not None:
        lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)[:docs]
        corpus = work / "corpus.jsonl"
        corpus.write_text("".join(lines), encoding="utf-8")
    try:
        for name, (path, kind) in build_indexes(corpus, queries, work, lang_field).items():
            per_file = sweep_index(name, path, kind, samples, rng, log)
            totals[name] = sum(per_file.values(), Counter())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=OUTCOME_HELP)
    parser.add_argument("--scifact", action="store_true", help="sweep SciFact-sized indexes (../shared)")
    parser.add_argument(
        "--samples", type=int, help="flip this many seeded offsets per file (default: every byte)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--docs", type=int, help="index only the corpus's first DOCS documents")
    parser.add_argument(
        "--quick", action="store_true", help="the sample's first 40 documents, 64 seeded bytes per file"
    )
    args = parser.parse_args()
    if args.quick:
        args.docs, args.samples = args.docs or 40, args.samples or 64
    totals = run(args.scifact, args.samples, args.seed, args.docs)
    bad = 0
    for name, counts in totals.items():
        print(
            f"TOTAL {name}: {sum(counts.values())} flips: " + ", ".join(f"{o} {counts[o]}" for o in OUTCOMES)
        )
        bad += counts["silent"] + counts["panic"] + counts["unverified"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
