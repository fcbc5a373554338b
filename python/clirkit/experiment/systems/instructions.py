"""Per-system instructions of an ONNX encoder: ``query_prefix`` and ``passage_prefix`` (prepended to
queries and to documents, as ``clirkit encode --query-prefix/--passage-prefix``) and ``input_values``
(values of graph inputs the tokenizer does not give, for both roles or per role, e.g. Jina v3's
``input_values = { query = { task_id = 0 }, passage = { task_id = 1 } }``, as ``clirkit encode
--input-values``). Each overrides the model directory's ``config.json``, so one model directory serves
several instructions (AIR-Bench's Instr-1 / Instr-2). A system gives only those it sets, and only those
enter its encode stages' keys, so a system without them keeps its stages."""

from __future__ import annotations

import json
from typing import Any

from clirkit._native import InvalidInputError

#: The instruction keys of ``dense``, ``impact`` and ``multivector`` systems.
INSTRUCTION_KEYS = ("query_prefix", "passage_prefix", "input_values")


def read_instructions(r: Any) -> dict[str, Any]:
    """The instruction keys a system table sets, checked (an error names the key)."""
    from clirkit.encoders.session import role_input_values

    out: dict[str, Any] = {}
    for key in ("query_prefix", "passage_prefix"):
        value = r.get(key, str)
        if value is not None:
            out[key] = value
    values = r.get("input_values", dict)
    if values is not None:
        try:
            role_input_values(values, "input_values")
        except InvalidInputError as err:
            raise r.error("input_values", str(err)) from None
        out["input_values"] = values
    return out


def encoder_instructions(options: dict[str, Any]) -> dict[str, Any]:
    """The instructions ``options`` set, as encoder keyword arguments (and stage-key entries)."""
    return {key: options[key] for key in INSTRUCTION_KEYS if options.get(key) is not None}


def role_instructions(options: dict[str, Any], role: str) -> dict[str, Any]:
    """What the instructions change for texts of ``role`` (``"query"`` or ``"passage"``): that role's
    prefix and input values, the entries of an encode stage's key (so a query prefix leaves the
    documents' encoding where it was)."""
    from clirkit.encoders.session import role_input_values

    out: dict[str, Any] = {}
    prefix = options.get(f"{role}_prefix")
    if prefix is not None:
        out[f"{role}_prefix"] = prefix
    if options.get("input_values") is not None:
        out["input_values"] = role_input_values(options["input_values"], "input_values")[role]
    return out


def file_encoding_options(options: dict[str, Any], quiet: bool) -> dict[str, Any]:
    """How a system's documents file is encoded, as the resumable writers take it (``fields``,
    ``passages``, the storage ``dtype``, ``quiet``)."""
    passages = tuple(options["passages"]) if options.get("passages") else None
    return {
        "fields": options["fields"],
        "passages": passages,
        "dtype": options.get("dtype", "float32"),
        "quiet": quiet,
    }


def instructions_key(options: dict[str, Any]) -> str:
    """The instructions as one hashable text (for caches of loaded encoders)."""
    return json.dumps(encoder_instructions(options), sort_keys=True)
