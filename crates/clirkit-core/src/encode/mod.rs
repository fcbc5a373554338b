//! Kernels that stand in for parts of a transformer encoder's graph: run between the graph segments
//! onnxruntime executes (`attention`), or inside its graph as custom operators (`layer_norm`, `float_attention`,
//! registered by the bindings crate's `ort_ops`).

pub mod attention;
pub mod float_attention;
pub mod layer_norm;

/// Reproducible operands for the kernels' tests: `n` values in `[-4, 4)`.
#[cfg(test)]
fn test_values(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state as f32 / u32::MAX as f32 - 0.5) * 8.0
        })
        .collect()
}
