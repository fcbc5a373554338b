"""ONNX encoders: equality with a plain one-text-at-a-time loop, options, bad input, GPU path."""

from __future__ import annotations

import functools
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_path

ort = pytest.importorskip("onnxruntime")
tokenizers = pytest.importorskip("tokenizers")

from clirkit.encoders import OnnxEncoder
from clirkit.encoders.pooling import pooling_from_config

MODELS = ["multilingual-e5-small-int8", "all-MiniLM-L6-v2-int8"]
HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()

TEXTS = [
    "What is cross-language information retrieval?",
    "",
    "Der Hund bellt laut im Garten, während die Katze schläft.",
    "كم نقطة تخلى عنها دفاع البانثرز؟",
    "超级碗 50 的冠军是哪支球队？",
    "a",
    "Dense retrievers encode queries and documents into one vector space " * 6,
    "Когда была основана компания?",
    "   leading and trailing spaces   ",
    "Les modèles multilingues partagent un vocabulaire de sous-mots. " * 3,
    "x " * 40,
    "Tokenization with emoji 🙂 and accents: café, naïve, Ångström.",
    "短",
    "Short query",
    (
        "The Panthers finished the regular season with a 15-1 record, and quarterback Cam Newton was named "
        "the NFL Most Valuable Player. They defeated the Arizona Cardinals 49-15 in the NFC Championship Game."
    ),
    "हिंदी में एक छोटा वाक्य।",
]


@functools.cache
def shared_encoder(model: str) -> OnnxEncoder:
    """One encoder per model for the whole module (loading and rewriting e5 takes seconds)."""
    return OnnxEncoder(shared_path("models", model), device="cpu")


def reference_encode(
    model_dir: Path, texts, prefix: str, max_length: int = 512, pooling: str = "mean", normalize: bool = True
) -> np.ndarray:
    """The plain loop users write: one text at a time, no padding, onnxruntime's default session, the
    model's token embeddings (last hidden state) pooled in numpy (mean, first token or last token),
    L2 normalization."""
    session = ort.InferenceSession(str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length)
    rows = []
    for text in texts:
        ids = np.array([tok.encode(prefix + text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, {k: v for k, v in feed.items() if k in names})[0][0]
        v = {"mean": hidden.mean(axis=0), "cls": hidden[0], "last": hidden[-1]}[pooling]
        rows.append(v / np.linalg.norm(v) if normalize else v)
    return np.array(rows, dtype=np.float32)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("model", MODELS)
def test_equals_one_at_a_time_reference_whatever_the_batching(model):
    model_dir = shared_path("models", model)
    config = json.loads((model_dir / "config.json").read_text())
    prefix = config.get("passage_prefix", "")
    expected = reference_encode(model_dir, TEXTS, prefix)
    enc = shared_encoder(model)
    dynamic = b"DynamicQuantizeLinear" in (model_dir / "model.onnx").read_bytes()
    first = None
    for batch_size, batch_tokens in ((1, 512), (3, 512), (32, 512), (32, 64)):
        enc.batch_size, enc.batch_tokens = batch_size, batch_tokens
        got = enc.encode_passages(TEXTS)
        assert got.shape == expected.shape and got.dtype == np.float32
        first = got if first is None else first
        # The same bits whatever the batching: a dynamically quantized model runs one text per call, and a
        # float model's rows do not depend on their batch-mates (why an experiment's `batch_size` is not
        # in its stage keys).
        np.testing.assert_array_equal(got, first)
        # The prepared graph (attention fused) rounds differently from the shipped one; a float model's
        # vectors move by rounding only, a dynamically quantized model's requantization amplifies it
        # (to 0.996 on the degenerate "x " * 40).
        floor = 0.995 if dynamic else 1 - 1e-6
        assert cosines(got, expected).min() > floor, batch_size
        assert np.median(cosines(got, expected)) > (0.999 if dynamic else 1 - 1e-6)
    one_thread = OnnxEncoder(model_dir, device="cpu", threads=1, batch_size=5)
    np.testing.assert_array_equal(one_thread.encode_passages(TEXTS), got)
    # The shipped graph at onnxruntime's default level: what the plain loop gives, up to the pooling's
    # float summation order.
    shipped = OnnxEncoder(model_dir, device="cpu", optimize_graph=False)
    assert shipped.graph_optimization == "all" and enc.graph_optimization.startswith("prepared")
    assert shipped.fingerprint() != enc.fingerprint()
    assert cosines(shipped.encode_passages(TEXTS), expected).min() > 1 - 1e-6
    # Batching a dynamically quantized graph as shipped moves its vectors.
    if b"DynamicQuantizeLinear" in (model_dir / "model.onnx").read_bytes():
        assert enc.one_text_per_call
        plain = OnnxEncoder(model_dir, batch_size=32, device="cpu", batch_invariant=False)
        assert cosines(plain.encode_passages(TEXTS), expected).min() < 1 - 1e-3
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # Queries get the query prefix, which changes the vectors of a prefixed model.
    expected_q = reference_encode(model_dir, TEXTS[:3], config.get("query_prefix", ""))
    assert cosines(shipped.encode_queries(TEXTS[:3]), expected_q).min() > 1 - 1e-4
    assert cosines(enc.encode_queries(TEXTS[:3]), expected_q).min() > floor


def test_per_sequence_quantization_makes_padded_batches_equal_lone_texts():
    """The graph the CUDA path batches (checked here on CPU): every sequence quantized over its own
    tokens gives, in one padded batch, what each text gives alone through the shipped graph (both at
    basic optimizations: extended fusions round int8 differently, by up to 1e-2 cosine on ``"x " * 40``)."""
    onnx = pytest.importorskip("onnx")
    from clirkit.encoders.quantization import per_sequence_quantization

    model_dir = shared_path("models", "multilingual-e5-small-int8")
    rewritten = onnx.load(str(model_dir / "model.onnx"))
    assert per_sequence_quantization(rewritten) is not None
    basic = ort.SessionOptions()
    basic.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    shipped = ort.InferenceSession(str(model_dir / "model.onnx"), basic, providers=["CPUExecutionProvider"])
    batched = ort.InferenceSession(rewritten.SerializeToString(), basic, providers=["CPUExecutionProvider"])
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(512)
    encodings = [tok.encode("passage: " + t) for t in TEXTS]
    width = max(len(e.ids) for e in encodings)
    ids = np.ones((len(TEXTS), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, e in enumerate(encodings):
        ids[row, : len(e.ids)], mask[row, : len(e.ids)] = e.ids, 1

    def pooled(session, ids, mask):
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, feed)[0]
        return (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)

    together = pooled(batched, ids, mask)
    alone = np.concatenate(
        [
            pooled(shipped, ids[r : r + 1, : mask[r].sum()], mask[r : r + 1, : mask[r].sum()])
            for r in range(len(TEXTS))
        ]
    )
    assert cosines(together, alone).min() > 1 - 1e-6
    # The shipped graph in the same padded batch: one activation scale for all, vectors move.
    assert cosines(pooled(shipped, ids, mask), alone).min() < 1 - 1e-3


def test_options_from_config_and_overrides():
    e5 = shared_path("models", "multilingual-e5-small-int8")
    enc = shared_encoder("multilingual-e5-small-int8")
    assert (enc.pooling, enc.normalize, enc.query_prefix, enc.passage_prefix, enc.max_length) == (
        "mean",
        True,
        "query: ",
        "passage: ",
        512,
    )
    with pytest.warns(UserWarning, match="max_length 4096 exceeds the model's 512 positions"):
        enc = OnnxEncoder(e5, pooling="cls", normalize=False, query_prefix="", max_length=4096, device="cpu")
    assert (enc.pooling, enc.normalize, enc.query_prefix, enc.max_length) == ("cls", False, "", 512)
    raw = enc.encode(["hello world", "a much longer input text than the first"])
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)


@pytest.mark.parametrize(("pooling", "normalize"), [("cls", True), ("last", True), ("last", False)])
def test_cls_and_last_token_pooling_equal_a_numpy_reference(pooling, normalize):
    """MiniLM is batched with padding on CPU (it is not dynamically quantized): the last token must be
    the last real one, not padding."""
    model_dir = shared_path("models", "all-MiniLM-L6-v2-int8")
    texts = TEXTS[:8]
    enc = OnnxEncoder(model_dir, pooling=pooling, normalize=normalize, batch_size=3, device="cpu")
    assert not enc.one_text_per_call
    got = enc.encode_passages(texts)
    expected = reference_encode(model_dir, texts, "", pooling=pooling, normalize=normalize)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
    mean = reference_encode(model_dir, texts, "", normalize=normalize)
    assert cosines(got, mean).max() < 0.99  # the pooling really changed the vectors


def test_pooling_parsed_from_prose_or_keys():
    assert pooling_from_config({"pooling": "mean over attention_mask, then L2 normalize"}) == ("mean", True)
    assert pooling_from_config({"pooling": "cls", "normalize": False}) == ("cls", False)
    assert pooling_from_config({"pooling": "last token"}) == ("last", None)
    assert pooling_from_config({}) == (None, None)
    with pytest.raises(ValueError, match="names none of"):
        pooling_from_config({"pooling": "max"})


def test_long_inputs_truncate_with_a_count_and_empty_texts_encode():
    model_dir = shared_path("models", "all-MiniLM-L6-v2-int8")
    enc = OnnxEncoder(model_dir, max_length=16, device="cpu")
    texts = ["word " * 300, "", "short", "other words " * 50]
    got = enc.encode_passages(texts)
    assert enc.truncated == 2
    assert np.isfinite(got).all()
    assert cosines(got, reference_encode(model_dir, texts, "", max_length=16)).min() > 1 - 1e-4
    assert enc.encode([]).shape == (0, 384)
    with pytest.raises(TypeError):
        enc.encode("not a list")


def test_token_windows_cover_the_text():
    enc = shared_encoder("all-MiniLM-L6-v2-int8")
    text = " ".join(f"w{i}" for i in range(100))  # each "w12" is several word pieces
    windows = enc.token_windows(text, 30, 15)
    n_tokens = len(enc.tokenizer.encode(text, add_special_tokens=False).ids)
    assert len(windows) == -(-(n_tokens - 30) // 15) + 1
    assert windows[0].startswith("w0") and windows[-1].endswith("w99")
    assert all(w in text for w in windows)
    assert enc.token_windows("short text", 30, 15) == ["short text"]
    assert enc.token_windows("", 30, 15) == [""]


def test_missing_model_files_are_named(tmp_path):
    src = shared_path("models", "all-MiniLM-L6-v2-int8")
    (tmp_path / "config.json").write_bytes((src / "config.json").read_bytes())
    with pytest.raises(FileNotFoundError, match="model.onnx, tokenizer.json"):
        OnnxEncoder(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        OnnxEncoder(tmp_path / "nowhere")


def _mixed_model(tmp_path: Path, config: dict) -> Path:
    """MiniLM's model (30,522-token embedding table) with multilingual-e5's 250k-token tokenizer."""
    shutil.copy(shared_path("models", "all-MiniLM-L6-v2-int8") / "model.onnx", tmp_path / "model.onnx")
    shutil.copy(shared_path("models", "multilingual-e5-small-int8") / "tokenizer.json", tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_tokenizer_larger_than_embedding_table_is_refused(tmp_path):
    with pytest.raises(ValueError, match="250002 tokens.*vocab_size.*30522"):
        OnnxEncoder(_mixed_model(tmp_path, {"vocab_size": 30522}), device="cpu")


def test_vocabulary_mismatch_found_by_probing_without_vocab_size(tmp_path):
    with pytest.raises(ValueError, match="rejects token id 250001"):
        OnnxEncoder(_mixed_model(tmp_path, {}), device="cpu")


def test_bad_options_rejected():
    model_dir = shared_path("models", "all-MiniLM-L6-v2-int8")
    for kwargs in ({"pooling": "max"}, {"device": "tpu"}, {"batch_size": 0}):
        with pytest.raises(ValueError):
            OnnxEncoder(model_dir, **kwargs)


@pytest.mark.skipif(HAS_CUDA, reason="CUDA provider present: the fallback is not exercised")
def test_cuda_requested_without_provider_warns_and_uses_cpu():
    with pytest.warns(UserWarning, match="no CUDA provider"):
        enc = OnnxEncoder(shared_path("models", "all-MiniLM-L6-v2-int8"), device="cuda")
    assert enc.device == "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert OnnxEncoder(shared_path("models", "all-MiniLM-L6-v2-int8"), device="auto").device == "cpu"


@pytest.mark.skipif(not HAS_CUDA, reason="needs onnxruntime-gpu with a CUDA device")
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("fp16", [False, True])
def test_cuda_matches_cpu(model, fp16, tmp_path):
    from clirkit.encoders.quantization import write_float_model
    from clirkit.encoders.session import is_dynamically_quantized

    model_dir = shared_path("models", model)
    reference_dir = model_dir
    if fp16 and is_dynamically_quantized(model_dir / "model.onnx"):
        # float16 on CUDA dequantizes the int8 weights: the CPU reference holds the same float weights.
        pytest.importorskip("onnx")
        reference_dir = write_float_model(model_dir, tmp_path / "float")
    # The shipped graph on CPU (the prepared one fuses attention, which rounds differently again).
    cpu = OnnxEncoder(reference_dir, device="cpu", optimize_graph=False).encode_passages(TEXTS)
    gpu_enc = OnnxEncoder(model_dir, device="cuda", fp16=fp16, batch_size=5)
    assert gpu_enc.device == "cuda"
    gpu = gpu_enc.encode_passages(TEXTS)
    # CUDA kernels round differently from CPU ones; int8 requantization amplifies that (on an H200,
    # multilingual-e5-small-int8 batched in int8 gave cosines 0.9965-1.0, median 0.9989).
    int8_on_gpu = not fp16 and is_dynamically_quantized(model_dir / "model.onnx")
    assert cosines(gpu, cpu).min() > 1 - 1e-2
    assert np.median(cosines(gpu, cpu)) > 1 - (2e-3 if int8_on_gpu else 1e-3)
