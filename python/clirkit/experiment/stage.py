"""A stage, what its action sees, and how inputs are identified: the types the plan, the shared stage
actions (:mod:`.stages`) and the system kinds (:mod:`.systems`) all build on.

A stage is identified by a digest of its kind, its own parameters and its inputs' identities (input
stages' digests, input files' content digests, the query set) with the clirkit version, so two tasks or experiments needing the
same stage get one artifact."""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from clirkit._native import __version__
from clirkit.experiment.config import ExperimentConfig
from clirkit.experiment.data import digest_of, file_identity
from clirkit.experiment.store import ArtifactStore

#: Bumped when a stage's output format or computation changes, so old artifacts are not reused.
STAGE_FORMAT = 1
#: Part of every stage's key: another clirkit version (whose analysis or scoring may differ) never
#: reuses this one's artifacts.
CLIRKIT_VERSION = __version__
#: The run a search, fusion or rerank stage writes in its output directory.
RUN_FILE = "run.trec"
#: The per-query and aggregate measures an evaluation stage writes.
EVAL_FILE = "eval.json"


@dataclass
class RunContext:
    """What stage actions share while a plan runs: thread count, quietness, loaded models, and the
    contexts entered for the whole run (left when it ends: :attr:`exits`)."""

    config: ExperimentConfig
    store: ArtifactStore
    threads: int
    quiet: bool
    cache: dict[Any, Any] = field(default_factory=dict)
    exits: ExitStack = field(default_factory=ExitStack)

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        """One object per key for the whole run (encoders, reranking backends)."""
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def entered(self, key: Any, make: Callable[[], AbstractContextManager[Any]]) -> Any:
        """One context per key entered for the whole run (a Ray cluster connection), left when it ends."""
        return self.cached(key, lambda: self.exits.enter_context(make()))


Action = Callable[["Stage", Path, RunContext], None]


@dataclass(eq=False)
class Stage:
    """One unit of work whose output directory is an artifact."""

    kind: str
    label: str
    params: Mapping[str, Any]
    inputs: tuple[Stage, ...]
    identity: Any
    action: Action
    digest: str = ""
    output: Path = Path()

    def __post_init__(self) -> None:
        self.digest = digest_of(
            {
                "kind": self.kind,
                "format": STAGE_FORMAT,
                "clirkit": CLIRKIT_VERSION,
                "params": self.params,
                "identity": self.identity,
                "inputs": [s.digest for s in self.inputs],
            }
        )

    def manifest(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "params": dict(self.params),
            "identity": self.identity,
            "inputs": [f"{s.kind}/{s.digest}" for s in self.inputs],
        }


def model_identity(model_dir: str) -> dict:
    """A model directory's identity: its files' identities (model, tokenizer, configuration)."""
    files = sorted(f for f in os.listdir(model_dir) if os.path.isfile(os.path.join(model_dir, f)))
    return {f: file_identity(os.path.join(model_dir, f)) for f in files}
