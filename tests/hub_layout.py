"""Hugging Face caches laid out by hand, as ``huggingface_hub`` writes them, for offline tests:
``HF_HOME/hub/<kind>s--<org>--<name>/{refs/<ref>, snapshots/<commit>/..., blobs/<hash>}``."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Union

Content = Union[bytes, str, Path]


def lay_snapshot(
    hf_home: Path, kind: str, repo: str, commit: str, files: dict[str, Content], ref="main"
) -> Path:
    """Lay ``files`` (relative path -> bytes, text or a file to copy) as commit ``commit`` of ``repo``
    (``kind`` "dataset" or "model"), with ``refs/<ref>`` naming it; returns the snapshot directory."""
    root = hf_home / "hub" / f"{kind}s--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        if isinstance(content, Path):
            data = content.read_bytes()
        else:
            data = content.encode("utf-8") if isinstance(content, str) else content
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        if not blob.exists():
            blob.write_bytes(data)
        link = snapshot / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / ref).write_text(commit)
    return snapshot


MTEB_CARD = """---
configs:
- config_name: default
  data_files:
  - split: test
    path: qrels/test.jsonl
- config_name: corpus
  data_files:
  - split: corpus
    path: corpus.jsonl
- config_name: queries
  data_files:
  - split: queries
    path: queries.jsonl
---
# {name}
"""


def mteb_files(beir_dir: Path, name: str = "scifact") -> dict[str, Content]:
    """A BEIR folder in the layout of MTEB's copies on the Hub: corpus/queries JSONL, qrels as JSONL
    rows ``{"query-id", "corpus-id", "score"}`` behind a dataset card naming three configurations."""
    rows = []
    with open(beir_dir / "qrels" / "test.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, docid, score = line.split()
            rows.append(json.dumps({"query-id": qid, "corpus-id": docid, "score": int(score)}))
    return {
        "README.md": MTEB_CARD.format(name=name),
        "corpus.jsonl": beir_dir / "corpus.jsonl",
        "queries.jsonl": beir_dir / "queries.jsonl",
        "qrels/test.jsonl": "\n".join(rows) + "\n",
    }


def use_hub_cache(monkeypatch, hf_home: Path) -> None:
    """Point ``huggingface_hub`` at ``hf_home``, offline, in this process and in child processes
    (the library reads its environment once, at import, so an imported one is patched too)."""
    import sys

    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(hf_home / "datasets"))
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
