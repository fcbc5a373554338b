//! Tests of the whole index: refine = flat, thread-count independence, exhaustive PQ scoring,
//! save/open round trip and corruption, and the error messages of bad inputs.

use super::*;
use crate::dense::metric::Metric;
use crate::rng::SplitMix64;

pub(crate) fn clustered(n: usize, d: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    let centers: Vec<f32> = (0..8 * d).map(|_| rng.unit() as f32 * 2.0 - 1.0).collect();
    (0..n)
        .flat_map(|i| {
            let c = (i * 5) % 8;
            (0..d)
                .map(|j| centers[c * d + j] + 0.3 * (rng.unit() as f32 - 0.5))
                .collect::<Vec<_>>()
        })
        .collect()
}

pub(crate) fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("doc{i}")).collect()
}

pub(super) fn opts(
    pq: Option<usize>,
    nbits: usize,
    ivf: Option<usize>,
    metric: Metric,
) -> BuildOptions {
    BuildOptions {
        pq,
        nbits,
        ivf,
        metric,
        ..Default::default()
    }
}

#[test]
fn refine_over_whole_collection_equals_flat() {
    let (n, d) = (300, 16);
    let data = clustered(n, d, 1);
    let queries = clustered(9, d, 2);
    for metric in [Metric::InnerProduct, Metric::L2] {
        let flat = DenseIndex::build(&data, d, &ids(n), &opts(None, 4, None, metric)).unwrap();
        let want = flat
            .search(
                &queries,
                d,
                &SearchOptions {
                    k: 20,
                    ..Default::default()
                },
            )
            .unwrap();
        for (nbits, ivf) in [(4, None), (8, None), (4, Some(4))] {
            let idx =
                DenseIndex::build(&data, d, &ids(n), &opts(Some(8), nbits, ivf, metric)).unwrap();
            for threads in [1, 3] {
                let so = SearchOptions {
                    k: 20,
                    refine: n,
                    nprobe: 4,
                    threads,
                    ..Default::default()
                };
                let got = idx.search(&queries, d, &so).unwrap();
                assert_eq!(
                    got, want,
                    "{metric:?} nbits={nbits} ivf={ivf:?} threads={threads}"
                );
            }
        }
    }
}

#[test]
fn pq_results_do_not_depend_on_threads_and_match_exhaustive_pq_scoring() {
    let (n, d) = (2000, 32);
    let data = clustered(n, d, 3);
    let queries = clustered(70, d, 4);
    let idx = DenseIndex::build(
        &data,
        d,
        &ids(n),
        &opts(Some(16), 4, None, Metric::InnerProduct),
    )
    .unwrap();
    let pq = &idx.pq.as_ref().unwrap().pq;
    let codes = pq.encode(&data);
    let so = |threads| SearchOptions {
        k: 10,
        threads,
        ..Default::default()
    };
    let one = idx.search(&queries, d, &so(1)).unwrap();
    assert_eq!(one, idx.search(&queries, d, &so(4)).unwrap());
    let mut found = 0;
    for (q, got) in queries.chunks(d).zip(&one) {
        let mut lut = vec![0f32; 16 * 16];
        pq.lut(Metric::InnerProduct, q, &mut lut);
        let mut all: Vec<(f32, u32)> = codes
            .chunks(16)
            .enumerate()
            .map(|(i, c)| (pq.adc_score(&lut, c.iter().copied()), i as u32))
            .collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        found += got.iter().filter(|h| all[..10].contains(h)).count();
    }
    // The integer scan only preselects 2k candidates; their exact PQ scores decide.
    assert!(found >= 690, "{found}/700 of the exhaustive PQ top-10");
    let ivf = DenseIndex::build(
        &data,
        d,
        &ids(n),
        &opts(Some(16), 4, Some(8), Metric::InnerProduct),
    )
    .unwrap();
    let so = |threads| SearchOptions {
        k: 10,
        nprobe: 3,
        threads,
        ..Default::default()
    };
    assert_eq!(
        ivf.search(&queries, d, &so(1)).unwrap(),
        ivf.search(&queries, d, &so(3)).unwrap()
    );
    let all = SearchOptions {
        k: 10,
        nprobe: 8,
        ..Default::default()
    };
    let ivf_all = ivf.search(&queries, d, &all).unwrap();
    let same: usize = ivf_all
        .iter()
        .zip(&one)
        .map(|(a, b)| a.iter().filter(|h| b.iter().any(|e| e.1 == h.1)).count())
        .sum();
    assert!(
        same >= 600,
        "IVF probing every list finds {same}/700 of flat PQ's hits"
    );
}

#[test]
fn four_bit_shortlists_do_not_depend_on_splitting_the_blocks_across_threads() {
    // One query on several threads scans slices of the blocks; the slices' quantized
    // shortlists are merged before the float scores decide.
    let (n, d) = (3000, 16);
    let data = clustered(n, d, 7);
    let idx = DenseIndex::build(&data, d, &ids(n), &opts(Some(8), 4, None, Metric::L2)).unwrap();
    for q in clustered(8, d, 8).chunks(d) {
        let so = |threads| SearchOptions {
            k: 20,
            threads,
            ..Default::default()
        };
        let one = idx.search(q, d, &so(1)).unwrap();
        for threads in [2, 4, 7] {
            assert_eq!(
                one,
                idx.search(q, d, &so(threads)).unwrap(),
                "threads={threads}"
            );
        }
    }
}

#[test]
fn save_open_round_trip() {
    let (n, d) = (300, 8);
    let data = clustered(n, d, 5);
    let queries = clustered(3, d, 6);
    let dir = tempfile::tempdir().unwrap();
    for (i, o) in [
        opts(None, 4, None, Metric::L2),
        opts(Some(4), 4, None, Metric::InnerProduct),
        opts(Some(2), 8, Some(3), Metric::L2),
    ]
    .into_iter()
    .enumerate()
    {
        let idx = DenseIndex::build(&data, d, &ids(n), &o).unwrap();
        let path = dir.path().join(format!("idx{i}"));
        idx.save(&path).unwrap();
        let back = DenseIndex::open(&path).unwrap();
        assert_eq!(
            (back.dim(), back.ntotal(), back.metric(), back.kind()),
            (d, n, o.metric, idx.kind())
        );
        assert_eq!(back.ids().get(7), "doc7");
        let so = SearchOptions {
            k: 5,
            nprobe: 2,
            ..Default::default()
        };
        assert_eq!(
            back.search(&queries, d, &so).unwrap(),
            idx.search(&queries, d, &so).unwrap()
        );
    }
    let bytes = std::fs::read(dir.path().join("idx1/codes.bin")).unwrap();
    let mut bad = bytes.clone();
    bad[crate::io::format::HEADER_LEN + 1] ^= 0xff;
    std::fs::write(dir.path().join("idx1/codes.bin"), &bad).unwrap();
    let e = DenseIndex::open(dir.path().join("idx1"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("checksum"), "{e}");
}

#[test]
fn bad_inputs_have_clear_errors() {
    let d = 8;
    let data = clustered(40, d, 7);
    let err = |data: &[f32], dim: usize, ids: &[String], o: &BuildOptions| {
        DenseIndex::build(data, dim, ids, o)
            .err()
            .unwrap()
            .to_string()
    };
    let mut nan = data.clone();
    nan[3 * d + 2] = f32::NAN;
    assert!(err(&nan, d, &ids(40), &BuildOptions::default())
        .contains("vector 3 has a non-finite value (NaN) at dimension 2"));
    let mut inf = data.clone();
    inf[5] = f32::INFINITY;
    assert!(err(&inf, d, &ids(40), &BuildOptions::default()).contains("non-finite value (inf)"));
    assert!(err(&data, d, &ids(39), &BuildOptions::default()).contains("39 ids for 40 vectors"));
    let mut dup = ids(40);
    dup[9] = "doc2".into();
    assert!(err(&data, d, &dup, &BuildOptions::default()).contains("duplicate id 'doc2'"));
    assert!(err(
        &data,
        d,
        &ids(40),
        &opts(Some(3), 4, None, Metric::InnerProduct)
    )
    .contains("M=3 does not divide the dimension 8"));
    assert!(err(
        &data[..10 * d],
        d,
        &ids(10),
        &opts(Some(4), 4, None, Metric::InnerProduct)
    )
    .contains("too few training vectors: 10"));
    assert!(err(
        &data,
        d,
        &ids(40),
        &opts(Some(4), 8, None, Metric::InnerProduct)
    )
    .contains("too few training vectors: 40"));
    let idx = DenseIndex::build(&data, d, &ids(40), &BuildOptions::default()).unwrap();
    let e = idx
        .search(&data[..12], 12, &SearchOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("queries have dimension 12, the index has dimension 8"),
        "{e}"
    );
    let mut q = data[..d].to_vec();
    q[0] = f32::NAN;
    assert!(idx
        .search(&q, d, &SearchOptions::default())
        .err()
        .unwrap()
        .to_string()
        .contains("queries: vector 0"));
    let nov = DenseIndex::build(
        &data,
        d,
        &ids(40),
        &BuildOptions {
            pq: Some(4),
            keep_vectors: false,
            ..Default::default()
        },
    )
    .unwrap();
    let so = SearchOptions {
        refine: 10,
        ..Default::default()
    };
    assert!(nov
        .search(&data[..d], d, &so)
        .err()
        .unwrap()
        .to_string()
        .contains("refine needs the full vectors"));
}

/// Every file of an index directory by name.
fn files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn streamed_build_equals_in_memory_build_at_any_budget() {
    use crate::dense::source::SliceSource;
    let (n, d) = (300, 16);
    let data = clustered(n, d, 3);
    let source = SliceSource::new(&data, d).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let configs = [
        (None, 4, None, true),
        (Some(8), 4, None, true),
        (Some(8), 8, None, true),
        (Some(8), 4, Some(5), true),
        (Some(4), 8, Some(3), false),
    ];
    for (c, &(pq, nbits, ivf, keep_vectors)) in configs.iter().enumerate() {
        let o = BuildOptions {
            train_size: Some(260),
            seed: 7,
            keep_vectors,
            ..opts(pq, nbits, ivf, Metric::L2)
        };
        let in_memory = tmp.path().join(format!("memory{c}"));
        DenseIndex::build(&data, d, &ids(n), &o)
            .unwrap()
            .save(&in_memory)
            .unwrap();
        // One byte of budget still makes chunks of one block: far below the data's 19 KB.
        for budget in [1, 1 << 30] {
            let streamed = tmp.path().join(format!("streamed{c}-{budget}"));
            DenseIndex::build_streaming(&source, &ids(n), &o, budget, &streamed).unwrap();
            assert_eq!(
                files(&in_memory),
                files(&streamed),
                "config {c}, budget {budget}"
            );
        }
    }
}

/// Write `base`'s rows then `source`'s (with `ids`) into `out`, encoded with `base`'s codebook.
fn append(
    base: &DenseIndex,
    source: &crate::dense::source::SliceSource,
    ids: &[String],
    out: &std::path::Path,
) {
    let parts = [Part::Index(base), Part::Vectors { source, ids }];
    base.write_combined(&parts, out, 100, 2, &crate::progress::Progress::default())
        .unwrap();
}

#[test]
fn append_and_merge_equal_one_build_with_the_same_codebook() {
    use crate::dense::source::SliceSource;
    let (n, d, half) = (300, 16, 170);
    let data = clustered(n, d, 4);
    let all_ids = ids(n);
    let tmp = tempfile::tempdir().unwrap();
    let queries = clustered(5, d, 5);
    let so = SearchOptions {
        k: 30,
        refine: 60,
        nprobe: 2,
        threads: 1,
        ..Default::default()
    };
    for (c, (nbits, ivf)) in [(4, None), (8, None), (4, Some(4))].into_iter().enumerate() {
        let at_once = tmp.path().join(format!("once{c}"));
        DenseIndex::build(
            &data,
            d,
            &all_ids,
            &opts(Some(8), nbits, ivf, Metric::InnerProduct),
        )
        .unwrap()
        .save(&at_once)
        .unwrap();
        let template = DenseIndex::open(&at_once).unwrap();
        let first = SliceSource::new(&data[..half * d], d).unwrap();
        let second = SliceSource::new(&data[half * d..], d).unwrap();
        let (ids_a, ids_b) = all_ids.split_at(half);
        let (a, b) = (
            tmp.path().join(format!("a{c}")),
            tmp.path().join(format!("b{c}")),
        );
        for (dir, source, ids) in [(&a, &first, ids_a), (&b, &second, ids_b)] {
            let part = Part::Vectors { source, ids };
            template
                .write_combined(&[part], dir, 1, 1, &crate::progress::Progress::default())
                .unwrap();
        }
        let index_a = DenseIndex::open(&a).unwrap();
        let appended = tmp.path().join(format!("appended{c}"));
        append(&index_a, &second, ids_b, &appended);
        assert_eq!(files(&at_once), files(&appended), "append, config {c}");
        let want = template.search(&queries, d, &so).unwrap();
        let got = DenseIndex::open(&appended)
            .unwrap()
            .search(&queries, d, &so)
            .unwrap();
        assert_eq!(want, got);

        let index_b = DenseIndex::open(&b).unwrap();
        let merged = tmp.path().join(format!("merged{c}"));
        let parts = [Part::Index(&index_a), Part::Index(&index_b)];
        index_a
            .write_combined(&parts, &merged, 1, 1, &crate::progress::Progress::default())
            .unwrap();
        assert_eq!(files(&at_once), files(&merged), "merge, config {c}");
    }

    let other = DenseIndex::build(
        &data,
        d,
        &all_ids,
        &opts(Some(8), 4, None, Metric::InnerProduct),
    )
    .unwrap();
    let retrained = DenseIndex::build(
        &data,
        d,
        &all_ids,
        &BuildOptions {
            seed: 9,
            ..opts(Some(8), 4, None, Metric::InnerProduct)
        },
    )
    .unwrap();
    let e = other
        .write_combined(
            &[Part::Index(&retrained)],
            &tmp.path().join("x"),
            1,
            1,
            &crate::progress::Progress::default(),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("part 1") && e.contains("same codebook"), "{e}");
    let e = other
        .write_combined(
            &[Part::Index(&other), Part::Index(&other)],
            &tmp.path().join("x"),
            1,
            1,
            &crate::progress::Progress::default(),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("duplicate id 'doc0'"), "{e}");
}

#[test]
fn float16_vectors_rescore_as_their_float32_widening_at_half_the_size() {
    use crate::dense::source::SliceSource;
    let (n, d) = (300, 16);
    // Vectors exactly representable in float16: stored either way, re-scoring sees the same values.
    let data: Vec<f32> = clustered(n, d, 8)
        .iter()
        .map(|&v| half::f16::from_f32(v).to_f32())
        .collect();
    let queries = clustered(7, d, 9);
    let tmp = tempfile::tempdir().unwrap();
    let so = SearchOptions {
        k: 20,
        refine: 60,
        nprobe: 2,
        threads: 2,
        ..Default::default()
    };
    for (c, (nbits, ivf)) in [(4, None), (8, None), (4, Some(4))].into_iter().enumerate() {
        let wide = opts(Some(8), nbits, ivf, Metric::InnerProduct);
        let narrow = BuildOptions {
            vector_dtype: VectorDtype::Float16,
            ..wide.clone()
        };
        let float32 = DenseIndex::build(&data, d, &ids(n), &wide).unwrap();
        let float16 = DenseIndex::build(&data, d, &ids(n), &narrow).unwrap();
        assert_eq!(float16.vector_dtype(), Some(VectorDtype::Float16));
        let want = float32.search(&queries, d, &so).unwrap();
        assert_eq!(
            float16.search(&queries, d, &so).unwrap(),
            want,
            "config {c}"
        );

        let (saved, streamed) = (
            tmp.path().join(format!("saved{c}")),
            tmp.path().join(format!("streamed{c}")),
        );
        float16.save(&saved).unwrap();
        let source = SliceSource::new(&data, d).unwrap();
        DenseIndex::build_streaming(&source, &ids(n), &narrow, 1, &streamed).unwrap();
        let (on_disk, wide_files) = (files(&saved), {
            let dir = tmp.path().join(format!("float32_{c}"));
            float32.save(&dir).unwrap();
            files(&dir)
        });
        assert_eq!(on_disk, files(&streamed), "streamed, config {c}");
        assert!(!on_disk.contains_key("vectors.bin"));
        let header = crate::io::format::HEADER_LEN;
        assert!(on_disk["vectors_f16.bin"].len() - header <= n * d * 2 + 4096);
        assert_eq!(on_disk["codes.bin"], wide_files["codes.bin"]);
        let opened = DenseIndex::open(&saved).unwrap();
        assert_eq!(opened.vector_dtype(), Some(VectorDtype::Float16));
        assert_eq!(
            opened.search(&queries, d, &so).unwrap(),
            want,
            "opened, config {c}"
        );

        // Appending to a float16 index keeps float16; merging equals the single build.
        let half_rows = 170;
        let appended = tmp.path().join(format!("appended{c}"));
        let first = tmp.path().join(format!("first{c}"));
        let head = SliceSource::new(&data[..half_rows * d], d).unwrap();
        let tail = SliceSource::new(&data[half_rows * d..], d).unwrap();
        let all_ids = ids(n);
        let (ids_head, ids_tail) = all_ids.split_at(half_rows);
        opened
            .write_combined(
                &[Part::Vectors {
                    source: &head,
                    ids: ids_head,
                }],
                &first,
                1,
                1,
                &crate::progress::Progress::default(),
            )
            .unwrap();
        append(
            &DenseIndex::open(&first).unwrap(),
            &tail,
            ids_tail,
            &appended,
        );
        assert_eq!(files(&appended), on_disk, "append, config {c}");
    }
    // A corrupted float16 row is an error where re-scoring reads it.
    let path = tmp.path().join("saved0/vectors_f16.bin");
    let mut bytes = std::fs::read(&path).unwrap();
    let header = crate::io::format::HEADER_LEN;
    bytes[header + 3] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let opened = DenseIndex::open(tmp.path().join("saved0")).unwrap();
    let e = opened.search(&queries, d, &so).err().unwrap().to_string();
    assert!(
        e.contains("checksum") || e.contains("vectors_f16.bin"),
        "{e}"
    );
    // Float16 storage is for re-scoring PQ codes: a flat index is refused.
    let flat16 = BuildOptions {
        vector_dtype: VectorDtype::Float16,
        ..opts(None, 4, None, Metric::InnerProduct)
    };
    let e = DenseIndex::build(&data, d, &ids(n), &flat16)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("needs pq"), "{e}");
}

#[test]
fn small_collection_path_equals_the_general_path_hit_for_hit() {
    use crate::dense::fastscan::Isa;
    let d = 24;
    let bits = |hits: &Hits| -> Vec<Vec<(u32, u32)>> {
        hits.iter()
            .map(|q| q.iter().map(|&(s, id)| (s.to_bits(), id)).collect())
            .collect()
    };
    // Sizes around the block of 32; M dividing d, not all multiples of 4.
    for (n, m, metric) in [
        (16, 6, Metric::InnerProduct),
        (33, 12, Metric::L2),
        (700, 8, Metric::InnerProduct),
        (2500, 24, Metric::InnerProduct),
        (2500, 6, Metric::L2),
    ] {
        let mut data = clustered(n, d, n as u64);
        // Every 4th row repeats the one before: equal codes tie on both the quantized and the
        // float score, so the tie rule (lower slot, lower id) decides.
        for i in (1..n).step_by(4) {
            data.copy_within((i - 1) * d..i * d, i * d);
        }
        let idx = DenseIndex::build(&data, d, &ids(n), &opts(Some(m), 4, None, metric)).unwrap();
        assert!(idx.takes_small_path(idx.pq.as_ref().unwrap()));
        let p = idx.pq.as_ref().unwrap();
        // 19 queries: two full groups of 8 and a short one; one repeats a stored row.
        let mut queries = clustered(19, d, 99);
        queries[..d].copy_from_slice(&data[..d]);
        for k in [1, 5, 40, n + 3] {
            for refine in [0, k + 7] {
                for threads in [1, 3] {
                    for isa in Isa::available() {
                        let so = SearchOptions {
                            k,
                            refine,
                            threads,
                            nprobe: 1,
                            ..Default::default()
                        };
                        let general = crate::parallel::install(threads, |t| {
                            let shortlists = idx.pq_shortlists(p, &queries, 19, &so, t, isa);
                            idx.rank_shortlists(p, &queries, &so, shortlists)
                        })
                        .unwrap()
                        .unwrap();
                        let small = crate::parallel::install(threads, |_| {
                            idx.search_pq_small(p, &queries, &so, isa)
                        })
                        .unwrap()
                        .unwrap();
                        assert_eq!(
                            bits(&small),
                            bits(&general),
                            "n={n} m={m} k={k} refine={refine} threads={threads} {isa:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn general_path_shortlists_are_the_exhaustive_quantized_best() {
    use crate::dense::fastscan::{layout, lut, Isa, BLOCK, QUERY_GROUP};
    use crate::dense::ivf::EMPTY_SLOT;
    // The general path's shortlist, however the scan is split, is the best `2k` slots by the
    // quantized score over the vectors it probes (all of them without IVF), ties to the lower
    // slot, each with its float PQ score.
    let (n, d, m) = (3001, 16, 8);
    let mut data = clustered(n, d, 21);
    // Repeated rows tie on the quantized score, so the tie rule decides at the cut.
    for i in (1..n).step_by(3) {
        data.copy_within((i - 1) * d..i * d, i * d);
    }
    let queries = clustered(11, d, 22);
    for (ivf, nprobe) in [(None, 1), (Some(6), 2)] {
        let idx = DenseIndex::build(&data, d, &ids(n), &opts(Some(m), 4, ivf, Metric::L2)).unwrap();
        let p = idx.pq.as_ref().unwrap();
        let codes = p.codes.as_slice();
        let bb = layout::block_bytes(m);
        // The slots a query probes.
        let probed = |q: &[f32]| -> Vec<bool> {
            match &p.coarse {
                None => (0..n.div_ceil(BLOCK) * BLOCK).map(|s| s < n).collect(),
                Some(c) => {
                    let mut on = vec![false; c.slots.as_slice().len()];
                    for l in c.quantizer.probe(Metric::L2, q, nprobe) {
                        let l = l as usize;
                        let slots = c.block_starts[l] as usize * BLOCK
                            ..c.block_starts[l + 1] as usize * BLOCK;
                        for (o, &id) in on[slots.clone()].iter_mut().zip(&c.slots.as_slice()[slots])
                        {
                            *o = id != EMPTY_SLOT;
                        }
                    }
                    on
                }
            }
        };
        for k in [1, 7, 150, n] {
            let so = SearchOptions {
                k,
                nprobe,
                ..Default::default()
            };
            let count = DenseIndex::shortlist_len_of(p, &so);
            let want: Vec<Vec<(u32, u32, u32)>> = queries
                .chunks(d)
                .map(|q| {
                    let mut float_lut = vec![0f32; m * 16];
                    p.pq.lut(Metric::L2, q, &mut float_lut);
                    let mut tables = vec![0u8; layout::chunks(m) * QUERY_GROUP * 64];
                    lut::quantize_into(&float_lut, m, 0, &mut tables);
                    let on = probed(q);
                    let mut all = Vec::new();
                    let mut thresholds = [i32::MAX; QUERY_GROUP];
                    thresholds[0] = -1;
                    Isa::Scalar.scan(codes, m, &tables, &mut thresholds, &mut |_, b, _, s| {
                        for (v, &score) in s.iter().enumerate() {
                            if on[b * BLOCK + v] {
                                all.push((score, (b * BLOCK + v) as u32));
                            }
                        }
                        -1
                    });
                    all.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                    all.truncate(count);
                    all.iter()
                        .map(|&(key, slot)| {
                            let block = &codes[slot as usize / BLOCK * bb..];
                            let code =
                                (0..m).map(|s| layout::code_at(block, slot as usize % BLOCK, s));
                            let score = p.pq.adc_score(&float_lut, code);
                            (key, slot, score.to_bits())
                        })
                        .collect()
                })
                .collect();
            for nq in [1, 11] {
                for threads in [1, 2, 5] {
                    for isa in Isa::available() {
                        let got = crate::parallel::install(threads, |t| {
                            idx.pq_shortlists(p, &queries[..nq * d], nq, &so, t, isa)
                        })
                        .unwrap();
                        let got: Vec<Vec<(u32, u32, u32)>> = got
                            .iter()
                            .map(|q| {
                                q.iter()
                                    .map(|h| (h.key, h.slot, h.score.to_bits()))
                                    .collect()
                            })
                            .collect();
                        assert_eq!(
                            got,
                            want[..nq],
                            "ivf={ivf:?} k={k} nq={nq} threads={threads} {isa:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn progress_counts_every_query_once_on_every_path_and_changes_no_hit() {
    use crate::progress::{Counter, Progress};
    use std::sync::Arc;
    let (n, d, nq) = (300, 16, 9);
    let data = clustered(n, d, 1);
    let queries = clustered(nq, d, 2);
    // Flat, the small 4-bit path, the general path (8 bits, and 4 bits with IVF).
    for (pq, nbits, ivf) in [
        (None, 4, None),
        (Some(8), 4, None),
        (Some(8), 8, None),
        (Some(8), 4, Some(4)),
    ] {
        let idx = DenseIndex::build(&data, d, &ids(n), &opts(pq, nbits, ivf, Metric::L2)).unwrap();
        for (threads, refine) in [(1, 0), (3, 0), (3, 40)] {
            let quiet = SearchOptions {
                k: 10,
                nprobe: 2,
                refine: if pq.is_some() { refine } else { 0 },
                threads,
                ..Default::default()
            };
            let counter = Arc::new(Counter::default());
            let counted = SearchOptions {
                progress: Progress::to(counter.clone()),
                ..quiet.clone()
            };
            let want = idx.search(&queries, d, &quiet).unwrap();
            assert_eq!(idx.search(&queries, d, &counted).unwrap(), want);
            assert_eq!(
                counter.done(),
                nq as u64,
                "{pq:?} {nbits} {ivf:?} {threads}"
            );
        }
    }
}
