//! Search over shards: an index split by rows into shards that share one codebook (and IVF
//! centroids), searched through these pieces, gives exactly the hits of the single index over
//! all rows (shard `s` holding the global rows `offset[s]..offset[s] + ntotal`).
//!
//! Round 1: each shard's [`DenseIndex::shortlist`] returns, per query, the candidates the single
//! index would select among its rows (same look-up tables, same quantization, same key), with
//! their scores. [`merge_shortlists`] keeps the best of them by the single index's order (key,
//! then slot order: IVF list, then row), which is the single index's shortlist. Round 2, when
//! the search re-scores ([`DenseIndex::rescores`]): each owning shard scores exactly its rows of
//! that shortlist with the stored vectors ([`DenseIndex::rescore`]). [`top_hits`] then orders
//! them as the single index does (score, then the lower global row) and keeps `k`.

use super::{BuildOptions, DenseIndex, PqPart, SearchOptions};
use crate::dense::check_matrix;
use crate::dense::fastscan::{Isa, BLOCK};
use crate::error::{Error, Result};
use crate::parallel;
use crate::rng::SplitMix64;
use crate::topk::Score;
use rayon::prelude::*;
use std::cmp::Ordering;

/// One candidate of a shard's shortlist for one query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// What the shortlist is selected by, higher first: the quantized fast-scan score (4-bit
    /// PQ), else the float score
    /// as its order bits ([`Score::order_bits`]).
    pub key: u32,
    /// The IVF list holding the row (0 without IVF): at equal keys the lower list, then the
    /// lower row, goes first (the single index's slot order).
    pub list: u32,
    /// The row (internal id) in its shard.
    pub row: u32,
    /// The score when nothing is re-scored: the float PQ score, or the exact one (flat index).
    pub score: f32,
}

/// A candidate of the merged shortlist: its shard and that shard's candidate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShardCandidate {
    pub shard: u32,
    pub candidate: Candidate,
}

impl DenseIndex {
    /// Whether a search with `opts` re-scores its shortlist with the stored vectors (round 2).
    pub fn rescores(&self, opts: &SearchOptions) -> bool {
        self.pq.is_some() && opts.refine > 0
    }

    /// Candidates per query the single index keeps before the final top-k.
    pub fn shortlist_len(&self, opts: &SearchOptions) -> usize {
        match &self.pq {
            None => opts.k,
            Some(p) => Self::shortlist_len_of(p, opts),
        }
    }

    /// Round 1: per query, this shard's part of the single index's shortlist, best first.
    pub fn shortlist(
        &self,
        queries: &[f32],
        qdim: usize,
        opts: &SearchOptions,
    ) -> Result<Vec<Vec<Candidate>>> {
        let hits = match &self.pq {
            None => self
                .search(queries, qdim, opts)?
                .into_iter()
                .map(|hs| {
                    hs.into_iter()
                        .map(|(score, row)| Candidate {
                            key: score.order_bits(),
                            list: 0,
                            row,
                            score,
                        })
                        .collect()
                })
                .collect(),
            Some(p) => {
                let nq = self.check_search(queries, qdim, opts)?;
                if nq == 0 {
                    return Ok(Vec::new());
                }
                let isa = Isa::select()?;
                parallel::install(opts.threads, |threads| {
                    self.pq_shortlists(p, queries, nq, opts, threads, isa)
                        .into_iter()
                        .map(|hs| {
                            hs.into_iter()
                                .map(|h| Candidate {
                                    key: h.key,
                                    list: list_of_slot(p, h.slot),
                                    row: self.slot_to_id(p, h.slot),
                                    score: h.score,
                                })
                                .collect()
                        })
                        .collect()
                })?
            }
        };
        Ok(hits)
    }

    /// Round 2: the exact scores of `rows[i]` (rows of this shard) for query `i`.
    pub fn rescore(
        &self,
        queries: &[f32],
        qdim: usize,
        rows: &[Vec<u32>],
        threads: usize,
    ) -> Result<Vec<Vec<f32>>> {
        if qdim != self.dim {
            return Err(Error::invalid(format!(
                "queries have dimension {qdim}, the index has dimension {}",
                self.dim
            )));
        }
        let nq = check_matrix(queries, qdim, "queries")?;
        if rows.len() != nq {
            return Err(Error::invalid(format!(
                "rows to re-score are given for {} queries, but there are {nq} queries",
                rows.len()
            )));
        }
        if let Some(&row) = rows.iter().flatten().find(|&&r| r as usize >= self.ntotal) {
            return Err(Error::invalid(format!(
                "row {row} to re-score is out of range: the index has {} rows",
                self.ntotal
            )));
        }
        parallel::install(threads, |_| {
            rows.par_iter()
                .zip(queries.par_chunks(qdim))
                .map(|(rs, q)| rs.iter().map(|&r| self.exact_score(q, r)).collect())
                .collect()
        })?
    }
}

/// The rows (increasing) a build with `opts` trains its codebook and IVF centroids on, out of
/// `n`: an index built from exactly these rows with the same seed and `train_size` trains
/// the same codebook, so shards added with it equal the single index's rows.
pub fn training_rows(n: usize, opts: &BuildOptions) -> Vec<usize> {
    SplitMix64::new(opts.seed).sample(n, opts.train_size.unwrap_or(65_536).min(n))
}

/// The IVF list holding `slot` (0 without IVF).
fn list_of_slot(p: &PqPart, slot: u32) -> u32 {
    match &p.coarse {
        None => 0,
        Some(c) => {
            let block = slot as u64 / BLOCK as u64;
            (c.block_starts.partition_point(|&b| b <= block) - 1) as u32
        }
    }
}

/// Round 1 merged, for one query: the `len` best of the shards' shortlists (`parts[s]` from
/// shard `s`, whose first global row is `offsets[s]`) in the single index's selection order.
pub fn merge_shortlists(
    parts: &[&[Candidate]],
    offsets: &[u64],
    len: usize,
) -> Result<Vec<ShardCandidate>> {
    if parts.len() != offsets.len() {
        return Err(Error::invalid(format!(
            "{} shortlists for {} shard offsets",
            parts.len(),
            offsets.len()
        )));
    }
    let mut all: Vec<(u64, ShardCandidate)> = parts
        .iter()
        .zip(offsets)
        .enumerate()
        .flat_map(|(s, (cands, &offset))| {
            cands.iter().map(move |&candidate| {
                let shard = ShardCandidate {
                    shard: s as u32,
                    candidate,
                };
                (offset + candidate.row as u64, shard)
            })
        })
        .collect();
    let order = |a: &(u64, ShardCandidate), b: &(u64, ShardCandidate)| -> Ordering {
        let (x, y) = (&a.1.candidate, &b.1.candidate);
        y.key
            .cmp(&x.key)
            .then(x.list.cmp(&y.list))
            .then(a.0.cmp(&b.0))
    };
    if all.len() > len && len > 0 {
        all.select_nth_unstable_by(len - 1, order);
    }
    all.truncate(len);
    all.sort_unstable_by(order);
    Ok(all.into_iter().map(|(_, c)| c).collect())
}

/// The final hits of one query from (score, global row) pairs: best score first, ties to the
/// lower global row, `k` of them (the single index's order).
pub fn top_hits(mut hits: Vec<(f32, u64)>, k: usize) -> Vec<(f32, u64)> {
    hits.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    hits.truncate(k);
    hits
}

#[cfg(test)]
mod tests {
    use super::super::tests::{clustered, ids, opts};
    use super::super::Part;
    use super::*;
    use crate::dense::source::SliceSource;
    use crate::dense::Metric;

    /// The single index's hits, searched through shards of `bounds` rows as a coordinator does.
    fn sharded_search(
        shards: &[DenseIndex],
        offsets: &[u64],
        queries: &[f32],
        d: usize,
        so: &SearchOptions,
    ) -> Vec<Vec<(f32, u32)>> {
        let lists: Vec<Vec<Vec<Candidate>>> = shards
            .iter()
            .map(|s| s.shortlist(queries, d, so).unwrap())
            .collect();
        let len = shards[0].shortlist_len(so);
        let nq = queries.len() / d;
        let merged: Vec<Vec<ShardCandidate>> = (0..nq)
            .map(|q| {
                let parts: Vec<&[Candidate]> = lists.iter().map(|l| l[q].as_slice()).collect();
                merge_shortlists(&parts, offsets, len).unwrap()
            })
            .collect();
        let mut scores: Vec<Vec<f32>> = merged
            .iter()
            .map(|m| m.iter().map(|c| c.candidate.score).collect())
            .collect();
        if shards[0].rescores(so) {
            for (s, shard) in shards.iter().enumerate() {
                let rows: Vec<Vec<u32>> = merged
                    .iter()
                    .map(|m| {
                        m.iter()
                            .filter(|c| c.shard as usize == s)
                            .map(|c| c.candidate.row)
                            .collect()
                    })
                    .collect();
                let exact = shard.rescore(queries, d, &rows, 2).unwrap();
                for (q, m) in merged.iter().enumerate() {
                    let mut next = exact[q].iter();
                    for (i, c) in m.iter().enumerate() {
                        if c.shard as usize == s {
                            scores[q][i] = *next.next().unwrap();
                        }
                    }
                }
            }
        }
        merged
            .iter()
            .zip(scores)
            .map(|(m, sc)| {
                let hits = m
                    .iter()
                    .zip(sc)
                    .map(|(c, s)| (s, offsets[c.shard as usize] + c.candidate.row as u64))
                    .collect();
                top_hits(hits, so.k)
                    .into_iter()
                    .map(|(s, g)| (s, g as u32))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn shards_with_one_codebook_give_the_single_index_hits() {
        let (n, d) = (600, 16);
        let data = clustered(n, d, 11);
        // Duplicated rows make equal scores, so the tie rules are exercised across shards.
        let data: Vec<f32> = data
            .chunks(d)
            .enumerate()
            .flat_map(|(i, r)| {
                if i % 7 == 3 {
                    data[..d].to_vec()
                } else {
                    r.to_vec()
                }
            })
            .collect();
        let all_ids = ids(n);
        let queries = clustered(6, d, 12);
        let bounds = [0usize, 180, 420, 430, n];
        let offsets: Vec<u64> = bounds[..4].iter().map(|&b| b as u64).collect();
        let kinds = [
            (None, 4, None),
            (Some(8), 4, None),
            (Some(8), 8, None),
            (Some(8), 4, Some(6)),
            (Some(8), 8, Some(6)),
        ];
        for (pq, nbits, ivf) in kinds {
            for metric in [Metric::InnerProduct, Metric::L2] {
                let single =
                    DenseIndex::build(&data, d, &all_ids, &opts(pq, nbits, ivf, metric)).unwrap();
                let tmp = tempfile::tempdir().unwrap();
                let shards: Vec<DenseIndex> = bounds
                    .windows(2)
                    .enumerate()
                    .map(|(s, w)| {
                        let source = SliceSource::new(&data[w[0] * d..w[1] * d], d).unwrap();
                        let part = Part::Vectors {
                            source: &source,
                            ids: &all_ids[w[0]..w[1]],
                        };
                        let dir = tmp.path().join(format!("s{s}"));
                        single
                            .write_combined(
                                &[part],
                                &dir,
                                1,
                                1,
                                &crate::progress::Progress::default(),
                            )
                            .unwrap();
                        DenseIndex::open(&dir).unwrap()
                    })
                    .collect();
                for (k, refine, nprobe) in [(10, 0, 2), (10, 10, 3), (200, 0, 6), (50, 150, 2)] {
                    let so = SearchOptions {
                        k,
                        nprobe,
                        refine,
                        threads: 3,
                        ..Default::default()
                    };
                    let want = single.search(&queries, d, &so).unwrap();
                    let got = sharded_search(&shards, &offsets, &queries, d, &so);
                    assert!(
                        got == want,
                        "{} {metric:?} k={k} refine={refine}",
                        single.kind()
                    );
                }
            }
        }
    }

    #[test]
    fn bad_round_two_inputs_are_refused() {
        let (n, d) = (50, 8);
        let data = clustered(n, d, 1);
        let index = DenseIndex::build(
            &data,
            d,
            &ids(n),
            &opts(Some(4), 4, None, Metric::InnerProduct),
        )
        .unwrap();
        let q = clustered(2, d, 2);
        let e = index.rescore(&q, d, &[vec![1]], 1).unwrap_err().to_string();
        assert!(e.contains("2 queries"), "{e}");
        let e = index
            .rescore(&q, d, &[vec![1], vec![50]], 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("row 50"), "{e}");
        let e = merge_shortlists(&[&[]], &[0, 1], 3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 shortlists for 2"), "{e}");
    }
}
