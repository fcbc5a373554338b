//! Index-level tests on synthetic token matrices: compressed search against exact MaxSim, budgets,
//! MaxP, and corrupt files.

use super::parts::{TokenPart, TokenParts};
use super::*;
use crate::dense::source::VectorSource;
use crate::io::replace_in_file;
use crate::rng::SplitMix64;
use std::path::Path;

const DIM: usize = 16;

/// `ndocs` documents of 3 to 12 unit tokens around a few topic directions, and their ids.
fn collection(ndocs: usize, seed: u64) -> (Vec<f32>, Vec<u64>, Vec<String>) {
    let mut rng = SplitMix64::new(seed);
    let topics: Vec<Vec<f32>> = (0..32)
        .map(|_| (0..DIM).map(|_| rng.unit() as f32 - 0.5).collect())
        .collect();
    let (mut data, mut offsets, mut ids) = (Vec::new(), vec![0u64], Vec::new());
    for d in 0..ndocs {
        let n = 3 + rng.below(10);
        for _ in 0..n {
            let topic = &topics[rng.below(topics.len())];
            let v: Vec<f32> = topic
                .iter()
                .map(|t| t + 0.8 * (rng.unit() as f32 - 0.5))
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            data.extend(v.iter().map(|x| x / norm));
        }
        offsets.push(offsets.last().unwrap() + n as u64);
        ids.push(format!("d{d}#{}", d % 3));
    }
    (data, offsets, ids)
}

fn build(dir: &Path, nbits: usize, keep_vectors: bool) -> (MultiVectorIndex, Vec<f32>, Vec<u64>) {
    let (data, offsets, ids) = collection(400, 1);
    let docs = TokenMatrix::new(&data, DIM, &offsets, Some(&ids), "docs").unwrap();
    let opts = BuildOptions {
        nbits,
        centroids: Some(32),
        keep_vectors,
        threads: 2,
        ..Default::default()
    };
    let index = MultiVectorIndex::build(&docs, &ids, dir, &opts).unwrap();
    (index, data, offsets)
}

fn top_ids(hits: &Hits, k: usize) -> Vec<Vec<u32>> {
    hits.iter()
        .map(|h| h.iter().take(k).map(|x| x.1).collect())
        .collect()
}

/// A 2-bit index with its vectors in a temporary directory, and `nq` queries from `seed`
/// (tokens, offsets, ids `q0`...).
#[allow(clippy::type_complexity)]
fn search_fixture(
    nq: usize,
    seed: u64,
) -> (
    tempfile::TempDir,
    MultiVectorIndex,
    (Vec<f32>, Vec<u64>, Vec<String>),
) {
    let dir = tempfile::tempdir().unwrap();
    let (index, _, _) = build(&dir.path().join("mv"), 2, true);
    let (qdata, qoffsets, _) = collection(nq, seed);
    let qids = (0..nq).map(|q| format!("q{q}")).collect();
    (dir, index, (qdata, qoffsets, qids))
}

#[test]
fn compressed_search_agrees_with_exact_and_converges_with_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (index, data, offsets) = build(&dir.path().join("mv"), 4, true);
    assert!(index.has_vectors() && index.ndocs() == 400);
    let (qdata, qoffsets, _) = collection(12, 7);
    let queries = TokenMatrix::new(&qdata, DIM, &qoffsets, None, "queries").unwrap();
    let k = 10;
    let exact = SearchOptions {
        k,
        exact: true,
        ..Default::default()
    };
    let reference = exact::search(
        &TokenMatrix::new(&data, DIM, &offsets, None, "docs").unwrap(),
        &queries,
        k,
        1,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(index.search(&queries, &exact).unwrap(), reference);

    let everything = SearchOptions {
        k,
        ncells: Some(index.ncentroids()),
        centroid_score_threshold: Some(f32::NEG_INFINITY),
        ndocs: Some(index.ndocs()),
        rerank: Some(index.ndocs()),
        ..Default::default()
    };
    let full = index.search(&queries, &everything).unwrap();
    // Every document scored from its decompressed tokens, by hand.
    let mut scratch = (Vec::new(), Vec::new());
    for (q, hits) in full.iter().enumerate() {
        let mut want: Vec<(f32, u32)> = (0..index.ndocs() as u32)
            .map(|d| {
                index.decompress(d, &mut scratch.0);
                (
                    exact::maxsim(queries.item(q), &scratch.0, DIM, &mut scratch.1),
                    d,
                )
            })
            .collect();
        want.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        assert_eq!(hits, &want[..k]);
    }
    let agreement = |hits: &Hits| {
        let (got, want) = (top_ids(hits, k), top_ids(&reference, k));
        let same: usize = got
            .iter()
            .zip(&want)
            .map(|(g, w)| g.iter().filter(|d| w.contains(d)).count())
            .sum();
        same as f64 / (k * got.len()) as f64
    };
    // Synthetic topics make many near-ties; the >= 95% check on real embeddings is in tests/.
    assert!(agreement(&full) >= 0.8, "{}", agreement(&full));
    let small = SearchOptions {
        k,
        ndocs: Some(k),
        rerank: Some(k),
        ..Default::default()
    };
    let small_hits = index.search(&queries, &small).unwrap();
    assert!(agreement(&small_hits) <= agreement(&full));
    // Refining the largest budget with the full vectors is exact search.
    let refined = SearchOptions {
        refine: true,
        ..everything.clone()
    };
    assert_eq!(index.search(&queries, &refined).unwrap(), reference);
    // Thread count does not change results.
    let one = SearchOptions {
        threads: 1,
        ..everything.clone()
    };
    assert_eq!(index.search(&queries, &one).unwrap(), full);
}

#[test]
fn maxp_returns_documents_and_runs_name_queries() {
    let (_dir, index, (qdata, qoffsets, qids)) = search_fixture(3, 9);
    let queries = TokenMatrix::new(&qdata, DIM, &qoffsets, None, "queries").unwrap();
    let opts = SearchOptions {
        k: 5,
        exact: true,
        ..Default::default()
    };
    let run = index.search_run(&queries, &qids, &opts, Some("#")).unwrap();
    for (_, docs) in &run.queries {
        assert_eq!(docs.len(), 5);
        assert!(docs.iter().all(|d| !d.doc_id.contains('#')));
    }
    let dup = vec!["q".to_string(); 3];
    assert!(index.search_run(&queries, &dup, &opts, None).is_err());
    let wrong = TokenMatrix::new(&qdata[..8], 8, &[0, 1], None, "queries").unwrap();
    let err = index.search(&wrong, &opts).unwrap_err().to_string();
    assert!(err.contains("dimension 8"), "{err}");
}

#[test]
fn corrupt_or_inconsistent_files_are_format_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mv");
    let (index, _, _) = build(&path, 2, false);
    drop(index);
    let no_vectors = MultiVectorIndex::open(&path).unwrap();
    let (qdata, qoffsets, _) = collection(2, 3);
    let queries = TokenMatrix::new(&qdata, DIM, &qoffsets, None, "queries").unwrap();
    let exact = SearchOptions {
        k: 3,
        exact: true,
        ..Default::default()
    };
    assert!(no_vectors
        .search(&queries, &exact)
        .unwrap_err()
        .to_string()
        .contains("keep_vectors"));
    drop(no_vectors);
    for file in [
        "codes.bin",
        "residuals.bin",
        "ivf_docs.bin",
        "doc_offsets.bin",
    ] {
        let target = path.join(file);
        let original = std::fs::read(&target).unwrap();
        let mut bytes = original.clone();
        let last = bytes.len() - 1;
        bytes[crate::io::format::HEADER_LEN + 1] ^= 0x5a;
        std::fs::write(&target, &bytes).unwrap();
        let err = MultiVectorIndex::open(&path)
            .err()
            .expect("corruption is caught");
        assert!(matches!(err, crate::Error::Format { .. }), "{err}");
        assert!(err.to_string().contains(file), "{err}");
        bytes.truncate(last);
        std::fs::write(&target, &bytes).unwrap();
        let err = MultiVectorIndex::open(&path)
            .err()
            .expect("truncation is caught");
        assert!(err.to_string().contains(file), "{err}");
        std::fs::write(&target, &original).unwrap();
    }
    replace_in_file(
        &path.join("meta.json"),
        "\"ncentroids\": 32",
        "\"ncentroids\": 33",
    );
    let err = MultiVectorIndex::open(&path).err().unwrap().to_string();
    assert!(err.contains("meta.json: checksum mismatch"), "{err}");
}

#[test]
fn build_rejects_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let (data, offsets, ids) = collection(20, 2);
    let docs = TokenMatrix::new(&data, DIM, &offsets, Some(&ids), "docs").unwrap();
    let with = |opts: BuildOptions| {
        MultiVectorIndex::build(&docs, &ids, dir.path().join("x"), &opts)
            .err()
            .unwrap()
            .to_string()
    };
    assert!(with(BuildOptions {
        nbits: 3,
        ..Default::default()
    })
    .contains("nbits"));
    let too_many = BuildOptions {
        centroids: Some(100_000),
        ..Default::default()
    };
    assert!(with(too_many).contains("centroids"));
    let err = MultiVectorIndex::build(&docs, &ids[1..], dir.path().join("x"), &Default::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("ids"), "{err}");
}

#[test]
fn run_written_window_by_window_is_the_whole_runs_file_at_any_thread_count() {
    let (dir, index, (qdata, qoffsets, qids)) = search_fixture(11, 5);
    let queries = TokenMatrix::new(&qdata, DIM, &qoffsets, None, "queries").unwrap();
    for (maxp, exact) in [(None, false), (Some("#"), false), (Some("#"), true)] {
        let whole = dir.path().join("whole.trec");
        let opts = |threads| SearchOptions {
            k: 7,
            exact,
            threads,
            ..Default::default()
        };
        let run = index.search_run(&queries, &qids, &opts(1), maxp).unwrap();
        crate::io::trec::write_run(&whole, &run, "t").unwrap();
        let expected = std::fs::read(&whole).unwrap();
        for threads in [1, 2, 3] {
            for window in [1, 4, 11, 64] {
                let streamed = dir.path().join("streamed.trec");
                index
                    .write_run(
                        &queries,
                        &qids,
                        &opts(threads),
                        maxp,
                        (&streamed, "t"),
                        window,
                    )
                    .unwrap();
                assert_eq!(
                    std::fs::read(&streamed).unwrap(),
                    expected,
                    "maxp {maxp:?}, exact {exact}, {threads} threads, window {window}"
                );
                // Counted, window by window: every query once, the same file.
                let counter = std::sync::Arc::new(crate::progress::Counter::default());
                let counted = SearchOptions {
                    progress: crate::progress::Progress::to(counter.clone()),
                    ..opts(threads)
                };
                let written = (streamed.as_path(), "t");
                index
                    .write_run(&queries, &qids, &counted, maxp, written, window)
                    .unwrap();
                assert_eq!(std::fs::read(&streamed).unwrap(), expected);
                assert_eq!(counter.done(), qids.len() as u64);
            }
        }
    }
    // Ids are checked over the whole run, not window by window, and nothing is written.
    let mut dup = qids.clone();
    dup[10] = "q0".to_string();
    let out = dir.path().join("dup.trec");
    let e = index
        .write_run(
            &queries,
            &dup,
            &SearchOptions::default(),
            None,
            (&out, "t"),
            4,
        )
        .unwrap_err();
    assert!(e.to_string().contains("duplicate query id 'q0'"), "{e}");
    assert!(!out.exists());
}

#[test]
fn crafted_document_numbers_beyond_the_count_are_format_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mv");
    drop(build(&path, 2, false));
    // An inverted list naming document 400 of 400, every checksum recomputed.
    crate::io::manifest::craft_payload::<format::MultiVectorManifest>(&path, "ivf_docs.bin", |p| {
        p[..4].copy_from_slice(&400u32.to_le_bytes())
    });
    let e = MultiVectorIndex::open(&path).err().unwrap();
    assert!(matches!(e, crate::Error::Format { .. }), "{e}");
    assert!(
        e.to_string().contains("ivf_docs.bin") && e.to_string().contains("document number"),
        "{e}"
    );
    // Document offsets past the token count.
    drop(build(&path, 2, false));
    crate::io::manifest::craft_payload::<format::MultiVectorManifest>(
        &path,
        "doc_offsets.bin",
        |p| {
            let last = p.len() - 8;
            let end = u64::from_le_bytes(p[last..].try_into().unwrap());
            p[last..].copy_from_slice(&(end + 1).to_le_bytes());
        },
    );
    let e = MultiVectorIndex::open(&path).err().unwrap();
    assert!(matches!(e, crate::Error::Format { .. }), "{e}");
    assert!(e.to_string().contains("doc_offsets.bin"), "{e}");
}

#[test]
fn corrupt_stored_vectors_are_caught_where_search_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mv");
    drop(build(&path, 2, true));
    let target = path.join("vectors.bin");
    let mut bytes = std::fs::read(&target).unwrap();
    // A NaN written over the first document's first value (no checksum recomputed).
    bytes[crate::io::format::HEADER_LEN..crate::io::format::HEADER_LEN + 4]
        .copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(&target, &bytes).unwrap();
    // Opening stays cheap (the vectors are not read); compressed search never reads them.
    let index = MultiVectorIndex::open(&path).unwrap();
    let (qdata, qoffsets, _) = collection(3, 4);
    let queries = TokenMatrix::new(&qdata, DIM, &qoffsets, None, "queries").unwrap();
    index.search(&queries, &SearchOptions::default()).unwrap();
    for opts in [
        SearchOptions {
            exact: true,
            ..Default::default()
        },
        SearchOptions {
            refine: true,
            ncells: Some(32),
            centroid_score_threshold: Some(f32::NEG_INFINITY),
            ndocs: Some(400),
            rerank: Some(400),
            ..Default::default()
        },
    ] {
        let e = index.search(&queries, &opts).unwrap_err();
        assert!(matches!(e, crate::Error::Format { .. }), "{e}");
        assert!(
            e.to_string().contains("vectors.bin") && e.to_string().contains("checksum mismatch"),
            "{e}"
        );
    }
    assert!(crate::io::manifest::verify_dir(&path, &format::LAYOUT).is_err());
}

#[test]
fn a_build_counts_every_token_assignment_it_states_and_writes_the_same_files() {
    use crate::progress::{Counter, Progress};
    let dir = tempfile::tempdir().unwrap();
    let (data, offsets, ids) = collection(30, 4);
    let docs = TokenMatrix::new(&data, DIM, &offsets, Some(&ids), "docs").unwrap();
    let quiet = BuildOptions {
        centroids: Some(8),
        kmeans_sample: Some(50),
        kmeans_iterations: 3,
        threads: 2,
        ..Default::default()
    };
    let counter = std::sync::Arc::new(Counter::default());
    let counted = BuildOptions {
        progress: Progress::to(counter.clone()),
        ..quiet.clone()
    };
    MultiVectorIndex::build(&docs, &ids, dir.path().join("quiet"), &quiet).unwrap();
    MultiVectorIndex::build(&docs, &ids, dir.path().join("counted"), &counted).unwrap();
    let total = 3 * 50 + docs.rows() as u64;
    assert_eq!((counter.done(), counter.total()), (total, total));
    assert_same_files(&dir.path().join("quiet"), &dir.path().join("counted"));
}

/// Every file of the index directory `a` equals the one of the same name in `b`, and `b` has no other.
fn assert_same_files(a: &Path, b: &Path) {
    let names = |dir: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|f| f.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(a), names(b));
    for name in names(a) {
        let read = |dir: &Path| std::fs::read(dir.join(&name)).unwrap();
        assert!(read(a) == read(b), "{name:?} differs");
    }
}

/// Write rows `rows` of `data` as a `.npy` token file of `dtype` (`<f4` or `<f2`) at `path`.
fn write_npy(path: &Path, data: &[f32], dtype: &str) {
    let payload: Vec<u8> = match dtype {
        "<f4" => data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        _ => data
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect(),
    };
    let shape = format!("({}, {DIM})", data.len() / DIM);
    std::fs::write(path, crate::dense::source::npy(dtype, &shape, &payload)).unwrap();
}

/// The offsets of items `range` of `offsets`, rebased to start at 0.
fn rebased(offsets: &[u64], range: std::ops::Range<usize>) -> Vec<u64> {
    offsets[range.start..=range.end]
        .iter()
        .map(|o| o - offsets[range.start])
        .collect()
}

#[test]
fn a_build_from_parts_writes_the_files_of_the_concatenated_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let (data, offsets, ids) = collection(600, 7);
    // The third part is stored as float16: its values as the build reads them.
    let rows = |r: std::ops::Range<usize>| {
        &data[offsets[r.start] as usize * DIM..offsets[r.end] as usize * DIM]
    };
    let halved: Vec<f32> = rows(400..600)
        .iter()
        .map(|&v| half::f16::from_f32(v).to_f32())
        .collect();
    let (a, c) = (dir.path().join("a.npy"), dir.path().join("c.npy"));
    write_npy(&a, rows(0..200), "<f4");
    write_npy(&c, rows(400..600), "<f2");
    // Part a keeps its items but the multiples of 3, part b (in memory) all, part c some, out of order.
    let kept_a: Vec<usize> = (0..200).filter(|i| i % 3 != 0).collect();
    let kept_c: Vec<usize> = vec![50, 7, 8, 9, 199, 0, 64];
    let part_ids = |r: std::ops::Range<usize>| ids[r].to_vec();
    let (mut want, mut want_offsets, mut want_ids) = (Vec::new(), vec![0u64], Vec::new());
    let mut push = |tokens: &[f32], item_offsets: &[u64], item: usize, id: &str| {
        let (s, e) = (item_offsets[item] as usize, item_offsets[item + 1] as usize);
        want.extend_from_slice(&tokens[s * DIM..e * DIM]);
        want_offsets.push(want_offsets.last().unwrap() + (e - s) as u64);
        want_ids.push(id.to_string());
    };
    let (oa, ob, oc) = (
        rebased(&offsets, 0..200),
        rebased(&offsets, 200..400),
        rebased(&offsets, 400..600),
    );
    for &i in &kept_a {
        push(rows(0..200), &oa, i, &ids[i]);
    }
    for i in 0..200 {
        push(rows(200..400), &ob, i, &ids[200 + i]);
    }
    for &i in &kept_c {
        push(&halved, &oc, i, &ids[400 + i]);
    }
    for keep_vectors in [false, true] {
        let opts = BuildOptions {
            centroids: Some(16),
            kmeans_sample: Some(700),
            keep_vectors,
            threads: 2,
            ..Default::default()
        };
        let parts = vec![
            TokenPart::npy(&a, oa.clone(), part_ids(0..200), Some(kept_a.clone())).unwrap(),
            TokenPart::slice(
                rows(200..400),
                DIM,
                ob.clone(),
                part_ids(200..400),
                None,
                "b",
            )
            .unwrap(),
            TokenPart::npy(&c, oc.clone(), part_ids(400..600), Some(kept_c.clone())).unwrap(),
        ];
        let parts = TokenParts::new(parts).unwrap();
        assert!(
            parts.rows() > 2 * super::build::chunk_rows(DIM),
            "several chunks are read"
        );
        let from_parts = dir.path().join(format!("parts-{keep_vectors}"));
        MultiVectorIndex::build_parts(&parts, &from_parts, &opts).unwrap();
        let whole = TokenMatrix::new(&want, DIM, &want_offsets, Some(&want_ids), "docs").unwrap();
        let concatenated = dir.path().join(format!("whole-{keep_vectors}"));
        MultiVectorIndex::build(&whole, &want_ids, &concatenated, &opts).unwrap();
        assert_same_files(&from_parts, &concatenated);
    }
}

#[test]
fn token_parts_read_any_row_range_and_refuse_bad_parts() {
    let dir = tempfile::tempdir().unwrap();
    let (data, offsets, ids) = collection(12, 9);
    let a = dir.path().join("a.npy");
    write_npy(&a, &data, "<f4");
    let kept = vec![3, 4, 5, 0, 11, 10];
    let part = TokenPart::npy(&a, offsets.clone(), ids.clone(), Some(kept.clone())).unwrap();
    let parts = TokenParts::new(vec![part]).unwrap();
    let want: Vec<f32> = kept
        .iter()
        .flat_map(|&i| {
            data[offsets[i] as usize * DIM..offsets[i + 1] as usize * DIM]
                .iter()
                .copied()
        })
        .collect();
    let rows = parts.rows();
    assert_eq!(rows * DIM, want.len());
    for first in 0..rows {
        for n in 1..=rows - first {
            let mut out = vec![0f32; n * DIM];
            parts.read_rows(first, &mut out).unwrap();
            assert!(
                out == want[first * DIM..(first + n) * DIM],
                "rows {first}+{n}"
            );
        }
    }
    let err = |part: crate::error::Result<TokenPart<'static>>| part.err().unwrap().to_string();
    let e = err(TokenPart::npy(
        &a,
        offsets.clone(),
        ids.clone(),
        Some(vec![12]),
    ));
    assert!(e.contains("a.npy: 12 items; item 12 was asked for"), "{e}");
    let e = err(TokenPart::npy(
        &a,
        offsets[..12].to_vec(),
        ids[..11].to_vec(),
        None,
    ));
    assert!(e.contains("a.npy: offsets do not add up"), "{e}");
    // An empty item is refused when kept, naming it, and allowed when left out.
    let len1 = offsets[2] - offsets[1];
    let shifted: Vec<u64> = offsets
        .iter()
        .enumerate()
        .map(|(i, &o)| if i >= 2 { o - len1 } else { o })
        .collect();
    let without_1: Vec<f32> = (data[..offsets[1] as usize * DIM].iter())
        .chain(&data[offsets[2] as usize * DIM..])
        .copied()
        .collect();
    let b = dir.path().join("b.npy");
    write_npy(&b, &without_1, "<f4");
    let holed_part = |items| TokenPart::npy(&b, shifted.clone(), ids.clone(), items).unwrap();
    let e = TokenParts::new(vec![holed_part(None)])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("b.npy: 'd1#1' (item 1) has no tokens"), "{e}");
    assert!(TokenParts::new(vec![holed_part(Some(vec![0, 2]))]).is_ok());
    // Parts of other dimensions, and a token whose norm overflows f32 (named by id and file).
    let other = TokenPart::slice(&data[..8], 8, vec![0, 1], vec!["x".into()], None, "mem").unwrap();
    let same = TokenPart::npy(&a, offsets.clone(), ids.clone(), None).unwrap();
    let e = TokenParts::new(vec![same, other])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("part 2 has tokens of dimension 8, part 1 has 16"),
        "{e}"
    );
    let mut big = data.clone();
    big[offsets[5] as usize * DIM + DIM] = 1e20;
    let part = TokenPart::slice(
        &big,
        DIM,
        offsets.clone(),
        ids.clone(),
        Some(vec![4, 5]),
        "mem",
    )
    .unwrap();
    let e = MultiVectorIndex::build_parts(
        &TokenParts::new(vec![part]).unwrap(),
        dir.path().join("x"),
        &Default::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("mem: token 1 of 'd5#2' (item 5) has a norm too large"),
        "{e}"
    );
}
