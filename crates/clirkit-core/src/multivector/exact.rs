//! Exact MaxSim: every document scored with its full token vectors. The reference the compressed
//! search is measured against, and the search itself for collections small enough to scan.

use super::matmul::dot_rows;
use super::tokens::TokenMatrix;
use crate::error::{Error, Result};
use crate::parallel;
use crate::progress::Progress;
use crate::topk::TopK;
use rayon::prelude::*;

/// Per query, the best hits: (score, internal id), best first.
pub type Hits = Vec<Vec<(f32, u32)>>;

/// Documents scored by one task of a query's scan.
const DOCS_PER_TASK: usize = 256;

/// MaxSim of a query (`nq x d`) and a document (`nd x d`): the sum over query tokens of their best
/// inner product with a document token. `scratch` is reused between calls.
pub fn maxsim(query: &[f32], doc: &[f32], dim: usize, scratch: &mut Vec<f32>) -> f32 {
    let (nq, nd) = (query.len() / dim, doc.len() / dim);
    scratch.resize(nq * nd, 0.0);
    dot_rows(query, doc, dim, scratch);
    scratch
        .chunks_exact(nd.max(1))
        .map(|row| row.iter().copied().fold(f32::NEG_INFINITY, f32::max))
        .sum()
}

/// `hits` once every score is finite. A token passes its own check (its squared norm fits f32) yet
/// inner products of large tokens, or their sum over a query's tokens, can overflow to infinity
/// (report finding F20): such scores would rank documents arbitrarily, so the search stops and names
/// the query (`name(q)`, for query number `q`).
pub fn finite_scores(hits: Hits, name: impl Fn(usize) -> String) -> Result<Hits> {
    match hits
        .iter()
        .position(|h| h.iter().any(|(s, _)| !s.is_finite()))
    {
        None => Ok(hits),
        Some(q) => Err(Error::invalid(format!(
            "{}: a MaxSim score overflows f32 (the query's and the documents' token norms are too \
             large); normalize or scale the vectors",
            name(q)
        ))),
    }
}

/// Check that queries and documents have the same dimension.
pub(crate) fn check_dims(queries: &TokenMatrix, dim: usize) -> Result<()> {
    if queries.dim() != dim {
        return Err(Error::invalid(format!(
            "queries have dimension {}, the documents have dimension {dim}",
            queries.dim()
        )));
    }
    Ok(())
}

/// The top `k` documents of every query by exact MaxSim: (score, document number), best first,
/// ties to the lower number. Queries run in parallel on `threads` workers (0: all cores), and each
/// query's documents in slices; the result does not depend on the thread count. Each query adds one
/// to `progress` when its scan finishes.
pub fn search(
    docs: &TokenMatrix,
    queries: &TokenMatrix,
    k: usize,
    threads: usize,
    progress: &Progress,
) -> Result<Hits> {
    check_dims(queries, docs.dim())?;
    if k == 0 {
        return Err(Error::invalid("k must be at least 1"));
    }
    let tasks = docs.len().div_ceil(DOCS_PER_TASK);
    parallel::install(threads, |_| scan(docs, queries, (k, tasks), progress))
}

fn scan(
    docs: &TokenMatrix,
    queries: &TokenMatrix,
    (k, tasks): (usize, usize),
    progress: &Progress,
) -> Hits {
    let dim = docs.dim();
    (0..queries.len())
        .into_par_iter()
        .map(|q| {
            let query = queries.item(q);
            let hits = (0..tasks)
                .into_par_iter()
                .fold(
                    || (TopK::new(k), Vec::new()),
                    |(mut top, mut scratch), t| {
                        let end = ((t + 1) * DOCS_PER_TASK).min(docs.len());
                        for d in t * DOCS_PER_TASK..end {
                            top.push(maxsim(query, docs.item(d), dim, &mut scratch), d as u32);
                        }
                        (top, scratch)
                    },
                )
                .map(|(top, _)| top)
                .reduce(
                    || TopK::new(k),
                    |mut a, b| {
                        a.merge(b);
                        a
                    },
                )
                .into_sorted()
                .iter()
                .map(|h| (h.score, h.id))
                .collect();
            progress.advance(1);
            hits
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn naive(q: &[f32], d: &[f32], dim: usize) -> f32 {
        q.chunks(dim)
            .map(|qt| {
                d.chunks(dim)
                    .map(|dt| qt.iter().zip(dt).map(|(a, b)| a * b).sum::<f32>())
                    .fold(f32::NEG_INFINITY, f32::max)
            })
            .sum()
    }

    #[test]
    fn search_ranks_by_maxsim() {
        let dim = 8;
        let mut rng = SplitMix64::new(3);
        let mut offsets = vec![0u64];
        let mut data = Vec::new();
        for i in 0..40 {
            let n = 1 + i % 7;
            data.extend((0..n * dim).map(|_| rng.unit() as f32 - 0.5));
            offsets.push(offsets.last().unwrap() + n as u64);
        }
        let docs = TokenMatrix::new(&data, dim, &offsets, None, "docs").unwrap();
        let qdata: Vec<f32> = (0..5 * dim).map(|_| rng.unit() as f32 - 0.5).collect();
        let queries = TokenMatrix::new(&qdata, dim, &[0, 2, 5], None, "queries").unwrap();
        let counter = std::sync::Arc::new(crate::progress::Counter::default());
        let progress = Progress::to(counter.clone());
        let hits = search(&docs, &queries, 10, 2, &progress).unwrap();
        assert_eq!(counter.done(), 2, "each query counted once");
        for (q, hs) in hits.iter().enumerate() {
            let mut want: Vec<(f32, u32)> = (0..docs.len())
                .map(|d| (naive(queries.item(q), docs.item(d), dim), d as u32))
                .collect();
            want.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let got_ids: Vec<u32> = hs.iter().map(|h| h.1).collect();
            let want_ids: Vec<u32> = want[..10].iter().map(|h| h.1).collect();
            assert_eq!(got_ids, want_ids);
            for (g, w) in hs.iter().zip(&want) {
                assert!((g.0 - w.0).abs() < 1e-5);
            }
        }
        let other = TokenMatrix::new(&qdata[..4], 4, &[0, 1], None, "queries").unwrap();
        assert!(search(&docs, &other, 3, 1, &Progress::default())
            .unwrap_err()
            .to_string()
            .contains("dimension 4"));
    }
}
