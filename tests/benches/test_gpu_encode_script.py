"""benches/gpu/encode.py, the prepared GPU bench, runs in its CI form on the CPU provider (no GPU here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiny_transformer

pytest.importorskip("onnxruntime")

SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "gpu" / "encode.py"


def test_gpu_script_runs_on_the_cpu_provider(tmp_path):
    model = tiny_transformer.build(tmp_path / "model")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"_id": str(i), "text": t}) + "\n" for i, t in enumerate(tiny_transformer.texts(4))
        ),
        encoding="utf-8",
    )
    summary = tmp_path / "summary.json"
    cmd = [sys.executable, str(SCRIPT), "--model", str(model), "--corpus", str(corpus), "--docs", "4"]
    cmd += ["--device", "cpu", "--peer", "none", "--json", str(summary)]
    env = {**os.environ, "CLIRKIT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(summary.read_text())
    assert result["device"] == "cpu" and result["docs"] == 4 and result["docs_per_s"]["clirkit"] > 0
    assert result["cosine_ok"] and result["cosine_to_cpu"]["min"] > 0.999
    # Asked for CUDA where onnxruntime has none, it says so and gives no figure.
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        return
    cuda = subprocess.run(cmd[:-6] + ["--peer", "none"], capture_output=True, text=True, timeout=300, env=env)
    assert cuda.returncode == 3 and "no GPU figure" in cuda.stdout
