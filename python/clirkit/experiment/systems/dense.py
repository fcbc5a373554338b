"""``kind = "dense"``: an ONNX bi-encoder with clirkit's dense index (flat, or PQ with ``pq = M``).

Each documents file is encoded once per model and settings (resumably: a killed encoding continues
where it stopped); a task's index holds the rows of its documents (a language's subset, or several
files together), and its search encodes the task's queries. With ``shards = N`` the index is the
sharded one of ``clirkit index dense --shards N`` (built and searched in threads here, or on a Ray
cluster with ``ray``: :mod:`clirkit.distributed.dense`), whose run is the single index's."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Callable, Optional

from clirkit._native import METRICS
from clirkit.experiment.data import iter_documents
from clirkit.experiment.plan import Plan
from clirkit.experiment.stage import RUN_FILE, RunContext, Stage, model_identity
from clirkit.experiment.stages import warn_empty_documents
from clirkit.experiment.systems import register_system_kind, system_error
from clirkit.experiment.systems.bm25 import drop_self_hits
from clirkit.experiment.systems.heads import declared_families, head_query_encoder, heads_encode_stage
from clirkit.experiment.systems.instructions import (
    INSTRUCTION_KEYS,
    encoder_instructions,
    file_encoding_options,
    instructions_key,
    read_instructions,
    role_instructions,
)
from clirkit.experiment.systems.precomputed import (
    document_parts,
    input_identity,
    query_input,
    query_rows,
    read_inputs,
)

EMBEDDINGS = "embeddings"  # prefix of embeddings.npy + embeddings.ids.txt in an encode artifact
QUERY_EMBEDDINGS = "queries.npy"
SEPARATOR = "#"
TAG = "clirkit-dense"


def cached_encoder(ctx: RunContext, name: str, encoder_class: Any, options: dict[str, Any], threads: Any):
    """One ``encoder_class`` per model and settings for the whole run (loading a model is slow)."""
    key = (name, options["model"], options["max_length"], options["batch_size"], instructions_key(options))
    return ctx.cached(
        key,
        lambda: encoder_class(
            options["model"],
            max_length=options["max_length"],
            batch_size=options["batch_size"],
            threads=threads,
            **encoder_instructions(options),
        ),
    )


def dense_encoder(ctx: RunContext, options: dict[str, Any]):
    from clirkit.encoders import OnnxEncoder

    return cached_encoder(ctx, "encoder", OnnxEncoder, options, ctx.threads or None)


def encode_documents_resumably(
    stage: Stage,
    out: Path,
    ctx: RunContext,
    options: dict[str, Any],
    path: str,
    name: str,
    encode_file: Callable[..., Any],
    written: Callable[[Path], Iterable[Path]],
) -> None:
    """Encode the documents at ``path`` with ``encode_file(encoder, path, prefix, ...)`` (a resumable
    encoding: :mod:`clirkit.encoders.corpus`) under the prefix ``name`` in the store's partial directory
    of ``stage``, which outlives a killed run so that the next one continues it, then move the files
    ``written(prefix)`` into ``out``."""
    warn_empty_documents(Path(path), options["fields"], stage.label)
    prefix = ctx.store.partial(stage.digest) / name
    encode_file(dense_encoder(ctx, options), path, prefix, **file_encoding_options(options, ctx.quiet))
    for done in written(prefix):
        done.rename(out / done.name)


def document_encode_params(model: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What an encoding of a documents file depends on (dense and multi-vector alike)."""
    return {
        "model": model,
        "fields": options["fields"],
        "passages": options["passages"],
        "max_length": options["max_length"],
        **role_instructions(options, "passage"),
        # float16 storage (``clirkit encode --dtype``) only when asked, so float32 encodings keep their key
        **({"dtype": options["dtype"]} if options.get("dtype", "float32") != "float32" else {}),
    }


def add_index_stage(
    plan: Plan, name: str, what: str, params: dict[str, Any], encodes: list[Stage], task: Any, build: Any
) -> Stage:
    """The stage indexing a task's documents from their encodings (keyed by the documents)."""
    return plan.add(
        Stage(name, f"{what} {task.docs.describe()}", params, tuple(encodes), task.docs.identity(), build)
    )


def document_encode_stages(
    plan: Plan,
    family: str,
    task: Any,
    options: dict[str, Any],
    model: Any,
    stage: tuple[str, str, dict[str, Any]],
    prefix: str,
    encode: Callable[..., None],
) -> tuple[list[Stage], list[str]]:
    """Each document source's encode stage and the prefix of its files: the ``encode-heads`` stage it
    shares with other systems when there is one, else a stage ``(name, verb, params)`` (keyed by the
    file, labelled ``<verb> <folder>/<file>``) running ``encode(stage, out, ctx, path=<file>)``."""
    name, verb, params = stage
    encodes, prefixes = [], []
    for source in task.docs.sources:
        shared = heads_encode_stage(plan, family, source, options, model)
        if shared is None:
            label = f"{verb} {Path(source.path).parent.name}/{Path(source.path).name}"
            action = functools.partial(encode, path=source.path)
            own = Stage(name, label, params, (), {"file": source.identity()["file"]}, action)
            shared = (plan.add(own), prefix)
        encodes.append(shared[0])
        prefixes.append(shared[1])
    return encodes, prefixes


def kept_document_ids(source: Any) -> Optional[frozenset[str]]:
    """Ids of the documents a language-filtered source keeps; None when the source has no filter."""
    if source.lang_filter is None:
        return None
    return frozenset(doc_id for doc_id, *_ in iter_documents(source))


def add_query_stage(
    plan: Plan,
    name: str,
    suffix: str,
    task: Any,
    model: Any,
    options: dict[str, Any],
    encode: Any,
    *,
    verb: str = "encode",
    max_length_option: str = "max_length",
) -> Stage:
    # Keyed by model and queries only: tasks asking the same questions (e.g. English topics
    # against each language) share this stage.
    return plan.add(
        Stage(
            name,
            f"{verb} {len(task.queries)} queries of {task.label}{suffix}",
            {"model": model, "max_length": options[max_length_option], **role_instructions(options, "query")},
            (),
            {"queries": task.queries_digest},
            encode,
        )
    )


def encode_task_queries(encoder: Any, task: Any, ctx: RunContext) -> Any:
    """``encoder.encode_queries`` of the task's query texts, with a progress bar of the queries encoded
    (counts and ETA; quiet when ``ctx.quiet`` or stderr is not a terminal)."""
    from clirkit._progress import ProgressBar, counting

    texts = [text for _, text, _ in task.queries]
    with counting(ProgressBar(len(texts), "queries", "queries", enabled=not ctx.quiet)):
        return encoder.encode_queries(texts)


def write_search_run(
    index: Any, queries: tuple[Any, ...], out: Path, hits: int, tag: str, task: Any, **options: Any
) -> None:
    """Searches ``index`` (dense, sharded dense or multi-vector: each takes ``queries`` then ``qids``
    last) and writes the task's run; dropping self hits asks for one hit more so each query keeps
    ``hits``. ``options`` (e.g. ``maxp``, ``threads``, dense ``refine``) go to the search as given."""
    if task.drop_self_hits:
        from clirkit.runs import write_run

        found = index.search_run(*queries, hits + 1, **options)
        run = {q: dict(drop_self_hits(list(found[q].items()), q, hits)) for q in found}
        write_run(out / RUN_FILE, run, tag)
    else:
        index.search_trec(*queries, out / RUN_FILE, hits, **options)


def encoder_options(r: Any, base: str, batch_size: int) -> dict[str, Any]:
    """The options every system that encodes its documents with an ONNX model takes."""
    return {
        "model": r.file("model", base, directory=True),
        "max_length": r.positive("max_length"),
        "batch_size": r.positive("batch_size", batch_size),
        "fields": list(r.strings("fields", ("title", "text"))),
        "hits": r.positive("hits"),
        **read_instructions(r),
    }


#: Keys that only apply to encoding documents and queries with a model.
ENCODING_KEYS = ("passages", "dtype", "max_length", "batch_size", "fields", *INSTRUCTION_KEYS)

#: The keys every system encoding with a model of its own takes, last in its ``options``.
MODEL_SYSTEM_KEYS = ("max_length", "batch_size", "fields", "hits", *INSTRUCTION_KEYS)

#: ``clirkit index dense``'s index options as dense system keys (besides ``pq``), with its defaults;
#: ``nprobe`` is ``clirkit search dense``'s.
INDEX_DEFAULTS: dict[str, Any] = {
    "nbits": 4,
    "ivf": None,
    "metric": "ip",
    "train_size": None,
    "seed": 0,
    "no_vectors": False,
    "vector_dtype": "float32",
}
INDEX_KEYS = tuple(INDEX_DEFAULTS)


def embedding_files(prefix: str) -> list[str]:
    """The files of precomputed embeddings: ``PREFIX.npy`` and ``PREFIX.ids.txt`` (as ``clirkit encode``
    writes them), or every shard's of a sharded (Ray Data) encoding directory."""
    if os.path.isdir(prefix):
        from clirkit.distributed.encode import encoded_shard_files

        return [os.fspath(f) for pair in encoded_shard_files(prefix) for f in pair]
    from clirkit.encoders.corpus import output_paths

    paths = output_paths(prefix)
    return [os.fspath(paths["npy"]), os.fspath(paths["ids"])]


def embedding_pairs(prefix: str) -> list[tuple[str, str]]:
    """``(.npy, ids)`` file pairs of :func:`embedding_files`, in row order."""
    files = embedding_files(prefix)
    return list(zip(files[::2], files[1::2]))


class DenseKind:
    name = "dense"
    options = (
        "model",
        "embeddings",
        "query_embeddings",
        "passages",
        "pq",
        "refine",
        *INDEX_KEYS,
        "nprobe",
        "shards",
        "ray",
        "memory_mb",
        "dtype",
        *MODEL_SYSTEM_KEYS,
    )

    def validate(self, r: Any, base: str) -> dict[str, Any]:
        refine = r.positive("refine", allow_zero=True)
        given = read_inputs(
            r, base, ("embeddings", "query_embeddings"), embedding_files, embedding_files, ENCODING_KEYS
        )
        index = read_index_options(r, refine)
        if given is not None:
            return {**given, "passages": None, "refine": refine, **index}
        encoding = self.encoding_options(r, base)
        if encoding["passages"] is not None and index["shards"] is not None:
            raise r.error(
                "shards",
                "a sharded index has no MaxP search, which passages = [size, stride] needs "
                "(as clirkit search dense --maxp refuses one): leave out shards or passages",
            )
        return {**encoding, "refine": refine, **index}

    @staticmethod
    def encoding_options(r: Any, base: str) -> dict[str, Any]:
        """The options of a system encoding its documents with an ONNX model, ``passages`` included
        (dense and multi-vector alike)."""
        passages = r.get("passages", list)
        if passages is not None and (
            len(passages) != 2 or not all(isinstance(p, int) and p > 0 for p in passages)
        ):
            raise r.error("passages", "must be [size, stride] in tokens")
        dtype = r.choice("dtype", ("float32", "float16"), "float32")
        return {**encoder_options(r, base, 32), "passages": passages, "dtype": dtype}

    def plan_search(self, plan: Plan, spec: Any, task: Any) -> Stage:
        options = spec.options
        if options["model"] is None:
            return self._plan_precomputed(plan, spec, task)
        model = model_identity(options["model"])
        encode_params = document_encode_params(model, options)

        def encode(stage: Stage, out: Path, ctx: RunContext, path: str) -> None:
            from clirkit.encoders.corpus import encode_file, output_paths

            def written(prefix: Path) -> list[Path]:
                return [output_paths(prefix)[kind] for kind in ("npy", "ids")]

            encode_documents_resumably(stage, out, ctx, options, path, EMBEDDINGS, encode_file, written)

        encodes, prefixes = document_encode_stages(
            plan, "dense", task, options, model, ("encode", "encode", encode_params), EMBEDDINGS, encode
        )

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.dense import read_ids

            parts = []
            for source, encoded, prefix in zip(task.docs.sources, encodes, prefixes):
                wanted = kept_document_ids(source)
                npy = encoded.output / f"{prefix}.npy"
                parts.append((npy, read_ids(encoded.output / f"{prefix}.ids.txt"), wanted))
            passages = options["passages"] is not None
            build_dense(plan, spec.name, task, parts, out / "index", options, ctx, passages=passages)

        index = add_index_stage(plan, "dense-index", "dense index", index_key(options), encodes, task, build)

        def encode_queries(stage: Stage, out: Path, ctx: RunContext) -> None:
            import numpy as np

            encoder = (
                head_query_encoder(ctx, options, "dense", options["max_length"])
                if "dense" in declared_families(options["model"])
                else dense_encoder(ctx, options)
            )
            vectors = encode_task_queries(encoder, task, ctx)
            np.save(out / QUERY_EMBEDDINGS, vectors)

        queries = add_query_stage(plan, "encode-queries", "", task, model, options, encode_queries)
        hits = options["hits"] or plan.config.hits
        params = {
            "hits": hits,
            "maxp": options["passages"] is not None,
            "refine": options["refine"],
            **({"nprobe": options["nprobe"]} if options.get("nprobe", 1) != 1 else {}),
            "drop_self_hits": task.drop_self_hits,
        }

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            import numpy as np

            qids = [q for q, _, _ in task.queries]
            vectors = np.load(queries.output / QUERY_EMBEDDINGS)
            maxp = options["passages"] is not None
            search_dense(index.output / "index", (vectors, qids), out, hits, task, options, ctx, maxp=maxp)

        return plan.add(Stage("search", f"{spec.name} {task.label}", params, (index, queries), None, search))

    def _plan_precomputed(self, plan: Plan, spec: Any, task: Any) -> Stage:
        """The index of the task's rows of precomputed embeddings, read in place, and its search
        with the task's rows of precomputed query embeddings: ``clirkit index dense`` then
        ``clirkit search dense`` on those files."""
        options = spec.options
        doc_parts = document_parts(plan, spec.name, "embeddings", options["embeddings"], task)
        files = [f for part in doc_parts for f in embedding_files(part.path)]
        selected = any(part.wanted is not None for part in doc_parts)
        identity: dict[str, Any] = {"embeddings": input_identity(files)}
        if selected:
            identity["docs"] = task.docs.identity()

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.dense import read_ids

            whole = doc_parts[0].path if len(doc_parts) == 1 and doc_parts[0].wanted is None else None
            if whole and os.path.isdir(whole) and len(embedding_pairs(whole)) == options["shards"]:
                from clirkit.distributed.dense import parts_from_encoding

                # One index shard per embedding shard, as clirkit index dense --embeddings DIR builds it.
                build_shards(parts_from_encoding(whole), out / "index", options, ctx)
                return
            parts = [
                (npy, read_ids(ids), part.wanted)
                for part in doc_parts
                for npy, ids in embedding_pairs(part.path)
            ]
            build_dense(plan, spec.name, task, parts, out / "index", options, ctx, passages=False)

        index = plan.add(
            Stage(
                "dense-index",
                f"dense index {task.docs.describe()}",
                index_key(options),
                (),
                identity,
                build,
            )
        )
        query_prefix = query_input(plan, spec.name, "query_embeddings", options["query_embeddings"], task)
        hits = options["hits"] or plan.config.hits
        params = {"hits": hits, "refine": options["refine"], "drop_self_hits": task.drop_self_hits}
        if options.get("nprobe", 1) != 1:
            params["nprobe"] = options["nprobe"]
        query_identity = {
            "query_embeddings": input_identity(embedding_files(query_prefix)),
            "queries": task.queries_digest,
        }

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            import numpy as np

            from clirkit.dense.vectors import as_matrix, load_vectors

            pairs = [load_vectors(npy, ids) for npy, ids in embedding_pairs(query_prefix)]
            qids = [q for _, ids in pairs for q in ids]
            vectors = as_matrix(
                pairs[0][0] if len(pairs) == 1 else np.concatenate([m for m, _ in pairs]), "queries"
            )
            rows = query_rows(qids, task, query_prefix)
            if len(rows) != len(qids):
                vectors, qids = vectors[rows], [qids[n] for n in rows]
            search_dense(index.output / "index", (vectors, qids), out, hits, task, options, ctx, maxp=False)

        return plan.add(
            Stage("search", f"{spec.name} {task.label}", params, (index,), query_identity, search)
        )


def read_shard_options(r: Any) -> dict[str, Any]:
    """``shards`` and ``ray`` of a system whose index can be sharded (``clirkit index KIND --shards N
    [--ray]``, ``clirkit search KIND [--ray]``), checked."""
    options = {"shards": r.positive("shards"), "ray": r.get("ray", (bool, str), False) or None}
    if isinstance(options["ray"], str) and not options["ray"].strip():
        raise r.error("ray", 'must be true or a cluster address ("auto", "ray://head:10001")')
    if options["ray"] is not None and options["shards"] is None:
        raise r.error("ray", "builds and searches a sharded index: give shards = N")
    return options


def read_index_options(r: Any, refine: Optional[int]) -> dict[str, Any]:
    """``pq``, :data:`INDEX_KEYS` and ``nprobe``, checked as ``clirkit index/search dense`` checks them."""
    pq = r.positive("pq")
    options: dict[str, Any] = {
        "pq": pq,
        "nbits": r.get("nbits", int, 4),
        "ivf": r.positive("ivf"),
        "metric": r.choice("metric", METRICS, "ip"),
        "train_size": r.positive("train_size"),
        "seed": r.positive("seed", 0, allow_zero=True),
        "no_vectors": r.get("no_vectors", bool, False),
        "vector_dtype": r.choice("vector_dtype", ("float32", "float16"), "float32"),
        "nprobe": r.positive("nprobe", 1),
        # clirkit index dense --shards N [--ray], clirkit search dense [--ray]
        **read_shard_options(r),
        # clirkit index dense --memory-mb: rows read at a time (the index is the same for any)
        "memory_mb": r.positive("memory_mb", 256, allow_zero=True),
    }
    if options["nbits"] not in (4, 8):
        raise r.error("nbits", f"must be 4 or 8, got {options['nbits']}")
    if options["seed"] >= 2**64:
        raise r.error("seed", "must be below 2^64")
    if pq is None:
        for key in ("nbits", "no_vectors", "vector_dtype"):
            if key in r.table and options[key] != INDEX_DEFAULTS[key]:
                raise r.error(key, "applies to a PQ index (pq = M)")
    if options["no_vectors"] and refine:
        raise r.error("refine", "re-scores with the stored vectors, which no_vectors = true leaves out")
    if options["ivf"] is None and "nprobe" in r.table:
        raise r.error("nprobe", "applies to an IVF index (ivf = NLIST)")
    return options


def index_key(options: dict[str, Any]) -> dict[str, Any]:
    """What a dense index stage depends on: ``pq``, every index option given another value than the
    CLI's default (an index built with the defaults keeps its key) and ``shards`` when given (a sharded
    index is another directory, even of one shard; where it is built, here or on Ray, changes nothing)."""
    changed = {k: options[k] for k in INDEX_KEYS if options.get(k, INDEX_DEFAULTS[k]) != INDEX_DEFAULTS[k]}
    if options.get("shards") is not None:
        changed["shards"] = options["shards"]
    return {"pq": options["pq"], **changed}


def index_build_options(options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :meth:`~clirkit.dense.DenseIndex.build_file` for ``options``."""
    built = {k: options.get(k, INDEX_DEFAULTS[k]) for k in INDEX_KEYS if k != "no_vectors"}
    return {"pq": options["pq"], **built, "keep_vectors": not options.get("no_vectors", False)}


def build_dense(
    plan: Plan,
    system: str,
    task: Any,
    parts: list[tuple[Path | str, list[str], Optional[frozenset[str]]]],
    index_dir: Path,
    options: dict[str, Any],
    ctx: RunContext,
    *,
    passages: bool,
) -> None:
    """Index the rows of ``parts`` (``.npy`` file, its ids, the ids kept or None for all) one part after
    another, streamed from the files as ``clirkit index dense`` reads its file: no matrix is copied.
    With ``passages`` a row is kept when its document (the id before the last ``#``) is. With
    ``shards`` those rows, in that order, are cut into shards of consecutive rows of about equal size,
    as ``clirkit index dense --shards N`` cuts the rows of its one file."""
    from clirkit.dense import DenseIndex

    files, rows, ids = [], [], []
    for npy, part_ids, wanted in parts:
        files.append(npy)
        if wanted is None:
            rows.append(None)
            ids.append(part_ids)
            continue
        doc_of = (lambda i: i.rsplit(SEPARATOR, 1)[0]) if passages else (lambda i: i)
        kept = [n for n, i in enumerate(part_ids) if doc_of(i) in wanted]
        rows.append(kept)
        ids.append([part_ids[n] for n in kept])
    shards = options.get("shards")
    if shards is not None:
        from clirkit.distributed.dense import split_parts

        total = sum(len(i) for i in ids)
        if shards > total:
            message = f"{shards} shards for the {total} rows of task {task.label}'s index"
            raise system_error(plan, system, ("shards",), message)
        build_shards(split_parts(list(zip(files, ids, rows)), shards), index_dir, options, ctx)
        return
    DenseIndex.build_file(
        files,
        [i for part_ids in ids for i in part_ids],
        index_dir,
        rows=rows,
        **index_build_options(options),
        memory_mb=options["memory_mb"],
        threads=ctx.threads,
        quiet=ctx.quiet,
    )


def build_shards(shards: list[Any], index_dir: Path, options: dict[str, Any], ctx: RunContext) -> None:
    """The sharded index of ``shards`` (:func:`clirkit.distributed.dense.build_sharded_dense`'s parts),
    built as ``clirkit index dense --shards N [--ray]`` builds it: in threads, or as Ray tasks."""
    from clirkit.distributed.dense import build_sharded_dense

    ray_cluster(options, ctx)
    build = {
        "memory_mb": options["memory_mb"],
        "threads": ctx.threads,
        "ray": options["ray"],
        "quiet": ctx.quiet,
    }
    build_sharded_dense(shards, index_dir, **index_build_options(options), **build)


def ray_cluster(options: dict[str, Any], ctx: RunContext) -> None:
    """With ``ray``, this process connected to that cluster once for the whole run (a local cluster
    started by the first stage that needs it serves every later one, and ends with the run)."""
    if options.get("ray") is not None:
        from clirkit.distributed.cluster import connected

        ctx.entered(("ray", options["ray"]), lambda: connected(options["ray"]))


def search_dense(
    index_dir: Path,
    queries: tuple[Any, list[str]],
    out: Path,
    hits: int,
    task: Any,
    options: dict[str, Any],
    ctx: RunContext,
    *,
    maxp: bool,
) -> None:
    """The task's run from the dense index at ``index_dir`` (``(vectors, qids)``), as ``clirkit search
    dense`` writes it: a sharded index (``shards``) searched through its shards in threads, or through
    shard actors on the Ray cluster ``ray`` names."""
    searching = {"refine": options["refine"], "nprobe": options.get("nprobe", 1)}
    if options.get("shards") is None:
        from clirkit.dense import DenseIndex

        opened = DenseIndex.open(index_dir)
        options = {"maxp": maxp, "threads": ctx.threads, "quiet": ctx.quiet, **searching}
        write_search_run(opened, queries, out, hits, TAG, task, **options)
        return
    from clirkit.distributed.dense import ShardedDenseIndex

    if options["ray"] is None:
        with ShardedDenseIndex.open(index_dir, threads=ctx.threads, quiet=ctx.quiet) as sharded:
            write_search_run(sharded, queries, out, hits, TAG, task, **searching)
        return
    ray_cluster(options, ctx)
    with ShardedDenseIndex.open(index_dir, ray=True, quiet=ctx.quiet) as sharded:
        write_search_run(sharded, queries, out, hits, TAG, task, **searching)


register_system_kind(DenseKind())
