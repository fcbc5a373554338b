use super::*;
use crate::io::temp_file;
use crate::progress::Progress;
use crate::rng::SplitMix64;
use std::collections::HashMap;

pub(super) fn quiet() -> BuildOptions {
    BuildOptions {
        threads: 2,
        ..BuildOptions::default()
    }
}

/// A term drawn with probability falling off with its rank (Zipf-like), as in learned sparse
/// vectors, so that postings lengths and weights vary widely.
fn random_vector(rng: &mut SplitMix64, vocab: usize, len: usize) -> Vec<(String, f64)> {
    let mut terms: Vec<(String, f64)> = Vec::new();
    for _ in 0..len {
        let rank = (vocab as f64).powf(rng.unit()) as usize;
        let term = format!("t{rank}");
        if terms.iter().all(|(t, _)| *t != term) {
            // Coarse weights make many exact ties, which exercise the tie rule.
            terms.push((term, (1 + rng.below(30)) as f64 / 10.0));
        }
    }
    terms
}

pub(super) fn vector_line(id: &str, terms: &[(String, f64)]) -> String {
    let vector: serde_json::Map<String, serde_json::Value> = terms
        .iter()
        .map(|(t, w)| (t.clone(), serde_json::json!(w)))
        .collect();
    serde_json::json!({"id": id, "contents": "", "vector": vector}).to_string()
}

pub(super) struct Collection {
    pub(super) dir: tempfile::TempDir,
    pub(super) index: ImpactIndex,
    /// Each document's id and quantized vector.
    pub(super) docs: Vec<(String, HashMap<String, u64>)>,
}

fn quantized(terms: &[(String, f64)]) -> HashMap<String, u64> {
    vectors::quantize_terms(terms, DEFAULT_QUANTIZE, Error::invalid)
        .unwrap()
        .into_iter()
        .map(|(t, w)| (t, w as u64))
        .collect()
}

pub(super) fn random_collection(seed: u64, num_docs: usize, vocab: usize) -> Collection {
    let mut rng = SplitMix64::new(seed);
    let docs: Vec<(String, Vec<(String, f64)>)> = (0..num_docs)
        .map(|i| {
            let len = 1 + rng.below(40);
            (
                format!("d{}", (i * 7919) % 100_003),
                random_vector(&mut rng, vocab, len),
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = docs.iter().map(|(id, t)| vector_line(id, t)).collect();
    let path = dir.path().join("docs.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    build(&path, &dir.path().join("idx"), &quiet()).unwrap();
    let index = ImpactIndex::open(dir.path().join("idx")).unwrap();
    Collection {
        dir,
        index,
        docs: docs
            .iter()
            .map(|(id, t)| (id.clone(), quantized(t)))
            .collect(),
    }
}

/// `n` queries `q{i}` of `len` random terms from a vocabulary of `vocab`.
pub(super) fn random_queries(seed: u64, n: u64, vocab: usize, len: usize) -> Vec<WeightedVector> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|i| WeightedVector {
            id: format!("q{i}"),
            line: i + 1,
            terms: random_vector(&mut rng, vocab, len),
        })
        .collect()
}

/// The top k by an exact integer dot product of the quantized vectors, canonical ties.
pub(super) fn exact_top_k(c: &Collection, query: &[(String, f64)], k: usize) -> Vec<(String, f64)> {
    assert_eq!(c.index.quantize(), DEFAULT_QUANTIZE);
    let query = quantized(query);
    let mut scored: Vec<(String, u64)> = c
        .docs
        .iter()
        .map(|(id, terms)| {
            let score = terms
                .iter()
                .map(|(t, w)| w * query.get(t).copied().unwrap_or(0))
                .sum();
            (id.clone(), score)
        })
        .filter(|(_, s)| *s > 0)
        .collect();
    scored.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    scored.truncate(k);
    scored.into_iter().map(|(id, s)| (id, s as f64)).collect()
}

fn pairs(c: &Collection, hits: &[Hit]) -> Vec<(String, f64)> {
    hits.iter()
        .map(|h| (c.index.doc_id(h.doc).to_string(), h.score as f64))
        .collect()
}

#[test]
fn pruned_and_exhaustive_equal_the_exact_dot_product() {
    for (seed, num_docs, vocab) in [(1, 300, 50), (2, 3000, 400), (3, 2000, 5000)] {
        let c = random_collection(seed, num_docs, vocab);
        let mut rng = SplitMix64::new(seed + 100);
        for _ in 0..30 {
            let len = 1 + rng.below(30);
            let query = random_vector(&mut rng, vocab + 20, len);
            for k in [1, 10, 100, 5000] {
                let expected = exact_top_k(&c, &query, k);
                for strategy in [
                    Strategy::MaxScore,
                    Strategy::BlockMaxWand,
                    Strategy::Exhaustive,
                    Strategy::Auto,
                ] {
                    let hits = c.index.search_by(strategy, &query, k).unwrap();
                    assert_eq!(pairs(&c, &hits), expected, "seed {seed} k {k} {strategy:?}");
                }
            }
        }
    }
}

#[test]
fn batch_search_is_independent_of_threads_and_unknown_terms_find_nothing() {
    let c = random_collection(5, 1000, 200);
    let queries = random_queries(9, 40, 200, 20);
    let one = c
        .index
        .batch_search(&queries, 50, 1, &Progress::default())
        .unwrap();
    let two = c
        .index
        .batch_search(&queries, 50, 2, &Progress::default())
        .unwrap();
    assert_eq!(one, two);
    for (q, hits) in queries.iter().zip(&one) {
        assert_eq!(hits, &c.index.search(&q.terms, 50).unwrap());
    }
    assert!(c
        .index
        .search(&[("absent".into(), 1.0)], 10)
        .unwrap()
        .is_empty());
    let e = c.index.search(&[("t1".into(), -1.0)], 10).unwrap_err();
    assert!(
        e.to_string()
            .contains("the weight of term 't1' is negative"),
        "{e}"
    );
}

#[test]
fn run_written_window_by_window_equals_the_whole_run() {
    let c = random_collection(6, 500, 100);
    let queries = random_queries(11, 30, 100, 10);
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.trec");
    let hits = c
        .index
        .batch_search(&queries, 20, 2, &Progress::default())
        .unwrap();
    let run = Run {
        queries: queries
            .iter()
            .zip(&hits)
            .map(|(q, h)| (q.id.clone(), c.index.to_scored(h)))
            .collect(),
    };
    trec::write_run(&whole, &run, "t").unwrap();
    let streamed = dir.path().join("streamed.trec");
    let counter = std::sync::Arc::new(crate::progress::Counter::default());
    let progress = Progress::to(counter.clone());
    crate::parallel::install(3, |_| {
        c.index
            .write_run_windowed(&queries, 20, &progress, &streamed, "t", 7)
    })
    .unwrap()
    .unwrap();
    assert_eq!(
        counter.done(),
        queries.len() as u64,
        "each query counted once"
    );
    let want = std::fs::read(&whole).unwrap();
    assert!(!want.is_empty());
    assert_eq!(std::fs::read(&streamed).unwrap(), want);
    let default = dir.path().join("default.trec");
    c.index
        .batch_search_to_run_file(&queries, 20, 1, &Progress::default(), &default, "t")
        .unwrap();
    assert_eq!(std::fs::read(&default).unwrap(), want);
}

#[test]
fn bad_vectors_fail_naming_file_and_line_and_leave_no_index() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    for (body, message) in [
        (
            "{\"id\": \"a\", \"vector\": {\"x\": 1}}\n{\"id\": \"b\", \"vector\": {\"x\": -0.5}}",
            "docs.jsonl:2: 'b': the weight of term 'x' is negative",
        ),
        (
            "{\"id\": \"a\", \"vector\": {\"x\": true}}",
            "docs.jsonl:1: 'a': the weight of term 'x' is a boolean",
        ),
        (
            "{\"id\": \"a\", \"vector\": {}}",
            "docs.jsonl:1: 'a': empty vector",
        ),
        (
            "{\"id\": \"a\", \"vector\": {\"x\": 1}}\n\n{\"id\": \"a\", \"vector\": {\"y\": 1}}",
            "duplicate id 'a' at line 3 (first seen at line 1)",
        ),
        (
            "{\"id\": \"a\", \"vector\": {\"x\": 1e30}}",
            "beyond the largest impact",
        ),
    ] {
        let path = dir.path().join("docs.jsonl");
        std::fs::write(&path, body).unwrap();
        let e = build(&path, &idx, &quiet()).unwrap_err().to_string();
        assert!(e.contains(message), "{e}");
        assert!(!idx.exists());
    }
}

#[test]
fn quantization_is_recorded_and_integer_weights_keep_their_order() {
    let (dir, path) = temp_file(
        "docs.jsonl",
        "{\"_id\": \"a\", \"vector\": {\"x\": 3, \"y\": 1}}\n{\"_id\": \"b\", \"vector\": {\"x\": 2, \"z\": 0.004}}\n",
    );
    let opts = BuildOptions {
        quantize: 1,
        ..quiet()
    };
    let manifest = build(&path, &dir.path().join("idx"), &opts).unwrap();
    assert_eq!((manifest.quantize, manifest.max_impact), (1, 3));
    assert_eq!(manifest.build.zero_impact_terms_dropped, 1);
    let index = ImpactIndex::open(dir.path().join("idx")).unwrap();
    assert_eq!(index.num_terms(), 2);
    let hits = index
        .search(&[("x".into(), 2.0), ("y".into(), 1.0)], 10)
        .unwrap();
    let got: Vec<(&str, f32)> = hits
        .iter()
        .map(|h| (index.doc_id(h.doc), h.score))
        .collect();
    assert_eq!(got, [("a", 7.0), ("b", 4.0)]);
    // Scores that could pass 2^24 would no longer be exact: refused, not rounded.
    let e = index
        .search(&[("x".into(), 1e7)], 10)
        .unwrap_err()
        .to_string();
    assert!(e.contains("beyond 2^24"), "{e}");
}

#[test]
fn corrupt_postings_are_caught_by_verify() {
    let c = random_collection(11, 200, 30);
    let path = c.index.dir().join(format::POSTINGS_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 20;
    bytes[last] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let reopened = ImpactIndex::open(c.index.dir()).unwrap();
    assert!(reopened
        .verify()
        .unwrap_err()
        .to_string()
        .contains("checksum"));
}

#[test]
fn a_crafted_document_number_beyond_the_count_is_a_format_error() {
    // Documents 0 and 2 hold "zorp" with impact 1: one block, gaps 0 and 1 packed in one bit
    // each (the byte 0b10), impacts all 1 (no bits).
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        vector_line("a", &[("zorp".to_string(), 1.0)]),
        vector_line("b", &[("quux".to_string(), 1.0)]),
        vector_line("c", &[("zorp".to_string(), 1.0)]),
    ];
    let path = dir.path().join("docs.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    let index = dir.path().join("idx");
    build(
        &path,
        &index,
        &BuildOptions {
            quantize: 1,
            ..quiet()
        },
    )
    .unwrap();
    let zorp = || {
        ImpactIndex::open(&index)
            .unwrap()
            .search(&[("zorp".to_string(), 1.0)], 10)
    };
    assert_eq!(zorp().unwrap().len(), 2);
    let (_, data_at) =
        crate::postings::termdict::single_block_at(&index, format::TERM_FILES, "zorp");
    // The gaps edited to 1 and 1, which decode to documents 1 and 3 (of 3).
    crate::io::manifest::craft_payload::<ImpactManifest>(&index, format::POSTINGS_FILE, |p| {
        assert_eq!(p[data_at], 0b10);
        p[data_at] = 0b11;
    });
    let e = zorp().unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(
        e.to_string().contains("postings.bin")
            && e.to_string().contains("decodes to documents other than"),
        "{e}"
    );
}

#[test]
fn block_max_and_integer_exhaustive_equal_the_exact_dot_product_and_maxscore() {
    // Collections spanning many document blocks, with many exact ties (coarse weights), queries
    // from one term to long ones, k from 1 to past the matching documents.
    for (seed, num_docs, vocab) in [(11, 1000, 30), (12, 3000, 400), (13, 2500, 6000)] {
        let c = random_collection(seed, num_docs, vocab);
        assert!(num_docs > 10 * block_max::DOC_BLOCK);
        let mut rng = SplitMix64::new(seed + 200);
        for _ in 0..25 {
            let len = 1 + rng.below(40);
            let query = random_vector(&mut rng, vocab + 20, len);
            let at = |m: String| Error::invalid(m);
            let terms = c.index.query_terms(&query, &at).unwrap();
            for k in [1, 3, 10, 64, 65, 1000, 5000] {
                let expected = exact_top_k(&c, &query, k);
                let pruned = block_max::top_k(&terms, k, c.index.ranks());
                assert_eq!(pairs(&c, &pruned), expected, "block-max seed {seed} k {k}");
                let every = exhaustive::top_k(&terms, k, c.index.ranks());
                assert_eq!(pairs(&c, &every), expected, "exhaustive seed {seed} k {k}");
                let old = c.index.search_by(Strategy::MaxScore, &query, k).unwrap();
                assert_eq!(pruned, old, "block-max vs MaxScore hits, seed {seed} k {k}");
            }
        }
    }
}

/// Every file of the index directory `dir`, by name.
fn index_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn spilled_builds_and_several_files_equal_the_in_memory_build_byte_for_byte() {
    let mut rng = SplitMix64::new(21);
    let lines: Vec<String> = (0..3000)
        .map(|i| {
            let len = 1 + rng.below(60);
            vector_line(&format!("d{i}"), &random_vector(&mut rng, 500, len))
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("docs.jsonl");
    std::fs::write(&whole, lines.join("\n")).unwrap();
    let reference = dir.path().join("memory");
    build(&whole, &reference, &quiet()).unwrap();
    let expected = index_files(&reference);
    // tiny budgets: a run spilled after every block of lines, slices of a term or a few
    for budget in [1usize, 4096, 1 << 16] {
        let out = dir.path().join(format!("spilled-{budget}"));
        let opts = BuildOptions {
            memory_budget_bytes: budget,
            ..quiet()
        };
        // blocks are 8192 lines: split the input so that several runs are spilled
        let parts: Vec<std::path::PathBuf> = lines
            .chunks(700)
            .enumerate()
            .map(|(n, chunk)| {
                let p = dir.path().join(format!("part-{budget}-{n}.jsonl"));
                std::fs::write(&p, chunk.join("\n")).unwrap();
                p
            })
            .collect();
        let files: Vec<&std::path::Path> = parts.iter().map(|p| p.as_path()).collect();
        build_files(&files, &out, &opts).unwrap();
        let mut got = index_files(&out);
        let mut want = expected.clone();
        // the manifest names its input files; every other file is the same
        got.retain(|(n, _)| n != "meta.json");
        want.retain(|(n, _)| n != "meta.json");
        assert_eq!(got, want, "budget {budget}");
        assert!(!std::fs::read_dir(&out).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("spill")));
    }
    // the same file with a tiny budget: the whole directory, manifest included, is the same
    let out = dir.path().join("same-input");
    let opts = BuildOptions {
        memory_budget_bytes: 1,
        ..quiet()
    };
    build(&whole, &out, &opts).unwrap();
    assert_eq!(index_files(&out), expected);
}

#[test]
fn an_id_repeated_across_files_names_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    std::fs::write(&a, "{\"id\": \"x\", \"vector\": {\"t\": 1}}\n").unwrap();
    std::fs::write(
        &b,
        "{\"id\": \"y\", \"vector\": {\"t\": 1}}\n{\"id\": \"x\", \"vector\": {\"t\": 2}}\n",
    )
    .unwrap();
    let e = build_files(&[&a, &b], &dir.path().join("idx"), &quiet())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("b.jsonl:2: duplicate id 'x' (first at") && e.contains("a.jsonl:1"),
        "{e}"
    );
}

#[test]
fn auto_picks_by_the_query_shape() {
    let shape = |num_docs, terms, postings, k| QueryShape {
        num_docs,
        terms,
        postings,
        k,
    };
    let maxscore = ExactPath::Cursors(Strategy::MaxScore);
    for (s, path) in [
        // A small collection: exhaustive, however few the postings (808b28a's rule: block-max).
        (shape(5_000, 8, 100, 10), ExactPath::Exhaustive),
        // Postings few next to the collection: MaxScore (808b28a's rule: block-max).
        (shape(100_000, 8, 3_000, 1000), maxscore),
        (shape(1_000_000, 8, 400_000, 10), maxscore),
        // Many hits past a sixteenth of the collection: exhaustive (808b28a's rule: block-max).
        (shape(100_000, 8, 30_000, 1000), ExactPath::Exhaustive),
        // A few hits of a short query over many postings: block-max (808b28a's: exhaustive).
        (shape(1_000_000, 8, 1_000_000, 10), ExactPath::BlockMax),
        (shape(100_000, 16, 60_000, 64), ExactPath::BlockMax),
        // Long queries over many postings: exhaustive, at any depth.
        (shape(1_000_000, 30, 3_000_000, 10), ExactPath::Exhaustive),
        (shape(1_000_000, 8, 3_000_000, 65), ExactPath::Exhaustive),
    ] {
        assert_eq!(s.auto_path(), path, "{s:?}");
        assert_eq!(s.path(Strategy::Auto), path);
    }
    let s = shape(1_000_000, 8, 1_000_000, 10);
    assert_eq!(s.path(Strategy::Exhaustive), ExactPath::Exhaustive);
    assert_eq!(
        s.path(Strategy::BlockMaxWand),
        ExactPath::Cursors(Strategy::BlockMaxWand)
    );
}

#[test]
fn auto_on_each_of_its_paths_equals_the_exact_dot_product() {
    // A collection past SMALL_COLLECTION, queries from one rare term (MaxScore) to many common
    // ones (block-max at a few hits, exhaustive at many): every path Auto takes is exact.
    let c = random_collection(61, SMALL_COLLECTION + 3_000, 60);
    let mut rng = SplitMix64::new(62);
    let mut taken = std::collections::BTreeSet::new();
    for len in [1, 1, 2, 3, 6, 10, 20, 40, 60] {
        let query = random_vector(&mut rng, 80, len);
        for k in [10, 1000] {
            let shape = c.index.query_shape(&query, k).unwrap();
            taken.insert(format!("{:?}", shape.auto_path()));
            let hits = c.index.search_by(Strategy::Auto, &query, k).unwrap();
            assert_eq!(pairs(&c, &hits), exact_top_k(&c, &query, k), "{shape:?}");
        }
    }
    let all = ["BlockMax", "Cursors(MaxScore)", "Exhaustive"];
    assert_eq!(taken, all.map(String::from).into(), "paths taken");
}
