"""The CPU graph clirkit runs, prepared once and cached: attention fused and, for inputs that always hold
a token, softmax NaN guards dropped (:mod:`clirkit.encoders.attention`), then onnxruntime's own graph
optimizations applied and the optimized graph saved.

Preparing a graph takes seconds (parsing, rewriting, checking, onnxruntime's fusions); a cached one loads
as fast as the shipped file. The cache sits beside the model (``<model dir>/.clirkit-graphs/``) when that
directory is writable, otherwise in clirkit's cache directory (``$CLIRKIT_CACHE_DIR``, else
``$XDG_CACHE_HOME/clirkit``, else ``~/.cache/clirkit``) under ``graphs/``. An entry is keyed by a digest of
the model file's content (and of external-data files beside it), the onnxruntime and onnx versions, the
preparation's version and its variant, so a changed model, a new runtime or a changed rewrite never
reuses a stale graph. Entries are written under temporary names and renamed into place, so concurrent
encoders and killed processes never leave a partial graph behind a valid name.

onnxruntime's ``BiasGelu`` fusion is left out (``DISABLED_OPTIMIZERS``): in onnxruntime 1.32 its CPU
kernel takes about twice the CPU of the ``Add`` + ``Gelu`` it replaces, with the same outputs bit for
bit. Its ``SkipLayerNormalization`` fusion is made, and the fused nodes handed to clirkit's operator of
that name, as are unmasked ``MultiHeadAttention`` nodes (:mod:`clirkit.encoders.custom_ops`: the same
arithmetic, faster), so a prepared graph loads only in sessions that register clirkit's operators
(:func:`open_prepared`).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._cache import cache_root

#: Bumped whenever what :func:`prepared_graph` writes changes, so old entries are not reused.
PREPARATION_VERSION = 6
DISABLED_OPTIMIZERS = ("BiasGeluFusion",)
#: Suffixes of external-data files that belong to a model (hashed with it).
_EXTERNAL_SUFFIXES = (".data", "_data", ".onnx.data", ".bin")
_digests: dict[tuple[str, int, int, int], str] = {}


def writable(directory: Path) -> bool:
    """Whether ``directory`` is meant to be written: its permission bits allow writing and this process
    may (root may write anywhere, so the bits are what says that a shared model directory is read-only)."""
    try:
        mode = directory.stat().st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)) and os.access(directory, os.W_OK)


def graph_directory(model_path: Path) -> Path:
    """Where prepared graphs of ``model_path`` are kept: beside it when its directory is writable, else
    in :func:`cache_root`."""
    beside = model_path.parent / ".clirkit-graphs"
    if beside.is_dir() and writable(beside):
        return beside
    if writable(model_path.parent):
        try:
            beside.mkdir(exist_ok=True)
            return beside
        except OSError:
            pass
    return cache_root() / "graphs"


def content_digest(model_path: Path) -> str:
    """A digest of the model file's bytes and of the external-data files beside it (remembered per file
    identity within the process: hashing a large model takes a moment)."""
    files = [model_path] + sorted(
        p
        for p in model_path.parent.iterdir()
        if p.is_file()
        and p != model_path
        and p.name.startswith(model_path.stem)
        and p.name.endswith(_EXTERNAL_SUFFIXES)
    )
    h = hashlib.blake2b(digest_size=16)
    for path in files:
        st = path.stat()
        identity = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
        digest = _digests.get(identity)
        if digest is None:
            file_hash = hashlib.blake2b(digest_size=16)
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    file_hash.update(block)
            digest = _digests[identity] = file_hash.hexdigest()
        h.update(f"{path.name}:{digest};".encode())
    return h.hexdigest()


def prepared_graph(
    ort: Any, model_path: Path, masked: bool, nonempty: bool = False, split_output: str | None = None
) -> Path:
    """The prepared CPU graph of ``model_path`` (``masked``: for padded batches; otherwise for unpadded
    single texts; ``nonempty``: every input holds at least one token, so softmax NaN guards go,
    :func:`~clirkit.encoders.attention.drop_softmax_nan_guards`; ``split_output``: the graph's output
    named so, a vocabulary projection, is split off by
    :func:`~clirkit.encoders.vocab_projection.split_projection`, its weights in
    :func:`projection_file` of the graph), from the cache or prepared now; ``model_path`` itself when
    nothing could be rewritten or the graph cannot be prepared (a warning says why)."""
    import onnx

    from clirkit.encoders.custom_ops import adopt_operators

    variant = ("masked" if masked else "unpadded") + ("-nonempty" if nonempty else "")
    variant += "-states" if split_output is not None else ""
    key = hashlib.blake2b(
        f"{content_digest(model_path)};ort {ort.__version__};onnx {onnx.__version__};"
        f"v{PREPARATION_VERSION};{variant};{split_output}".encode(),
        digest_size=12,
    ).hexdigest()
    directory = graph_directory(model_path)
    target = directory / f"{model_path.stem}.{variant}.{key}.onnx"
    unchanged = target.with_suffix(".unchanged")
    if target.is_file():
        return target
    if unchanged.is_file():
        return model_path
    directory.mkdir(parents=True, exist_ok=True)
    try:
        rewritten, projection = _rewrite(ort, model_path, masked, nonempty, split_output)
    except Exception as err:  # a graph clirkit cannot rewrite still runs as shipped
        warnings.warn(
            f"{model_path}: attention not fused ({err}); running the graph as shipped", stacklevel=4
        )
        return model_path
    if rewritten is None:
        unchanged.touch()
        return model_path
    with tempfile.TemporaryDirectory(prefix=".prepare-", dir=directory) as scratch:
        source = Path(scratch) / "fused.onnx"
        onnx.save_model(
            rewritten,
            str(source),
            save_as_external_data=True,
            location="fused.onnx.data",
            size_threshold=4096,
        )
        partial = Path(scratch) / target.name
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(partial)
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", target.name + ".data"
        )
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "4096"
        )
        ort.InferenceSession(
            str(source),
            options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=list(DISABLED_OPTIMIZERS),
        )
        optimized = onnx.load(str(partial), load_external_data=False)
        if adopt_operators(optimized):
            onnx.save_model(optimized, str(partial))
        data = Path(scratch) / (target.name + ".data")
        if data.is_file():
            os.replace(data, directory / data.name)
        if projection is not None:
            weights = Path(scratch) / projection_file(target).name
            with weights.open("wb") as f:
                np.savez(f, weight=projection[0], bias=projection[1])
            os.replace(weights, projection_file(target))
        os.replace(partial, target)  # the graph last: its name is what marks the entry complete
    return target


def open_prepared(ort: Any, graph: Path, options: Any, providers: list[str] | None = None) -> Any:
    """An onnxruntime session over the prepared graph at ``graph`` with ``options`` (which this
    changes): clirkit's operators registered, attention kernels kept off onnxruntime's flash path
    (:mod:`clirkit.encoders.custom_ops`), the optimizers in ``DISABLED_OPTIMIZERS`` left out."""
    from clirkit.encoders.custom_ops import register, unblocked_attention

    register(options)
    with unblocked_attention():
        return ort.InferenceSession(
            str(graph),
            sess_options=options,
            providers=providers or ["CPUExecutionProvider"],
            disabled_optimizers=list(DISABLED_OPTIMIZERS),
        )


def projection_file(graph: Path) -> Path:
    """The vocabulary projection split off a prepared graph (an ``.npz`` of ``weight`` and ``bias``
    beside it); absent when none was."""
    return graph.with_suffix(".projection.npz")


def _rewrite(
    ort: Any, model_path: Path, masked: bool, nonempty: bool, split_output: str | None
) -> tuple[Any, tuple[np.ndarray, np.ndarray] | None]:
    """The model with softmax NaN guards dropped (``nonempty``) and attention fused, checked against the
    shipped graph on a probe, and then its ``split_output`` projection split off (with the weights and
    bias split off); (None, None) when nothing was rewritten."""
    import onnx

    from clirkit.encoders.attention import (
        drop_softmax_nan_guards,
        drop_unused_initializers,
        fuse_attention,
        fuse_erf_gelu,
    )
    from clirkit.encoders.vocab_projection import split_projection

    model = onnx.load(str(model_path), load_external_data=False)
    read_external_data(model, model_path.parent)  # small tensors may be kept there too
    names = {i.name for i in model.graph.input}
    if not names <= {"input_ids", "attention_mask", "token_type_ids", "position_ids"}:
        return None, None  # feeds the probe cannot build: leave such a model as it is
    shipped = model.SerializeToString()
    dropped = drop_softmax_nan_guards(model) if nonempty else 0
    fused = fuse_attention(model, masked, padding_masks=lambda graph, names: padding_masks(ort, graph, names))
    fused += dropped + fuse_erf_gelu(model)
    if fused:
        drop_unused_initializers(model)
        _check_probe(ort, shipped, model, masked)
    projection = split_projection(model, split_output) if split_output is not None else None
    if not fused and projection is None:
        return None, None
    return model, projection


def read_external_data(model: Any, directory: Path) -> None:
    """Read the tensors of ``model`` (an ``onnx.ModelProto`` loaded without its external data) kept in
    external-data files under ``directory`` into the model. onnx's own loader refuses a data file that is a
    symbolic link, and the Hugging Face hub's cache lays every file of a snapshot as one."""
    from onnx import TensorProto

    tensors = list(model.graph.initializer) + [
        a.t for node in model.graph.node for a in node.attribute if a.HasField("t")
    ]
    for tensor in tensors:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = Path(info.get("location", ""))
        if location.is_absolute() or ".." in location.parts or not location.parts:
            raise ValueError(
                f"tensor {tensor.name!r}: external data location {str(location)!r} is not a file beside the graph"
            )
        with (directory / location).open("rb") as f:
            f.seek(int(info.get("offset", 0)))
            tensor.raw_data = f.read(int(info["length"])) if "length" in info else f.read()
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]


def _probe_batch(lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """A padded probe batch of texts of ``lengths`` tokens: (ids, attention mask)."""
    ids = np.zeros((len(lengths), max(lengths)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = np.arange(1, length + 1) + 7 * row
        mask[row, :length] = 1
    return ids, mask


def _probe_feeds(session: Any, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """``session``'s feeds for a probe batch (type ids 0, positions from 0), in the types it declares."""
    types = {"tensor(int32)": np.int32, "tensor(int64)": np.int64}
    values = {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": np.zeros_like(ids),
        "position_ids": np.broadcast_to(np.arange(ids.shape[1]), ids.shape),
    }
    return {i.name: values[i.name].astype(types.get(i.type, np.int64)) for i in session.get_inputs()}


def padding_masks(ort: Any, model: Any, names: list[str]) -> set[str]:
    """Which of the additive attention masks ``names`` of ``model`` are key padding masks: evaluated on
    a padded probe batch (the operators computing them, alone), 0 wherever the key is a token and at
    most -10,000 wherever it is padding, for every query and head (a causal mask is not)."""
    from onnx import TensorProto, helper

    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    needed: set[int] = set()
    read: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        node = producers.get(name)
        if name in read or node is None:
            read.add(name)
            continue
        read.add(name)
        needed.add(id(node))
        pending.extend(node.input)
    nodes = [n for n in graph.node if id(n) in needed]
    nodes += [helper.make_node("Cast", [name], [f"{name}.float"], to=TensorProto.FLOAT) for name in names]
    outputs = [helper.make_tensor_value_info(f"{name}.float", TensorProto.FLOAT, None) for name in names]
    sub = helper.make_model(
        helper.make_graph(
            nodes,
            "padding-masks",
            [i for i in graph.input if i.name in read],
            outputs,
            initializer=[t for t in graph.initializer if t.name in read],
        ),
        opset_imports=list(model.opset_import),
    )
    sub.ir_version = model.ir_version
    ids, mask = _probe_batch([7, 4])
    try:
        session = ort.InferenceSession(sub.SerializeToString(), providers=["CPUExecutionProvider"])
        values = session.run(None, _probe_feeds(session, ids, mask))
    except Exception:  # onnxruntime raises its own error types: an operand it cannot evaluate is not fused
        return set()
    batch, width = ids.shape
    keys = np.broadcast_to(mask[:, None, None, :] == 1, (batch, 1, width, width))
    checked = set()
    for name, value in zip(names, values):
        try:
            shape = np.broadcast_shapes(np.shape(value), keys.shape)
        except ValueError:
            continue
        value, real = np.broadcast_to(value, shape), np.broadcast_to(keys, shape)
        if shape[-2:] == keys.shape[-2:] and np.all(value[real] == 0) and np.all(value[~real] <= -1e4):
            checked.add(name)
    return checked


def _check_probe(ort: Any, shipped_graph: bytes, rewritten: Any, masked: bool) -> None:
    """The rewritten graph must give the shipped graph's outputs on a probe batch (padded when
    ``masked``, one unpadded text otherwise): every token's state within float rounding (cosine
    1 - 1e-4) for a float graph, each text's states within int8 requantization noise (cosine 0.99) for a
    dynamically quantized one."""
    lengths = [9, 5] if masked else [9]
    ids, mask = _probe_batch(lengths)
    quantized = any(n.op_type == "DynamicQuantizeLinear" for n in rewritten.graph.node)
    floor = 0.99 if quantized else 1 - 1e-4
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    shipped = ort.InferenceSession(shipped_graph, options, providers=["CPUExecutionProvider"])
    fused = ort.InferenceSession(rewritten.SerializeToString(), options, providers=["CPUExecutionProvider"])
    pairs = zip(
        shipped.run(None, _probe_feeds(shipped, ids, mask)), fused.run(None, _probe_feeds(fused, ids, mask))
    )
    for want, got in pairs:
        want, got = np.asarray(want, dtype=np.float64), np.asarray(got, dtype=np.float64)
        if want.shape != got.shape:
            raise ValueError(f"the fused graph outputs shape {got.shape}, the shipped one {want.shape}")
        if want.ndim >= 3:  # per token: each row's real tokens
            rows = [(want[r, :n], got[r, :n]) for r, n in enumerate(lengths)]
        else:
            rows = [(want[r], got[r]) for r in range(len(lengths))] if want.ndim == 2 else [(want, got)]
        for a, b in rows:
            per_token = not quantized and a.ndim >= 2
            a, b = (
                (a.reshape(len(a), -1), b.reshape(len(b), -1))
                if per_token
                else (a.reshape(1, -1), b.reshape(1, -1))
            )
            norms = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)
            cosine = float(np.min(np.sum(a * b, axis=1) / norms))
            if cosine < floor:
                raise ValueError(
                    f"the fused graph's outputs differ from the shipped graph's (cosine {cosine:.6f})"
                )
