//! Analysis throughput per language (MB/s of UTF-8 input), on real text: XQuAD-R sentences
//! from ../shared when present, else the sample collection embedded in the repo.
//!
//! `cargo bench -p clirkit-benches --bench analysis`

use std::collections::BTreeMap;
use std::path::Path;

use clirkit_core::text::Analyzer;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// About this many bytes of text per language.
const BYTES_PER_LANG: usize = 256 * 1024;

fn texts_by_lang() -> BTreeMap<String, Vec<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let shared = root.join("../shared/data/xquad-r/corpus.jsonl");
    let sample = root.join("python/clirkit/data/sample/corpus.jsonl");
    let path = if shared.exists() { shared } else { sample };
    let data = std::fs::read_to_string(&path).expect("corpus for the analysis bench");
    let mut by_lang: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
    for line in data.lines() {
        let doc: serde_json::Value = serde_json::from_str(line).expect("JSON line");
        let (Some(lang), Some(text)) = (doc["lang"].as_str(), doc["text"].as_str()) else {
            continue;
        };
        let entry = by_lang.entry(lang.to_string()).or_default();
        if entry.0 < BYTES_PER_LANG {
            entry.0 += text.len();
            entry.1.push(text.to_string());
        }
    }
    by_lang.into_iter().map(|(l, (_, t))| (l, t)).collect()
}

fn bench_analysis(c: &mut Criterion) {
    let mut group = c.benchmark_group("analyze");
    group.sample_size(10);
    for (lang, texts) in texts_by_lang() {
        let analyzer = Analyzer::for_lang(&lang).expect("analyzer");
        let bytes: usize = texts.iter().map(String::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(&lang, |b| {
            let mut terms = Vec::with_capacity(64);
            b.iter(|| {
                let mut n = 0;
                for text in &texts {
                    terms.clear();
                    analyzer.analyze_into(text, &mut terms);
                    n += terms.len();
                }
                n
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_analysis);
criterion_main!(benches);
