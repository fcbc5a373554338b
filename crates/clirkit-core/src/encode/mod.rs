//! Kernels that stand in for parts of a transformer encoder's graph: run between the graph segments
//! onnxruntime executes (`attention`), or inside its graph as a custom operator (`layer_norm`, registered
//! by the bindings crate's `ort_ops`).

pub mod attention;
pub mod layer_norm;
