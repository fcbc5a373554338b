//! A sharded impact build searched shard by shard and merged equals the single index, byte for
//! byte; and a sharded index that is not one build is refused, naming the place at fault.

use super::*;
use crate::impact::tests::{quiet, random_collection, random_queries, vector_line};
use crate::impact::{build, BuildOptions, WeightedVector};
use crate::io::jsonl::split_lines;
use crate::io::trec::write_run_to;
use crate::progress::Progress;
use crate::ranking::Run;
use crate::sharded::{encode_hits, merge_hits};

/// Build `vectors` as a sharded index of `shards` shards at `out`, shard `i` with `opts(i)`.
fn build_sharded_with(
    vectors: &Path,
    out: &Path,
    shards: usize,
    opts: impl Fn(usize) -> BuildOptions,
) -> Result<ShardedImpactManifest> {
    let dir = ShardedDir::create(out, shards)?;
    for (i, range) in split_lines(vectors, shards)?.into_iter().enumerate() {
        let opts = BuildOptions {
            range: Some(range),
            ..opts(i)
        };
        build(vectors, &dir.shard_dir(i), &opts)?;
    }
    finish(dir)
}

fn run_bytes(run: &Run) -> Vec<u8> {
    let mut out = Vec::new();
    write_run_to(&mut out, run, "t").unwrap();
    out
}

/// The run of `queries` searched on every shard of `sharded` and merged.
fn sharded_run(sharded: &Path, shards: usize, queries: &[WeightedVector], k: usize) -> Run {
    let parts: Vec<Vec<u8>> = (0..shards)
        .map(|i| {
            let shard = ImpactIndex::open_shard(sharded, i).unwrap();
            let hits = shard
                .batch_search(queries, k, 1, &Progress::default())
                .unwrap();
            encode_hits(|doc| shard.doc_id(doc), &hits)
        })
        .collect();
    let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let qids: Vec<String> = queries.iter().map(|q| q.id.clone()).collect();
    merge_hits(&parts, &qids, k).unwrap()
}

#[test]
fn sharded_search_equals_the_single_index_byte_for_byte() {
    // Coarse random weights: many exact score ties, broken across shards by the id rule.
    let c = random_collection(11, 900, 300);
    let vectors = c.dir.path().join("docs.jsonl");
    let queries = random_queries(5, 60, 300, 6);
    for shards in [1, 3, 8] {
        let out = c.dir.path().join(format!("sharded-{shards}"));
        let manifest = build_sharded_with(&vectors, &out, shards, |_| quiet()).unwrap();
        assert_eq!(manifest.num_docs, 900);
        assert_eq!(manifest.num_postings, c.index.manifest().num_postings);
        assert_eq!(manifest.max_impact, c.index.manifest().max_impact);
        for k in [1, 10, 200] {
            let mut expected = Run::new();
            for (q, hits) in queries.iter().zip(
                c.index
                    .batch_search(&queries, k, 1, &Progress::default())
                    .unwrap(),
            ) {
                expected.push(q.id.clone(), c.index.to_scored(&hits));
            }
            let merged = sharded_run(&out, shards, &queries, k);
            assert!(
                run_bytes(&merged) == run_bytes(&expected),
                "{shards} shards, k={k}"
            );
        }
        let (kind, _) = crate::index_kinds::sharded_manifest(&out).unwrap();
        assert_eq!(kind, "impact");
        let summary = crate::index_kinds::verify(&out).unwrap();
        assert_eq!(summary.format, FORMAT);
    }
}

#[test]
fn shards_quantized_otherwise_are_refused_naming_the_shard() {
    let c = random_collection(3, 60, 40);
    let vectors = c.dir.path().join("docs.jsonl");
    let out = c.dir.path().join("mixed");
    let e = build_sharded_with(&vectors, &out, 2, |i| BuildOptions {
        quantize: 100 + i as u32,
        ..quiet()
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("shard-0001") && e.contains("quantize 101"),
        "{e}"
    );
    assert!(!out.exists(), "a refused build leaves nothing");
}

#[test]
fn an_id_in_two_shards_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let vectors = dir.path().join("v.jsonl");
    let one = [("a".to_string(), 1.0)];
    let lines = [
        vector_line("x", &one),
        vector_line("y", &one),
        vector_line("x", &one),
    ];
    std::fs::write(&vectors, lines.join("\n")).unwrap();
    let out = dir.path().join("dup");
    let e = build_sharded_with(&vectors, &out, 2, |_| quiet())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("document id 'x'") && e.contains("shard-0000") && e.contains("shard-0001"),
        "{e}"
    );
}

#[test]
fn a_missing_or_rebuilt_shard_is_refused_naming_it() {
    let c = random_collection(9, 80, 40);
    let vectors = c.dir.path().join("docs.jsonl");
    let out = c.dir.path().join("sharded");
    build_sharded_with(&vectors, &out, 2, |_| quiet()).unwrap();
    // Rebuilt from other lines: another build than the manifest records.
    let range = split_lines(&vectors, 3).unwrap().remove(0);
    let opts = BuildOptions {
        range: Some(range),
        ..quiet()
    };
    build(&vectors, &out.join("shard-0001"), &opts).unwrap();
    let e = ImpactIndex::open_shard(&out, 1).err().unwrap().to_string();
    assert!(
        e.contains("shard-0001") && e.contains("another build"),
        "{e}"
    );
    std::fs::remove_dir_all(out.join("shard-0001")).unwrap();
    let e = check_shards(&out).unwrap_err().to_string();
    assert!(e.contains("shard-0001") && e.contains("missing"), "{e}");
}
