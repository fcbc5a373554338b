//! Fast-scan kernel throughput per ISA: one query group (8 queries) over 64k packed 4-bit
//! vectors, for M = 96 and M = 192 (d = 384 at M = d/4 and d/2). Thresholds stay at "report
//! nothing" so only the scan is measured.
//!
//!     cargo bench -p clirkit-benches --bench pq_scan

use clirkit_core::dense::fastscan::{layout, lut, Isa, QUERY_GROUP};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

fn pseudo_random(seed: u64, n: usize) -> Vec<u64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
        .collect()
}

fn scan(c: &mut Criterion) {
    let n = 65_536;
    let mut group = c.benchmark_group("pq4_fastscan");
    group.sample_size(10);
    for m in [96usize, 192] {
        let raw: Vec<u8> = pseudo_random(1, n * m)
            .iter()
            .map(|v| (v % 16) as u8)
            .collect();
        let mut codes = Vec::new();
        layout::pack(&raw, m, &mut codes);
        let mut luts = vec![0u8; layout::chunks(m) * QUERY_GROUP * 64];
        for q in 0..QUERY_GROUP {
            let table: Vec<f32> = pseudo_random(q as u64 + 7, m * 16)
                .iter()
                .map(|v| (v % 1000) as f32 / 1000.0)
                .collect();
            lut::quantize_into(&table, m, q, &mut luts);
        }
        group.throughput(Throughput::Elements((n * QUERY_GROUP) as u64));
        for isa in Isa::available() {
            let mut arranged = luts.clone();
            isa.arrange_luts(&mut arranged);
            group.bench_with_input(
                BenchmarkId::new(isa.name(), format!("M{m}")),
                &m,
                |b, &m| {
                    b.iter(|| {
                        let mut thresholds = [i32::MAX; QUERY_GROUP];
                        isa.scan(
                            black_box(&codes),
                            m,
                            &arranged,
                            &mut thresholds,
                            &mut |_, _, _, _| i32::MAX,
                        );
                        black_box(thresholds)
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, scan);
criterion_main!(benches);
