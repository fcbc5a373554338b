//! k-means: k-means++ seeding and Lloyd iterations, deterministic for a seed.
//!
//! Like FAISS, training subsamples to at most `max_points_per_centroid * k` points (seeded), so
//! training cost does not grow with the collection. Assignment is parallel (each point's nearest
//! centroid does not depend on scheduling); centroid sums are accumulated sequentially in f64 in
//! point order, so results are identical for any thread count.

use super::flat::{dot, norm_sq};
use crate::error::{Error, Result};
use crate::rng::SplitMix64;
use rayon::prelude::*;

/// Parameters of one k-means run.
#[derive(Clone, Debug)]
pub struct KMeans {
    pub k: usize,
    pub iterations: usize,
    pub seed: u64,
    pub max_points_per_centroid: usize,
}

impl KMeans {
    pub fn new(k: usize, seed: u64) -> Self {
        KMeans {
            k,
            iterations: 25,
            seed,
            max_points_per_centroid: 256,
        }
    }

    /// Train on `data` (row-major, `d` columns); returns `k * d` centroids.
    pub fn train(&self, data: &[f32], d: usize) -> Result<Vec<f32>> {
        let n = data.len() / d;
        let k = self.k;
        if n < k {
            return Err(Error::invalid(format!(
                "too few training vectors: {n} for {k} centroids (need at least {k})"
            )));
        }
        let mut rng = SplitMix64::new(self.seed);
        let sample: Vec<f32>;
        let data = if n > k * self.max_points_per_centroid {
            let rows = rng.sample(n, k * self.max_points_per_centroid);
            sample = rows
                .iter()
                .flat_map(|&r| data[r * d..(r + 1) * d].iter().copied())
                .collect();
            &sample[..]
        } else {
            data
        };
        let n = data.len() / d;
        let mut centroids = plus_plus_init(data, d, k, &mut rng);
        let mut assign = vec![0u32; n];
        for _ in 0..self.iterations {
            nearest(data, d, &centroids, &mut assign);
            let changed = update(data, d, k, &assign, &mut centroids, &mut rng);
            if !changed {
                break;
            }
        }
        Ok(centroids)
    }
}

/// k-means++: each next centroid drawn with probability proportional to its squared distance
/// to the nearest centroid chosen so far.
fn plus_plus_init(data: &[f32], d: usize, k: usize, rng: &mut SplitMix64) -> Vec<f32> {
    let n = data.len() / d;
    let mut centroids = Vec::with_capacity(k * d);
    let first = rng.below(n);
    centroids.extend_from_slice(&data[first * d..(first + 1) * d]);
    let mut best = vec![f32::INFINITY; n];
    for c in 1..k {
        let last = &centroids[(c - 1) * d..c * d];
        best.par_chunks_mut(4096)
            .enumerate()
            .for_each(|(chunk, out)| {
                for (j, b) in out.iter_mut().enumerate() {
                    let i = chunk * 4096 + j;
                    let dist = l2_sq(&data[i * d..(i + 1) * d], last);
                    if dist < *b {
                        *b = dist;
                    }
                }
            });
        let total: f64 = best.iter().map(|&v| v as f64).sum();
        let pick = if total > 0.0 {
            let mut target = rng.unit() * total;
            let mut pick = n - 1;
            for (i, &v) in best.iter().enumerate() {
                target -= v as f64;
                if target < 0.0 {
                    pick = i;
                    break;
                }
            }
            pick
        } else {
            rng.below(n)
        };
        centroids.extend_from_slice(&data[pick * d..(pick + 1) * d]);
    }
    centroids
}

fn l2_sq(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Index of the nearest centroid (L2) of every row; ties go to the lower index.
pub fn nearest(data: &[f32], d: usize, centroids: &[f32], out: &mut [u32]) {
    let norms: Vec<f32> = centroids.chunks_exact(d).map(norm_sq).collect();
    out.par_chunks_mut(1024)
        .enumerate()
        .for_each(|(chunk, out)| {
            for (j, o) in out.iter_mut().enumerate() {
                let i = chunk * 1024 + j;
                let x = &data[i * d..(i + 1) * d];
                let mut best = f32::INFINITY;
                let mut arg = 0u32;
                for (c, cent) in centroids.chunks_exact(d).enumerate() {
                    let dist = norms[c] - 2.0 * dot(x, cent);
                    if dist < best {
                        best = dist;
                        arg = c as u32;
                    }
                }
                *o = arg;
            }
        });
}

/// Move centroids to their points' means; an empty cluster takes a perturbed copy of the
/// largest one's centroid (as FAISS does). Returns whether any assignment-driven change happened.
fn update(
    data: &[f32],
    d: usize,
    k: usize,
    assign: &[u32],
    centroids: &mut [f32],
    rng: &mut SplitMix64,
) -> bool {
    let mut sums = vec![0f64; k * d];
    let mut counts = vec![0usize; k];
    for (i, &a) in assign.iter().enumerate() {
        let a = a as usize;
        counts[a] += 1;
        for (s, &x) in sums[a * d..(a + 1) * d]
            .iter_mut()
            .zip(&data[i * d..(i + 1) * d])
        {
            *s += x as f64;
        }
    }
    let mut changed = false;
    for c in 0..k {
        if counts[c] == 0 {
            continue;
        }
        for j in 0..d {
            let v = (sums[c * d + j] / counts[c] as f64) as f32;
            if v != centroids[c * d + j] {
                changed = true;
            }
            centroids[c * d + j] = v;
        }
    }
    for c in 0..k {
        if counts[c] > 0 {
            continue;
        }
        let big = (0..k)
            .max_by_key(|&j| (counts[j], std::cmp::Reverse(j)))
            .unwrap();
        for j in 0..d {
            let v = centroids[big * d + j];
            let eps = 1.0 / 1024.0;
            let sign = if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
            centroids[c * d + j] = v * (1.0 + sign * eps);
            centroids[big * d + j] = v * (1.0 - sign * eps);
        }
        counts[c] = counts[big] / 2;
        counts[big] -= counts[c];
        changed = true;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blobs() -> Vec<f32> {
        let mut rng = SplitMix64::new(1);
        let mut v = Vec::new();
        for i in 0..300 {
            let c = (i % 3) as f32 * 10.0;
            v.push(c + rng.unit() as f32);
            v.push(-c + rng.unit() as f32);
        }
        v
    }

    #[test]
    fn finds_separated_clusters_deterministically() {
        let data = blobs();
        let a = KMeans::new(3, 7).train(&data, 2).unwrap();
        let b = KMeans::new(3, 7).train(&data, 2).unwrap();
        assert_eq!(a, b);
        let mut xs: Vec<i32> = a.chunks(2).map(|c| c[0].floor() as i32).collect();
        xs.sort();
        assert_eq!(xs, vec![0, 10, 20]);
    }

    #[test]
    fn too_few_points_is_an_error() {
        let err = KMeans::new(16, 0)
            .train(&[0.0; 20], 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("too few training vectors: 10 for 16"), "{err}");
    }
}
