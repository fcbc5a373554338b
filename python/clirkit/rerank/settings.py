"""The one way a reranker is made from settings, shared by ``clirkit rerank`` and an experiment's
``[rerank.NAME]`` node, so that both reach every backend with the same defaults and give the same run.

Backends (:data:`BACKENDS`): ``openai`` (listwise: sliding windows over an OpenAI-compatible chat server,
a prompt family of :data:`~clirkit.rerank.templates.TEMPLATES`), and four pointwise ones that score every
candidate and sort the whole depth: ``cross-encoder`` (an ONNX cross-encoder), ``query-likelihood`` (UPR
over ``/completions``), ``yes-no`` (Qwen3-Reranker over ``/completions``) and ``pointwise`` (an ONNX
bi-encoder's cosine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from clirkit._native import InvalidInputError
from clirkit.rerank.backends import Backend
from clirkit.rerank.pointwise import Scorer

__all__ = [
    "BACKENDS",
    "LISTWISE_BACKENDS",
    "ONNX_BACKENDS",
    "SERVER_BACKENDS",
    "CROSS_ENCODER_MAX_LENGTH",
    "RerankerSettings",
    "make_reranker",
]

#: Every backend, listwise first.
BACKENDS = ("openai", "cross-encoder", "query-likelihood", "yes-no", "pointwise")
#: Backends that rank windows (RankGPT's partial sort); the others sort the whole depth.
LISTWISE_BACKENDS = ("openai",)
#: Backends that ask an OpenAI-compatible server (``base_url`` and a model name).
SERVER_BACKENDS = ("openai", "query-likelihood", "yes-no")
#: Backends that run an ONNX model directory here.
ONNX_BACKENDS = ("cross-encoder", "pointwise")
#: A cross-encoder's pair length when none is given (the bi-encoder's default is the model's limit).
CROSS_ENCODER_MAX_LENGTH = 512


@dataclass(frozen=True)
class RerankerSettings:
    """What a reranker is made of; the defaults are ``clirkit rerank``'s.

    ``model`` is the model name sent to a server (server backends); ``model_dir`` the ONNX model
    directory (``cross-encoder``, ``pointwise``). ``max_length``: the cross-encoder's pair length
    (default :data:`CROSS_ENCODER_MAX_LENGTH`) or the bi-encoder's input length (default the model's
    limit). ``passage_tokens``/``query_tokens`` cut prompt texts with ``tokenizer`` (a
    ``tokenizer.json``) or a script-aware count (:mod:`clirkit.rerank.prompt_budget`); ``max_words``
    also cuts listwise passages by whitespace words, as RankGPT does."""

    backend: str = "openai"
    base_url: Optional[str] = None
    model: Optional[str] = None
    model_dir: Optional[str] = None
    api_key: Optional[str] = None
    template: str = "rankgpt"
    temperature: float = 0.0
    max_tokens: Optional[int] = None
    extra_body: Dict[str, Any] = field(default_factory=dict)
    instruction: Optional[str] = None
    max_words: int = 300
    passage_tokens: Optional[int] = None
    query_tokens: Optional[int] = None
    tokenizer: Optional[str] = None
    max_length: Optional[int] = None
    batch_size: int = 32
    concurrency: int = 8
    timeout: float = 60.0
    retries: int = 3
    max_response_mb: float = 8.0


def make_reranker(settings: RerankerSettings) -> Tuple[Optional[Backend], Optional[Scorer]]:
    """``(listwise backend, None)`` or ``(None, pointwise scorer)`` for ``settings``; an
    :class:`InvalidInputError` naming the option when one is missing or does not apply."""
    from clirkit.rerank.prompt_budget import prompt_truncation

    s = settings
    if s.backend not in BACKENDS:
        raise InvalidInputError(f"unknown rerank backend '{s.backend}': one of {', '.join(BACKENDS)}")
    if s.max_response_mb <= 0:
        raise InvalidInputError("max_response_mb must be positive")
    truncate, truncate_identity = prompt_truncation(s.passage_tokens, s.query_tokens, s.tokenizer)
    if s.backend in SERVER_BACKENDS:
        if not s.base_url or not s.model:
            raise InvalidInputError(f"backend {s.backend} needs base_url and model (the server's model name)")
        server = dict(
            api_key=s.api_key,
            timeout=s.timeout,
            retries=s.retries,
            concurrency=s.concurrency,
            truncate=truncate,
            truncate_identity=truncate_identity,
            extra_body=dict(s.extra_body),
            max_response_bytes=int(s.max_response_mb * 1024 * 1024),
        )
        if s.backend == "openai":
            from clirkit.rerank.openai_chat import OpenAIChatBackend

            listwise = dict(
                template=s.template, max_words=s.max_words, temperature=s.temperature, max_tokens=s.max_tokens
            )
            return OpenAIChatBackend(s.base_url, s.model, **listwise, **server), None  # type: ignore[arg-type]
        from clirkit.rerank.likelihood import QueryLikelihoodScorer, YesNoScorer

        if s.backend == "query-likelihood":
            return None, QueryLikelihoodScorer(s.base_url, s.model, **server)  # type: ignore[arg-type]
        instruction = {} if s.instruction is None else {"instruction": s.instruction}
        return None, YesNoScorer(s.base_url, s.model, **server, **instruction)  # type: ignore[arg-type]
    if truncate is not None:
        raise InvalidInputError(f"backend {s.backend} truncates with its own tokenizer (max_length)")
    if not s.model_dir:
        raise InvalidInputError(f"backend {s.backend} needs an ONNX model directory")
    from clirkit.rerank.pointwise import CallableScorer

    try:
        if s.backend == "cross-encoder":
            from clirkit.encoders.cross_encoder import CrossEncoder

            length = s.max_length or CROSS_ENCODER_MAX_LENGTH
            model = CrossEncoder(s.model_dir, max_length=length, batch_size=s.batch_size)
            return None, CallableScorer(model.score, f"cross-encoder:{s.model_dir}:max_length={length}")
        from clirkit.encoders import OnnxEncoder
    except ImportError as err:
        raise InvalidInputError(f"backend {s.backend} needs clirkit.encoders (ONNX models): {err}") from err
    encoder = OnnxEncoder(s.model_dir, max_length=s.max_length, batch_size=s.batch_size)
    return None, CallableScorer.from_encoder(encoder, identity=f"cosine:{s.model_dir}")
