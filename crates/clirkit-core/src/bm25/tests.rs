//! Index round trips, exactness of pruning, memory-bounded builds and bad input.

use super::*;
use crate::io::replace_in_file;
use crate::postings::END;
use std::io::Write;

pub(crate) fn write_corpus(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let p = dir.join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    p
}

pub(super) fn doc(id: &str, text: &str) -> String {
    serde_json::json!({"_id": id, "title": "", "text": text}).to_string()
}

pub(crate) fn quiet() -> BuildOptions {
    BuildOptions {
        ..BuildOptions::default()
    }
}

/// A small deterministic generator (xorshift64*), so tests need no extra crates.
pub(crate) struct Rng(pub(crate) u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Documents over a Zipf-ish vocabulary of made-up words, with repeated texts (exact score
/// ties) and ids whose byte order differs from file order.
/// A temporary directory holding `all.jsonl`, a [`random_corpus`] of `docs` documents over
/// `vocab` words from `seed`: (the directory, the corpus file, its lines).
pub(crate) fn random_corpus_dir(
    seed: u64,
    docs: usize,
    vocab: usize,
) -> (tempfile::TempDir, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let lines = random_corpus(&mut Rng(seed), docs, vocab);
    let corpus = write_corpus(dir.path(), "all.jsonl", &lines);
    (dir, corpus, lines)
}

pub(crate) fn random_corpus(rng: &mut Rng, docs: usize, vocab: usize) -> Vec<String> {
    let words: Vec<String> = (0..vocab).map(|i| format!("w{i}x")).collect();
    let mut texts: Vec<String> = Vec::new();
    (0..docs)
        .map(|i| {
            let text = if i > 0 && rng.below(5) == 0 {
                texts[rng.below(texts.len() as u64) as usize].clone()
            } else {
                let len = rng.below(40) as usize;
                (0..len)
                    .map(|_| {
                        let r = rng.below(vocab as u64 * vocab as u64);
                        words[(r as f64).sqrt() as usize % vocab].as_str()
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            texts.push(text.clone());
            doc(&format!("d{}", (i * 7919) % (docs + 13)), &text)
        })
        .collect()
}

/// A copy of the index at `index` without `blockmax.bin`, as indexes built before it were.
fn without_block_maxima(index: &Path, copy: &Path) -> PathBuf {
    std::fs::create_dir_all(copy).unwrap();
    for entry in std::fs::read_dir(index).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != block_maxima::BLOCK_MAXIMA_FILE {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    crate::io::manifest::reseal(copy, |_| {}).unwrap();
    copy.to_path_buf()
}

#[test]
fn pruned_search_equals_exhaustive() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (round, (docs, vocab)) in [(300, 20), (2000, 60), (5000, 200)].into_iter().enumerate() {
        let corpus = write_corpus(dir.path(), "c.jsonl", &random_corpus(&mut rng, docs, vocab));
        let index = dir.path().join(format!("idx{round}"));
        build(&corpus, &index, &quiet()).unwrap();
        let stored = Bm25Index::open(&index).unwrap();
        let older = without_block_maxima(&index, &dir.path().join(format!("old{round}")));
        let older = Bm25Index::open(older).unwrap();
        assert!(stored.block_maxima.is_some() && older.block_maxima.is_none());
        for q in 0..150 {
            let terms = 1 + rng.below(10);
            let query: Vec<String> = (0..terms)
                .map(|_| format!("w{}x", rng.below(vocab as u64 + 3)))
                .collect();
            let query = query.join(" ");
            let k = [1, 3, 10, 100, 1000, 100_000][q % 6];
            // The index's own parameters half the time (stored block maxima), others (the
            // tf/norm bound) the rest; the index without the file always falls back.
            let params = match q % 8 {
                0 => Bm25Params { k1: 1.2, b: 0.75 },
                2 => Bm25Params { k1: 0.5, b: 1.0 },
                4 => Bm25Params { k1: 2.0, b: 0.0 },
                6 => Bm25Params { k1: 0.9, b: 0.41 },
                _ => Bm25Params::default(),
            };
            let slow = stored
                .search_by(Strategy::Exhaustive, &query, None, k, params)
                .unwrap();
            let fast = stored
                .search_by(Strategy::MaxScore, &query, None, k, params)
                .unwrap();
            for idx in [&stored, &older] {
                for strategy in [Strategy::MaxScore, Strategy::BlockMaxWand, Strategy::Auto] {
                    let hits = idx.search_by(strategy, &query, None, k, params).unwrap();
                    assert_eq!(
                        hits,
                        slow,
                        "{strategy:?}, query {query:?} k={k} {params:?} on {docs} docs, stored maxima: {}",
                        idx.block_maxima.is_some()
                    );
                }
            }
            for w in fast.windows(2) {
                let (a, b) = (&w[0], &w[1]);
                assert!(crate::ranking::canonical_cmp(
                    a.score as f64,
                    stored.doc_id(a.doc),
                    b.score as f64,
                    stored.doc_id(b.doc)
                )
                .is_lt());
            }
        }
    }
}

/// The first k-th score small-k search prunes from is the full score of a k-th document of
/// the collection, so never above the k-th score exhaustive scoring finds; and on lists long
/// enough to hold k documents it is there to prune with.
#[test]
fn first_kth_score_is_at_most_the_kth_score() {
    let (dir, corpus, _) = random_corpus_dir(0x5eed_f1e5, 3000, 80);
    let path = dir.path().join("idx");
    build(&corpus, &path, &quiet()).unwrap();
    for index in [
        Bm25Index::open(&path).unwrap(),
        Bm25Index::open(without_block_maxima(&path, &dir.path().join("old"))).unwrap(),
    ] {
        let analyzer = index.query_analyzer(None).unwrap();
        let mut rng = Rng(0xfeed);
        let (mut estimated, mut reached) = (0, 0);
        for q in 0..200 {
            let terms = 1 + rng.below(6);
            let query: Vec<String> = (0..terms).map(|_| format!("w{}x", rng.below(90))).collect();
            let query = query.join(" ");
            let k = [1, 3, 10, 64][q % 4];
            let params = Bm25Params::default();
            let cache = index.cache(params).unwrap();
            let cursors = index.cursors(&analyzer, &query, &cache).unwrap();
            let Some(first) = crate::postings::query::estimate::first_kth_score(&cursors, k) else {
                continue;
            };
            estimated += 1;
            let hits = index
                .search_by(Strategy::Exhaustive, &query, None, k, params)
                .unwrap();
            assert_eq!(hits.len(), k, "{query:?} k={k}");
            let kth = hits[k - 1].score;
            assert!(
                first <= kth,
                "{query:?} k={k}: first {first} above the k-th score {kth}"
            );
            reached += usize::from(first == kth);
        }
        assert!(estimated > 150, "estimated {estimated} of 200");
        // Exact on some: the leading term's best blocks often hold the top k (one-term queries).
        assert!(
            reached > 10,
            "first k-th score exact on {reached} of {estimated}"
        );
    }
}

#[test]
fn scores_follow_lucene_bm25() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(
        dir.path(),
        "c.jsonl",
        &[
            doc("a", "zorp quux zorp"),
            doc("b", "quux blah blah blah blah"),
            doc("c", ""),
            doc("d", &"filler ".repeat(30)),
        ],
    );
    let index = dir.path().join("idx");
    build(&corpus, &index, &quiet()).unwrap();
    let idx = Bm25Index::open(&index).unwrap();
    assert_eq!(idx.num_docs(), 4);
    // The empty document has no field in Lucene: docCount = 3, avgdl = 38 / 3.
    assert_eq!(idx.avgdl(), (38.0f64 / 3.0) as f32);
    let hits = idx
        .search("zorp zorp quux", None, 10, Bm25Params::default())
        .unwrap();
    let (k1, b, avgdl) = (0.9f64, 0.4f64, 38.0f64 / 3.0);
    let idf = |df: f64| (1.0 + (3.0 - df + 0.5) / (df + 0.5)).ln();
    let bm25 = |tf: f64, dl: f64| tf / (tf + k1 * (1.0 - b + b * dl / avgdl));
    let a = 2.0 * idf(1.0) * bm25(2.0, 3.0) + idf(2.0) * bm25(1.0, 3.0);
    let bb = idf(2.0) * bm25(1.0, 5.0);
    assert_eq!(hits.len(), 2);
    assert_eq!(idx.doc_id(hits[0].doc), "a");
    assert!(
        (hits[0].score as f64 - a).abs() < 1e-5,
        "{} vs {a}",
        hits[0].score
    );
    assert_eq!(idx.doc_id(hits[1].doc), "b");
    assert!((hits[1].score as f64 - bb).abs() < 1e-5);
}

#[test]
fn spilled_build_is_identical_to_in_memory_build() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(42);
    let mut lines = random_corpus(&mut rng, 3000, 100);
    // Terms longer than the 22 bytes a hash-table key holds inline, spread over many runs.
    for i in 0..50 {
        let text = format!("pneumonoultramicroscopicsilicovolcanoconiosis{} w1x", i % 7);
        lines.insert(i * 60, doc(&format!("long{i}"), &text));
    }
    // Term frequencies past the 255 an in-memory posting holds inline, in documents of one length.
    for i in 0..5 {
        let text = format!(
            "{}{}",
            "zorp ".repeat(250 + 10 * i),
            "w2x ".repeat(50 - 10 * i)
        );
        lines.insert(i * 500 + 7, doc(&format!("many{i}"), &text));
    }
    let corpus = write_corpus(dir.path(), "c.jsonl", &lines);
    let one = dir.path().join("one");
    let many = dir.path().join("many");
    // One thread: one in-memory shard, never spilled. Three threads: three shards, each spilled
    // many times. The files must not depend on either.
    // With document vectors: the forward index is inverted in slices of documents that fit the
    // budget (many with the small one, a few with the medium one), and its file must not change either.
    let single = BuildOptions {
        threads: 1,
        store_docvectors: true,
        ..quiet()
    };
    let a = build(&corpus, &one, &single).unwrap();
    let small = BuildOptions {
        memory_budget_bytes: 20_000,
        batch_lines: 100,
        threads: 3,
        store_docvectors: true,
        ..quiet()
    };
    let b = build(&corpus, &many, &small).unwrap();
    assert_eq!(a.spilled_runs, 0);
    assert!(b.spilled_runs > 5, "{b:?}");
    // A budget that spills a few larger runs, merged through read buffers much smaller than them.
    let few = dir.path().join("few");
    let medium = BuildOptions {
        memory_budget_bytes: 400_000,
        threads: 2,
        ..small
    };
    let c = build(&corpus, &few, &medium).unwrap();
    assert!(c.spilled_runs >= 2, "{c:?}");
    for (f, other) in [
        format::TERMS_FILE,
        format::POSTINGS_FILE,
        format::DOCS_FILE,
        format::IDS_FILE,
        block_maxima::BLOCK_MAXIMA_FILE,
        super::docvectors::DOCVECTORS_FILE,
    ]
    .into_iter()
    .flat_map(|f| [(f, &many), (f, &few)])
    {
        assert_eq!(
            std::fs::read(one.join(f)).unwrap(),
            std::fs::read(other.join(f)).unwrap(),
            "{f} of {}",
            other.display()
        );
    }
    // No run files (nor the forward index's records) are left behind.
    assert_eq!(std::fs::read_dir(&many).unwrap().count(), 7);
    let idx = Bm25Index::open(&many).unwrap();
    let hits = idx.search("zorp", None, 10, Bm25Params::default()).unwrap();
    let found: Vec<&str> = hits.iter().map(|h| idx.doc_id(h.doc)).collect();
    // Same length, higher tf: higher score.
    assert_eq!(found, ["many4", "many3", "many2", "many1", "many0"]);
}

/// An index of `random_corpus(docs, vocab)` from `seed`, built at `dir/idx`.
fn random_index(dir: &Path, seed: u64, docs: usize, vocab: usize) -> PathBuf {
    let corpus = write_corpus(dir, "c.jsonl", &random_corpus(&mut Rng(seed), docs, vocab));
    let index = dir.join("idx");
    build(&corpus, &index, &quiet()).unwrap();
    index
}

/// A random index over `vocab` words and `count` two-word queries over its words.
fn batch_fixture(
    seed: u64,
    vocab: usize,
    count: usize,
) -> (tempfile::TempDir, Bm25Index, Vec<BatchQuery>) {
    let dir = tempfile::tempdir().unwrap();
    let index = random_index(dir.path(), seed, 1000, vocab);
    let queries = (0..count)
        .map(|i| BatchQuery {
            id: format!("q{i}"),
            text: format!("w{}x w{}x", i % vocab, (i * 7) % vocab),
            lang: None,
        })
        .collect();
    (dir, Bm25Index::open(&index).unwrap(), queries)
}

#[test]
fn batch_search_is_deterministic_across_threads() {
    let (_dir, idx, queries) = batch_fixture(7, 50, 64);
    let p = Bm25Params::default();
    let one = idx
        .batch_search(&queries, 50, None, p, 1, &Progress::default())
        .unwrap();
    let two = idx
        .batch_search(&queries, 50, None, p, 2, &Progress::default())
        .unwrap();
    assert_eq!(one, two);
    assert_eq!(one[5], idx.search(&queries[5].text, None, 50, p).unwrap());
}

#[test]
fn streamed_run_files_equal_the_whole_run_at_any_thread_count() {
    // More queries than one reorder window, so several windows are written in turn.
    let (dir, idx, queries) = batch_fixture(11, 40, 5000);
    let p = Bm25Params::default();
    let hits = idx
        .batch_search(&queries, 5, None, p, 1, &Progress::default())
        .unwrap();
    let qids: Vec<String> = queries.iter().map(|q| q.id.clone()).collect();
    let whole = dir.path().join("whole.trec");
    crate::io::trec::write_run(&whole, &idx.to_run(&qids, &hits), "t").unwrap();
    for threads in [1, 3] {
        let streamed = dir.path().join(format!("streamed-{threads}.trec"));
        let settings = BatchSettings {
            k: 5,
            lang: None,
            params: p,
            rm3: None,
            threads,
            progress: &Progress::default(),
        };
        idx.batch_search_to_run_file(&queries, &settings, &streamed, "t")
            .unwrap();
        assert_eq!(
            std::fs::read(&streamed).unwrap(),
            std::fs::read(&whole).unwrap()
        );
    }
}

#[test]
fn bad_input_errors_name_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("idx");
    let err = |lines: &[String], opts: &BuildOptions| {
        let corpus = write_corpus(dir.path(), "bad.jsonl", lines);
        let e = build(&corpus, &index, opts).unwrap_err().to_string();
        assert!(!index.exists(), "nothing loadable after a failed build");
        e
    };
    let e = err(
        &[doc("a", "x"), "{\"_id\": \"b\", \"text\": ".into()],
        &quiet(),
    );
    assert!(e.contains("bad.jsonl:2: malformed JSON"), "{e}");
    let e = err(&[doc("a", "x"), "{\"text\": \"y\"}".into()], &quiet());
    assert!(e.contains("bad.jsonl:2: no id field"), "{e}");
    let e = err(&[doc("a", "x"), doc("b", "y"), doc("a", "z")], &quiet());
    assert!(
        e.contains("duplicate id 'a' at line 3 (first seen at line 1)"),
        "{e}"
    );
    // First lines stay right past blank lines, across batches of two lines.
    let lines = [
        doc("a", "x"),
        String::new(),
        doc("b", "y"),
        String::new(),
        String::new(),
        doc("c", "z"),
        doc("d", "w"),
    ];
    let small_batches = BuildOptions {
        batch_lines: 2,
        ..quiet()
    };
    for (id, first) in [("a", 1), ("b", 3), ("c", 6), ("d", 7)] {
        let e = err(&[&lines[..], &[doc(id, "again")]].concat(), &small_batches);
        let want = format!("duplicate id '{id}' at line 8 (first seen at line {first})");
        assert!(e.contains(&want), "{e}");
    }
    let e = err(
        &[doc("a", "x")],
        &BuildOptions {
            lang: Some("xx".into()),
            ..quiet()
        },
    );
    assert!(
        e.contains("unknown language 'xx'") && e.contains("en"),
        "{e}"
    );
    let with_lang = |id: &str, lang: &str| {
        serde_json::json!({"_id": id, "text": "hello", "lang": lang}).to_string()
    };
    let e = err(
        &[with_lang("a", "en"), with_lang("b", "qq")],
        &BuildOptions {
            lang_field: Some("lang".into()),
            ..quiet()
        },
    );
    assert!(
        e.contains("bad.jsonl:2: document 'b'") && e.contains("unknown language 'qq'"),
        "{e}"
    );

    let corpus = dir.path().join("bytes.jsonl");
    std::fs::write(
        &corpus,
        b"{\"_id\": \"a\", \"text\": \"ok\"}\n{\"_id\": \"b\", \"text\": \"\xff\"}\n",
    )
    .unwrap();
    let e = build(&corpus, &index, &quiet()).unwrap_err().to_string();
    assert!(e.contains("bytes.jsonl:2: not valid UTF-8"), "{e}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "no temporary directory survives a failed build"
    );
}

#[test]
fn keep_first_duplicate_and_empty_documents() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(
        dir.path(),
        "c.jsonl",
        &[
            doc("a", "zorp"),
            doc("e", ""),
            doc("a", "quux"),
            doc("b", "quux zorp"),
        ],
    );
    let index = dir.path().join("idx");
    let opts = BuildOptions {
        keep_first_duplicate: true,
        ..quiet()
    };
    let summary = build(&corpus, &index, &opts).unwrap();
    assert_eq!(summary.skipped_duplicates, 1);
    let idx = Bm25Index::open(&index).unwrap();
    assert_eq!(idx.num_docs(), 3);
    assert_eq!(idx.doc_id(1), "e");
    let hits = idx.search("quux", None, 10, Bm25Params::default()).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(idx.doc_id(hits[0].doc), "b");
    assert!(idx
        .search("", None, 10, Bm25Params::default())
        .unwrap()
        .is_empty());
}

#[test]
fn failed_rebuild_keeps_the_old_index_and_versions_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_corpus(dir.path(), "good.jsonl", &[doc("a", "zorp")]);
    let bad = write_corpus(dir.path(), "bad.jsonl", &[doc("a", "zorp"), "{".into()]);
    let index = dir.path().join("idx");
    build(&good, &index, &quiet()).unwrap();
    assert!(build(&bad, &index, &quiet()).is_err());
    let idx = Bm25Index::open(&index).unwrap();
    assert_eq!(
        idx.search("zorp", None, 1, Bm25Params::default())
            .unwrap()
            .len(),
        1
    );
    idx.verify().unwrap();

    replace_in_file(
        &index.join("meta.json"),
        "\"version\": 2",
        "\"version\": 99",
    );
    let e = Bm25Index::open(&index).err().unwrap().to_string();
    assert!(e.contains("version 99") && e.contains("rebuild"), "{e}");

    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let e = Bm25Index::open(&other).err().unwrap().to_string();
    assert!(e.contains("not a clirkit index"), "{e}");
}

#[test]
fn multilingual_query_language_rules() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(
        dir.path(),
        "c.jsonl",
        &[serde_json::json!({"_id": "a", "text": "zorp", "lang": "en"}).to_string()],
    );
    let index = dir.path().join("idx");
    let opts = BuildOptions {
        lang_field: Some("lang".into()),
        ..quiet()
    };
    build(&corpus, &index, &opts).unwrap();
    let idx = Bm25Index::open(&index).unwrap();
    assert_eq!(idx.languages(), ["en"]);
    assert_eq!(
        idx.search("zorp", None, 5, Bm25Params::default())
            .unwrap()
            .len(),
        1
    );
    let e = idx
        .search("zorp", Some("zz"), 5, Bm25Params::default())
        .unwrap_err();
    assert!(e.to_string().contains("unknown language 'zz'"));
    let bad = Bm25Params { k1: -1.0, b: 0.4 };
    assert!(idx.search("zorp", None, 5, bad).is_err());
}

#[test]
fn cancelled_build_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path(), "c.jsonl", &[doc("a", "zorp")]);
    let index = dir.path().join("idx");
    let cancel = std::sync::atomic::AtomicBool::new(true);
    let e = build_cancellable(&corpus, &index, &quiet(), &cancel).unwrap_err();
    assert!(e.to_string().contains("interrupted"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn empty_corpus_builds_an_empty_index() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path(), "c.jsonl", &[]);
    let index = dir.path().join("idx");
    build(&corpus, &index, &quiet()).unwrap();
    let idx = Bm25Index::open(&index).unwrap();
    assert_eq!((idx.num_docs(), idx.num_terms()), (0, 0));
    assert!(idx
        .search("zorp", None, 10, Bm25Params::default())
        .unwrap()
        .is_empty());
}

/// Rewrite `meta.json` with `edit` applied and its checksum recomputed, as a tool that knows the
/// format could: what the open-time statistics checks must catch on their own.
fn rewrite_manifest(index: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let out = crate::io::atomic::AtomicDir::create(index.with_extension("copy")).unwrap();
    for entry in std::fs::read_dir(index).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "meta.json" {
            std::fs::copy(entry.path(), out.path().join(entry.file_name())).unwrap();
        }
    }
    let mut manifest: Bm25Manifest = crate::io::manifest::read(index).unwrap();
    let mut value = serde_json::to_value(&manifest).unwrap();
    edit(&mut value);
    manifest = serde_json::from_value(value).unwrap();
    crate::io::manifest::commit(out, &manifest).unwrap();
    std::fs::remove_dir_all(index).unwrap();
    std::fs::rename(index.with_extension("copy"), index).unwrap();
}

#[test]
fn inconsistent_statistics_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("idx");
    let docs = [doc("a", "zorp quux"), doc("b", "quux")];
    build(
        &write_corpus(dir.path(), "c.jsonl", &docs),
        &index,
        &quiet(),
    )
    .unwrap();
    let meta = std::fs::read_to_string(index.join("meta.json")).unwrap();
    // A hand edit breaks the manifest's checksum...
    std::fs::write(
        index.join("meta.json"),
        meta.replace("\"avgdl\": 1.5", "\"avgdl\": 0"),
    )
    .unwrap();
    let e = Bm25Index::open(&index).err().unwrap().to_string();
    assert!(e.contains("meta.json: checksum mismatch"), "{e}");
    std::fs::write(index.join("meta.json"), &meta).unwrap();
    // ...and one with a recomputed checksum still fails on the statistics themselves.
    rewrite_manifest(&index, |m| m["avgdl"] = serde_json::json!(0.0));
    let e = Bm25Index::open(&index).err().unwrap().to_string();
    assert!(e.contains("inconsistent statistics: avgdl 0"), "{e}");
}

#[test]
fn corrupt_postings_are_caught_where_they_are_read_and_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    let index = random_index(dir.path(), 3, 3000, 400);
    assert_eq!(
        crate::io::manifest::verify_dir(&index, &LAYOUT)
            .unwrap()
            .format,
        "clirkit-bm25"
    );
    let path = index.join(format::POSTINGS_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = crate::io::format::HEADER_LEN + bytes.len() / 3;
    bytes[at] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    // Opening stays cheap (the postings are not read), so it succeeds; a search over every
    // term reads every postings chunk and meets the corrupt one; verify names the file.
    let idx = Bm25Index::open(&index).unwrap();
    let all_terms: Vec<String> = (0..400).map(|t| format!("w{t}x")).collect();
    let e = idx
        .search(&all_terms.join(" "), None, 10, Bm25Params::default())
        .expect_err("the corrupt chunk is detected")
        .to_string();
    assert!(e.contains("postings.bin: checksum mismatch"), "{e}");
    let e = idx.verify().err().unwrap().to_string();
    assert!(
        e.contains("postings.bin") && e.contains("checksum mismatch"),
        "{e}"
    );
}

#[test]
fn stored_block_maxima_are_each_blocks_largest_score() {
    let dir = tempfile::tempdir().unwrap();
    let index = random_index(dir.path(), 5, 4000, 120);
    let idx = Bm25Index::open(&index).unwrap();
    let cache = idx.cache(Bm25Params::default()).unwrap();
    for t in 0..120 {
        for boost in [1.0f32, 3.0] {
            let term = format!("w{t}x");
            let terms = [(term.as_str(), boost)].into_iter();
            let Some(mut cursor) = idx.weighted_cursors(terms, &cache).unwrap().pop() else {
                continue;
            };
            assert!(cursor.max_score > 0.0);
            let (mut block_last, mut block_bound, mut block_best) = (None, 0f32, 0f32);
            let mut term_best = 0f32;
            while cursor.doc != END {
                let doc = cursor.doc;
                let bound = cursor.block_bound(doc);
                let last = cursor.bound_block_last_doc();
                if block_last != Some(last) {
                    // Each block's bound is its largest score exactly, not merely above it.
                    assert!(block_last.is_none() || block_best == block_bound, "{term}");
                    (block_last, block_bound, block_best) = (Some(last), bound, 0.0);
                }
                let score = cursor.score();
                assert!(score <= bound, "{term} doc {doc}: {score} > {bound}");
                block_best = block_best.max(score);
                term_best = term_best.max(score);
                cursor.next();
            }
            assert_eq!(block_best, block_bound, "{term}");
            assert_eq!(cursor.max_score, term_best, "{term}");
        }
    }
}

#[test]
fn corrupt_block_maxima_are_an_error_not_another_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let index = random_index(dir.path(), 3, 3000, 400);
    let path = index.join(block_maxima::BLOCK_MAXIMA_FILE);
    let intact = std::fs::read(&path).unwrap();
    let all_terms: Vec<String> = (0..400).map(|t| format!("w{t}x")).collect();
    let query = all_terms.join(" ");
    // A flip in the parameters, the term table or the maxima: the open or the first search
    // that reads the chunk fails, and verify names the file.
    for at in [0, 30, intact.len() * 2 / 3 - crate::io::format::HEADER_LEN] {
        let mut bytes = intact.clone();
        bytes[crate::io::format::HEADER_LEN + at] ^= 0x04;
        std::fs::write(&path, &bytes).unwrap();
        let e = Bm25Index::open(&index)
            .and_then(|idx| idx.search(&query, None, 10, Bm25Params::default()))
            .expect_err("the corrupt chunk is detected")
            .to_string();
        assert!(e.contains("blockmax.bin: checksum mismatch"), "{e}");
        let e = crate::io::manifest::verify_dir(&index, &LAYOUT)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("blockmax.bin") && e.contains("checksum mismatch"),
            "{e}"
        );
    }
}

#[test]
fn a_directory_that_is_not_an_index_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path(), "c.jsonl", &[doc("a", "zorp")]);
    let user = dir.path().join("thesis");
    std::fs::create_dir(&user).unwrap();
    std::fs::write(user.join("meta.json"), "{}").unwrap();
    std::fs::write(user.join("thesis.tex"), "x").unwrap();
    let e = build(&corpus, &user, &quiet()).err().unwrap().to_string();
    assert!(
        e.contains("thesis") && e.contains("not a clirkit index"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(user.join("thesis.tex")).unwrap(),
        "x"
    );
}

#[test]
fn gzip_and_zstd_corpora_index_to_the_same_files_as_the_plain_one() {
    use crate::io::input::tests::{gzip, zstd};
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(5);
    let plain = write_corpus(dir.path(), "c.jsonl", &random_corpus(&mut rng, 200, 30));
    let text = std::fs::read(&plain).unwrap();
    let packed = [("c.jsonl.gz", gzip(&text)), ("c.jsonl.zst", zstd(&text))];
    build(&plain, &dir.path().join("plain"), &quiet()).unwrap();
    let expected = files_but_corpus(&dir.path().join("plain"));
    for (name, bytes) in packed {
        let corpus = dir.path().join(name);
        std::fs::write(&corpus, bytes).unwrap();
        let index = dir.path().join(format!("idx-{name}"));
        build(&corpus, &index, &quiet()).unwrap();
        assert_eq!(files_but_corpus(&index), expected, "{name}");
    }
}

#[test]
fn a_build_counts_the_bytes_read_from_disk_against_the_inputs_sizes() {
    use crate::io::input::tests::gzip;
    use crate::progress::Counter;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(6);
    let docs = random_corpus(&mut rng, 400, 30);
    let plain = write_corpus(dir.path(), "c.jsonl", &docs[..300]);
    let packed = dir.path().join("d.jsonl.gz");
    let more = docs[300..].join("\n").into_bytes();
    std::fs::write(&packed, gzip(&more)).unwrap();
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    let counter = Arc::new(Counter::default());
    let opts = BuildOptions {
        progress: Progress::to(counter.clone()),
        batch_lines: 64,
        ..quiet()
    };
    let parts = [CorpusPart::whole(&plain), CorpusPart::whole(&packed)];
    let never = std::sync::atomic::AtomicBool::new(false);
    build_parts_cancellable(&parts, &dir.path().join("idx"), &opts, &never).unwrap();
    // Compressed bytes count as they lie on disk, so the count ends at the total.
    let total = size(&plain) + size(&packed);
    assert_eq!((counter.done(), counter.total()), (total, total));
}

#[test]
fn a_batch_search_counts_each_query_once() {
    use crate::progress::Counter;
    use std::sync::Arc;
    let (dir, idx, queries) = batch_fixture(12, 40, 700);
    let counter = Arc::new(Counter::default());
    let progress = Progress::to(counter.clone());
    idx.batch_search(&queries, 5, None, Bm25Params::default(), 2, &progress)
        .unwrap();
    assert_eq!(counter.done(), queries.len() as u64);
    let settings = BatchSettings {
        k: 5,
        lang: None,
        params: Bm25Params::default(),
        rm3: None,
        threads: 2,
        progress: &progress,
    };
    let out = dir.path().join("run.trec");
    idx.batch_search_to_run_file(&queries, &settings, &out, "t")
        .unwrap();
    assert_eq!(counter.done(), 2 * queries.len() as u64);
}

/// Every file of the index at `index`, the manifest without the corpus it names and the sorted
/// runs it spilled (how batches fell: by file, they end where a file does), and so without its own
/// checksum: what builds over the same documents from other files must share.
fn files_but_corpus(index: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(index)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let mut bytes = std::fs::read(e.path()).unwrap();
            if name == "meta.json" {
                let mut meta: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                meta["build"]["corpus"] = serde_json::Value::Null;
                meta["build"]["spilled_runs"] = serde_json::Value::Null;
                meta["checksum"] = serde_json::Value::Null;
                bytes = meta.to_string().into_bytes();
            }
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

/// The indexes at `a` and `b` hold the same files with the same bytes, but for the corpus named
/// in the manifest (the failure names the file that differs).
fn assert_same_files(a: &Path, b: &Path) {
    let (a, b) = (files_but_corpus(a), files_but_corpus(b));
    let names = |files: &[(String, Vec<u8>)]| files.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&a), names(&b));
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        if name == "meta.json" {
            assert_eq!(String::from_utf8_lossy(x), String::from_utf8_lossy(y));
        }
        assert!(x == y, "{name} differs");
    }
}

#[test]
fn corpus_files_read_in_sequence_index_as_their_concatenation() {
    let dir = tempfile::tempdir().unwrap();
    let lines = random_corpus(&mut Rng(11), 300, 40);
    // Each part's language rule, and the language its documents get: a fixed one (the record's
    // own field ignored), the record's field, or the part's default for records without one.
    let rules = [
        (Some("en"), None, "en"),
        (None, None, "fr"),
        (None, Some("de"), "de"),
    ];
    let (mut parts, mut joined) = (Vec::new(), Vec::new());
    for (i, chunk) in lines.chunks(100).enumerate() {
        let (lang, default_lang, chosen) = rules[i];
        let mut own = Vec::new();
        for (j, line) in chunk.iter().enumerate() {
            let mut rec: serde_json::Value = serde_json::from_str(line).unwrap();
            rec["lang"] = chosen.into();
            joined.push(rec.to_string());
            match (i, j % 2) {
                (0, 0) => rec["lang"] = "it".into(),
                (2, _) => drop(rec.as_object_mut().unwrap().remove("lang")),
                _ => {}
            }
            own.push(rec.to_string());
        }
        if i == 1 {
            own.insert(7, String::new()); // a blank line shifts the line numbers of one part
        }
        parts.push(CorpusPart {
            path: write_corpus(dir.path(), &format!("part{i}.jsonl"), &own),
            lang: lang.map(String::from),
            default_lang: default_lang.map(String::from),
        });
    }
    let whole = write_corpus(dir.path(), "all.jsonl", &joined);
    // Small batches and budget: batches end inside parts, postings spill, docvectors are kept.
    let opts = BuildOptions {
        lang_field: Some("lang".into()),
        batch_lines: 7,
        memory_budget_bytes: 1 << 14,
        store_docvectors: true,
        ..quiet()
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    build(&whole, &dir.path().join("whole"), &opts).unwrap();
    build_parts_cancellable(&parts, &dir.path().join("parts"), &opts, &never).unwrap();
    assert_same_files(&dir.path().join("parts"), &dir.path().join("whole"));
    let index = Bm25Index::open(dir.path().join("parts")).unwrap();
    let langs: Vec<&str> = index
        .manifest()
        .languages
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(langs, ["de", "en", "fr"]);

    // An id in two files is an error naming both, with each one's line.
    let again = serde_json::json!({"_id": serde_json::from_str::<serde_json::Value>(&lines[3]).unwrap()["_id"], "text": "x"});
    let mut last = std::fs::read_to_string(&parts[2].path).unwrap();
    last.push_str(&format!("{again}\n"));
    std::fs::write(&parts[2].path, last).unwrap();
    let e = build_parts_cancellable(&parts, &dir.path().join("dup"), &opts, &never).unwrap_err();
    let message = e.to_string();
    assert!(matches!(e, Error::DuplicateId { .. }), "{message}");
    let (p0, p2) = (parts[0].path.display(), parts[2].path.display());
    assert!(
        message.starts_with(&format!("{p2}: duplicate id ")),
        "{message}"
    );
    assert!(
        message.ends_with(&format!("at line 101 (first seen at {p0}:4)")),
        "{message}"
    );

    // A part's language without a language field for the index is refused, naming the file.
    let e = build_parts_cancellable(&parts, &dir.path().join("x"), &quiet(), &never).unwrap_err();
    assert!(
        e.to_string()
            .contains("part0.jsonl: a language for one corpus file"),
        "{e}"
    );
}

/// The indexes at `a` and `b` have the same data files, byte for byte.
pub(super) fn assert_same_index_files(a: &Path, b: &Path) {
    for file in [
        "terms.bin",
        "postings.bin",
        "docs.bin",
        "ids.bin",
        block_maxima::BLOCK_MAXIMA_FILE,
    ] {
        let same = std::fs::read(a.join(file)).unwrap() == std::fs::read(b.join(file)).unwrap();
        assert!(same, "{file}");
    }
}

#[test]
fn merge_equals_one_build_of_the_concatenated_corpora() {
    let (dir, whole, lines) = random_corpus_dir(11, 400, 60);
    let once = dir.path().join("once");
    build(&whole, &once, &quiet()).unwrap();
    let mut parts = Vec::new();
    for (i, range) in [0..150, 150..151, 151..400].into_iter().enumerate() {
        let corpus = write_corpus(dir.path(), &format!("part{i}.jsonl"), &lines[range]);
        let index = dir.path().join(format!("part{i}"));
        build(&corpus, &index, &quiet()).unwrap();
        parts.push(index);
    }
    let merged = dir.path().join("merged");
    let inputs: Vec<&Path> = parts.iter().map(PathBuf::as_path).collect();
    merge::merge(&inputs, &merged).unwrap();
    assert_same_index_files(&once, &merged);
    let (a, b) = (
        Bm25Index::open(&once).unwrap(),
        Bm25Index::open(&merged).unwrap(),
    );
    let (a, b) = (a.manifest(), b.manifest());
    assert_eq!(
        (
            a.num_docs,
            a.doc_count,
            a.sum_total_term_freq,
            a.avgdl,
            a.num_terms
        ),
        (
            b.num_docs,
            b.doc_count,
            b.sum_total_term_freq,
            b.avgdl,
            b.num_terms
        )
    );

    let e = merge::merge(&[&parts[0], &parts[0]], &dir.path().join("x"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("also in an earlier input"), "{e}");
    let other = dir.path().join("other");
    let opts = BuildOptions {
        fields: vec!["text".into()],
        ..quiet()
    };
    build(
        &write_corpus(dir.path(), "o.jsonl", &[doc("z", "a b")]),
        &other,
        &opts,
    )
    .unwrap();
    let e = merge::merge(&[&parts[0], &other], &dir.path().join("x"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("indexed fields"), "{e}");
}

/// The index of "a zorp", "b quux", "c zorp" (documents 0, 1, 2) with the postings payload of
/// "zorp" edited by `edit(payload, metas_at, data_at)` and every checksum recomputed.
fn crafted_zorp_postings(dir: &Path, edit: impl FnOnce(&mut Vec<u8>, usize, usize)) -> PathBuf {
    let docs = [doc("a", "zorp"), doc("b", "quux"), doc("c", "zorp")];
    let index = dir.join("idx");
    build(&write_corpus(dir, "c.jsonl", &docs), &index, &quiet()).unwrap();
    let (metas_at, data_at) =
        crate::postings::termdict::single_block_at(&index, format::BM25_TERM_FILES, "zorp");
    crate::io::manifest::craft_payload::<Bm25Manifest>(&index, format::POSTINGS_FILE, |p| {
        edit(p, metas_at, data_at)
    });
    index
}

/// A term whose block metadata is malformed is refused at every query of an opened index, not
/// only the first: only terms found well formed are spared the walk over their blocks later.
#[test]
fn a_malformed_term_is_refused_at_every_query() {
    let dir = tempfile::tempdir().unwrap();
    let index = crafted_zorp_postings(dir.path(), |p, metas_at, _| {
        // The block's posting count (its metadata's last byte) set to 0: no block holds none.
        assert_eq!(p[metas_at + 15], 2);
        p[metas_at + 15] = 0;
    });
    let index = Bm25Index::open(&index).unwrap();
    for _ in 0..2 {
        let e = index
            .search("zorp", None, 10, Bm25Params::default())
            .unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{e}");
        assert!(e.to_string().contains("block is malformed"), "{e}");
    }
    // A well-formed term answers alike both times.
    let quux = || {
        index
            .search("quux", None, 10, Bm25Params::default())
            .unwrap()
    };
    let first = quux();
    assert_eq!(first.len(), 1);
    assert_eq!(first, quux());
}

#[test]
fn a_crafted_document_number_beyond_the_count_is_a_format_error() {
    let zorp = |index: &Path| {
        Bm25Index::open(index)
            .unwrap()
            .search("zorp", None, 10, Bm25Params::default())
    };
    // Block metadata naming document 3 of 3.
    let dir = tempfile::tempdir().unwrap();
    let index = crafted_zorp_postings(dir.path(), |p, metas_at, _| {
        assert_eq!(p[metas_at..metas_at + 4], 2u32.to_le_bytes());
        p[metas_at..metas_at + 4].copy_from_slice(&3u32.to_le_bytes());
    });
    let e = zorp(&index).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(
        e.to_string().contains("postings.bin") && e.to_string().contains("document 3 of 3"),
        "{e}"
    );
    // Metadata intact, but the packed gaps (0 then 1: documents 0 and 2) edited to 1 and 1,
    // which decode to documents 1 and 3.
    let dir = tempfile::tempdir().unwrap();
    let index = crafted_zorp_postings(dir.path(), |p, _, data_at| {
        assert_eq!(p[data_at], 0b10);
        p[data_at] = 0b11;
    });
    let e = zorp(&index).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(
        e.to_string().contains("postings.bin")
            && e.to_string().contains("decodes to documents other than"),
        "{e}"
    );
}
