"""Position bias (PosIR-style): effectiveness by where the answer sits in the relevant document.

Input is a position-aware qrels file: TSV with a header naming ``query-id``, ``corpus-id``,
``span_start``, ``span_end`` (character offsets, end exclusive), ``doc_chars`` and optionally
``doc_tokens`` and ``relevance`` (default 1); one row per query (``xquad-pos``'s
``qrels/positions.tsv`` is one). Each query's relative position is its span midpoint over the document
length, binned into 20 equal-width bins over [0, 1]; documents are bucketed by length (tokens when
known, from the file or from :func:`token_lengths`, else characters; as in PosIR, buckets are closed at
their upper edge and the last also holds the documents beyond the last edge: edges 0-512-1024-1536-2048
give <=512, 513-1024, 1025-1536 and >1536); per bin we report the mean per-query measure (nDCG@10 by default) and per bucket the
Position Sensitivity Index PSI = 1 - min/max over the non-empty bins (optionally only bins with at least
``min_queries`` queries). Queries absent from a run are
skipped (trec_eval's default) unless ``complete=True``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clirkit import _native
from clirkit._atomic import atomic_binary_output
from clirkit._types import RunInput
from clirkit.evaluation import is_path, warn_no_overlap

DEFAULT_EDGES = (0, 512, 1024, 1536, 2048)


@dataclass(frozen=True)
class BucketTable:
    """Per-bin means of one document-length bucket (``label`` "all" for all queries)."""

    label: str
    counts: list[int]
    means: list[float | None]
    psi: float | None
    mean: float | None


@dataclass(frozen=True)
class PositionTable:
    """One system's position-bias table."""

    system: str
    measure: str
    length_unit: str
    overall: BucketTable
    buckets: list[BucketTable]

    @property
    def bins(self) -> int:
        return len(self.overall.counts)

    def to_records(self) -> list[dict[str, Any]]:
        """Flat records (system, bucket, bin, bin range, queries, mean), pandas-friendly."""
        out = []
        for bucket in [self.overall, *self.buckets]:
            for i, (n, m) in enumerate(zip(bucket.counts, bucket.means)):
                out.append(
                    {
                        "system": self.system,
                        "bucket": bucket.label,
                        "bin": i,
                        "from": i / self.bins,
                        "to": (i + 1) / self.bins,
                        "queries": n,
                        self.measure: m,
                    }
                )
        return out


def token_lengths(corpus: str | os.PathLike, tokenizer: str | os.PathLike) -> dict[str, int]:
    """Token count per document of a BEIR ``corpus.jsonl`` (``text`` field) with a Hugging Face
    ``tokenizer.json`` (special tokens excluded). Needs the ``tokenizers`` package."""
    from tokenizers import Tokenizer  # imported lazily: optional dependency

    tok = Tokenizer.from_file(os.fspath(tokenizer))
    ids, texts = [], []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                doc = json.loads(line)
                ids.append(str(doc.get("_id", doc.get("id"))))
                texts.append(doc.get("text", ""))
    encodings = tok.encode_batch(texts, add_special_tokens=False)
    return {i: len(e.ids) for i, e in zip(ids, encodings)}


def position_bias(
    positions: str | os.PathLike,
    runs: Mapping[str, RunInput],
    measure: str = "ndcg_cut.10",
    bins: int = 20,
    edges: Sequence[int] = DEFAULT_EDGES,
    complete: bool = False,
    doc_tokens: Mapping[str, int] | None = None,
    min_queries: int = 1,
) -> list[PositionTable]:
    """Position-bias tables, one per labelled run (path or dict). Bins with fewer than
    ``min_queries`` queries are shown but left out of PSI."""
    tables = []
    for system, run in runs.items():
        run_arg = os.fspath(run) if is_path(run) else {q: dict(d) for q, d in run.items()}
        unit, overall, buckets, raw = _native.position_bias(
            os.fspath(positions),
            run_arg,
            measure,
            bins,
            list(edges),
            complete,
            dict(doc_tokens) if doc_tokens is not None else None,
            min_queries,
        )
        warn_no_overlap(raw[3], raw[4])
        tables.append(
            PositionTable(system, raw[0][0], unit, BucketTable(*overall), [BucketTable(*b) for b in buckets])
        )
    return tables


def format_value(x: float | None) -> str:
    """A table cell: four decimals, '-' for a missing value."""
    return "-" if x is None else f"{x + 0.0:.4f}"


def format_tables(tables: Sequence[PositionTable]) -> str:
    """Plain text: per system, a row per bin (queries and mean per bucket), then PSI per bucket."""
    out = []
    for t in tables:
        cols = [t.overall, *t.buckets]
        out.append(f"# {t.system}: mean {t.measure} by relative answer position (length in {t.length_unit})")
        out.append("bin          " + "".join(f"{c.label:>18}" for c in cols))
        for i in range(t.bins):
            cells = "".join(f"{format_value(c.means[i]):>11} ({c.counts[i]:>4})" for c in cols)
            out.append(f"{i / t.bins:.2f}-{(i + 1) / t.bins:.2f}    {cells}")
        out.append(
            "mean         " + "".join(f"{format_value(c.mean):>11} ({sum(c.counts):>4})" for c in cols)
        )
        out.append("PSI          " + "".join(f"{format_value(c.psi):>18}" for c in cols))
        out.append("")
    return "\n".join(out)


def plot(tables: Sequence[PositionTable], path: str | os.PathLike, title: str | None = None) -> None:
    """A PNG: the measure against relative position (bin centres), one line per system, PSI in the
    legend. Needs matplotlib (the ``plot`` extra); imported only here."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for t in tables:
        xs = [(i + 0.5) / t.bins for i, m in enumerate(t.overall.means) if m is not None]
        ys = [m for m in t.overall.means if m is not None]
        ax.plot(xs, ys, marker="o", markersize=3, label=f"{t.system} (PSI {format_value(t.overall.psi)})")
    measure = tables[0].measure if tables else "measure"
    ax.set_xlabel("relative position of the answer span in the relevant document")
    ax.set_ylabel(f"mean {measure}")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    ax.set_title(title or f"{measure} by answer position")
    fig.tight_layout()
    try:  # written whole, so a crash never leaves a truncated PNG behind
        with atomic_binary_output(path) as f:
            fig.savefig(f, format="png")
    finally:
        plt.close(fig)
