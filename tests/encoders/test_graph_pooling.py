"""Pooling inside the graph (the GPU path's): equal to the host pooling of the token states."""

from __future__ import annotations

import numpy as np
import pytest
import tiny_transformer

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from clirkit.encoders.graph_pooling import POOLED_OUTPUT, pool_in_graph  # noqa: E402
from clirkit.encoders.pooling import pool  # noqa: E402


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_graph_pooling_equals_host_pooling_on_padded_batches(tmp_path, pooling):
    model = onnx.load(str(tiny_transformer.build(tmp_path) / "model.onnx"))
    shipped = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert pool_in_graph(model, pooling)
    onnx.checker.check_model(model)
    pooled = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert pooled.get_outputs()[0].name == POOLED_OUTPUT
    assert pooled.get_outputs()[0].shape[-1] == tiny_transformer.HIDDEN
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 60, size=(4, 9))
    mask = np.ones_like(ids)
    for row, length in enumerate([9, 1, 4, 7]):
        mask[row, length:] = 0
        ids[row, length:] = 0
    feeds = {"input_ids": ids, "attention_mask": mask}
    on_host = pool(shipped.run(None, feeds)[0], mask, pooling, normalize=True)
    in_graph = pool(pooled.run([POOLED_OUTPUT], feeds)[0], mask, pooling, normalize=True)
    np.testing.assert_allclose(in_graph, on_host, rtol=1e-5, atol=1e-6)


def test_poolings_the_graph_cannot_take_are_left_to_the_host(tmp_path):
    model = onnx.load(str(tiny_transformer.build(tmp_path) / "model.onnx"))
    assert not pool_in_graph(model, "last")
    del model.graph.input[1]  # no attention mask
    assert not pool_in_graph(model, "mean")
    assert [o.name for o in model.graph.output] == ["last_hidden_state"]
