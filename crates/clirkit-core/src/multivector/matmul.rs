//! Dense products of small matrices (query tokens against centroids or a document's tokens), on
//! `matrixmultiply`'s SIMD kernels. Single-threaded per call: parallelism is across queries and
//! documents, so results do not depend on the thread count.

/// `out (m x n) = a (m x d) · b (n x d)ᵀ`, all row-major.
pub(crate) fn dot_rows(a: &[f32], b: &[f32], d: usize, out: &mut [f32]) {
    let (m, n) = (a.len() / d, b.len() / d);
    assert!(a.len() == m * d && b.len() == n * d && out.len() == m * n);
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: the slices hold m*d, n*d and m*n values (asserted), addressed with these strides.
    unsafe {
        matrixmultiply::sgemm(
            m,
            d,
            n,
            1.0,
            a.as_ptr(),
            d as isize,
            1,
            b.as_ptr(),
            1,
            d as isize,
            0.0,
            out.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_naive_product() {
        let a: Vec<f32> = (0..6).map(|v| v as f32).collect(); // 2 x 3
        let b: Vec<f32> = (0..12).map(|v| (v as f32) * 0.5).collect(); // 4 x 3
        let mut out = vec![0f32; 8];
        dot_rows(&a, &b, 3, &mut out);
        for i in 0..2 {
            for j in 0..4 {
                let want: f32 = (0..3).map(|t| a[i * 3 + t] * b[j * 3 + t]).sum();
                assert_eq!(out[i * 4 + j], want);
            }
        }
    }
}
