"""Dense retrieval from texts: an ONNX encoder with the index of what it encoded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from clirkit._types import PathLike, RunDict
from clirkit.dense.index import DenseIndex

if TYPE_CHECKING:
    from clirkit.encoders import OnnxEncoder

__all__ = ["DenseRetriever"]


class DenseRetriever:
    """An ONNX encoder with the dense index of what it encoded: query texts in, runs out.

    >>> retriever = DenseRetriever.build("models/e5", "corpus.jsonl", "work/docs", passages=(180, 90))  # doctest: +SKIP
    >>> retriever.search({"q1": "what causes ulcers"}, k=100)  # {qid: {docid: score}}  # doctest: +SKIP

    ``maxp=True`` when the index holds passages (``docid#k``): :meth:`search` then returns ``k`` documents
    per query scored by their best passage (see :meth:`DenseIndex.search_run`).
    """

    def __init__(
        self, encoder: OnnxEncoder, index: DenseIndex, *, maxp: bool = False, separator: str = "#"
    ) -> None:
        self.encoder = encoder
        self.index = index
        self.maxp = maxp
        self.separator = separator

    @staticmethod
    def build(
        model: PathLike,
        corpus: PathLike,
        output_prefix: PathLike,
        *,
        passages: tuple[int, int] | None = None,
        fields: Sequence[str] | None = None,
        pq: int | None = None,
        index_dir: PathLike | None = None,
        device: str = "auto",
        threads: int = 0,
        quiet: bool = False,
        **encoder_options: Any,
    ) -> DenseRetriever:
        """Encode the JSONL ``corpus`` with the model directory ``model`` into ``PREFIX.npy`` +
        ``PREFIX.ids.txt`` (streamed and resumable: :func:`clirkit.encoders.encode_file`), optionally
        as ``passages=(size, stride)`` token windows, and index the vectors (flat, or ``pq=M``); the index
        is saved to ``index_dir`` when given. ``encoder_options`` go to :class:`clirkit.encoders.OnnxEncoder`
        (pooling, prefixes, max_length, batch_size, fp16, ...)."""
        from clirkit.encoders import OnnxEncoder, encode_file, load_embeddings

        encoder = OnnxEncoder(model, device=device, threads=threads, **encoder_options)
        encode_file(encoder, corpus, output_prefix, fields=fields, passages=passages, quiet=quiet)
        embeddings, ids = load_embeddings(output_prefix)
        index = DenseIndex.build(embeddings, ids, pq=pq, threads=threads, quiet=quiet)
        if index_dir is not None:
            index.save(index_dir)
        return DenseRetriever(encoder, index, maxp=passages is not None)

    def search(self, queries: Mapping[str, str], k: int = 1000, **search_options: Any) -> RunDict:
        """Encode ``{qid: text}`` with the query prefix and return the top ``k`` per query as
        ``{qid: {docid: score}}`` (documents by MaxP when :attr:`maxp`; options as :meth:`DenseIndex.search`)."""
        qids = list(queries)
        vectors = self.encoder.encode_queries([queries[q] for q in qids])
        return self.index.search_run(
            vectors, qids, k, maxp=self.maxp, separator=self.separator, **search_options
        )
