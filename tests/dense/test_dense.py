"""Dense vector search: API, exactness of refine, save/open, CLI, and every bad input."""

from __future__ import annotations

import clirkit
import numpy as np
import pytest
from clirkit import DenseIndex, IndexFormatError, InvalidInputError
from clirkit.cli import main
from clirkit.dense import fastscan_kernels
from clirkit.encoders import maxp


def clustered(n: int, d: int, seed: int, centers: int = 16) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centers, d)).astype(np.float32)
    x = c[rng.integers(0, centers, n)] + 0.4 * rng.normal(size=(n, d)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def data():
    x = clustered(3000, 32, 0)
    q = clustered(50, 32, 1)
    ids = [f"d{i}" for i in range(len(x))]
    return x, q, ids


def exact_topk(x: np.ndarray, q: np.ndarray, k: int, metric: str = "ip") -> np.ndarray:
    if metric == "ip":
        s = q @ x.T
    else:
        s = -((q[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    return np.argsort(-s, axis=1, kind="stable")[:, :k]


def test_flat_is_exact(data):
    x, q, ids = data
    idx = DenseIndex.build(x, ids)
    assert (idx.kind, idx.dim, idx.ntotal, idx.metric) == ("flat", 32, 3000, "ip")
    scores, got = idx.search(q, k=10)
    assert scores.dtype == np.float32 and got.dtype == np.int64 and got.shape == (50, 10)
    want = exact_topk(x, q, 10)
    assert (got == want).mean() > 0.99  # float summation order may swap near-ties
    np.testing.assert_allclose(scores[:, 0], (q @ x.T).max(1), rtol=1e-5)


def test_pq_refine_over_everything_equals_flat(data):
    x, q, ids = data
    flat_s, flat_i = DenseIndex.build(x, ids).search(q, k=20)
    for kw in ({"pq": 16}, {"pq": 8, "nbits": 8}, {"pq": 16, "ivf": 8}):
        idx = DenseIndex.build(x, ids, keep_vectors=True, **kw)
        s, i = idx.search(q, k=20, refine=len(x), nprobe=8)
        np.testing.assert_array_equal(i, flat_i, err_msg=str(kw))
        np.testing.assert_array_equal(s, flat_s, err_msg=str(kw))


def test_pq_recall_and_thread_independence(data):
    x, q, ids = data
    idx = DenseIndex.build(x, ids, pq=16, quiet=True)
    s1, i1 = idx.search(q, k=10, threads=1, refine=0)
    s2, i2 = idx.search(q, k=10, threads=2, refine=0)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_array_equal(s1, s2)
    want = exact_topk(x, q, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(i1, want)])
    assert recall > 0.3, recall  # FAISS PQ16x4fs: about 0.4 on this data
    _, refined = idx.search(q, k=10, refine=100)
    recall_refined = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(refined, want)])
    assert recall_refined > max(recall, 0.9), (recall, recall_refined)


def test_pq_default_refines_top_k_when_vectors_are_stored(data):
    x, q, ids = data
    with_vectors = DenseIndex.build(x, ids, pq=16, quiet=True)
    assert with_vectors.has_vectors
    default = with_vectors.search(q, k=10)
    for got, want in zip(default, with_vectors.search(q, k=10, refine=10)):
        np.testing.assert_array_equal(got, want)
    exact = q @ x.T
    scores, hits = default
    np.testing.assert_allclose(scores, np.take_along_axis(exact, hits, 1), rtol=1e-5)
    pq_only = with_vectors.search(q, k=10, refine=0)
    assert not np.allclose(pq_only[0], scores)  # PQ scores are approximations
    assert with_vectors.search_run(q, [f"q{i}" for i in range(len(q))], k=10) == with_vectors.search_run(
        q, [f"q{i}" for i in range(len(q))], k=10, refine=10
    )
    codes_only = DenseIndex.build(x, ids, pq=16, keep_vectors=False, quiet=True)
    assert not codes_only.has_vectors
    for got, want in zip(codes_only.search(q, k=10), codes_only.search(q, k=10, refine=0)):
        np.testing.assert_array_equal(got, want)


def test_l2_metric_scores_are_negated_distances(data):
    x, q, ids = data
    idx = DenseIndex.build(x, ids, metric="l2")
    s, i = idx.search(q[:3], k=5)
    d = ((q[:3, None, :] - x[i]) ** 2).sum(-1)
    np.testing.assert_allclose(s, -d, rtol=1e-4, atol=1e-5)
    assert (np.diff(s, axis=1) <= 0).all()


def test_padding_when_k_exceeds_collection():
    x = clustered(40, 8, 3)
    idx = DenseIndex.build(x, [str(i) for i in range(40)], pq=4)
    s, i = idx.search(x[:2], k=50)
    assert (i[:, 40:] == -1).all() and np.isneginf(s[:, 40:]).all()
    assert sorted(i[0, :40].tolist()) == list(range(40))


def test_save_open_round_trip(tmp_path, data):
    x, q, ids = data
    for kw in ({}, {"pq": 16}, {"pq": 16, "ivf": 4, "metric": "l2"}, {"pq": 8, "nbits": 8}):
        idx = DenseIndex.build(x, ids, **kw)
        path = tmp_path / f"idx{len(kw)}{kw.get('nbits', 4)}"
        idx.save(path)
        back = DenseIndex.open(path)
        assert (back.kind, back.dim, back.ntotal, back.metric) == (idx.kind, idx.dim, idx.ntotal, idx.metric)
        assert back.ids[123] == "d123" and len(back.ids) == 3000 and "d7" in back.ids
        for a, b in zip(idx.search(q, k=7, nprobe=2), back.search(q, k=7, nprobe=2)):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(IndexFormatError, match="not a clirkit index"):
        DenseIndex.open(tmp_path / "missing")


def test_search_run_and_trec(tmp_path, data):
    x, q, ids = data
    idx = DenseIndex.build(x, ids, pq=16)
    qids = [f"q{i}" for i in range(len(q))]
    run = idx.search_run(q, qids, k=5)
    s, i = idx.search(q, k=5)
    assert list(run) == qids
    assert run["q3"] == {ids[j]: pytest.approx(float(v)) for j, v in zip(i[3], s[3])}
    out = tmp_path / "run.trec"
    idx.search_trec(q, qids, out, k=5, tag="t")
    back = clirkit.read_run(out)
    assert set(back["q0"]) == set(run["q0"])
    with pytest.raises(InvalidInputError, match="duplicate query id 'q0'"):
        idx.search_run(q[:2], ["q0", "q0"], k=5)
    with pytest.raises(InvalidInputError, match="1 query ids for 2 queries"):
        idx.search_run(q[:2], ["q0"], k=5)


def test_bad_inputs(data):
    x, q, ids = data
    with pytest.raises(InvalidInputError, match="2999 ids for 3000 vectors"):
        DenseIndex.build(x, ids[:-1])
    dup = list(ids)
    dup[10] = "d3"
    with pytest.raises(clirkit.ClirkitError, match="duplicate id 'd3'"):
        DenseIndex.build(x, dup)
    bad = x.copy()
    bad[17, 5] = np.nan
    with pytest.raises(InvalidInputError, match="vector 17 has a non-finite value"):
        DenseIndex.build(bad, ids)
    bad[17, 5] = np.inf
    with pytest.raises(InvalidInputError, match="vector 17 has a non-finite value"):
        DenseIndex.build(bad, ids, pq=8)
    with pytest.raises(InvalidInputError, match="M=5 does not divide the dimension 32"):
        DenseIndex.build(x, ids, pq=5)
    with pytest.raises(InvalidInputError, match="too few training vectors: 10"):
        DenseIndex.build(x[:10], ids[:10], pq=8)
    with pytest.raises(InvalidInputError, match="too few training vectors: 100 .* 256 centroids"):
        DenseIndex.build(x[:100], ids[:100], pq=8, nbits=8)
    with pytest.raises(InvalidInputError, match="unknown metric 'cos'"):
        DenseIndex.build(x, ids, metric="cos")
    with pytest.raises(InvalidInputError, match="2-D"):
        DenseIndex.build(x[0], ids[:1])
    idx = DenseIndex.build(x, ids, pq=8, keep_vectors=False)
    with pytest.raises(InvalidInputError, match="queries have dimension 16, the index has dimension 32"):
        idx.search(q[:, :16])
    with pytest.raises(InvalidInputError, match="queries: vector 0 has a non-finite"):
        idx.search(np.full((1, 32), np.nan, dtype=np.float32))
    with pytest.raises(InvalidInputError, match="refine needs the full vectors"):
        idx.search(q, refine=10)


def test_float16_and_single_query(data):
    x, q, ids = data
    idx = DenseIndex.build(x.astype(np.float16), ids)
    s, _ = idx.search(q[0].astype(np.float16), k=3)
    assert s.shape == (1, 3)


def test_kernels_listed():
    assert fastscan_kernels()[0] == "scalar"


def index_dense_cli(tmp_path, *extra: str) -> int:
    """`clirkit index dense` of ``tmp_path``'s docs.npy and ids.txt into ``tmp_path/idx``: the exit code."""
    return main(
        [
            "index",
            "dense",
            "--embeddings",
            str(tmp_path / "docs.npy"),
            "--ids",
            str(tmp_path / "ids.txt"),
            "--index",
            str(tmp_path / "idx"),
            "--quiet",
            *extra,
        ]
    )


def test_cli_index_and_search(tmp_path, data):
    x, q, ids = data
    np.save(tmp_path / "docs.npy", x.astype(np.float16))
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    np.save(tmp_path / "q.npy", q)
    (tmp_path / "qids.txt").write_text("\n".join(f"q{i}" for i in range(len(q))) + "\n")
    idx = tmp_path / "idx"
    assert index_dense_cli(tmp_path, "--pq", "16") == 0
    run = tmp_path / "run.trec"
    assert (
        main(
            [
                "search",
                "dense",
                "--index",
                str(idx),
                "--queries",
                str(tmp_path / "q.npy"),
                "--qids",
                str(tmp_path / "qids.txt"),
                "--output",
                str(run),
                "--k",
                "10",
                "--refine",
                "50",
                "--quiet",
            ]
        )
        == 0
    )
    lines = run.read_text().splitlines()
    assert len(lines) == 500 and lines[0].split()[1] == "Q0" and lines[0].split()[-1] == "clirkit-dense"


@pytest.fixture(scope="module")
def passages():
    """400 documents of 1 to 20 passages (ids ``d{i}#{k}``), each document's passages close together, so
    the top passages of a query crowd into few documents."""
    rng = np.random.default_rng(3)
    centers = clustered(400, 16, 4)
    counts = rng.integers(1, 21, len(centers))
    x = np.repeat(centers, counts, axis=0) + 0.05 * rng.normal(size=(counts.sum(), 16)).astype(np.float32)
    ids = [f"d{d}#{k}" for d, n in enumerate(counts) for k in range(n)]
    return x.astype(np.float32), clustered(30, 16, 5), ids


def test_maxp_search_returns_k_documents_equal_to_deep_search_then_maxp(passages):
    x, q, ids = passages
    qids = [f"q{i}" for i in range(len(q))]
    flat = DenseIndex.build(x, ids)
    got = flat.search_run(q, qids, k=10, maxp=True)
    assert all(len(docs) == 10 and not any("#" in d for d in docs) for docs in got.values())
    assert got == maxp(flat.search_run(q, qids, k=len(ids)), depth=10)
    assert any(len(docs) < 10 for docs in maxp(flat.search_run(q, qids, k=10)).values())
    pq = DenseIndex.build(x, ids, pq=8)
    assert all(len(docs) == 10 for docs in pq.search_run(q, qids, k=10, maxp=True).values())
    renamed = DenseIndex.build(x, [i.replace("#", "::") for i in ids])
    assert renamed.search_run(q, qids, k=10, maxp=True, separator="::") == got
    with pytest.raises(InvalidInputError, match="separator must not be empty"):
        flat.search_run(q, qids, k=10, maxp=True, separator="")


def test_cli_maxp_search_equals_deep_search_then_clirkit_maxp(tmp_path, passages):
    x, q, ids = passages
    np.save(tmp_path / "passages.npy", x)
    (tmp_path / "passages.ids.txt").write_text("\n".join(ids) + "\n")
    np.save(tmp_path / "q.npy", q)
    (tmp_path / "qids.txt").write_text("\n".join(f"q{i}" for i in range(len(q))) + "\n")
    index = str(tmp_path / "idx")
    main(["index", "dense", "--embeddings", str(tmp_path / "passages.npy"), "--ids", str(tmp_path / "passages.ids.txt"),
          "--index", index, "--quiet"])  # fmt: skip
    search = ["search", "dense", "--index", index, "--queries", str(tmp_path / "q.npy"),
              "--qids", str(tmp_path / "qids.txt"), "--quiet"]  # fmt: skip
    assert main([*search, "--k", "10", "--maxp", "--output", str(tmp_path / "maxp.trec")]) == 0
    assert main([*search, "--k", str(len(ids)), "--output", str(tmp_path / "deep.trec")]) == 0
    assert (
        main(["maxp", str(tmp_path / "deep.trec"), "--depth", "10", "--output", str(tmp_path / "docs.trec")])
        == 0
    )
    searched = clirkit.read_run(tmp_path / "maxp.trec")
    assert all(len(docs) == 10 for docs in searched.values()) and len(searched) == len(q)
    assert searched == clirkit.read_run(tmp_path / "docs.trec")


def test_cli_errors(tmp_path, data, capsys):
    x, _, ids = data
    np.save(tmp_path / "docs.npy", x)
    (tmp_path / "ids.txt").write_text("\n".join(ids[:-1]) + "\n")
    assert index_dense_cli(tmp_path) == 2
    assert "2999 ids for 3000 vectors" in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()
    (tmp_path / "ids.txt").write_text("a\n\nb\n")
    assert index_dense_cli(tmp_path) == 2
    assert "ids.txt:2" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["flat", "pq", "ivf"])
def test_every_kernel_gives_identical_results(data, monkeypatch, kind):
    x, q, ids = data
    pq = None if kind == "flat" else 16
    idx = DenseIndex.build(x, ids, pq=pq, ivf=8 if kind == "ivf" else None)
    results = {}
    for isa in fastscan_kernels():
        monkeypatch.setenv("CLIRKIT_FASTSCAN_ISA", isa)
        results[isa] = idx.search(q, k=50, nprobe=3)
    base = results["scalar"]
    for isa, (s, i) in results.items():
        np.testing.assert_array_equal(i, base[1], err_msg=isa)
        np.testing.assert_array_equal(s, base[0], err_msg=isa)
    monkeypatch.setenv("CLIRKIT_FASTSCAN_ISA", "sse9")
    with pytest.raises(InvalidInputError, match="CLIRKIT_FASTSCAN_ISA=sse9"):
        idx.search(q)
