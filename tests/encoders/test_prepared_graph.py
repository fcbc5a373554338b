"""The prepared CPU graph: attention fused into MultiHeadAttention with the same outputs, cached per model
content beside a writable model or in clirkit's cache directory; token-budget batches."""

from __future__ import annotations

import os
import shutil
import stat

import numpy as np
import pytest
import tiny_transformer
from clirkit.encoders import OnnxEncoder, graph_cache
from clirkit.encoders.attention import drop_unused_initializers, fuse_attention
from clirkit.encoders.tokenization import length_batches

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


run, padded = tiny_transformer.run, tiny_transformer.padded


@pytest.mark.parametrize("masked", [True, False])
def test_fused_attention_gives_the_unfused_outputs(tmp_path, masked):
    tiny_transformer.build(tmp_path, layers=3)
    original = onnx.load(str(tmp_path / "model.onnx"))
    fused = onnx.load(str(tmp_path / "model.onnx"))
    assert fuse_attention(fused, masked=masked) == 3
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("MultiHeadAttention") == 3 and "Softmax" not in ops
    rng = np.random.default_rng(1)
    batches = [padded(rng, [11, 4, 7])] if masked else [padded(rng, [n]) for n in (1, 9, 23)]
    for ids, mask in batches:
        want, got = run(original, ids, mask), run(fused, ids, mask)
        for row, length in enumerate(mask.sum(1)):
            np.testing.assert_allclose(got[row, :length], want[row, :length], rtol=1e-4, atol=1e-5)
    if not masked:  # padding ignored: only right for unpadded inputs, which is what this variant is for
        ids, mask = padded(rng, [9, 4])
        assert not np.allclose(run(fused, ids, mask)[1, :4], run(original, ids, mask)[1, :4], atol=1e-3)


def test_a_mask_operand_with_another_input_is_not_a_padding_mask(tmp_path):
    """An additive score term computed from anything but attention_mask (a position bias) must stay."""
    from onnx import TensorProto, helper

    tiny_transformer.build(tmp_path, layers=1)
    model = onnx.load(str(tmp_path / "model.onnx"))
    model.graph.input.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1, 1, 1, 1]))
    nodes = list(model.graph.node)
    position = next(i for i, n in enumerate(nodes) if n.output[0] == "mask_bias")
    nodes[position].output[0] = "mask_only"
    nodes.insert(position + 1, helper.make_node("Add", ["mask_only", "bias"], ["mask_bias"]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    assert fuse_attention(model, masked=True) == 0


def test_prepared_graph_is_cached_beside_a_writable_model(tmp_path, monkeypatch):
    model_dir = tiny_transformer.build(tmp_path / "model")
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    first = graph_cache.prepared_graph(ort, model_dir / "model.onnx", masked=True)
    assert first.parent == model_dir / ".clirkit-graphs" and first.is_file()
    fused = onnx.load(str(first))
    assert "MultiHeadAttention" in {n.op_type for n in fused.graph.node}
    assert [p.name for p in first.parent.iterdir() if p.name.startswith(".prepare-")] == []

    def refuse(*args, **kwargs):
        raise AssertionError("a cached graph must not be prepared again")

    monkeypatch.setattr("clirkit.encoders.attention.fuse_attention", refuse)
    assert graph_cache.prepared_graph(ort, model_dir / "model.onnx", masked=True) == first
    # The unpadded variant and a changed model are other entries.
    monkeypatch.undo()
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    assert graph_cache.prepared_graph(ort, model_dir / "model.onnx", masked=False) != first
    tiny_transformer.build(model_dir, seed=4)
    changed = graph_cache.prepared_graph(ort, model_dir / "model.onnx", masked=True)
    assert changed != first and changed.is_file()
    assert not (tmp_path / "cache").exists()


def test_read_only_model_directory_caches_in_clirkit_cache_dir(tmp_path, monkeypatch):
    model_dir = tiny_transformer.build(tmp_path / "model")
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    os.chmod(model_dir, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        enc = OnnxEncoder(model_dir, device="cpu", batch_invariant=False)
        cached = sorted((tmp_path / "cache" / "graphs").glob("model.masked-nonempty.*.onnx"))
        assert len(cached) == 1 and not (model_dir / ".clirkit-graphs").exists()
        vectors = enc.encode(tiny_transformer.texts(20))
        again = OnnxEncoder(model_dir, device="cpu", batch_invariant=False).encode(tiny_transformer.texts(20))
        np.testing.assert_array_equal(again, vectors)  # the cache hit runs the same graph
    finally:
        os.chmod(model_dir, stat.S_IRWXU)
    shipped = OnnxEncoder(model_dir, device="cpu", optimize_graph=False).encode(tiny_transformer.texts(20))
    np.testing.assert_allclose(vectors, shipped, atol=1e-5)


def test_a_graph_that_cannot_be_fused_runs_as_shipped(tmp_path, monkeypatch):
    model_dir = tiny_transformer.build(tmp_path / "model")
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("clirkit.encoders.attention.fuse_attention", lambda model, masked, **checks: 0)
    assert graph_cache.prepared_graph(ort, model_dir / "model.onnx", masked=True) == model_dir / "model.onnx"
    assert len(list((model_dir / ".clirkit-graphs").glob("*.unchanged"))) == 1
    shutil.rmtree(model_dir / ".clirkit-graphs")


def nan_guarded(model) -> None:
    """Each ``Softmax`` followed by a dynamo export's ``Where(IsNaN(p), 0, p)`` (in place)."""
    from onnx import TensorProto, helper

    nodes = []
    for node in model.graph.node:
        nodes.append(node)
        if node.op_type == "Softmax":
            p = node.output[0]
            node.output[0] = f"{p}_raw"
            nodes.append(helper.make_node("IsNaN", [f"{p}_raw"], [f"{p}_isnan"]))
            nodes.append(helper.make_node("Where", [f"{p}_isnan", "guard_zero", f"{p}_raw"], [p]))
    model.graph.initializer.append(helper.make_tensor("guard_zero", TensorProto.FLOAT, [], [0.0]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def test_softmax_nan_guards_are_dropped_with_the_same_outputs(tmp_path):
    from clirkit.encoders.attention import drop_softmax_nan_guards

    tiny_transformer.build(tmp_path, layers=2)
    guarded = onnx.load(str(tmp_path / "model.onnx"))
    nan_guarded(guarded)
    assert fuse_attention(onnx.load_from_string(guarded.SerializeToString()), masked=True) == 0
    dropped = onnx.load_from_string(guarded.SerializeToString())
    assert drop_softmax_nan_guards(dropped) == 2
    assert not {"IsNaN", "Where"} & {n.op_type for n in dropped.graph.node}
    ids, mask = padded(np.random.default_rng(3), [12, 5, 1, 9])
    np.testing.assert_array_equal(run(dropped, ids, mask), run(guarded, ids, mask))
    assert fuse_attention(dropped, masked=True) == 2  # the classic pattern again


def test_guards_go_only_when_every_input_holds_a_token(tmp_path, monkeypatch):
    """The encoder asks for the NaN guards to go when its tokenizer gives an empty text special tokens;
    a tokenizer that gives it none keeps them (a text of no token is a fully masked row)."""
    import json

    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    for name, specials in (("with", True), ("without", False)):
        model_dir = tiny_transformer.build(tmp_path / name, layers=2)
        model = onnx.load(str(model_dir / "model.onnx"))
        nan_guarded(model)
        onnx.save(model, str(model_dir / "model.onnx"))
        if not specials:
            tokenizer = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
            tokenizer["post_processor"] = None
            (model_dir / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
        enc = OnnxEncoder(model_dir, device="cpu")
        texts = tiny_transformer.texts(12, seed=8)
        np.testing.assert_allclose(
            enc.encode(texts),
            OnnxEncoder(model_dir, device="cpu", optimize_graph=False).encode(texts),
            atol=1e-5,
        )
        prepared = sorted((model_dir / ".clirkit-graphs").glob("*.onnx"))
        if specials:
            assert [p.name.split(".")[1] for p in prepared] == ["masked-nonempty"]
            ops = {n.op_type for n in onnx.load(str(prepared[0])).graph.node}
            assert "MultiHeadAttention" in ops and "IsNaN" not in ops
        else:
            assert prepared == []  # nothing could be rewritten: the graph runs as shipped
            assert [p.name.split(".")[1] for p in (model_dir / ".clirkit-graphs").glob("*.unchanged")] == [
                "masked"
            ]


@pytest.mark.parametrize("budget", [1, 7, 40, 10_000])
def test_token_budget_batches(budget):
    rng = np.random.default_rng(budget)
    lengths = rng.integers(1, 30, size=200).tolist()
    batches = length_batches(lengths, 16, budget)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(200))
    widths = [lengths[b[0]] for b in batches]
    assert widths == sorted(widths, reverse=True)
    for batch in batches:
        assert max(lengths[i] for i in batch) == lengths[batch[0]]
        assert len(batch) <= 16
        assert len(batch) == 1 or len(batch) * lengths[batch[0]] <= budget


def test_external_data_behind_a_symbolic_link_is_read(tmp_path, monkeypatch):
    """The Hugging Face hub's cache lays a snapshot's files as symbolic links, which onnx's own loader
    refuses for external data: the graph is still prepared (not run as shipped with a warning)."""
    import warnings

    model_dir = tiny_transformer.build(tmp_path / "model", layers=2)
    graph = onnx.load(str(model_dir / "model.onnx"))
    shipped = onnx.load_from_string(graph.SerializeToString())  # saving below moves graph's tensors out
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    onnx.save_model(
        graph, str(blobs / "model.onnx"), save_as_external_data=True, location="weights", size_threshold=0
    )
    (blobs / "model.onnx").replace(model_dir / "model.onnx")
    (model_dir / "weights").symlink_to(blobs / "weights")
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepared = graph_cache.prepared_graph(ort, model_dir / "model.onnx", masked=True)
    assert prepared != model_dir / "model.onnx"
    assert "MultiHeadAttention" in {n.op_type for n in onnx.load(str(prepared)).graph.node}
    ids, mask = padded(np.random.default_rng(2), [6, 3])
    np.testing.assert_allclose(
        run(onnx.load(str(prepared)), ids, mask)[0], run(shipped, ids, mask)[0], atol=1e-5
    )


def test_constants_only_fused_operators_read_are_dropped(tmp_path):
    """onnxruntime warns once per initializer no node reads; the prepared graph leaves none behind."""
    tiny_transformer.build(tmp_path, layers=2)
    fused = onnx.load(str(tmp_path / "model.onnx"))
    fuse_attention(fused, masked=False)
    kept = onnx.ModelProto()
    kept.CopyFrom(fused)
    before = {t.name for t in fused.graph.initializer}
    read = {x for node in fused.graph.node for x in node.input}
    assert drop_unused_initializers(fused) == len(before - read) > 0
    assert {t.name for t in fused.graph.initializer} == before & read
    assert drop_unused_initializers(fused) == 0
    ids, mask = padded(np.random.default_rng(2), [9])
    np.testing.assert_array_equal(run(fused, ids, mask), run(kept, ids, mask))
    # An initializer that is also a graph input is that input's default: kept, read or not.
    from onnx import TensorProto, helper, numpy_helper

    fused.graph.initializer.append(numpy_helper.from_array(np.zeros(1, dtype=np.float32), "default_only"))
    fused.graph.input.append(helper.make_tensor_value_info("default_only", TensorProto.FLOAT, [1]))
    assert drop_unused_initializers(fused) == 0
