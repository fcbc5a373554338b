//! A sharded build searched shard by shard and merged equals the single index, byte for byte.

use super::*;
use crate::bm25::tests::{assert_same_index_files, doc, quiet, random_corpus_dir, write_corpus};
use crate::bm25::{build, merge, BatchQuery, Bm25Params, BuildOptions};
use crate::io::jsonl::{split_lines, LineRange};
use crate::progress::Progress;
use crate::ranking::Run;
use crate::sharded::{encode_hits, merge_hits};

/// The build of shard `range` of `corpus` with `opts`.
fn shard_build(corpus: &Path, range: LineRange, shard: &Path, opts: &BuildOptions) -> Result<()> {
    let opts = BuildOptions {
        range: Some(range),
        ..opts.clone()
    };
    build(corpus, shard, &opts).map(|_| ())
}

/// Build `corpus` with `opts` as a sharded index of `shards` shards at `out`.
pub(crate) fn build_sharded(
    corpus: &Path,
    out: &Path,
    shards: usize,
    opts: &BuildOptions,
) -> Result<ShardedManifest> {
    let sharded = ShardedBuild::create(out, shards)?;
    for (i, range) in split_lines(corpus, shards)?.into_iter().enumerate() {
        shard_build(corpus, range, &sharded.shard_dir(i), opts)?;
    }
    sharded.finish()
}

/// The message of the error `result` must be.
fn error_text<T>(result: Result<T>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

fn queries(texts: &[&str]) -> Vec<BatchQuery> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| BatchQuery {
            id: format!("q{i}"),
            text: t.to_string(),
            lang: None,
        })
        .collect()
}

/// The sharded index's run: every shard searched with global statistics, the hits merged.
fn sharded_run(dir: &Path, queries: &[BatchQuery], k: usize) -> Run {
    let shards = check_shards(dir).unwrap().shards.len();
    let parts: Vec<Vec<u8>> = (0..shards)
        .map(|i| {
            let shard = Bm25Index::open_shard(dir, i).unwrap();
            let hits = shard
                .batch_search(
                    queries,
                    k,
                    None,
                    Bm25Params::default(),
                    1,
                    &Progress::default(),
                )
                .unwrap();
            encode_hits(|doc| shard.doc_id(doc), &hits)
        })
        .collect();
    let qids: Vec<String> = queries.iter().map(|q| q.id.clone()).collect();
    let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    merge_hits(&parts, &qids, k).unwrap()
}

#[test]
fn split_lines_cuts_whole_lines_and_numbers_them() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..10).map(|i| doc(&format!("d{i}"), "a b")).collect();
    let corpus = write_corpus(dir.path(), "c.jsonl", &lines);
    let bytes = std::fs::read(&corpus).unwrap();
    let ranges = split_lines(&corpus, 3).unwrap();
    assert_eq!(ranges.len(), 3);
    assert_eq!((ranges[0].start, ranges[2].end), (0, bytes.len() as u64));
    for pair in ranges.windows(2) {
        assert_eq!(pair[0].end, pair[1].start);
        assert_eq!(bytes[pair[1].start as usize - 1], b'\n');
        let lines_before = bytes[..pair[1].start as usize]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        assert_eq!(pair[1].first_line, lines_before + 1);
    }
    // More parts than lines: the extra parts are empty.
    let many = split_lines(&corpus, 25).unwrap();
    assert_eq!(many.len(), 25);
    assert!(many[24].start == many[24].end);
}

#[test]
fn sharded_search_equals_the_single_index() {
    let (dir, corpus, _) = random_corpus_dir(23, 600, 50);
    let once = dir.path().join("once");
    build(&corpus, &once, &quiet()).unwrap();
    let single = Bm25Index::open(&once).unwrap();
    let sharded = dir.path().join("sharded");
    let manifest = build_sharded(&corpus, &sharded, 4, &quiet()).unwrap();
    let (m, c) = (single.manifest(), &manifest.collection);
    assert_eq!(
        (c.num_docs, c.doc_count, c.sum_total_term_freq),
        (m.num_docs, m.doc_count, m.sum_total_term_freq)
    );
    assert_eq!((c.avgdl, c.num_terms), (m.avgdl, m.num_terms));
    let qs = queries(&[
        "w1x w2x",
        "w0x",
        "w3x w3x w17x w40x",
        "w49x w1x w0x",
        "absent",
    ]);
    let qids: Vec<String> = qs.iter().map(|q| q.id.clone()).collect();
    for k in [1, 10, 1000] {
        let hits = single
            .batch_search(&qs, k, None, Bm25Params::default(), 1, &Progress::default())
            .unwrap();
        assert_eq!(
            sharded_run(&sharded, &qs, k),
            single.to_run(&qids, &hits),
            "k={k}"
        );
    }
    // The shards merged are the single build, file for file: shard order is corpus order.
    let merged = dir.path().join("merged");
    let shards: Vec<PathBuf> = manifest
        .shards
        .iter()
        .map(|s| sharded.join(&s.dir))
        .collect();
    let inputs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    merge::merge(&inputs, &merged).unwrap();
    assert_same_index_files(&once, &merged);
}

#[test]
fn missing_or_foreign_shards_and_duplicate_ids_are_refused() {
    let (dir, corpus, lines) = random_corpus_dir(5, 200, 30);
    let sharded = dir.path().join("sharded");
    build_sharded(&corpus, &sharded, 3, &quiet()).unwrap();

    // A shard of another build: shard 1 rebuilt from other lines.
    let other = write_corpus(dir.path(), "other.jsonl", &lines[..20]);
    build(&other, &sharded.join("shard-0001"), &quiet()).unwrap();
    for e in [
        error_text(check_shards(&sharded)),
        error_text(Bm25Index::open_shard(&sharded, 1)),
    ] {
        assert!(
            e.contains("shard-0001") && e.contains("another build"),
            "{e}"
        );
    }
    std::fs::remove_dir_all(sharded.join("shard-0001")).unwrap();
    let e = error_text(check_shards(&sharded));
    assert!(e.contains("shard 1 of the sharded index is missing"), "{e}");
    assert!(Bm25Index::open_shard(&sharded, 0).is_ok());
    let e = error_text(Bm25Index::open_shard(&sharded, 3));
    assert!(e.contains("no shard 3"), "{e}");

    // An id in two shards is refused, as a single build refuses it.
    let mut dup = lines[..50].to_vec();
    dup.push(lines[0].clone());
    let corpus = write_corpus(dir.path(), "dup.jsonl", &dup);
    let e = error_text(build_sharded(&corpus, &dir.path().join("dup"), 2, &quiet()));
    assert!(e.contains("ids must be unique across shards"), "{e}");
    assert!(!dir.path().join("dup").exists());

    // A directory that is not a clirkit index is never replaced.
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    assert!(ShardedBuild::create(&foreign, 2).is_err());
}

#[test]
fn corrupt_hits_are_an_error() {
    let qids = vec!["q".to_string()];
    let e = error_text(merge_hits(&[&[1, 0, 0, 0, 0]], &qids, 10));
    assert!(e.contains("shard 0 are truncated or corrupt"), "{e}");
    let e = error_text(merge_hits(&[&[0, 0, 0, 0, 9]], &qids, 10));
    assert!(e.contains("corrupt"), "{e}");
}

#[test]
fn a_shard_error_names_the_true_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<String> = (0..40).map(|i| doc(&format!("d{i}"), "a b c")).collect();
    lines[33] = "{not json".into();
    let corpus = write_corpus(dir.path(), "c.jsonl", &lines);
    let range = split_lines(&corpus, 2).unwrap()[1];
    let e = error_text(shard_build(&corpus, range, &dir.path().join("s"), &quiet()));
    assert!(e.contains("c.jsonl:34"), "{e}");
}

#[test]
fn shards_of_a_multilingual_corpus_score_as_its_single_index() {
    let dir = tempfile::tempdir().unwrap();
    // Sorted by language, so each shard holds fewer languages than the whole corpus.
    let texts = [
        ("en", "the runner is running home"),
        ("en", "a house by the river"),
        ("de", "die Häuser am Fluss"),
        ("de", "der Läufer läuft nach Hause"),
        ("fr", "les maisons près de la rivière"),
        ("fr", "le coureur court à la maison"),
    ];
    let lines: Vec<String> = (0..60)
        .map(|i| {
            let (lang, text) = texts[i * texts.len() / 60];
            serde_json::json!({"_id": format!("{lang}{i}"), "text": format!("{text} {i}"), "lang": lang})
                .to_string()
        })
        .collect();
    let corpus = write_corpus(dir.path(), "multi.jsonl", &lines);
    let opts = BuildOptions {
        lang_field: Some("lang".into()),
        ..quiet()
    };
    let once = dir.path().join("once");
    build(&corpus, &once, &opts).unwrap();
    let single = Bm25Index::open(&once).unwrap();
    let manifest = build_sharded(&corpus, &dir.path().join("sharded"), 4, &opts).unwrap();
    assert_eq!(manifest.analyzers, single.manifest().analyzers);
    let mut qs = queries(&["running home", "Häuser Fluss", "maisons rivière 7", "house"]);
    for (q, lang) in qs.iter_mut().zip(["en", "de", "fr", "en"]) {
        q.lang = Some(lang.into());
    }
    let qids: Vec<String> = qs.iter().map(|q| q.id.clone()).collect();
    let hits = single
        .batch_search(
            &qs,
            10,
            None,
            Bm25Params::default(),
            1,
            &Progress::default(),
        )
        .unwrap();
    let dir_path = dir.path().join("sharded");
    assert_eq!(sharded_run(&dir_path, &qs, 10), single.to_run(&qids, &hits));
    // A query without a language is refused by every shard, as by the single index.
    let shard = Bm25Index::open_shard(&dir_path, 0).unwrap();
    let e = error_text(shard.search("house", None, 10, Bm25Params::default()));
    assert!(e.contains("several languages"), "{e}");
}
