//! Kernels that stand in for parts of a transformer encoder's graph, run between the graph segments
//! onnxruntime executes.

pub mod attention;
