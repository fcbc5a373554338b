//! Building a multi-vector index: centroids by k-means over a seeded sample of token vectors (Lloyd
//! from seeded sample rows, as PLAID's FAISS k-means starts; [`crate::dense::kmeans`]'s k-means++
//! seeding costs a pass over the sample per centroid, too slow for thousands of centroids), every
//! token's nearest centroid, the residual codec trained on a second sample's residuals, packed
//! residuals, and the inverted lists (centroid -> documents). Written into an index directory
//! atomically; the result does not depend on the thread count.

use super::codec::ResidualCodec;
use super::format::{
    array_writer, write_array, MultiVectorIndex, MultiVectorManifest, BUCKETS, CENTROIDS, CODES,
    DOC_OFFSETS, FORMAT, IDS, IVF_DOCS, IVF_OFFSETS, MAX_CENTROIDS, RESIDUALS, VECTORS, VERSION,
};
use super::matmul::dot_rows;
use super::parts::{TokenPart, TokenParts};
use super::TokenMatrix;
use crate::dense::flat::norm_sq;
use crate::dense::source::VectorSource;
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::atomic::AtomicDir;
use crate::io::bytes::as_byte_slice;
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
/// Bytes of float32 token vectors read per step of a pass over the collection (small in tests, so
/// that their collections are read in several chunks).
const CHUNK_BYTES: usize = if cfg!(test) { 1 << 16 } else { 32 << 20 };

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

/// The nearest centroid (L2; ties to the lower number) of every token of `data` into `codes`, each
/// block of tokens added to `progress` as it is assigned.
fn assign_into(
    data: &[f32],
    dim: usize,
    centroids: &[f32],
    codes: &mut [u16],
    progress: &Progress,
) {
    let ncent = centroids.len() / dim;
    let norms: Vec<f32> = centroids.chunks_exact(dim).map(norm_sq).collect();
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
}

/// Rows read per pass step: about [`CHUNK_BYTES`] of float32, a whole number of assignment blocks
/// (so tokens are assigned in the same blocks whatever the chunking).
pub(crate) fn chunk_rows(dim: usize) -> usize {
    (CHUNK_BYTES / (4 * dim * ASSIGN_BLOCK)).max(1) * ASSIGN_BLOCK
}

/// Call `f(first row, rows)` on every chunk of rows of `tokens` in order, read into one buffer.
fn each_chunk(
    tokens: &dyn VectorSource,
    mut f: impl FnMut(usize, &[f32]) -> Result<()>,
) -> Result<()> {
    let (dim, rows) = (tokens.dim(), tokens.rows());
    let step = chunk_rows(dim);
    let mut buffer = vec![0f32; step.min(rows) * dim];
    for first in (0..rows).step_by(step) {
        let chunk = &mut buffer[..step.min(rows - first) * dim];
        tokens.read_rows(first, chunk)?;
        f(first, chunk)?;
    }
    Ok(())
}

/// The rows `rows` (increasing) of `tokens`, in that order; runs of consecutive rows are read at once.
fn read_sample(tokens: &dyn VectorSource, rows: &[usize]) -> Result<Vec<f32>> {
    let dim = tokens.dim();
    let mut sample = vec![0f32; rows.len() * dim];
    let mut i = 0;
    while i < rows.len() {
        let mut j = i + 1;
        while j < rows.len() && rows[j] == rows[j - 1] + 1 {
            j += 1;
        }
        tokens.read_rows(rows[i], &mut sample[i * dim..j * dim])?;
        i = j;
    }
    Ok(sample)
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
    let mut codes = vec![0u16; sample.len() / dim];
    for _ in 0..iterations {
        assign_into(sample, dim, &centroids, &mut codes, progress);
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
    /// `dir`, atomically, and open it: [`MultiVectorIndex::build_parts`] with the matrix as the
    /// one part.
    pub fn build(
        tokens: &TokenMatrix,
        ids: &[String],
        dir: impl AsRef<Path>,
        opts: &BuildOptions,
    ) -> Result<Self> {
        if ids.len() != tokens.len() {
            return Err(Error::invalid(format!(
                "{} ids for {} documents: give exactly one id per document",
                ids.len(),
                tokens.len()
            )));
        }
        let (data, offsets) = (tokens.data(), tokens.offsets().to_vec());
        let part = TokenPart::slice(data, tokens.dim(), offsets, ids.to_vec(), None, "documents")?;
        Self::build_parts(&TokenParts::new(vec![part])?, dir, opts)
    }

    /// Index the items of `tokens` into the directory `dir`, atomically, and open it. The token
    /// vectors are read in place, a chunk at a time, in three passes (norms, assignment to the
    /// centroids, residuals), besides the k-means sample: memory holds the sample, the centroids, two
    /// bytes of code per token and one chunk, never the collection's matrix; the residuals (and the
    /// full vectors, when kept) are written as they are encoded. The files are the same however the
    /// collection is split into parts.
    pub fn build_parts(
        tokens: &TokenParts,
        dir: impl AsRef<Path>,
        opts: &BuildOptions,
    ) -> Result<Self> {
        let (dim, ntokens, ndocs) = (tokens.dim(), tokens.rows(), tokens.len());
        if ndocs == 0 {
            return Err(Error::invalid("no documents to index"));
        }
        ResidualCodec::check_params(dim, opts.nbits)?;
        let ids: Vec<&str> = tokens.ids().collect();
        let table = IdTable::from_ids(&ids)?;
        drop(ids);
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
        let built = parallel::install(opts.threads, |_| -> Result<MultiVectorManifest> {
            let mut normalized = true;
            each_chunk(tokens, |first, rows| {
                tokens.check_norms(first, rows)?;
                normalized = normalized
                    && rows
                        .par_chunks_exact(dim)
                        .all(|t| (norm_sq(t) - 1.0).abs() < 1e-3);
                Ok(())
            })?;
            let mut rng = SplitMix64::new(opts.seed);
            let sample = read_sample(tokens, &rng.sample(ntokens, sample_size))?;
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
            // The codec's sample (increasing rows), its residuals taken as the assignment pass
            // reaches them.
            let held_out = rng.sample(ntokens, CODEC_SAMPLE_TOKENS.min(ntokens));
            let mut residual_sample = vec![0f32; held_out.len() * dim];
            let mut next = 0;
            let mut codes = vec![0u16; ntokens];
            each_chunk(tokens, |first, rows| {
                let codes = &mut codes[first..first + rows.len() / dim];
                assign_into(rows, dim, &centroids, codes, &opts.progress);
                while next < held_out.len() && held_out[next] < first + codes.len() {
                    let r = held_out[next] - first;
                    let c = codes[r] as usize;
                    let x = &rows[r * dim..(r + 1) * dim];
                    let centroid = &centroids[c * dim..(c + 1) * dim];
                    for ((out, x), c) in residual_sample[next * dim..(next + 1) * dim]
                        .iter_mut()
                        .zip(x)
                        .zip(centroid)
                    {
                        *out = x - c;
                    }
                    next += 1;
                }
                Ok(())
            })?;
            let codec = ResidualCodec::train(dim, opts.nbits, &residual_sample)?;
            let bpt = codec.bytes_per_token();
            let mut residuals = array_writer(&tmp, RESIDUALS)?;
            let mut vectors = opts
                .keep_vectors
                .then(|| array_writer(&tmp, VECTORS))
                .transpose()?;
            let mut packed = Vec::new();
            each_chunk(tokens, |first, rows| {
                packed.resize(rows.len() / dim * bpt, 0u8);
                let codes = &codes[first..];
                packed
                    .par_chunks_mut(bpt)
                    .zip(rows.par_chunks_exact(dim))
                    .zip(codes.par_iter())
                    .for_each_init(
                        || vec![0f32; dim],
                        |residual, ((out, x), &c)| {
                            let centroid = &centroids[c as usize * dim..];
                            for ((r, x), c) in residual.iter_mut().zip(x).zip(centroid) {
                                *r = x - c;
                            }
                            codec.encode(residual, out);
                        },
                    );
                residuals.write(&packed)?;
                if let Some(vectors) = vectors.as_mut() {
                    vectors.write(as_byte_slice(rows))?;
                }
                Ok(())
            })?;
            residuals.finish()?;
            if let Some(vectors) = vectors {
                vectors.finish()?;
            }
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
            write_array(&tmp, IVF_OFFSETS, &ivf_offsets)?;
            write_array(&tmp, IVF_DOCS, &ivf_docs)?;
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
