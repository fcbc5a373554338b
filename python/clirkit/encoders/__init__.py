"""Text encoders and what is built on them, one module per concern.

- :mod:`~clirkit.encoders.onnx_encoder`: :class:`OnnxEncoder`, texts in, dense vectors out (its
  docstring lists the options);
- :mod:`~clirkit.encoders.cross_encoder`: :class:`CrossEncoder`, (query, passage) pairs in, relevance
  scores out;
- :mod:`~clirkit.encoders.truncation`: :func:`truncate_text`, token-aware truncation in any script;
- :mod:`~clirkit.encoders.sparse`: :class:`SparseEncoder`, texts in, SPLADE term weights out;
- :mod:`~clirkit.encoders.session`: the onnxruntime session (device, graph preparation, model inputs,
  IO binding);
- :mod:`~clirkit.encoders.graph_cache` and :mod:`~clirkit.encoders.attention`: the prepared CPU graph
  (attention fused, cached per model content and runtime version);
- :mod:`~clirkit.encoders.split_attention`: the prepared graph cut at its attention nodes, attention
  computed by a kernel passed in (fast mode's int8 attention on CPU);
- :mod:`~clirkit.encoders.multihead`: :class:`MultiHeadEncoder` and :func:`encode_heads_file`, several
  families' outputs (dense, sparse token weights, token vectors) from one forward pass, computed by
  :mod:`~clirkit.encoders.heads`;
- :mod:`~clirkit.encoders.tokenization`: tokenizers, padded batches, token windows;
- :mod:`~clirkit.encoders.pooling`: token states to one vector per text;
- :mod:`~clirkit.encoders.quantization`: batch-invariant int8 graphs;
- :mod:`~clirkit.encoders.corpus`: streaming, resumable encoding of a JSONL file to ``.npy`` + ids
  (dense) or to vector JSONL (sparse);
- :mod:`~clirkit.encoders.tokens`: per-token (multi-vector, ColBERT-style) encoding to token files;
- :mod:`~clirkit.encoders.seen_ids`: duplicate-id detection in bounded memory while encoding;
- :mod:`~clirkit.encoders.passages`: passage ids and MaxP (passage run to document run).

onnxruntime and tokenizers (the ``encoders`` extra) are imported when an encoder is created, not here.
"""

from clirkit.encoders.corpus import (
    EncodeResult,
    SparseEncodeResult,
    encode_file,
    encode_sparse_file,
    load_embeddings,
    output_paths,
    sparse_output_paths,
)
from clirkit.encoders.cross_encoder import CrossEncoder
from clirkit.encoders.multihead import FAMILIES, MultiHeadEncoder, encode_heads_file
from clirkit.encoders.onnx_encoder import MODEL_FILES, OnnxEncoder
from clirkit.encoders.passages import doc_id, maxp, maxp_file
from clirkit.encoders.pooling import POOLINGS
from clirkit.encoders.session import DEVICES
from clirkit.encoders.sparse import SparseEncoder, is_sparse_model
from clirkit.encoders.tokens import TokenEncoder, TokenFiles, encode_tokens_file, load_tokens, token_paths
from clirkit.encoders.truncation import truncate_text

__all__ = [
    "DEVICES",
    "FAMILIES",
    "MODEL_FILES",
    "POOLINGS",
    "CrossEncoder",
    "EncodeResult",
    "MultiHeadEncoder",
    "OnnxEncoder",
    "SparseEncodeResult",
    "SparseEncoder",
    "TokenEncoder",
    "TokenFiles",
    "doc_id",
    "encode_file",
    "encode_heads_file",
    "encode_sparse_file",
    "encode_tokens_file",
    "is_sparse_model",
    "load_embeddings",
    "load_tokens",
    "maxp",
    "maxp_file",
    "output_paths",
    "sparse_output_paths",
    "token_paths",
    "truncate_text",
]
