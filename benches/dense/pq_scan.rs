//! Fast-scan kernel throughput per ISA: one query group (8 queries) over 64k packed 4-bit
//! vectors, for M = 96 and M = 192 (d = 384 at M = d/4 and d/2). Thresholds stay at "report
//! nothing" so only the scan is measured. Then the two kernels of the small-collection path:
//! float re-scoring of a shortlist per ISA, and the reservoir that keeps the best slots.
//!
//!     cargo bench -p clirkit-benches --bench pq_scan

use clirkit_core::dense::fastscan::{layout, lut, rescore, Isa, QUERY_GROUP};
use clirkit_core::topk::Reservoir;
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
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

/// `n` vectors of `m` pseudo-random 4-bit codes, packed.
fn packed_codes(seed: u64, n: usize, m: usize) -> Vec<u8> {
    let raw: Vec<u8> = pseudo_random(seed, n * m)
        .iter()
        .map(|v| (v % 16) as u8)
        .collect();
    let mut codes = Vec::new();
    layout::pack(&raw, m, &mut codes);
    codes
}

/// A criterion group over M = 96 and M = 192, each given `n` seeded pseudo-random packed codes.
fn over_m(
    c: &mut Criterion,
    name: &str,
    samples: usize,
    (n, seed): (usize, u64),
    mut body: impl FnMut(&mut BenchmarkGroup<'_, WallTime>, usize, &[u8]),
) {
    let mut group = c.benchmark_group(name);
    group.sample_size(samples);
    for m in [96usize, 192] {
        body(&mut group, m, &packed_codes(seed, n, m));
    }
    group.finish();
}

fn scan(c: &mut Criterion) {
    let n = 65_536;
    over_m(c, "pq4_fastscan", 10, (n, 1), |group, m, codes| {
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
                            black_box(codes),
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
    });
}

/// Float scores of a shortlist of 200 and 2,000 slots (k = 100 and 1,000) among 13,014 vectors.
fn rescore_shortlist(c: &mut Criterion) {
    let n = 13_014;
    over_m(c, "pq4_rescore", 20, (n, 2), |group, m, codes| {
        let table: Vec<f32> = pseudo_random(3, m * 16)
            .iter()
            .map(|v| (v % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        for len in [200usize, 2000] {
            let mut slots: Vec<u32> = pseudo_random(4, len)
                .iter()
                .map(|v| (v % n as u64) as u32)
                .collect();
            slots.sort_unstable();
            let mut out = vec![0f32; len];
            group.throughput(Throughput::Elements(len as u64));
            for isa in Isa::available() {
                group.bench_with_input(
                    BenchmarkId::new(isa.name(), format!("M{m}/{len}")),
                    &m,
                    |b, &m| {
                        b.iter(|| {
                            rescore::rescore(isa, black_box(codes), m, &table, &slots, &mut out);
                            black_box(out[0])
                        })
                    },
                );
            }
        }
    });
}

/// The best 200 and 2,000 of 13,014 quantized scores (bell-shaped, many ties) offered in slot
/// order as a kernel offers them: only those above the reservoir's threshold.
fn reservoir(c: &mut Criterion) {
    let n = 13_014;
    let scores: Vec<u32> = pseudo_random(5, n)
        .iter()
        .map(|v| (20_000 + (v & 0xfff) + (v >> 20 & 0xfff) + (v >> 40 & 0xfff)) as u32)
        .collect();
    let mut group = c.benchmark_group("pq4_reservoir");
    group.sample_size(20);
    group.throughput(Throughput::Elements(n as u64));
    let mut reservoir = Reservoir::default();
    for count in [200usize, 2000] {
        let mut out = Vec::with_capacity(count);
        group.bench_with_input(
            BenchmarkId::new("scan_order", count),
            &count,
            |b, &count| {
                b.iter(|| {
                    reservoir.reset(count, 2);
                    for (slot, &s) in black_box(&scores).iter().enumerate() {
                        if s as i64 > reservoir.threshold() as i64 {
                            reservoir.push(s, slot as u32);
                        }
                    }
                    out.clear();
                    reservoir.drain_into(&mut out);
                    black_box(out.len())
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, scan, rescore_shortlist, reservoir);
criterion_main!(benches);
