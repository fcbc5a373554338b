//! Building a multi-vector index: centroids by k-means over a seeded sample of token vectors (Lloyd
//! from seeded sample rows, as PLAID's FAISS k-means starts; [`crate::dense::kmeans`]'s k-means++
//! seeding costs a pass over the sample per centroid, too slow for thousands of centroids), every
//! token's nearest centroid, the residual codec trained on a second sample's residuals, packed
//! residuals, and the inverted lists (centroid -> documents). Written into an index directory
//! atomically; the result does not depend on the thread count.

use super::codec::ResidualCodec;
use super::format::{
    write_array, MultiVectorIndex, MultiVectorManifest, BUCKETS, CENTROIDS, CODES, DOC_OFFSETS,
    FORMAT, IDS, IVF_DOCS, IVF_OFFSETS, MAX_CENTROIDS, RESIDUALS, VECTORS, VERSION,
};
use super::matmul::dot_rows;
use super::TokenMatrix;
use crate::dense::flat::norm_sq;
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::atomic::AtomicDir;
use crate::io::manifest;
use crate::parallel;
use crate::progress::Progress;
use crate::rng::SplitMix64;
use rayon::prelude::*;
use std::path::Path;

/// Training points per centroid when the sample size is not given.
const SAMPLE_PER_CENTROID: usize = 64;
/// Tokens whose residuals place the codec's buckets.
const CODEC_SAMPLE_TOKENS: usize = 1 << 14;
/// Tokens assigned to centroids per matrix product.
const ASSIGN_BLOCK: usize = 1024;

/// How to build a [`MultiVectorIndex`].
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Bits per dimension of the residuals: 1, 2 or 4.
    pub nbits: usize,
    /// Centroids; `None`: [`default_centroids`].
    pub centroids: Option<usize>,
    /// Tokens sampled to train the centroids; `None`: 64 per centroid.
    pub kmeans_sample: Option<usize>,
    pub kmeans_iterations: usize,
    pub seed: u64,
    pub threads: usize,
    /// Also store the full token vectors (exact search needs them).
    pub keep_vectors: bool,
    /// Counts token assignments to centroids (the k-means passes over the sample, then every
    /// token), the build's main cost; the total is stated once the sample size is known.
    pub progress: Progress,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            nbits: 2,
            centroids: None,
            kmeans_sample: None,
            // PLAID's default (kmeans_niters = 4).
            kmeans_iterations: 4,
            seed: 0,
            threads: 0,
            keep_vectors: false,
            progress: Progress::default(),
        }
    }
}

/// The largest power of two at most `4 √ntokens`, `ntokens` and 65,536 (PLAID takes `16 √ntokens`
/// on a GPU; a quarter keeps k-means affordable on a CPU).
pub fn default_centroids(ntokens: usize) -> usize {
    let target = (4.0 * (ntokens as f64).sqrt())
        .min(ntokens as f64)
        .min(MAX_CENTROIDS as f64)
        .max(1.0);
    1usize << (target.log2().floor() as u32)
}

/// The nearest centroid (L2; ties to the lower number) of every token, each block of tokens added
/// to `progress` as it is assigned.
fn assign(data: &[f32], dim: usize, centroids: &[f32], progress: &Progress) -> Vec<u16> {
    let ncent = centroids.len() / dim;
    let norms: Vec<f32> = centroids.chunks_exact(dim).map(norm_sq).collect();
    let mut codes = vec![0u16; data.len() / dim];
    codes
        .par_chunks_mut(ASSIGN_BLOCK)
        .zip(data.par_chunks(ASSIGN_BLOCK * dim))
        .for_each_init(Vec::new, |scores, (out, block)| {
            scores.resize(out.len() * ncent, 0.0);
            dot_rows(block, centroids, dim, scores);
            for (code, row) in out.iter_mut().zip(scores.chunks_exact(ncent)) {
                let mut best = (f32::INFINITY, 0usize);
                for (c, (&s, &n)) in row.iter().zip(&norms).enumerate() {
                    let dist = n - 2.0 * s;
                    if dist < best.0 {
                        best = (dist, c);
                    }
                }
                *code = best.1 as u16;
            }
            progress.advance(out.len());
        });
    codes
}

/// Lloyd's k-means from `k` distinct sample rows drawn with `rng`. Assignment is by matrix products
/// ([`assign`]); sums are accumulated in f64 in point order, so the result does not depend on the
/// thread count. An emptied cluster keeps its centroid.
fn kmeans(
    sample: &[f32],
    dim: usize,
    k: usize,
    (iterations, progress): (usize, &Progress),
    rng: &mut SplitMix64,
) -> Vec<f32> {
    let mut centroids: Vec<f32> = rng
        .sample(sample.len() / dim, k)
        .iter()
        .flat_map(|&r| sample[r * dim..(r + 1) * dim].iter().copied())
        .collect();
    for _ in 0..iterations {
        let codes = assign(sample, dim, &centroids, progress);
        let mut sums = vec![0f64; k * dim];
        let mut counts = vec![0usize; k];
        for (x, &c) in sample.chunks_exact(dim).zip(&codes) {
            counts[c as usize] += 1;
            for (s, &v) in sums[c as usize * dim..].iter_mut().zip(x) {
                *s += v as f64;
            }
        }
        for ((centroid, sum), &count) in centroids
            .chunks_exact_mut(dim)
            .zip(sums.chunks_exact(dim))
            .zip(&counts)
        {
            if count > 0 {
                for (c, s) in centroid.iter_mut().zip(sum) {
                    *c = (s / count as f64) as f32;
                }
            }
        }
    }
    centroids
}

/// Per centroid, the increasing numbers of the documents holding a token of it: (offsets, docs).
fn inverted_lists(codes: &[u16], doc_offsets: &[u64], ncent: usize) -> (Vec<u64>, Vec<u32>) {
    let unique: Vec<Vec<u16>> = doc_offsets
        .par_windows(2)
        .map(|w| {
            let mut c = codes[w[0] as usize..w[1] as usize].to_vec();
            c.sort_unstable();
            c.dedup();
            c
        })
        .collect();
    let mut offsets = vec![0u64; ncent + 1];
    for &c in unique.iter().flatten() {
        offsets[c as usize + 1] += 1;
    }
    for c in 0..ncent {
        offsets[c + 1] += offsets[c];
    }
    let mut next: Vec<u64> = offsets[..ncent].to_vec();
    let mut docs = vec![0u32; offsets[ncent] as usize];
    for (doc, cs) in unique.iter().enumerate() {
        for &c in cs {
            docs[next[c as usize] as usize] = doc as u32;
            next[c as usize] += 1;
        }
    }
    (offsets, docs)
}

impl MultiVectorIndex {
    /// Index `tokens` (one item per document or passage, `ids` naming them) into the directory
    /// `dir`, atomically, and open it.
    pub fn build(
        tokens: &TokenMatrix,
        ids: &[String],
        dir: impl AsRef<Path>,
        opts: &BuildOptions,
    ) -> Result<Self> {
        let (dim, ntokens, ndocs) = (tokens.dim(), tokens.rows(), tokens.len());
        if ids.len() != ndocs {
            return Err(Error::invalid(format!(
                "{} ids for {ndocs} documents: give exactly one id per document",
                ids.len()
            )));
        }
        if ndocs == 0 {
            return Err(Error::invalid("no documents to index"));
        }
        ResidualCodec::check_params(dim, opts.nbits)?;
        let table = IdTable::from_ids(ids)?;
        let ncent = opts.centroids.unwrap_or_else(|| default_centroids(ntokens));
        if ncent == 0 || ncent > MAX_CENTROIDS || ncent > ntokens {
            return Err(Error::invalid(format!(
                "centroids must be between 1 and min(65536, number of tokens = {ntokens}), got {ncent}"
            )));
        }
        if opts.kmeans_iterations == 0 {
            return Err(Error::invalid("k-means needs at least 1 iteration"));
        }
        let sample_size = opts
            .kmeans_sample
            .unwrap_or(SAMPLE_PER_CENTROID * ncent)
            .clamp(ncent, ntokens);
        let assignments = opts.kmeans_iterations.saturating_mul(sample_size);
        opts.progress.expect(assignments.saturating_add(ntokens));
        let out = AtomicDir::create(dir.as_ref())?;
        let tmp = out.path().to_path_buf();
        let data = tokens.data();
        let built = parallel::install(opts.threads, |_| -> Result<MultiVectorManifest> {
            let normalized = data
                .par_chunks_exact(dim)
                .all(|t| (norm_sq(t) - 1.0).abs() < 1e-3);
            let mut rng = SplitMix64::new(opts.seed);
            let sample: Vec<f32> = rng
                .sample(ntokens, sample_size)
                .iter()
                .flat_map(|&r| data[r * dim..(r + 1) * dim].iter().copied())
                .collect();
            let passes = (opts.kmeans_iterations, &opts.progress);
            let mut centroids = kmeans(&sample, dim, ncent, passes, &mut rng);
            drop(sample);
            if normalized {
                // Unit tokens are compared by inner product: unit centroids, as in PLAID.
                for c in centroids.chunks_exact_mut(dim) {
                    let norm = norm_sq(c).sqrt();
                    if norm > 0.0 {
                        c.iter_mut().for_each(|v| *v /= norm);
                    }
                }
            }
            let codes = assign(data, dim, &centroids, &opts.progress);
            let held_out = rng.sample(ntokens, CODEC_SAMPLE_TOKENS.min(ntokens));
            let residual_sample: Vec<f32> = held_out
                .iter()
                .flat_map(|&r| {
                    let c = codes[r] as usize;
                    let centroid = &centroids[c * dim..(c + 1) * dim];
                    data[r * dim..(r + 1) * dim]
                        .iter()
                        .zip(centroid)
                        .map(|(x, c)| x - c)
                })
                .collect();
            let codec = ResidualCodec::train(dim, opts.nbits, &residual_sample)?;
            let bpt = codec.bytes_per_token();
            let mut residuals = vec![0u8; ntokens * bpt];
            residuals.par_chunks_mut(bpt).enumerate().for_each_init(
                || vec![0f32; dim],
                |residual, (t, out)| {
                    let c = codes[t] as usize;
                    let x = &data[t * dim..(t + 1) * dim];
                    for ((r, x), c) in residual.iter_mut().zip(x).zip(&centroids[c * dim..]) {
                        *r = x - c;
                    }
                    codec.encode(residual, out);
                },
            );
            let (ivf_offsets, ivf_docs) = inverted_lists(&codes, tokens.offsets(), ncent);
            table.save(tmp.join(IDS))?;
            write_array(&tmp, CENTROIDS, &centroids)?;
            let buckets: Vec<f32> = codec
                .cutoffs()
                .iter()
                .chain(codec.weights())
                .copied()
                .collect();
            write_array(&tmp, BUCKETS, &buckets)?;
            write_array(&tmp, DOC_OFFSETS, tokens.offsets())?;
            write_array(&tmp, CODES, &codes)?;
            write_array(&tmp, RESIDUALS, &residuals)?;
            write_array(&tmp, IVF_OFFSETS, &ivf_offsets)?;
            write_array(&tmp, IVF_DOCS, &ivf_docs)?;
            if opts.keep_vectors {
                write_array(&tmp, VECTORS, data)?;
            }
            Ok(MultiVectorManifest {
                format: FORMAT.to_string(),
                version: VERSION,
                dim,
                ndocs,
                ntokens,
                ncentroids: ncent,
                nbits: opts.nbits,
                normalized,
                vectors: opts.keep_vectors,
                ivf_entries: ivf_docs.len(),
                seed: opts.seed,
                kmeans_sample: sample_size,
                kmeans_iterations: opts.kmeans_iterations,
            })
        })??;
        let final_path = out.final_path().to_path_buf();
        manifest::commit(out, &built)?;
        MultiVectorIndex::open(final_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_centroids_is_a_power_of_two_within_bounds() {
        assert_eq!(default_centroids(1), 1);
        assert_eq!(default_centroids(3), 2);
        assert_eq!(default_centroids(1_000_000), 2048);
        assert_eq!(default_centroids(usize::MAX >> 4), MAX_CENTROIDS);
    }

    #[test]
    fn inverted_lists_hold_each_document_once_in_order() {
        let codes = [2u16, 0, 2, 1, 2, 0];
        let (offsets, docs) = inverted_lists(&codes, &[0, 3, 4, 6], 3);
        assert_eq!(offsets, [0, 2, 3, 5]);
        assert_eq!(docs, [0, 2, 1, 0, 2]);
    }
}
