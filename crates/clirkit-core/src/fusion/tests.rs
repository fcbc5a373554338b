//! Fusion against a naive reference and hand-computed examples.

use super::normalize::Norm;
use super::*;
use crate::ranking::{Run, ScoredDoc};

fn run(queries: &[(&str, &[(&str, f64)])]) -> Run {
    let mut r = Run::new();
    for (q, docs) in queries {
        r.push(
            *q,
            docs.iter().map(|(d, s)| ScoredDoc::new(*d, *s)).collect(),
        );
    }
    r
}

#[test]
fn rrf_by_hand_with_ties_and_missing_queries() {
    // Run a: q1 ranks b(2) > c(1) > a(1) (tie broken by id desc); q2 only in run b.
    let a = run(&[("q1", &[("a", 1.0), ("b", 2.0), ("c", 1.0)])]);
    let b = run(&[("q1", &[("a", 5.0)]), ("q2", &[("x", 1.0)])]);
    let fused = fuse_runs(&[a, b], &FusionOptions::new(Method::Rrf { k: 60.0 })).unwrap();
    let q1: Vec<(String, f64)> = fused.queries[0]
        .1
        .iter()
        .map(|d| (d.doc_id.clone(), d.score))
        .collect();
    assert_eq!(fused.queries[0].0, "q1");
    assert_eq!(
        q1,
        vec![
            ("a".to_string(), 1.0 / 63.0 + 1.0 / 61.0),
            ("b".to_string(), 1.0 / 61.0),
            ("c".to_string(), 1.0 / 62.0),
        ]
    );
    assert_eq!(fused.queries[1].0, "q2");
    assert_eq!(fused.queries[1].1[0].score, 1.0 / 61.0);
}

#[test]
fn depth_weights_and_top() {
    let a = run(&[("q", &[("a", 3.0), ("b", 2.0), ("c", 1.0)])]);
    let b = run(&[("q", &[("c", 3.0), ("d", 2.0)])]);
    let mut opts = FusionOptions::new(Method::Rrf { k: 0.0 });
    opts.depth = Some(1);
    opts.weights = Some(vec![1.0, 3.0]);
    let fused = fuse_runs(&[a.clone(), b.clone()], &opts).unwrap();
    let ids: Vec<(&str, f64)> = fused.queries[0]
        .1
        .iter()
        .map(|d| (d.doc_id.as_str(), d.score))
        .collect();
    assert_eq!(ids, vec![("c", 3.0), ("a", 1.0)]);
    opts.top = Some(1);
    assert_eq!(fuse_runs(&[a, b], &opts).unwrap().queries[0].1.len(), 1);
}

#[test]
fn combsum_combmnz_interpolate() {
    let a = run(&[("q", &[("a", 10.0), ("b", 5.0), ("c", 0.0)])]);
    let b = run(&[("q", &[("b", 4.0), ("d", 2.0)])]);
    let scores = |m: Method| -> Vec<(String, f64)> {
        fuse_runs(&[a.clone(), b.clone()], &FusionOptions::new(m))
            .unwrap()
            .queries[0]
            .1
            .iter()
            .map(|d| (d.doc_id.clone(), d.score))
            .collect()
    };
    let s = |x: &str, v: f64| (x.to_string(), v);
    assert_eq!(
        scores(Method::CombSum { norm: Norm::MinMax }),
        vec![s("b", 1.5), s("a", 1.0), s("d", 0.0), s("c", 0.0)]
    );
    assert_eq!(
        scores(Method::CombMnz { norm: Norm::MinMax }),
        vec![s("b", 3.0), s("a", 1.0), s("d", 0.0), s("c", 0.0)]
    );
    assert_eq!(
        scores(Method::Interpolate {
            alpha: 0.25,
            norm: Norm::MinMax
        }),
        vec![s("b", 0.875), s("a", 0.25), s("d", 0.0), s("c", 0.0)]
    );
}

#[test]
fn bad_options_are_rejected() {
    let a = run(&[("q", &[("a", 1.0)])]);
    let mut opts = FusionOptions::new(Method::Rrf { k: 60.0 });
    opts.weights = Some(vec![1.0, 2.0]);
    let e = fuse_runs(std::slice::from_ref(&a), &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 weights given for 1 runs"), "{e}");
    let e = fuse_runs(&[], &FusionOptions::new(Method::Rrf { k: 60.0 }))
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least one run"), "{e}");
    let interp = FusionOptions::new(Method::Interpolate {
        alpha: 0.5,
        norm: Norm::MinMax,
    });
    let e = fuse_runs(&[a], &interp).unwrap_err().to_string();
    assert!(e.contains("exactly two runs"), "{e}");
}

/// Per query: its id and its documents as (doc id, fused score).
type Fused = Vec<(String, Vec<(String, f64)>)>;

/// Naive fusion over strings: (doc, score) per query in canonical order.
fn reference(runs: &[Run], options: &FusionOptions) -> Fused {
    let weights = options.run_weights(runs.len()).unwrap();
    // Per query: (doc id, sum, hits) in order of first appearance.
    type Sums = Vec<(String, f64, u32)>;
    let mut out: Vec<(String, Sums)> = Vec::new();
    for (run, w) in runs.iter().zip(&weights) {
        for (qid, docs) in &run.queries {
            let mut docs = docs.clone();
            crate::ranking::sort_canonical(&mut docs);
            docs.truncate(options.depth.unwrap_or(usize::MAX));
            let normalizer = match options.method {
                Method::Rrf { .. } => None,
                Method::CombSum { norm }
                | Method::CombMnz { norm }
                | Method::Interpolate { norm, .. } => Some(norm.fit(docs.iter().map(|d| d.score))),
            };
            let at = match out.iter().position(|(q, _)| q == qid) {
                Some(at) => at,
                None => {
                    out.push((qid.clone(), Vec::new()));
                    out.len() - 1
                }
            };
            for (i, d) in docs.iter().enumerate() {
                let value = match (options.method, &normalizer) {
                    (Method::Rrf { k }, _) => w / (k + (i + 1) as f64),
                    (_, Some(n)) => w * n.apply(d.score),
                    _ => unreachable!(),
                };
                let acc = &mut out[at].1;
                match acc.iter_mut().find(|(id, _, _)| *id == d.doc_id) {
                    Some(e) => {
                        e.1 += value;
                        e.2 += 1;
                    }
                    None => acc.push((d.doc_id.clone(), value, 1)),
                }
            }
        }
    }
    out.into_iter()
        .map(|(q, acc)| {
            let mut docs: Vec<ScoredDoc> = acc
                .into_iter()
                .map(|(id, s, hits)| match options.method {
                    Method::CombMnz { .. } => ScoredDoc::new(id, s * hits as f64),
                    _ => ScoredDoc::new(id, s),
                })
                .collect();
            crate::ranking::sort_canonical(&mut docs);
            docs.truncate(options.top.unwrap_or(usize::MAX));
            (q, docs.into_iter().map(|d| (d.doc_id, d.score)).collect())
        })
        .collect()
}

/// `fuse_runs` as (doc id, score) pairs per query.
fn fused(runs: &[Run], options: &FusionOptions) -> Fused {
    fuse_runs(runs, options)
        .unwrap()
        .queries
        .into_iter()
        .map(|(q, docs)| (q, docs.into_iter().map(|d| (d.doc_id, d.score)).collect()))
        .collect()
}

/// A seeded generator of numbers below its argument (a linear congruential generator).
fn seeded_below(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    }
}

#[test]
fn long_and_short_ids_with_ties_match_the_reference() {
    // Ids around the 15-byte inline limit, sharing 8-byte prefixes, with many score ties.
    let ids: Vec<String> = (0..60)
        .map(|i| match i % 5 {
            0 => format!("d{i}"),
            1 => format!("doc-00000000-{i:03}"), // 16 bytes: the shortest long id
            2 => format!("doc-0000000-{i:03}"),  // 15 bytes: the longest inline id
            3 => format!("doc-0000{i:04}"),
            _ => format!("doc-00000000-{i:03}-{}", "x".repeat(i % 7)),
        })
        .collect();
    let mut next = seeded_below(7);
    let runs: Vec<Run> = (0..3)
        .map(|_| {
            let mut r = Run::new();
            for q in 0..20 {
                let mut docs: Vec<ScoredDoc> = Vec::new();
                for id in &ids {
                    if next(3) == 0 {
                        docs.push(ScoredDoc::new(id, next(4) as f64 * 0.5));
                    }
                }
                if !docs.is_empty() {
                    r.push(format!("q{q}"), docs);
                }
            }
            r
        })
        .collect();
    let methods = [
        Method::Rrf { k: 60.0 },
        Method::CombSum { norm: Norm::MinMax },
        Method::CombMnz { norm: Norm::ZScore },
    ];
    for method in methods {
        for (depth, top) in [(None, None), (Some(5), Some(7))] {
            let mut options = FusionOptions::new(method);
            options.depth = depth;
            options.top = top;
            let got = fused(&runs, &options);
            assert_eq!(
                got,
                reference(&runs, &options),
                "{method:?} {depth:?} {top:?}"
            );
        }
    }
}

#[test]
fn long_lists_match_the_reference() {
    // Lists long enough that each query's output spans many pages (the prefaulted path),
    // several queries per task, overlapping candidates and RRF ties.
    let mut next = seeded_below(11);
    let runs: Vec<Run> = (0..3)
        .map(|_| {
            let mut r = Run::new();
            for q in 0..40 {
                let mut docs = Vec::new();
                for d in 0..1500 {
                    if next(2) == 0 {
                        docs.push(ScoredDoc::new(format!("q{q}-d{d}"), next(1000) as f64));
                    }
                }
                docs.truncate(700);
                r.push(format!("q{q}"), docs);
            }
            r
        })
        .collect();
    for method in [
        Method::Rrf { k: 60.0 },
        Method::CombMnz { norm: Norm::MinMax },
    ] {
        let options = FusionOptions::new(method);
        let got = fused(&runs, &options);
        assert_eq!(got, reference(&runs, &options), "{method:?}");
    }
}

#[test]
fn builder_rejects_duplicates() {
    let mut b = RunListsBuilder::default();
    let e = b
        .push_query(b"q", [(&b"d"[..], 1.0), (&b"d"[..], 2.0)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("query 'q': document 'd' given twice"), "{e}");
}

#[test]
fn a_combsum_overflow_is_refused_not_written() {
    let a = run(&[("q1", &[("a", 1e308)])]);
    let b = run(&[("q1", &[("a", 1e308)])]);
    let lists = [
        RunLists::from_run(&a).unwrap(),
        RunLists::from_run(&b).unwrap(),
    ];
    let options = FusionOptions::new(Method::CombSum { norm: Norm::None });
    let fused = fuse(&[&lists[0], &lists[1]], &options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fused.trec");
    let e = run_file::write_run_lists(&out, &fused, "t")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("score inf of document 'a' for query 'q1' is not finite"),
        "{e}"
    );
    assert!(!out.exists());
}

/// Runs of `queries` queries over ids around the inline limit, each run missing some queries.
fn runs_for_writing(num_runs: usize, queries: usize) -> Vec<RunLists> {
    let mut next = seeded_below(11);
    (0..num_runs)
        .map(|r| {
            let mut builder = RunListsBuilder::default();
            for q in 0..queries {
                if (q + r) % 7 == 0 {
                    continue;
                }
                let docs: Vec<(String, f64)> = (0..next(40))
                    .map(|d| {
                        let id = format!("doc-{:011}{}", next(60), "x".repeat(d as usize % 3));
                        (id, next(9) as f64 * 0.25 - 1.0)
                    })
                    .collect::<std::collections::BTreeMap<_, _>>()
                    .into_iter()
                    .collect();
                builder
                    .push_query(
                        format!("q{q}").as_bytes(),
                        docs.iter().map(|(id, s)| (id.as_bytes(), *s)),
                    )
                    .unwrap();
            }
            builder.finish()
        })
        .collect()
}

#[test]
fn fusing_to_a_file_writes_what_fusing_then_writing_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (expected_path, got_path) = (dir.path().join("expected"), dir.path().join("got"));
    // Enough queries for several segments, and fewer than one.
    for queries in [0, 5, 700] {
        let lists = runs_for_writing(3, queries);
        let three: Vec<&RunLists> = lists.iter().collect();
        let mut cases: Vec<(FusionOptions, &[&RunLists])> = Vec::new();
        for method in [
            Method::Rrf { k: 60.0 },
            Method::CombSum { norm: Norm::MinMax },
            Method::CombSum { norm: Norm::None },
            Method::CombMnz { norm: Norm::ZScore },
        ] {
            for (weights, depth, top) in [
                (None, None, None),
                (Some(vec![0.5, 2.0, 1.0]), Some(9), Some(4)),
            ] {
                let mut options = FusionOptions::new(method);
                (options.weights, options.depth, options.top) = (weights, depth, top);
                cases.push((options, &three));
            }
        }
        let mut options = FusionOptions::new(Method::Interpolate {
            alpha: 0.3,
            norm: Norm::MinMax,
        });
        options.top = Some(10);
        cases.push((options, &three[..2]));
        for (options, runs) in cases {
            let fused = fuse(runs, &options).unwrap();
            run_file::write_run_lists(&expected_path, &fused, "tag").unwrap();
            fuse_to_file(runs, &options, &got_path, "tag").unwrap();
            assert!(
                std::fs::read(&got_path).unwrap() == std::fs::read(&expected_path).unwrap(),
                "{queries} queries, {options:?}"
            );
        }
    }
}

#[test]
fn fusing_to_a_file_fails_as_fusing_then_writing_fails() {
    // A CombSUM overflow in the last of many segments; bad options.
    let mut lists = runs_for_writing(2, 700);
    let mut overflow = RunListsBuilder::default();
    overflow
        .push_query(b"q-last", [(&b"a"[..], 1e308)])
        .unwrap();
    let overflow = overflow.finish();
    let sum = FusionOptions::new(Method::CombSum { norm: Norm::None });
    let zero_top = FusionOptions {
        top: Some(0),
        ..FusionOptions::new(Method::Rrf { k: 60.0 })
    };
    lists.truncate(1);
    let runs: [&RunLists; 3] = [&lists[0], &overflow, &overflow];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fused.trec");
    for options in [sum, zero_top] {
        let expected = fuse(&runs, &options)
            .and_then(|fused| run_file::write_run_lists(&out, &fused, "t"))
            .unwrap_err()
            .to_string();
        assert!(!out.exists());
        let got = fuse_to_file(&runs, &options, &out, "t")
            .unwrap_err()
            .to_string();
        assert_eq!(got, expected);
        assert!(!out.exists());
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
