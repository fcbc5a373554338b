"""ONNX models built for tests from the small encoders in ../shared (tests skip cleanly without them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from conftest import shared_path

BASE = "all-MiniLM-L6-v2-int8"


def with_head(dst: Path, classes: int, config: dict | None = None) -> tuple[Path, np.ndarray, np.ndarray]:
    """MiniLM with a classification head appended: first token's hidden state · W + b -> (batch,
    classes) logits; returns the directory, W and b."""
    import onnx
    from onnx import helper, numpy_helper

    src = shared_path("models", BASE)
    model = onnx.load(str(src / "model.onnx"))
    rng = np.random.default_rng(11)
    weight = rng.standard_normal((384, classes)).astype(np.float32)
    bias = rng.standard_normal(classes).astype(np.float32)
    hidden = model.graph.output[0].name
    model.graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0, dtype=np.int64), "head_first"),
            numpy_helper.from_array(weight, "head_weight"),
            numpy_helper.from_array(bias, "head_bias"),
        ]
    )
    model.graph.node.extend(
        [
            helper.make_node("Gather", [hidden, "head_first"], ["head_cls"], axis=1),
            helper.make_node("MatMul", ["head_cls", "head_weight"], ["head_product"]),
            helper.make_node("Add", ["head_product", "head_bias"], ["logits"]),
        ]
    )
    del model.graph.output[:]
    model.graph.output.append(
        helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["batch", classes])
    )
    dst.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(dst / "model.onnx"))
    shutil.copy(src / "tokenizer.json", dst)
    base_config = json.loads((src / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**base_config, **(config or {})}))
    return dst, weight, bias
