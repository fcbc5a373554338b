"""``hf:<org>/<name>[@revision]``: a dataset repository on the Hugging Face Hub (extra ``clirkit[hf]``).

The repository is fetched into (or, with ``HF_HUB_OFFLINE=1``, found in) the Hugging Face cache by
``huggingface_hub``; its commit is the revision recorded in the identity. Two layouts are read, each
streamed by ``datasets``:

- configurations named in the dataset card (MTEB's BEIR copies): ``corpus`` and ``queries``, and the
  qrels in ``qrels`` or ``default`` (split ``test`` unless ``#split=`` says otherwise);
- plain files: ``corpus.jsonl[.gz]`` / ``corpus.parquet`` / ``corpus/*``, the same for ``queries``, and
  ``qrels/<split>.{tsv,jsonl,parquet}`` (BEIR's layout).

Qrels files in TSV or TREC form are read by clirkit's own qrels reader (ids stay strings as written)."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from typing import Any, Optional

from clirkit import _native
from clirkit._extras import require
from clirkit._native import InvalidInputError
from clirkit.sources.export import checked_id
from clirkit.sources.names import SourceName

ID_COLUMNS = ("_id", "id", "docid", "doc_id", "query_id", "qid")
QRELS_QUERY = ("query-id", "query_id", "qid")
QRELS_DOC = ("corpus-id", "corpus_id", "doc_id", "docid", "doc-id")
QRELS_LABEL = ("score", "relevance", "label", "rel")
#: File extensions ``datasets`` streams, with the builder that reads them.
BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".gz": "json"}
TEXT_QRELS = (".tsv", ".txt", ".trec", ".qrels")


def snapshot(repo: str, revision: Optional[str], repo_type: str, what: str, **options: Any) -> str:
    """A repository's local snapshot directory (downloaded, or from the cache when offline);
    ``options`` go to ``huggingface_hub.snapshot_download`` (e.g. ``allow_patterns``)."""
    hub = require("huggingface_hub", "hf", what)
    try:
        return hub.snapshot_download(repo, repo_type=repo_type, revision=revision, **options)
    except Exception as err:  # the library's own errors (offline and not cached, unknown repo, ...)
        raise InvalidInputError(f"{what}: cannot resolve {repo_type} '{repo}' from the Hub: {err}") from None


class HubDatasetSource:
    """One dataset repository: its parts as records, streamed."""

    def __init__(self, name: SourceName) -> None:
        self.name = name
        folder = snapshot(name.target, name.revision, "dataset", f"'{name.text}'")
        self.folder = os.path.join(folder, name.options["dir"]) if "dir" in name.options else folder
        if not os.path.isdir(self.folder):
            raise InvalidInputError(f"{name.text}: no folder '{name.options['dir']}' in the repository")
        self.split = name.options.get("split", "test")
        self.query_field = name.options.get("query", "text")
        self.identity = {
            "hf": name.target,
            "revision": os.path.basename(os.path.normpath(folder)),
            "dir": name.options.get("dir"),
            "split": self.split,
            "query_field": self.query_field,
        }
        self._datasets = require("datasets", "hf", f"'{name.text}'")
        self.configs = self._configs()

    def _configs(self) -> list[str]:
        if not os.path.exists(os.path.join(self.folder, "README.md")):
            return []
        try:
            return list(self._datasets.get_dataset_config_names(self.folder))
        except Exception:  # a card without configurations: the plain-file layout
            return []

    def _config_files(self, config: str, split: Optional[str]) -> list[str]:
        builder = self._datasets.load_dataset_builder(self.folder, config)
        data_files = builder.config.data_files or {}
        if split is None:
            if len(data_files) != 1:
                raise InvalidInputError(
                    f"{self.name.text}: configuration '{config}' has splits {', '.join(data_files)}; expected one"
                )
            split = next(iter(data_files))
        if split not in data_files:
            raise InvalidInputError(
                f"{self.name.text}: configuration '{config}' has no split '{split}' ({', '.join(data_files)})"
            )
        return [str(f) for f in data_files[split]]

    def _part_files(self, part: str) -> list[str]:
        if part == "qrels":
            config = next((c for c in ("qrels", "default") if c in self.configs), None)
            if config is not None and "corpus" in self.configs:
                return self._config_files(config, self.split)
            patterns = [f"qrels/{self.split}.*", f"{self.split}.tsv"]
        elif part in self.configs:
            return self._config_files(part, None)
        else:
            patterns = [f"{part}.jsonl", f"{part}.jsonl.gz", f"{part}.parquet", f"{part}/*"]
        for pattern in patterns:
            found = sorted(glob.glob(os.path.join(self.folder, pattern)))
            if found:
                return found
        raise InvalidInputError(
            f"{self.name.text}: no {part} (no '{part}' configuration, no file matching {', '.join(patterns)})"
        )

    def _rows(self, files: list[str]) -> Iterator[dict[str, Any]]:
        ext = next((e for e in BUILDERS if files[0].endswith(e)), None)
        if ext is None:
            raise InvalidInputError(f"{self.name.text}: cannot read {os.path.basename(files[0])}")
        stream = self._datasets.load_dataset(BUILDERS[ext], data_files=files, split="train", streaming=True)
        yield from stream

    def _records(self, part: str, text_fields: Optional[tuple[str, ...]]) -> Iterator[dict[str, str]]:
        files = self._part_files(part)
        for row in self._rows(files):
            id_column = next((c for c in ID_COLUMNS if c in row), None)
            if id_column is None:
                raise InvalidInputError(
                    f"{self.name.text}: a {part} record has no id ({', '.join(ID_COLUMNS)})"
                )
            record = {"_id": checked_id(row[id_column], self.name.text)}
            if text_fields is None:
                record.update({k: v for k, v in row.items() if k != id_column and isinstance(v, str)})
            else:
                for column in text_fields:
                    if isinstance(row.get(column), str):
                        record["text"] = row[column]
                        break
                else:
                    raise InvalidInputError(
                        f"{self.name.text}: query '{record['_id']}' has no '{text_fields[0]}' text"
                    )
                if isinstance(row.get("lang"), str):
                    record["lang"] = row["lang"]
            yield record

    def documents(self) -> Iterator[dict[str, str]]:
        return self._records("corpus", None)

    def queries(self) -> Iterator[dict[str, str]]:
        return self._records("queries", (self.query_field,))

    def qrels(self) -> Iterator[tuple[str, str, int]]:
        files = self._part_files("qrels")
        if all(f.endswith(TEXT_QRELS) for f in files):
            for path in files:  # clirkit's own qrels reader (clirkit.runs names sources: no cycle)
                for qid, judged in _native.read_qrels(path):
                    for docid, label in judged:
                        yield qid, docid, label
            return
        for row in self._rows(files):
            columns = [
                next((c for c in names if c in row), None) for names in (QRELS_QUERY, QRELS_DOC, QRELS_LABEL)
            ]
            if None in columns:
                raise InvalidInputError(
                    f"{self.name.text}: qrels columns {', '.join(row)} lack a query id, document id or label"
                )
            yield (
                checked_id(row[columns[0]], self.name.text),
                checked_id(row[columns[1]], self.name.text),
                int(row[columns[2]]),
            )
