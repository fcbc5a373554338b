"""Systems over one multi-head model share one encoding of the documents.

A model whose ``config.json`` declares ``heads`` (BGE-M3: dense, sparse token weights, ColBERT token
vectors; :mod:`clirkit.encoders.multihead`) gives every family's document outputs from one forward pass.
A ``dense``, ``impact`` or ``multivector`` system over such a model, whose family the model declares,
reads its documents' encoding from an ``encode-heads`` stage instead of encoding them itself: one stage
per documents file and encoding settings (model, fields, passages, max_length), computing the families of
every system of the experiment that asks for that same encoding (on any of its tasks), so the corpus is
encoded once however many of those systems there are. Queries go through the same head
(:func:`head_query_encoder`).

A plain model's per-token states feed both a dense system (pooled) and a multi-vector system (every
token's state): when both ask for the same encoding, they share an ``encode-heads`` stage too (the
encoder's ``token_states`` mode); a plain model's one family alone keeps its own ``encode`` or
``encode-tokens`` stage, and its queries are encoded as ever (the results are the same).

Each family's files are those a separate encode of that family alone writes (the writers of
:func:`clirkit.encoders.encode_heads_file`, the same as ``encode_file`` / ``encode_tokens_file``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from clirkit.experiment.plan import Plan
from clirkit.experiment.stage import RunContext, Stage
from clirkit.experiment.stages import warn_empty_documents
from clirkit.experiment.systems.instructions import (
    encoder_instructions,
    file_encoding_options,
    instructions_key,
    role_instructions,
)

#: The head family each system kind reads.
FAMILY_OF_KIND = {"dense": "dense", "impact": "sparse", "multivector": "multivector"}
#: Prefix of the files in an ``encode-heads`` artifact: ``heads.dense.npy``, ``heads.sparse.vectors.jsonl``,
#: ``heads.multivector.tokens.npy``...
PREFIX = "heads"


def model_config(model_dir: str) -> dict[str, Any]:
    """``model_dir/config.json`` ({} when absent or unreadable: the encoder reports that when it loads)."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def declared_families(model_dir: str) -> tuple[str, ...]:
    """The families ``model_dir/config.json`` declares in ``heads`` (none when it declares no heads; the
    encoder reports a malformed declaration when it loads the model)."""
    heads = model_config(model_dir).get("heads")
    return tuple(sorted(heads)) if isinstance(heads, dict) else ()


def one_pass_families(model_dir: str) -> tuple[str, ...]:
    """The families one forward pass of the model gives: those it declares, else dense and
    multi-vector from a plain model's token states (:func:`~clirkit.encoders.heads.token_state_heads_problem`)."""
    from clirkit.encoders.heads import token_state_heads_problem

    declared = declared_families(model_dir)
    if declared:
        return declared
    if token_state_heads_problem(Path(model_dir), model_config(model_dir)) is None:
        return ("dense", "multivector")
    return ()


def encoding_key(options: dict[str, Any]) -> tuple[Any, ...]:
    """What a shared document encoding depends on: systems with equal keys share it."""
    passages = tuple(options["passages"]) if options.get("passages") else None
    return (
        options["model"],
        tuple(options["fields"]),
        passages,
        options["max_length"],
        instructions_key(options),
        options.get("dtype", "float32"),
    )


def sharing_systems(plan: Plan, source_path: str, key: tuple[Any, ...]) -> list[tuple[str, dict[str, Any]]]:
    """(family, options) of every system of the experiment that reads the encoding ``key`` of the
    documents file ``source_path`` on some task, in file order."""
    memo = plan.shared.setdefault("encode-heads", {})
    if (source_path, key) not in memo:
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        for task in plan.tasks:
            if source_path not in (s.path for s in task.docs.sources):
                continue
            for name, spec in plan.config.systems.items():
                family = FAMILY_OF_KIND.get(spec.kind)
                if family is None or (spec.settings and task.setting not in spec.settings):
                    continue
                options = spec.options
                if options["model"] is None:  # encodings made elsewhere (precomputed.py)
                    continue
                if family in one_pass_families(options["model"]) and encoding_key(options) == key:
                    found.setdefault(name, (family, options))
        memo[(source_path, key)] = list(found.values())
    return memo[(source_path, key)]


def heads_encode_stage(
    plan: Plan, family: str, source: Any, options: dict[str, Any], model: Any
) -> Optional[tuple[Stage, str]]:
    """The ``encode-heads`` stage of the documents file ``source`` that a system of ``family`` with
    ``options`` reads, and the prefix of its family's files in that stage's output; None when the
    system encodes its documents itself: its model declares no head of ``family`` and no other family
    of the experiment shares a pass of a plain model's token states with it."""
    declared = declared_families(options["model"])
    if family not in one_pass_families(options["model"]):
        return None
    key = encoding_key(options)
    systems = sharing_systems(plan, source.path, key)
    families = sorted({f for f, _ in systems} | {family})
    if not declared and len(families) < 2:
        return None  # a plain model's one family: the family's own encode stage, as ever
    # Batches of the widest any sharing system asks for (a dynamically quantized model runs each text
    # alone on CPU whatever the batch size).
    batch_size = max([o["batch_size"] for _, o in systems] + [options["batch_size"]])
    params = {
        "model": model,
        "fields": options["fields"],
        "passages": options["passages"],
        "max_length": options["max_length"],
        "heads": families,
        **role_instructions(options, "passage"),
        **({"dtype": options["dtype"]} if options.get("dtype", "float32") != "float32" else {}),
    }
    path = source.path

    def encode(stage: Stage, out: Path, ctx: RunContext) -> None:
        from clirkit.encoders.corpus import output_paths
        from clirkit.encoders.multihead import MultiHeadEncoder, encode_heads_file
        from clirkit.encoders.tokens import token_paths

        warn_empty_documents(Path(path), options["fields"], stage.label)
        encoder = ctx.cached(
            (
                "heads",
                options["model"],
                options["max_length"],
                batch_size,
                tuple(families),
                instructions_key(options),
            ),
            lambda: MultiHeadEncoder(
                options["model"],
                outputs=families,
                token_states=not declared,
                max_length=options["max_length"],
                batch_size=batch_size,
                threads=ctx.threads or 0,
                **encoder_instructions(options),
            ),
        )
        prefix = ctx.store.partial(stage.digest) / PREFIX
        encode_heads_file(encoder, path, prefix, **file_encoding_options(options, ctx.quiet))
        written: list[Path] = []
        for name in families:
            part = Path(f"{prefix}.{name}")
            if name == "dense":
                written += [output_paths(part)[kind] for kind in ("npy", "ids")]
            elif name == "sparse":
                written.append(Path(f"{part}.vectors.jsonl"))
            else:
                written += list(token_paths(part).values())
        for done in written:
            done.rename(out / done.name)

    label = f"encode {'+'.join(families)} {Path(path).parent.name}/{Path(path).name}"
    stage = plan.add(Stage("encode-heads", label, params, (), {"file": source.identity()["file"]}, encode))
    return stage, f"{PREFIX}.{family}"


def head_query_encoder(ctx: RunContext, options: dict[str, Any], family: str, max_length: Any) -> Any:
    """The query encoder of a system reading ``family`` from its model's heads: the family's view of a
    one-head :class:`~clirkit.encoders.MultiHeadEncoder` (dense: vectors; sparse: term weights;
    multivector: a :class:`~clirkit.encoders.tokens.TokenEncoder` of the head's token vectors)."""
    from clirkit.encoders.multihead import MultiHeadEncoder

    encoder = ctx.cached(
        ("heads", options["model"], max_length, options["batch_size"], (family,), instructions_key(options)),
        lambda: MultiHeadEncoder(
            options["model"],
            outputs=[family],
            max_length=max_length,
            batch_size=options["batch_size"],
            threads=ctx.threads or 0,
            **encoder_instructions(options),
        ),
    )
    return encoder.view(family)
