//! Exact (brute-force) search: blocked inner product / squared L2, multi-threaded.
//!
//! The same [`score`] function is used for flat search and for refining PQ candidates, so a
//! refine over the whole collection reproduces flat search bit for bit. The arithmetic is fixed
//! (16 independent lanes, then a fixed reduction tree, no fused multiply-add): compiling the
//! kernel for AVX2 or AVX-512 changes the register width, never the result.

use super::fastscan::Isa;
use super::Metric;
use crate::progress::Progress;
use crate::topk::{merge_slices, TopK};
use rayon::prelude::*;
use std::ops::Range;

#[inline(always)]
fn reduce16(acc: [f32; 16]) -> f32 {
    let mut h = [0f32; 8];
    for i in 0..8 {
        h[i] = acc[i] + acc[i + 8];
    }
    let q = [h[0] + h[4], h[1] + h[5], h[2] + h[6], h[3] + h[7]];
    (q[0] + q[2]) + (q[1] + q[3])
}

/// Sum of `term(a[i], b[i])` in 16 independent lanes, then a fixed reduction tree.
#[inline(always)]
fn fold_lanes(a: &[f32], b: &[f32], term: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [0f32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += term(x[i], y[i]);
        }
    }
    for (i, (x, y)) in ra.iter().zip(rb).enumerate() {
        acc[i] += term(*x, *y);
    }
    reduce16(acc)
}

#[inline(always)]
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    fold_lanes(a, b, |x, y| x * y)
}

#[inline(always)]
fn l2_lanes(a: &[f32], b: &[f32]) -> f32 {
    fold_lanes(a, b, |x, y| (x - y) * (x - y))
}

/// Inner product with clirkit's fixed summation order.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes(a, b)
}

/// Squared L2 norm.
#[inline]
pub fn norm_sq(a: &[f32]) -> f32 {
    dot_lanes(a, a)
}

/// Higher-is-better similarity: inner product, or negated squared L2 distance.
#[inline]
pub fn score(metric: Metric, q: &[f32], x: &[f32]) -> f32 {
    match metric {
        Metric::InnerProduct => dot_lanes(q, x),
        Metric::L2 => -l2_lanes(q, x),
    }
}

/// Queries scored against a block of rows at a time, so each row is read once per query batch.
const QUERY_BATCH: usize = 8;
const ROW_BLOCK: usize = 256;

/// A block of `rows` (row-major, `d` columns, ids from `first_id`) to score against `queries`.
#[derive(Clone, Copy)]
struct RowScan<'a> {
    metric: Metric,
    queries: &'a [f32],
    d: usize,
    rows: &'a [f32],
    first_id: usize,
}

#[inline(always)]
fn scan_rows_impl(scan: &RowScan<'_>, heaps: &mut [TopK<f32>]) {
    let RowScan {
        metric,
        queries,
        d,
        rows,
        first_id,
    } = *scan;
    let nq = queries.len() / d;
    for (b, block) in rows.chunks(ROW_BLOCK * d).enumerate() {
        for q0 in (0..nq).step_by(QUERY_BATCH) {
            let q1 = (q0 + QUERY_BATCH).min(nq);
            for (r, x) in block.chunks_exact(d).enumerate() {
                let id = (first_id + b * ROW_BLOCK + r) as u32;
                for (qi, heap) in heaps[q0..q1].iter_mut().enumerate() {
                    let q = &queries[(q0 + qi) * d..(q0 + qi + 1) * d];
                    heap.push(score(metric, q, x), id);
                }
            }
        }
    }
}

/// [`scan_rows_impl`] compiled with a target feature enabled: the same arithmetic, in wider
/// registers.
macro_rules! scan_rows_with_feature {
    ($name:ident, $feature:literal) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $name(scan: &RowScan<'_>, heaps: &mut [TopK<f32>]) {
            scan_rows_impl(scan, heaps)
        }
    };
}
scan_rows_with_feature!(scan_rows_avx512, "avx512f");
scan_rows_with_feature!(scan_rows_avx2, "avx2");

/// Score `rows` (ids from `first_id`) against `queries`, pushing into one heap per query, with
/// the kernel compiled for `isa` (from [`Isa::select_float`]; every level gives the same bits).
pub fn scan_rows(
    isa: Isa,
    metric: Metric,
    queries: &[f32],
    d: usize,
    rows: &[f32],
    first_id: usize,
    heaps: &mut [TopK<f32>],
) {
    assert!(
        isa.is_float_available(),
        "{} float kernel not supported here",
        isa.name()
    );
    let scan = RowScan {
        metric,
        queries,
        d,
        rows,
        first_id,
    };
    match isa {
        Isa::Scalar => scan_rows_impl(&scan, heaps),
        // SAFETY: the CPU supports AVX2 (asserted above).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { scan_rows_avx2(&scan, heaps) },
        // SAFETY: the CPU supports AVX-512F (asserted above).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { scan_rows_avx512(&scan, heaps) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!(),
    }
}

/// Split `nq` queries and `n` rows into work items for `threads` workers: query batches
/// first; when there are fewer batches than workers, the rows are split too.
pub(crate) fn plan(nq: usize, n: usize, threads: usize) -> (usize, usize) {
    let threads = threads.max(1);
    let query_chunk = nq.div_ceil(threads).clamp(1, 64);
    let batches = nq.div_ceil(query_chunk);
    let slices = if batches >= threads {
        1
    } else {
        threads.div_ceil(batches)
    };
    let row_chunk = n.div_ceil(slices).max(1);
    (query_chunk, row_chunk)
}

/// The work items of [`plan`]'s split, query chunk by query chunk, each chunk's row slices in
/// order: per item its queries and its rows (`nq` queries, `n` rows; never fewer than one slice).
pub(crate) fn work_items(
    nq: usize,
    query_chunk: usize,
    n: usize,
    row_chunk: usize,
) -> Vec<(Range<usize>, Range<usize>)> {
    let slices = n.div_ceil(row_chunk).max(1);
    (0..nq.div_ceil(query_chunk))
        .flat_map(|qc| {
            (0..slices).map(move |rc| {
                let (q0, r0) = (qc * query_chunk, (rc * row_chunk).min(n));
                (q0..(q0 + query_chunk).min(nq), r0..(r0 + row_chunk).min(n))
            })
        })
        .collect()
}

/// Exact top-`k` of `queries` against `data` (both row-major, `d` columns) with the kernels
/// of `isa`; must be called inside the rayon pool that sets the thread count.
pub fn search(
    isa: Isa,
    metric: Metric,
    data: &[f32],
    d: usize,
    queries: &[f32],
    (k, threads): (usize, usize),
    progress: &Progress,
) -> Vec<TopK<f32>> {
    let nq = queries.len() / d;
    let n = data.len() / d;
    let (query_chunk, row_chunk) = plan(nq, n, threads);
    let slices = n.div_ceil(row_chunk).max(1);
    let counted = progress.sliced(nq.div_ceil(query_chunk), slices);
    let partial: Vec<Vec<TopK<f32>>> = work_items(nq, query_chunk, n, row_chunk)
        .into_par_iter()
        .map(|(qs, rs)| {
            let mut heaps: Vec<TopK<f32>> = qs.clone().map(|_| TopK::new(k)).collect();
            let (queries, rows) = (
                &queries[qs.start * d..qs.end * d],
                &data[rs.start * d..rs.end * d],
            );
            scan_rows(isa, metric, queries, d, rows, rs.start, &mut heaps);
            counted.finished(qs.start / query_chunk, qs.len());
            heaps
        })
        .collect();
    merge_slices(partial, slices, k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rows` data rows and `nq` queries of `d` values uniform in [-0.5, 0.5), from `seed`.
    fn data_and_queries(seed: u64, rows: usize, nq: usize, d: usize) -> (Vec<f32>, Vec<f32>) {
        let mut rng = crate::rng::SplitMix64::new(seed);
        let data: Vec<f32> = (0..rows * d).map(|_| rng.unit() as f32 - 0.5).collect();
        let queries: Vec<f32> = (0..nq * d).map(|_| rng.unit() as f32 - 0.5).collect();
        (data, queries)
    }

    #[test]
    fn flat_matches_naive_for_any_thread_count() {
        let d = 20;
        let (data, queries) = data_and_queries(3, 300, 5, d);
        for metric in [Metric::InnerProduct, Metric::L2] {
            let want: Vec<Vec<u32>> = queries
                .chunks(d)
                .map(|q| {
                    let mut s: Vec<(f32, u32)> = data
                        .chunks(d)
                        .enumerate()
                        .map(|(i, x)| (score(metric, q, x), i as u32))
                        .collect();
                    s.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                    s.iter().take(7).map(|p| p.1).collect()
                })
                .collect();
            for threads in [1, 2, 7] {
                let got: Vec<Vec<u32>> = search(
                    Isa::Scalar,
                    metric,
                    &data,
                    d,
                    &queries,
                    (7, threads),
                    &Progress::default(),
                )
                .into_iter()
                .map(|t| t.into_sorted().iter().map(|h| h.id).collect())
                .collect();
                assert_eq!(got, want, "{metric:?} threads={threads}");
            }
        }
    }

    #[test]
    fn every_available_isa_equals_the_scalar_reference_bit_for_bit() {
        // 37 columns: two full 16-lane chunks and a remainder; 600 rows: several row blocks.
        let d = 37;
        let (data, queries) = data_and_queries(11, 600, 11, d);
        let bits = |isa: Isa, metric: Metric| -> Vec<Vec<(u32, u32)>> {
            search(
                isa,
                metric,
                &data,
                d,
                &queries,
                (25, 3),
                &Progress::default(),
            )
            .into_iter()
            .map(|t| {
                t.into_sorted()
                    .iter()
                    .map(|h| (h.score.to_bits(), h.id))
                    .collect()
            })
            .collect()
        };
        for metric in [Metric::InnerProduct, Metric::L2] {
            let want = bits(Isa::Scalar, metric);
            for isa in [Isa::Avx2, Isa::Avx512] {
                if isa.is_float_available() {
                    assert_eq!(bits(isa, metric), want, "{metric:?} {}", isa.name());
                }
            }
        }
    }
}
