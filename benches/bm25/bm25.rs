//! Criterion benchmarks of BM25 indexing and search on a generated Zipfian corpus.
//!
//! `cargo bench -p clirkit-benches --bench bm25`; the postings decoder alone: `-- postings_decode`.
//! Corpus: 50,000 documents of 20-120 tokens
//! drawn from a 30,000-word vocabulary with Zipf(1.0) frequencies (seeded, so runs compare).

use clirkit_core::bm25::{self, BatchQuery, Bm25Index, Bm25Params, BuildOptions, Strategy};
use clirkit_core::postings::codec::decode_docs;
use clirkit_core::postings::{
    encode_postings, BlockMeta, BLOCK_LEN, BLOCK_META_LEN, POSTINGS_PADDING,
};
use clirkit_core::progress::Progress;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::io::Write;
use std::path::Path;

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Draws word ranks with probability proportional to 1 / rank.
struct Zipf {
    cumulative: Vec<f64>,
}
impl Zipf {
    fn new(n: usize) -> Self {
        let mut acc = 0.0;
        let cumulative = (1..=n)
            .map(|r| {
                acc += 1.0 / r as f64;
                acc
            })
            .collect();
        Zipf { cumulative }
    }
    fn sample(&self, rng: &mut Rng) -> usize {
        let x = rng.unit() * self.cumulative.last().unwrap();
        self.cumulative.partition_point(|&c| c < x)
    }
}

fn word(rank: usize) -> String {
    // Letters only, so any analyzer keeps each word as one token.
    let mut s = String::from("w");
    let mut r = rank;
    loop {
        s.push((b'a' + (r % 26) as u8) as char);
        r /= 26;
        if r == 0 {
            break s;
        }
    }
}

fn write_corpus(path: &Path, docs: usize, zipf: &Zipf, rng: &mut Rng) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..docs {
        let len = 20 + (rng.unit() * 100.0) as usize;
        let text: Vec<String> = (0..len).map(|_| word(zipf.sample(rng))).collect();
        // Ids and words need no JSON escaping.
        writeln!(
            f,
            "{{\"_id\": \"doc{i}\", \"text\": \"{}\"}}",
            text.join(" ")
        )
        .unwrap();
    }
}

fn queries(n: usize, zipf: &Zipf, rng: &mut Rng) -> Vec<BatchQuery> {
    (0..n)
        .map(|i| {
            let len = 2 + (rng.unit() * 5.0) as usize;
            // Skip the 50 most frequent ranks: queries are made of content words.
            let text: Vec<String> = (0..len).map(|_| word(50 + zipf.sample(rng))).collect();
            BatchQuery {
                id: format!("q{i}"),
                text: text.join(" "),
                lang: None,
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("clirkit-bench-bm25-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corpus = dir.join("corpus.jsonl");
    let zipf = Zipf::new(30_000);
    let mut rng = Rng(0x5eed);
    let docs = 50_000;
    write_corpus(&corpus, docs, &zipf, &mut rng);
    let index = dir.join("idx");
    let opts = BuildOptions {
        lang: Some("en".into()),
        threads: 2,
        ..BuildOptions::default()
    };

    // Built once up front, so `cargo bench ... -- bm25_search` can run the search group alone.
    bm25::build(&corpus, &index, &opts).unwrap();
    let rebuilt = dir.join("idx-rebuilt");
    let mut g = c.benchmark_group("bm25_build");
    g.sample_size(10);
    g.throughput(Throughput::Elements(docs as u64));
    g.bench_function("50k_docs_2_threads", |b| {
        b.iter(|| bm25::build(&corpus, &rebuilt, &opts).unwrap())
    });
    g.finish();

    let idx = Bm25Index::open(&index).unwrap();
    let qs = queries(500, &zipf, &mut rng);
    let mut g = c.benchmark_group("bm25_search");
    g.throughput(Throughput::Elements(qs.len() as u64));
    for k in [10usize, 1000] {
        g.bench_function(format!("500_queries_k{k}_1_thread"), |b| {
            b.iter(|| {
                idx.batch_search(&qs, k, None, Bm25Params::default(), 1, &Progress::default())
                    .unwrap()
            })
        });
    }
    for k in [10usize, 1000] {
        for (name, strategy) in [
            ("maxscore", Strategy::MaxScore),
            ("bmw", Strategy::BlockMaxWand),
            ("exhaustive", Strategy::Exhaustive),
        ] {
            g.bench_function(format!("500_queries_k{k}_{name}_1_thread"), |b| {
                b.iter(|| {
                    for q in &qs {
                        idx.search_by(strategy, &q.text, None, k, Bm25Params::default())
                            .unwrap();
                    }
                })
            });
        }
        // b one step above the index's own: the stored block maxima do not apply, so bounds
        // come from a block's max tf and min norm, for nearly the same scores.
        let tf_norm_params = Bm25Params {
            b: f32::from_bits(bm25::DEFAULT_B.to_bits() + 1),
            ..Bm25Params::default()
        };
        for (name, strategy) in [
            ("maxscore", Strategy::MaxScore),
            ("bmw", Strategy::BlockMaxWand),
        ] {
            g.bench_function(
                format!("500_queries_k{k}_{name}_tf_norm_bounds_1_thread"),
                |b| {
                    b.iter(|| {
                        for q in &qs {
                            idx.search_by(strategy, &q.text, None, k, tf_norm_params)
                                .unwrap();
                        }
                    })
                },
            );
        }
    }
    g.finish();
    drop(idx);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Doc-id decoding of full blocks (the unpack kernel per bit width plus the gaps' prefix sum),
/// over postings whose gaps need 1 to 12 bits (wider gaps over 1,024 blocks would run past
/// `u32` document numbers).
fn decode_blocks(c: &mut Criterion) {
    let mut rng = Rng(0xb10c);
    let blocks = 1024;
    let mut g = c.benchmark_group("postings_decode");
    g.throughput(Throughput::Elements((blocks * BLOCK_LEN) as u64));
    for bits in [1u32, 4, 8, 12] {
        let mut doc = 0u32;
        let docs: Vec<u32> = (0..blocks * BLOCK_LEN)
            .map(|_| {
                doc += 1 + (rng.unit() * ((1u64 << bits) - 1) as f64) as u32;
                doc
            })
            .collect();
        let values = vec![1u32; docs.len()];
        let norms = vec![0u8; doc as usize + 1];
        let mut buf = Vec::new();
        encode_postings(&docs, &values, &norms, &mut buf);
        buf.extend_from_slice(&[0; POSTINGS_PADDING]);
        let (metas, data) = buf.split_at(blocks * BLOCK_META_LEN);
        g.bench_function(format!("docs_{bits}_bit_gaps"), |b| {
            let mut out = [0u32; BLOCK_LEN];
            b.iter(|| {
                let mut prev = u32::MAX;
                let mut sum = 0u32;
                for block in 0..blocks {
                    let meta = BlockMeta::decode(metas, block);
                    let intact = decode_docs(data, &meta, prev, &mut out);
                    prev = meta.last_doc;
                    sum = sum
                        .wrapping_add(out[BLOCK_LEN - 1])
                        .wrapping_add(intact as u32);
                }
                sum
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench, decode_blocks);
criterion_main!(benches);
