use super::audit::{compare, ladder, sample};
use super::*;
use crate::impact::tests::{exact_top_k, random_collection, random_queries, Collection};
use crate::impact::vectors::WeightedVector;
use crate::impact::Hit;

fn scored(c: &Collection, hits: &[Hit]) -> Vec<(String, f64)> {
    c.index
        .to_scored(hits)
        .into_iter()
        .map(|d| (d.doc_id.to_string(), d.score))
        .collect()
}

/// The structure of `c`'s index keeping `postings_per_term` postings per term (0 = all).
fn pruned(c: &Collection, postings_per_term: usize) -> ApproximateIndex {
    ApproximateIndex::build(&c.index, BuildParams { postings_per_term }).unwrap()
}

const EVERYTHING: SearchParams = SearchParams {
    query_terms: 0,
    candidates: usize::MAX,
};

#[test]
fn keeping_everything_is_exact_with_canonical_ties() {
    let c = random_collection(7, 600, 300);
    let approx = pruned(&c, 0);
    for q in random_queries(8, 40, 300, 6) {
        for k in [1, 10, 100] {
            let hits = approx.search(&c.index, &q.terms, k, EVERYTHING).unwrap();
            assert_eq!(
                scored(&c, &hits),
                exact_top_k(&c, &q.terms, k),
                "{} k={k}",
                q.id
            );
        }
    }
}

#[test]
fn pruned_search_returns_exact_scores_best_first() {
    let c = random_collection(11, 800, 200);
    let approx = pruned(&c, 20);
    assert!(approx.kept_postings() < c.index.manifest().num_postings as usize);
    let params = SearchParams {
        query_terms: 2,
        candidates: 15,
    };
    let mut missed = 0;
    for q in random_queries(12, 30, 200, 8) {
        let hits = scored(&c, &approx.search(&c.index, &q.terms, 10, params).unwrap());
        let all = exact_top_k(&c, &q.terms, usize::MAX);
        for (id, score) in &hits {
            let exact = all.iter().find(|(d, _)| d == id).unwrap();
            assert_eq!(*score, exact.1, "{}: {id}", q.id);
        }
        // In canonical order (score descending, then id descending).
        let mut sorted = hits.clone();
        sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        assert_eq!(hits, sorted);
        let top: Vec<_> = all.iter().take(10).map(|h| &h.0).collect();
        missed += top
            .iter()
            .filter(|d| !hits.iter().any(|h| &&h.0 == *d))
            .count();
    }
    // Pruning this hard loses some of the exact top 10 (the test would not exercise it else).
    assert!(missed > 0);
}

#[test]
fn batch_search_is_independent_of_threads() {
    let c = random_collection(3, 500, 150);
    let approx = ApproximateIndex::build(&c.index, BuildParams::default()).unwrap();
    let queries = random_queries(4, 25, 150, 5);
    let counter = std::sync::Arc::new(crate::progress::Counter::default());
    let progress = crate::progress::Progress::to(counter.clone());
    let params = SearchParams::default();
    let run = |threads| {
        crate::parallel::install(threads, |_| {
            approx.search_each(&c.index, &queries, 10, params, &progress)
        })
        .unwrap()
        .unwrap()
    };
    assert_eq!(run(1), run(3));
    // Every query of both runs was counted as it finished.
    assert_eq!(counter.done(), 2 * queries.len() as u64);
}

#[test]
fn audit_figures_equal_an_independent_comparison() {
    let c = random_collection(21, 700, 250);
    let approx = pruned(&c, 15);
    let queries = random_queries(22, 50, 250, 8);
    let params = SearchParams {
        query_terms: 3,
        candidates: 12,
    };
    let report = audit(&approx, &c.index, &queries, 20, 5, 100, params).unwrap();
    assert_eq!((report.audited, report.of, report.seed), (20, 50, 5));
    let positions = sample(50, 20, 5);
    let mut accuracy = 0.0;
    let mut gap = 0.0;
    for (&i, audited) in positions.iter().zip(&report.queries) {
        let q = &queries[i];
        assert_eq!(audited.query, q.id);
        let exact = exact_top_k(&c, &q.terms, 10);
        let hits = approx.search(&c.index, &q.terms, 100, params).unwrap();
        let got = scored(&c, &hits[..hits.len().min(10)]);
        let found = exact
            .iter()
            .filter(|e| got.iter().any(|g| g.0 == e.0))
            .count();
        let a = found as f64 / exact.len() as f64;
        let sum = |v: &[(String, f64)]| v.iter().map(|x| x.1).sum::<f64>();
        let g = (sum(&exact) - sum(&got)) / sum(&exact);
        assert_eq!(audited.accuracy_at_10, a, "{}", q.id);
        assert!((audited.score_gap - g).abs() < 1e-12, "{}", q.id);
        accuracy += a;
        gap += g;
    }
    assert!((report.accuracy_at_10 - accuracy / 20.0).abs() < 1e-12);
    assert!((report.score_gap - gap / 20.0).abs() < 1e-12);
    assert!(report.accuracy_at_10 < 1.0 && report.score_gap > 0.0);
}

#[test]
fn compare_counts_overlap_and_shortfall() {
    let h = |doc, score| Hit { doc, score };
    let exact = [h(1, 10.0), h(2, 6.0), h(3, 4.0)];
    assert_eq!(compare(&exact, &exact), (1.0, 0.0));
    let (a, g) = compare(&exact, &[h(1, 10.0), h(9, 5.0), h(3, 4.0)]);
    assert_eq!(a, 2.0 / 3.0);
    assert!((g - 1.0 / 20.0).abs() < 1e-12);
    assert_eq!(compare(&[], &[]), (1.0, 0.0));
}

#[test]
fn calibration_reaches_a_reachable_target() {
    let c = random_collection(31, 600, 200);
    let approx = pruned(&c, 0);
    let queries = random_queries(32, 30, 200, 8);
    let chosen = calibrate(&approx, &c.index, &queries, 1.0, 30, 1, 10).unwrap();
    // The sample is every query: its bound is its mean, which reaches the target.
    assert!(chosen.reached && (chosen.sample, chosen.of) == (30, 30));
    assert_eq!((chosen.accuracy_at_10, chosen.lower_bound), (1.0, 1.0));
    let report = audit(&approx, &c.index, &queries, 30, 1, 10, chosen.params).unwrap();
    assert_eq!(report.accuracy_at_10, 1.0);
    // The cheapest setting does not reach it, so calibration had to choose.
    let cheapest = SearchParams {
        query_terms: 4,
        candidates: 25,
    };
    let low = audit(&approx, &c.index, &queries, 30, 1, 10, cheapest).unwrap();
    assert!(low.accuracy_at_10 < 1.0);
    assert!(calibrate(&approx, &c.index, &queries, 1.5, 30, 1, 10).is_err());
    // From a part of the queries, a perfect sample does not show a perfect set: not reached, and
    // the setting of highest bound (a perfect one on the sample) is kept.
    let part = calibrate(&approx, &c.index, &queries, 1.0, 10, 1, 10).unwrap();
    assert!(!part.reached && part.accuracy_at_10 == 1.0 && part.lower_bound < 1.0);
}

#[test]
fn lower_bound_by_hand() {
    // mean 0.925, sample sd 0.095743, n = 4 of 10: 0.925 - t(0.95, 3) * sd / 2 * sqrt(6 / 9)
    // (scipy: 0.925 - stats.t.ppf(0.95, 3) * np.std(x, ddof=1) / 2 * np.sqrt(6 / 9)).
    let x = [1.0, 1.0, 0.9, 0.8];
    assert!((lower_bound(&x, 10) - 0.833_014_558_806_777_8).abs() < 1e-9);
    // The whole set is its own mean; a larger set leaves a wider bound.
    assert!((lower_bound(&x, 4) - 0.925).abs() < 1e-12);
    assert!(lower_bound(&x, 1000) < lower_bound(&x, 10));
    // No miss in the sample: still one miss's spread, 0.1^2 / n.
    let perfect = [1.0; 50];
    let t = crate::eval::significance::student_t_upper_quantile(0.05, 49.0);
    let expected = 1.0 - t * (0.01f64 / 50.0 / 50.0).sqrt() * (150.0f64 / 199.0).sqrt();
    assert!((lower_bound(&perfect, 200) - expected).abs() < 1e-12);
    assert!(lower_bound(&perfect, 200) < 1.0);
}

/// What the rule before the lower bound picked: the cheapest setting whose MEAN Accuracy@10 on
/// the sample reaches `target` (the most accurate when none does).
fn cheapest_by_sample_mean(
    approx: &ApproximateIndex,
    c: &Collection,
    queries: &[WeightedVector],
    per_setting: &[(SearchParams, Vec<f64>)],
    positions: &[usize],
    target: f64,
) -> SearchParams {
    let mut best: Option<(bool, f64, u64, SearchParams)> = None;
    for (params, accuracy) in per_setting {
        let mean = positions.iter().map(|&i| accuracy[i]).sum::<f64>() / positions.len() as f64;
        let work: u64 = positions
            .iter()
            .map(|&i| approx.work(&c.index, &queries[i].terms, 10, *params))
            .sum();
        let reached = mean >= target - 1e-9;
        let better = match best {
            None => true,
            Some((r, m, w, _)) => match (reached, r) {
                (true, false) => true,
                (false, true) => false,
                (true, true) => work < w,
                (false, false) => mean > m || (mean == m && work < w),
            },
        };
        if better {
            best = Some((reached, mean, work, *params));
        }
    }
    best.unwrap().3
}

#[test]
fn calibration_holds_on_the_whole_set_where_the_sample_mean_alone_does_not() {
    // 200 queries over a hard-pruned structure (Accuracy@10 varies from query to query),
    // calibrated on 15 of them for several targets and seeds.
    let c = random_collection(51, 1500, 300);
    let approx = pruned(&c, 30);
    let queries = random_queries(52, 200, 300, 8);
    let everyone = |params| audit(&approx, &c.index, &queries, 200, 0, 10, params).unwrap();
    let per_setting: Vec<(SearchParams, Vec<f64>)> = ladder()
        .into_iter()
        .map(|params| {
            let report = everyone(params);
            (
                params,
                report.queries.iter().map(|q| q.accuracy_at_10).collect(),
            )
        })
        .collect();
    let whole = |params: SearchParams| {
        let (_, acc) = per_setting.iter().find(|(p, _)| *p == params).unwrap();
        acc.iter().sum::<f64>() / acc.len() as f64
    };
    let (mut old_missed, mut new_missed, mut cases) = (0, 0, 0);
    for seed in 0..6u64 {
        let positions = sample(queries.len(), 15, seed);
        for target in [0.6, 0.7, 0.8, 0.9] {
            cases += 1;
            let old =
                cheapest_by_sample_mean(&approx, &c, &queries, &per_setting, &positions, target);
            old_missed += usize::from(whole(old) < target);
            let new = calibrate(&approx, &c.index, &queries, target, 15, seed, 10).unwrap();
            assert!(new.lower_bound <= new.accuracy_at_10);
            if new.reached {
                new_missed += usize::from(whole(new.params) < target);
            }
        }
    }
    // The sample mean alone lands short of the target on the whole set in many cases; the bound
    // never does here.
    assert!(
        old_missed >= cases / 4,
        "old rule missed {old_missed} of {cases}"
    );
    assert_eq!(new_missed, 0, "of {cases}");
}

#[test]
fn a_structure_of_another_index_is_refused() {
    let a = random_collection(41, 200, 100);
    let b = random_collection(42, 200, 100);
    let approx = ApproximateIndex::build(&a.index, BuildParams::default()).unwrap();
    let q = &random_queries(43, 1, 100, 4)[0];
    let err = approx
        .search(&b.index, &q.terms, 10, SearchParams::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("another index"), "{err}");
}

/// The search's answer by brute force: every walked pruned list summed into partial scores, the
/// `candidates` best by (partial descending, document ascending), then the exact top k among them.
fn brute_force(
    c: &Collection,
    approx: &ApproximateIndex,
    everything: &ApproximateIndex,
    terms: &[(String, f64)],
    k: usize,
    params: SearchParams,
) -> Vec<Hit> {
    let at = |m: String| crate::error::Error::invalid(m);
    let quantized = crate::impact::vectors::quantize_terms(terms, c.index.quantize(), at).unwrap();
    let mut query: Vec<(usize, u32)> = quantized
        .iter()
        .filter_map(|(t, q)| c.index.term_number(t).map(|n| (n, *q)))
        .collect();
    query.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let walked = match params.query_terms {
        0 => query.len(),
        n => n.min(query.len()),
    };
    let mut partial = std::collections::BTreeMap::<u32, u32>::new();
    for &(term, q) in &query[..walked] {
        let (docs, impacts) = approx.list(term);
        for (&d, &i) in docs.iter().zip(impacts) {
            *partial.entry(d).or_default() += q * i;
        }
    }
    let mut ranked: Vec<(u32, u32)> = partial.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(params.candidates.max(k));
    let chosen: std::collections::HashSet<u32> = ranked.iter().map(|r| r.0).collect();
    let all = everything
        .search(&c.index, terms, c.index.num_docs(), EVERYTHING)
        .unwrap();
    all.into_iter()
        .filter(|h| chosen.contains(&h.doc))
        .take(k)
        .collect()
}

#[test]
fn candidates_are_the_best_partial_scores_across_windows() {
    // 3,000 documents: 47 windows of the test build's 64 documents, and enough touched documents
    // per query that the running cut of the candidates (at twice their number) fires.
    let c = random_collection(31, 3000, 120);
    let approx = pruned(&c, 150);
    let everything = pruned(&c, 0);
    for params in [(0, 1), (0, 40), (3, 25), (5, 100), (2, 5000)] {
        let params = SearchParams {
            query_terms: params.0,
            candidates: params.1,
        };
        for q in random_queries(32, 20, 120, 10) {
            for k in [1, 10] {
                let got = approx.search(&c.index, &q.terms, k, params).unwrap();
                let want = brute_force(&c, &approx, &everything, &q.terms, k, params);
                assert_eq!(got, want, "{} k={k} {params:?}", q.id);
            }
        }
    }
}
