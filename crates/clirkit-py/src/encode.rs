//! `clirkit._native.quantized_attention`: a transformer's self-attention in int8
//! (`clirkit_core::encode::attention`), numpy float32 in and out, the GIL released while it runs (the
//! ONNX encoder's workers call it concurrently).

use crate::common::{contiguous, define_register};
use crate::errors::{DetachCaught, IntoPy};
use clirkit_core::encode::attention::{quantized_attention as attend, AttentionShape, Kernel};
use numpy::{IntoPyArray, PyArray3, PyArrayMethods, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::prelude::*;

/// `softmax(scale * q k^T) v` per head for each text of `(texts, tokens, hidden)` float32 queries,
/// keys and values (unpadded: every token attends to every token of its text), computed with int8
/// products; float32 `(texts, tokens, hidden)`.
#[pyfunction]
#[pyo3(signature = (query, key, value, num_heads, scale))]
fn quantized_attention<'py>(
    py: Python<'py>,
    query: PyReadonlyArray3<'py, f32>,
    key: PyReadonlyArray3<'py, f32>,
    value: PyReadonlyArray3<'py, f32>,
    num_heads: usize,
    scale: f32,
) -> PyResult<Bound<'py, PyArray3<f32>>> {
    let dims = query.shape().to_vec();
    if key.shape() != dims.as_slice() || value.shape() != dims.as_slice() {
        return Err(clirkit_core::Error::invalid(format!(
            "attention: queries {:?}, keys {:?} and values {:?} must have one shape",
            dims,
            key.shape(),
            value.shape()
        )))
        .py_err();
    }
    let (texts, tokens, hidden) = (dims[0], dims[1], dims[2]);
    let shape = AttentionShape::new(tokens, hidden, num_heads).py_err()?;
    let kernel = Kernel::detect(shape.head_dim);
    let (q, k, v) = (
        contiguous(&query, "queries")?,
        contiguous(&key, "keys")?,
        contiguous(&value, "values")?,
    );
    let out = py
        .detach_caught(|| -> clirkit_core::Result<Vec<f32>> {
            let mut out = vec![0f32; q.len()];
            let text = tokens * hidden;
            for t in 0..texts {
                let span = t * text..(t + 1) * text;
                attend(
                    &q[span.clone()],
                    &k[span.clone()],
                    &v[span.clone()],
                    &mut out[span],
                    shape,
                    scale,
                    kernel,
                )?;
            }
            Ok(out)
        })
        .py_err()?;
    out.into_pyarray(py).reshape([texts, tokens, hidden])
}

/// The kernel `quantized_attention` runs on this CPU for heads of `head_dim` values:
/// `"avx512-vnni"` or `"portable"` (both give the same bits; the portable one is far slower).
#[pyfunction]
fn attention_kernel(head_dim: usize) -> &'static str {
    Kernel::detect(head_dim).name()
}

define_register!(classes: [], functions: [quantized_attention, attention_kernel]);
