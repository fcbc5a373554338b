//! RM3 on a tiny corpus, against expansion weights worked out by hand from the feedback
//! documents' BM25 scores.

use super::*;
use crate::bm25::{build, Bm25Index, Bm25Params, BuildOptions};
use crate::progress::Progress;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Twenty documents: "kiwi" is in d0 and d1 only; "common" is in three (15% > 10%, never a
/// feedback term); "café" (not `[a-z0-9]`) and "x" (one letter) are never feedback terms.
fn corpus(dir: &Path) -> PathBuf {
    let mut texts = vec![
        "kiwi plum plum fig common".to_string(),
        "kiwi fig lime café x common".to_string(),
        "common".to_string(),
    ];
    texts.extend((3..20).map(|i| format!("filler{i}")));
    let p = dir.join("corpus.jsonl");
    let mut f = std::fs::File::create(&p).unwrap();
    for (i, t) in texts.iter().enumerate() {
        let line = serde_json::json!({"_id": format!("d{i}"), "title": "", "text": t});
        writeln!(f, "{line}").unwrap();
    }
    p
}

fn index(dir: &Path, store_docvectors: bool) -> Bm25Index {
    let at = dir.join(if store_docvectors { "with" } else { "without" });
    let opts = BuildOptions {
        store_docvectors,
        ..BuildOptions::default()
    };
    build(&corpus(dir), &at, &opts).unwrap();
    Bm25Index::open(&at).unwrap()
}

fn weights(expansion: &Expansion) -> BTreeMap<String, f32> {
    expansion.iter().cloned().collect()
}

/// The BM25 scores of d0 and d1, the only documents with "kiwi".
fn feedback_scores(index: &Bm25Index) -> (f64, f64) {
    let hits = index
        .search("kiwi", None, 10, Bm25Params::default())
        .unwrap();
    assert_eq!(hits.len(), 2);
    let score = |id: &str| {
        hits.iter()
            .find(|h| index.doc_id(h.doc) == id)
            .unwrap()
            .score as f64
    };
    (score("d0"), score("d1"))
}

fn close(a: f32, b: f64) -> bool {
    (a as f64 - b).abs() < 1e-6
}

#[test]
fn expansion_weights_match_the_hand_computation() {
    let tmp = tempfile::tempdir().unwrap();
    let index = index(tmp.path(), true);
    let (s0, s1) = feedback_scores(&index);

    let (_, expansion) = index
        .search_rm3(
            "kiwi",
            None,
            10,
            Bm25Params::default(),
            &Rm3Params::default(),
        )
        .unwrap();
    // d0: kiwi 1, plum 2, fig 1 (L1 4); d1: kiwi 1, fig 1, lime 1 (L1 3).
    let model = [
        ("kiwi", s0 / 4.0 + s1 / 3.0),
        ("plum", s0 / 2.0),
        ("fig", s0 / 4.0 + s1 / 3.0),
        ("lime", s1 / 3.0),
    ];
    let total: f64 = model.iter().map(|(_, w)| w).sum();
    let got = weights(&expansion);
    assert_eq!(got.len(), 4, "{expansion:?}");
    for (term, w) in model {
        let expected = 0.5 * (term == "kiwi") as u8 as f64 + 0.5 * w / total;
        assert!(
            close(got[term], expected),
            "{term}: {} vs {expected}",
            got[term]
        );
    }
    let sum: f32 = expansion.iter().map(|(_, w)| w).sum();
    assert!((sum - 1.0).abs() < 1e-6);
    // Sorted by weight descending.
    assert_eq!(expansion[0].0, "kiwi");
    assert!(expansion.windows(2).all(|p| p[0].1 >= p[1].1));
}

#[test]
fn pruning_keeps_the_heaviest_terms_with_ties_by_term() {
    let tmp = tempfile::tempdir().unwrap();
    let index = index(tmp.path(), true);
    let (s0, s1) = feedback_scores(&index);
    let rm3 = Rm3Params {
        fb_terms: 2,
        original_weight: 0.25,
        ..Rm3Params::default()
    };
    let (_, expansion) = index
        .search_rm3("kiwi kiwi", None, 10, Bm25Params::default(), &rm3)
        .unwrap();
    // Each document keeps two terms: d0 plum 2 and fig (ties fig < kiwi), L1 3; d1 fig and
    // kiwi, L1 2. The model keeps its two heaviest terms.
    let fig = s0 / 3.0 + s1 / 2.0;
    let plum = 2.0 * s0 / 3.0;
    let kiwi = s1 / 2.0;
    let mut model = vec![("fig", fig), ("plum", plum), ("kiwi", kiwi)];
    model.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(b.0)));
    model.truncate(2);
    let total: f64 = model.iter().map(|(_, w)| w).sum();
    let got = weights(&expansion);
    let mut expected: BTreeMap<&str, f64> = BTreeMap::from([("kiwi", 0.25)]);
    for (term, w) in model {
        *expected.entry(term).or_default() += 0.75 * w / total;
    }
    assert_eq!(got.len(), expected.len(), "{expansion:?}");
    for (term, w) in expected {
        assert!(close(got[term], w), "{term}: {} vs {w}", got[term]);
    }
}

#[test]
fn second_search_scores_each_term_by_its_weight() {
    let tmp = tempfile::tempdir().unwrap();
    let index = index(tmp.path(), true);
    let (hits, expansion) = index
        .search_rm3(
            "kiwi",
            None,
            20,
            Bm25Params::default(),
            &Rm3Params::default(),
        )
        .unwrap();
    // The score of a document is the sum of weight x its single-term BM25 score.
    for hit in &hits {
        let mut expected = 0f64;
        for (term, w) in &expansion {
            let single = index.search(term, None, 20, Bm25Params::default()).unwrap();
            if let Some(h) = single.iter().find(|h| h.doc == hit.doc) {
                expected += (*w * h.score) as f64;
            }
        }
        assert!(
            (hit.score as f64 - expected).abs() < 1e-5,
            "{hit:?} vs {expected}"
        );
    }
    // Every expansion term occurs only in d0 and d1.
    let ids: Vec<&str> = hits.iter().map(|h| index.doc_id(h.doc)).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&"d0") && ids.contains(&"d1"));
}

#[test]
fn batch_equals_single_and_bad_input_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let index = index(tmp.path(), true);
    let queries: Vec<crate::bm25::BatchQuery> = ["kiwi", "plum fig", "zzzq"]
        .iter()
        .enumerate()
        .map(|(i, t)| crate::bm25::BatchQuery {
            id: format!("q{i}"),
            text: t.to_string(),
            lang: None,
        })
        .collect();
    let rm3 = Rm3Params::default();
    let (hits, expansions) = index
        .batch_search_rm3(
            &queries,
            5,
            None,
            Bm25Params::default(),
            &rm3,
            2,
            &Progress::default(),
        )
        .unwrap();
    for (i, q) in queries.iter().enumerate() {
        let (h, e) = index
            .search_rm3(&q.text, None, 5, Bm25Params::default(), &rm3)
            .unwrap();
        assert_eq!(hits[i], h);
        assert_eq!(expansions[i], e);
    }
    // A query matching nothing keeps its own terms only.
    assert_eq!(expansions[2], vec![("zzzq".to_string(), 0.5)]);

    let bad = Rm3Params { fb_docs: 0, ..rm3 };
    let e = index.search_rm3("kiwi", None, 5, Bm25Params::default(), &bad);
    assert!(e.unwrap_err().to_string().contains("at least one feedback"));
    let bad = Rm3Params {
        original_weight: 1.5,
        ..rm3
    };
    let e = index.search_rm3("kiwi", None, 5, Bm25Params::default(), &bad);
    assert!(e.unwrap_err().to_string().contains("original query weight"));

    let plain = index_without(tmp.path());
    let e = plain
        .search_rm3("kiwi", None, 5, Bm25Params::default(), &rm3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--store-docvectors"), "{e}");
}

fn index_without(dir: &Path) -> Bm25Index {
    index(dir, false)
}

#[test]
fn docvectors_are_optional_in_the_manifest_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let without = index(tmp.path(), false);
    assert!(!without.has_docvectors());
    let meta = std::fs::read_to_string(without.dir().join("meta.json")).unwrap();
    assert!(!meta.contains("docvectors"), "{meta}");
    assert!(!without.dir().join("docvectors.bin").exists());

    let with = index(tmp.path(), true);
    assert!(with.has_docvectors());
    let meta = std::fs::read_to_string(with.dir().join("meta.json")).unwrap();
    assert!(meta.contains("\"docvectors\": true"), "{meta}");
    let dir = with.dir().to_path_buf();
    drop(with);
    let path = dir.join("docvectors.bin");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[crate::io::format::HEADER_LEN + 3] ^= 0x55;
    std::fs::write(&path, bytes).unwrap();
    let e = Bm25Index::open(&dir).err().unwrap().to_string();
    assert!(e.contains("docvectors.bin"), "{e}");
}

#[test]
fn feedback_documents_tied_at_the_cut_are_taken_by_doc_id_ascending() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("ties.jsonl");
    let mut f = std::fs::File::create(&p).unwrap();
    // "b" and "a" score the same for "kiwi"; Anserini keeps "a" (ties by doc id ascending),
    // although clirkit's runs list "b" first.
    let mut docs = vec![
        ("b", "kiwi fig".to_string()),
        ("a", "kiwi plum".to_string()),
    ];
    docs.extend((0..18).map(|i| ("", format!("filler{i}"))));
    for (i, (id, text)) in docs.iter().enumerate() {
        let id = if id.is_empty() {
            format!("z{i}")
        } else {
            id.to_string()
        };
        let line = serde_json::json!({"_id": id, "title": "", "text": text});
        writeln!(f, "{line}").unwrap();
    }
    let opts = BuildOptions {
        store_docvectors: true,
        ..BuildOptions::default()
    };
    build(&p, &tmp.path().join("idx"), &opts).unwrap();
    let index = Bm25Index::open(tmp.path().join("idx")).unwrap();
    let hits = index
        .search("kiwi", None, 2, Bm25Params::default())
        .unwrap();
    assert_eq!(hits[0].score, hits[1].score);
    assert_eq!(index.doc_id(hits[0].doc), "b");
    let rm3 = Rm3Params {
        fb_docs: 1,
        ..Rm3Params::default()
    };
    let (_, expansion) = index
        .search_rm3("kiwi", None, 10, Bm25Params::default(), &rm3)
        .unwrap();
    let terms: Vec<&str> = expansion.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(terms, ["kiwi", "plum"]);
}
