"""Models by Hub id: ``org/name[@revision][/subfolder or /path/to/file.onnx]`` wherever a model directory
is accepted (extra ``clirkit[hf]``).

The repository is fetched into (or, with ``HF_HUB_OFFLINE=1``, found in) the Hugging Face cache by
``huggingface_hub``, only the files an encoder reads: configuration and tokenizer files and the ONNX
graph with its external data. The graph is ``model.onnx`` of the subfolder given (else of the repository's
root, else of ``onnx/``), or the one ``.onnx`` file there, or the file named. The encoders then read a
directory of links into the cache (``$CLIRKIT_CACHE_DIR/models/<digest of repo, commit, graph>/``): the graph
as ``model.onnx``, the files beside it under their own names (so external data resolves), the tokenizer,
and a ``config.json`` which is the repository's own when it is a clirkit one (it states ``pooling``,
``normalize`` or a prefix), else the repository's with what its sentence-transformers files say:
pooling from ``modules.json`` and ``1_Pooling/config.json``, normalization from a ``Normalize`` module,
prefixes from the ``query`` and ``passage``/``document`` prompts of ``config_sentence_transformers.json``,
the length limit from ``sentence_bert_config.json``'s ``max_seq_length``."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from typing import Any, Optional

from clirkit._atomic import atomic_text_output, replace_symlink
from clirkit._native import InvalidInputError
from clirkit.sources.names import cache_root

_MODEL_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+?)(?:@(?P<rev>[^/]+))?(?:/(?P<sub>.+))?$")
#: Keys that make a config.json a clirkit one (it then wins over sentence-transformers files).
CLIRKIT_KEYS = ("pooling", "normalize", "query_prefix", "passage_prefix", "sparse", "sparse_head")
#: Files an encoder may read from a repository, besides the graph and what lies beside it.
MODEL_PATTERNS = ("*.json", "*.txt", "*.npy", "*.model")
ST_POOLING = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "last",
}


def is_model_id(value: Any) -> bool:
    """True for a Hub model id (``org/name``, optionally ``@revision`` and a subfolder) that is not an
    existing path."""
    return (
        isinstance(value, (str, os.PathLike))
        and not os.path.exists(value)
        and bool(_MODEL_ID.match(str(value)))
    )


def local_model(value: Any) -> Any:
    """``value`` itself when it is a path, else the local model directory of the Hub id it names."""
    return resolve_model(str(value)) if is_model_id(value) else value


def resolve_model(model_id: str) -> str:
    """The directory the encoders read for the Hub model ``model_id`` (see the module docstring)."""
    from clirkit.sources.hf import snapshot

    match = _MODEL_ID.match(model_id)
    if match is None:
        raise InvalidInputError(f"'{model_id}' is not a Hub model id (org/name[@revision][/subfolder])")
    repo, revision, sub = match["repo"], match["rev"], (match["sub"] or "").strip("/")
    graph_dir = sub if sub and not sub.endswith(".onnx") else os.path.dirname(sub)
    patterns = [*MODEL_PATTERNS, *(f"{d}/*" for d in ([graph_dir] if graph_dir else ["onnx"])), "model.onnx*"]
    root = snapshot(
        repo, revision, "model", f"model '{model_id}' (not a local directory)", allow_patterns=patterns
    )
    graph = _graph(root, sub, model_id)
    commit = os.path.basename(os.path.normpath(root))
    relative_graph = os.path.relpath(graph, root)
    digest = hashlib.sha256(json.dumps([repo, commit, relative_graph]).encode()).hexdigest()[:24]
    view = os.path.join(cache_root(), "models", digest)
    os.makedirs(view, exist_ok=True)
    links = _beside(root)
    links.update(_beside(os.path.dirname(graph)))
    links["model.onnx"] = graph
    tokenizer = next(
        (
            p
            for p in (
                os.path.join(os.path.dirname(graph), "tokenizer.json"),
                os.path.join(root, "tokenizer.json"),
            )
            if os.path.isfile(p)
        ),
        None,
    )
    if tokenizer is None:
        raise InvalidInputError(f"model '{model_id}': the repository has no tokenizer.json")
    links["tokenizer.json"] = tokenizer
    for name, target in links.items():
        replace_symlink(os.path.join(view, name), target)
    config = model_config(root, os.path.dirname(graph))
    with atomic_text_output(os.path.join(view, "config.json")) as f:
        json.dump(config, f, indent=1, sort_keys=True)
    return view


def _graph(root: str, sub: str, model_id: str) -> str:
    if sub.endswith(".onnx"):
        candidates = [os.path.join(root, sub)]
    else:
        folders = [os.path.join(root, sub)] if sub else [root, os.path.join(root, "onnx")]
        candidates = []
        for folder in folders:
            if os.path.isfile(os.path.join(folder, "model.onnx")):
                candidates = [os.path.join(folder, "model.onnx")]
                break
            candidates = sorted(glob.glob(os.path.join(folder, "*.onnx")))
            if candidates:
                break
    if len(candidates) != 1 or not os.path.isfile(candidates[0]):
        shown = ", ".join(os.path.relpath(c, root) for c in candidates) or "none"
        raise InvalidInputError(
            f"model '{model_id}': expected one ONNX graph (model.onnx) in {sub or 'the repository or onnx/'}, "
            f"found {shown}; name a file, e.g. {model_id.split('@')[0]}/onnx/model.onnx"
        )
    return candidates[0]


def _beside(folder: str) -> dict[str, str]:
    """Files in ``folder`` other than ONNX graphs (external data, vocabularies, projections)."""
    out = {}
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not name.endswith(".onnx") and name != "config.json":
            out[name] = path
    return out


def _read_json(path: str) -> Optional[Any]:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as err:
            raise InvalidInputError(f"{path}: not valid JSON: {err}") from None


def model_config(root: str, graph_dir: str) -> dict[str, Any]:
    """The encoder configuration of a repository (see the module docstring)."""
    config = (
        _read_json(os.path.join(graph_dir, "config.json"))
        or _read_json(os.path.join(root, "config.json"))
        or {}
    )
    if not isinstance(config, dict):
        raise InvalidInputError(f"{root}: config.json must be an object")
    if any(key in config for key in CLIRKIT_KEYS):
        return config
    return {**config, **sentence_transformers_settings(root, config)}


def sentence_transformers_settings(root: str, config: dict[str, Any]) -> dict[str, Any]:
    """Pooling, normalization, prefixes and length limit stated by sentence-transformers files."""
    out: dict[str, Any] = {}
    modules = _read_json(os.path.join(root, "modules.json"))
    if isinstance(modules, list):
        types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
        out["normalize"] = any(t.endswith("Normalize") for t in types)
        for module in modules:
            if isinstance(module, dict) and str(module.get("type", "")).endswith("Pooling"):
                pooling = _read_json(os.path.join(root, str(module.get("path", "")), "config.json")) or {}
                chosen = [word for key, word in ST_POOLING.items() if pooling.get(key)]
                others = [
                    k
                    for k, v in pooling.items()
                    if k.startswith("pooling_mode") and v and k not in ST_POOLING
                ]
                if len(chosen) != 1 or others:
                    raise InvalidInputError(
                        f"{root}/{module.get('path')}/config.json: pooling {', '.join(chosen + others) or 'none'} "
                        f"is not one of {', '.join(ST_POOLING)} alone"
                    )
                out["pooling"] = chosen[0]
    st_config = _read_json(os.path.join(root, "config_sentence_transformers.json")) or {}
    prompts = st_config.get("prompts") or {}
    if isinstance(prompts, dict):
        if isinstance(prompts.get("query"), str):
            out["query_prefix"] = prompts["query"]
        passage = next(
            (prompts[k] for k in ("passage", "document", "corpus") if isinstance(prompts.get(k), str)), None
        )
        if passage is not None:
            out["passage_prefix"] = passage
    bert_config = _read_json(os.path.join(root, "sentence_bert_config.json")) or {}
    limit = bert_config.get("max_seq_length")
    if isinstance(limit, int) and limit > 0:
        out["max_position_embeddings"] = min(limit, int(config.get("max_position_embeddings", limit)))
    return out
