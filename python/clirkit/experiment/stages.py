"""Stage actions shared by every system kind: documents, qrels, fusion, reranking, evaluation.
Each action builds its artifact in the directory it is given (the store renames it into place)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from clirkit.experiment.config import FusionSpec, RerankSpec
from clirkit.experiment.data import Corpus, DocSet, Task, file_identity, iter_documents
from clirkit.experiment.stage import EVAL_FILE, RUN_FILE, RunContext, Stage, model_identity
from clirkit.experiment.toml_source import ExperimentError


def write_documents(docs: DocSet):
    """Action: the task's documents as one JSONL file, each record whole (every field a system may
    name) with its id as ``_id`` and its analyzer language as ``lang``."""

    def action(stage: Stage, out: Path, ctx: RunContext) -> None:
        seen: set[str] = set()
        with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
            for source in docs.sources:
                for doc_id, fields, lang in iter_documents(source):
                    if doc_id in seen:
                        raise ExperimentError(
                            f"{source.path}: document id '{doc_id}' appears twice in {docs.describe()}"
                        )
                    seen.add(doc_id)
                    record = {**fields, "_id": doc_id, "lang": lang}
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")

    return action


def write_qrels(task: Task):
    """Action: the task's qrels restricted to its queries and searched documents (TREC format)."""

    def action(stage: Stage, out: Path, ctx: RunContext) -> None:
        from clirkit.runs import read_qrels

        wanted_docs = {doc_id for source in task.docs.sources for doc_id, *_ in iter_documents(source)}
        wanted_queries = {q for q, _, _ in task.queries}
        with open(out / "qrels.trec", "w", encoding="utf-8") as f:
            for qid, judged in read_qrels(task.qrels).items():
                if qid not in wanted_queries:
                    continue
                for doc_id, label in judged.items():
                    if doc_id in wanted_docs:
                        f.write(f"{qid} 0 {doc_id} {label}\n")

    return action


def fuse_stage(spec: FusionSpec, task: Task, inputs: tuple[Stage, ...]) -> Stage:
    params = {
        "method": spec.method,
        "k": spec.k,
        "weights": spec.weights,
        "depth": spec.depth,
        "norm": spec.norm,
        "alpha": spec.alpha,
        "top": spec.top,
    }

    def action(stage: Stage, out: Path, ctx: RunContext) -> None:
        from clirkit.fusion import fuse_native

        fused = fuse_native(
            [str(s.output / RUN_FILE) for s in inputs],
            method=spec.method,
            k=spec.k,
            weights=spec.weights,
            depth=spec.depth,
            norm=spec.norm,
            alpha=spec.alpha,
            top=spec.top,
            threads=ctx.threads,
        )
        fused.write(str(out / RUN_FILE), "clirkit-fuse", ctx.threads)

    return Stage("fuse", f"{spec.name} {task.label}", params, inputs, None, action)


class _EmbeddingScorer:
    """Cosine similarity (the dot product of L2-normalized vectors) from an encoder, as
    :meth:`CallableScorer.from_encoder` computes it, memoizing every embedding; embeddings a dense
    system already computed with the same model and settings are fed in instead of re-encoded."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.memo: dict[str, dict[str, object]] = {"q": {}, "p": {}}

    def seed(self, kind: str, texts: list[str], vectors) -> None:
        memo = self.memo[kind]
        for text, vector in zip(texts, vectors):
            memo.setdefault(text, vector)

    def embed(self, kind: str, texts: list[str]) -> list[object]:
        memo = self.memo[kind]
        missing = [t for t in dict.fromkeys(texts) if t not in memo]
        if missing:
            encode = self.encoder.encode_queries if kind == "q" else self.encoder.encode_passages
            for text, vector in zip(missing, encode(missing)):
                memo[text] = vector
        return [memo[t] for t in texts]

    def __call__(self, query: str, passages: list[str]) -> list[float]:
        import numpy

        (q,) = self.embed("q", [query])
        return [float(numpy.dot(q, p)) for p in self.embed("p", passages)]


def _rerank_backend(spec: RerankSpec, ctx: RunContext):
    """``(listwise backend or pointwise scorer, embedding memo or None)``: made by
    :func:`clirkit.rerank.settings.make_reranker` from the node's options, as ``clirkit rerank`` makes
    it; the bi-encoder (``pointwise``) scorer keeps an embedding memo a dense system can seed."""
    from clirkit.rerank import CallableScorer
    from clirkit.rerank.settings import RerankerSettings, make_reranker

    options = spec.options
    if spec.backend == "pointwise":

        def make():
            from clirkit.encoders import OnnxEncoder

            encoder = OnnxEncoder(
                options["model"],
                max_length=options["max_length"],
                batch_size=options["batch_size"],
                threads=ctx.threads or None,
            )
            scorer = _EmbeddingScorer(encoder)
            return CallableScorer(scorer, f"cosine:{options['model']}"), scorer

        # One scorer per model for the whole run: its embeddings carry over between tasks.
        return ctx.cached(("pointwise", options["model"], options["max_length"], options["batch_size"]), make)
    settings = {k: v for k, v in options.items() if k != "fields"}
    if spec.backend == "cross-encoder":
        settings["model_dir"] = settings.pop("model")
        made = ctx.cached(("cross-encoder", *sorted(settings.items())), lambda: make_reranker(
            RerankerSettings(backend=spec.backend, **settings)
        ))  # fmt: skip
        return made[1], None
    backend, scorer = make_reranker(RerankerSettings(backend=spec.backend, **settings))
    return (backend if backend is not None else scorer), None


def rerank_key(spec: RerankSpec) -> dict:
    """What a rerank node's run depends on: every option but how a server is asked
    (:data:`~clirkit.experiment.config.nodes.RERANK_TRANSPORT_KEYS`), models and tokenizers by their
    content."""
    from clirkit.experiment.config.nodes import RERANK_TRANSPORT_KEYS
    from clirkit.rerank.settings import LISTWISE_BACKENDS, ONNX_BACKENDS

    params = {k: v for k, v in spec.options.items() if k not in RERANK_TRANSPORT_KEYS}
    params.update(backend=spec.backend, depth=spec.depth)
    if spec.backend in ONNX_BACKENDS:
        params["model"] = model_identity(spec.options["model"])
    if params.get("tokenizer") is not None:
        params["tokenizer"] = file_identity(params["tokenizer"])
    # A pointwise backend scores every candidate and sorts the whole depth, as ``clirkit rerank`` does;
    # windows are a listwise backend's (RankGPT's partial sort).
    if spec.backend in LISTWISE_BACKENDS:
        params.update(window=spec.window, stride=spec.stride)
    else:
        params["sort"] = "full"
    return params


def _corpus_records(corpus: Corpus, fields: list[str]):
    """The records of a corpus file, or of several read in sequence."""
    from clirkit.datasets import iter_jsonl

    for path in [corpus] if isinstance(corpus, Path) else [f.path for f in corpus]:
        yield from iter_jsonl(path, fields)


def warn_empty_documents(corpus: Corpus, fields: list[str], system: str) -> int:
    """Count the documents of ``corpus`` (a file, or several read in sequence) whose ``fields`` hold no
    text, warning on stderr with the count when there are any (a system given fields its documents lack
    indexes nothing); returns the count."""
    import sys

    total = empty = 0
    for record in _corpus_records(corpus, fields):
        total += 1
        empty += not record.text
    if empty:
        named = corpus if isinstance(corpus, Path) else " + ".join(str(f.path) for f in corpus)
        print(
            f"clirkit: warning: {system}: {empty} of {total} documents of {named} have no text in "
            f"fields {fields}",
            file=sys.stderr,
        )
    return empty


def _document_texts(corpus: Corpus, fields: list[str]) -> dict[str, str]:
    """``{doc id: the present fields joined by a space}`` (the reranker sees what the file names)."""
    return {record.id: record.text for record in _corpus_records(corpus, fields)}


def reusable_embeddings(stages: list[Stage], spec: RerankSpec, task: Task) -> list[Stage]:
    """Stages that encoded this task's documents or queries exactly as the pointwise reranker would
    (same model, maximum length and fields, whole documents)."""
    if spec.backend != "pointwise":
        return []
    model = model_identity(spec.options["model"])
    max_length = spec.options["max_length"]
    passages = {"model": model, "fields": spec.options["fields"], "passages": None, "max_length": max_length}
    files = [source.identity()["file"] for source in task.docs.sources]
    out = []
    for stage in stages:
        if stage.kind == "encode" and dict(stage.params) == passages and stage.identity["file"] in files:
            out.append(stage)
        elif (
            stage.kind == "encode-queries"
            and dict(stage.params) == {"model": model, "max_length": max_length}
            and stage.identity == {"queries": task.queries_digest}
        ):
            out.append(stage)
    return out


def _seed(scorer: _EmbeddingScorer, seeds: list[Stage], task: Task, doc_text: dict[str, str]) -> None:
    import numpy as np

    from clirkit.encoders.corpus import load_embeddings

    for stage in seeds:
        if stage.kind == "encode-queries":
            scorer.seed("q", [text for _, text, _ in task.queries], np.load(stage.output / "queries.npy"))
        else:
            matrix, ids = load_embeddings(stage.output / "embeddings")
            rows = [n for n, doc_id in enumerate(ids) if doc_id in doc_text]
            scorer.seed("p", [doc_text[ids[n]] for n in rows], matrix[rows])


def failed_rerank_message(label: str, stats, cache: Path) -> str:
    """Why a rerank stage is not committed: its failed windows, named (the first ten)."""
    shown = "; ".join(f"query {f.qid} window at {f.start}: {f.reason}" for f in stats.failed_windows[:10])
    more = f"; and {len(stats.failed_windows) - 10} more" if len(stats.failed_windows) > 10 else ""
    return (
        f"rerank {label}: {len(stats.failed_windows)} of {stats.windows} windows failed ({shown}{more}); "
        f"the stage is not committed. The answers obtained are kept in {cache}, so the next run asks "
        "only the failed windows"
    )


def rerank_stage(
    spec: RerankSpec,
    task: Task,
    source: Stage,
    docs_path: Corpus,
    docs_stage: Optional[Stage],
    seeds: list[Stage],
) -> Stage:
    params = rerank_key(spec)
    inputs = (source,) if docs_stage is None else (source, docs_stage)
    identity = {"queries": task.queries_digest, "docs": task.docs.identity()}

    def action(stage: Stage, out: Path, ctx: RunContext) -> None:
        from clirkit.rerank import Scorer, rerank, rerank_pointwise
        from clirkit.runs import write_run

        backend, memo = _rerank_backend(spec, ctx)
        doc_text = _document_texts(docs_path, spec.options["fields"])
        queries = {q: text for q, text, _ in task.queries}
        cache = ctx.store.partial(stage.digest) / "answers.sqlite"
        if memo is not None:
            _seed(memo, seeds, task, doc_text)
        if isinstance(backend, Scorer):
            run, stats = rerank_pointwise(
                str(source.output / RUN_FILE), queries, doc_text, backend, depth=spec.depth, cache=cache,
                progress=not ctx.quiet,
            )  # fmt: skip
        else:
            run, stats = rerank(
                str(source.output / RUN_FILE),
                queries,
                doc_text,
                backend,
                depth=spec.depth,
                window=spec.window,
                stride=spec.stride,
                cache=cache,
                retry_failed=True,  # a stage is committed only when every window was answered
                progress=not ctx.quiet,
            )
        if stats.failed_windows:
            raise ExperimentError(failed_rerank_message(stage.label, stats, cache))
        write_run(out / RUN_FILE, run, "clirkit-rerank")

    return Stage("rerank", f"{spec.name} {task.label}", params, inputs, identity, action)


def eval_stage(task: Task, run: Stage, qrels: Path, qrels_stage: Optional[Stage]) -> Stage:
    from clirkit.evaluation import measure_keys

    inputs = (run,) if qrels_stage is None else (run, qrels_stage)
    identity = None if qrels_stage is not None else {"qrels": _qrels_identity(qrels)}
    params: dict = {"measures": list(task.measures)}
    # On a multilingual task, alpha-nDCG's aspects are the documents' languages (NeuCLIR's language
    # fairness); the documents are already in the key through the run's search stage.
    mlir = task.setting == "mlir"
    by_language = mlir and any(key.startswith("alpha_nDCG") for key in measure_keys(task.measures, mlir=True))
    if by_language:
        params["aspects"] = "document languages"

    def action(stage: Stage, out: Path, ctx: RunContext) -> None:
        import warnings

        from clirkit.evaluation import evaluate

        languages = _judged_document_languages(task, qrels) if by_language else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            per_query = evaluate(
                str(qrels),
                str(run.output / RUN_FILE),
                list(task.measures),
                per_query=True,
                doc_languages=languages,
            )
        aggregate = per_query.pop("all")
        keys = {m: measure_keys([m], mlir=mlir) for m in task.measures}
        with open(out / EVAL_FILE, "w", encoding="utf-8") as f:
            json.dump({"keys": keys, "aggregate": aggregate, "per_query": per_query}, f)

    return Stage("eval", f"eval {run.label}", params, inputs, identity, action)


def _judged_document_languages(task: Task, qrels: Path) -> dict[str, str]:
    """The language of every judged document of the task, read from its documents (streamed: only the
    judged ones are kept)."""
    from clirkit.runs import read_qrels

    judged = {doc for docs in read_qrels(str(qrels)).values() for doc in docs}
    return {
        doc_id: lang
        for source in task.docs.sources
        for doc_id, _, lang in iter_documents(source)
        if doc_id in judged
    }


def _qrels_identity(path: Path) -> dict:
    return file_identity(str(path))


def read_eval(stage: Stage) -> dict:
    with open(stage.output / EVAL_FILE, encoding="utf-8") as f:
        return json.load(f)
