//! `clirkit._native.VocabProjection`: SPLADE's vocabulary projection fused with the max over each
//! text's tokens (`clirkit_core::impact::projection`), numpy float32 in and out, the GIL released
//! while it runs (the ONNX encoder's workers call it concurrently).

use crate::common::{contiguous, define_register};
use crate::errors::{DetachCaught, IntoPy};
use clirkit_core::impact::projection::{Batch, VocabProjection};
use clirkit_core::Error;
use numpy::{
    IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;

/// A vocabulary projection (weights `(vocab, hidden)`, bias `(vocab,)`), packed once.
#[pyclass(name = "VocabProjection", module = "clirkit._native", frozen)]
pub struct PyVocabProjection {
    inner: VocabProjection,
}

#[pymethods]
impl PyVocabProjection {
    /// Pack `weight` (float32 `(vocab, hidden)`) and `bias` (float32 `(vocab,)`).
    #[new]
    fn new(weight: PyReadonlyArray2<'_, f32>, bias: PyReadonlyArray1<'_, f32>) -> PyResult<Self> {
        let (vocab, hidden) = (weight.shape()[0], weight.shape()[1]);
        let (weight, bias) = (contiguous(&weight, "weight")?, contiguous(&bias, "bias")?);
        let inner = VocabProjection::new(weight, bias, vocab, hidden).py_err()?;
        Ok(PyVocabProjection { inner })
    }

    /// `(vocab, hidden)`: vocabulary entries and hidden units per token.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        (self.inner.vocab(), self.inner.hidden())
    }

    /// The kernel this CPU runs: `"avx512"` (`"avx512+int8-prefilter"` with VNNI), `"avx2-fma"` or
    /// `"portable"` (all give the same bits).
    #[getter]
    fn kernel(&self) -> &'static str {
        self.inner.kernel_name()
    }

    /// Each text's maximum logit per entry, float32 `(texts, vocab)`: `states` float32
    /// `(texts, seq, hidden)` (right-padded), `lengths` int64 `(texts,)` the real tokens of each.
    /// With `positive`, `max(0, maximum)` (bit for bit), computed in float32 only where an int8
    /// prefilter finds that it may be positive (on CPUs with AVX-512 VNNI).
    #[pyo3(signature = (states, lengths, *, positive=false))]
    fn max_logits<'py>(
        &self,
        py: Python<'py>,
        states: PyReadonlyArray3<'py, f32>,
        lengths: PyReadonlyArray1<'py, i64>,
        positive: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let shape = states.shape();
        let (texts, seq, hidden) = (shape[0], shape[1], shape[2]);
        if hidden != self.inner.hidden() || lengths.len() != texts {
            return Err(Error::invalid(format!(
                "token states of shape ({texts}, {seq}, {hidden}) with {} lengths do not fit a projection of {} hidden units",
                lengths.len(),
                self.inner.hidden()
            )))
            .py_err();
        }
        let lengths: Vec<usize> = contiguous(&lengths, "lengths")?
            .iter()
            .map(|&n| usize::try_from(n).unwrap_or(0))
            .collect();
        let data = contiguous(&states, "states")?;
        let vocab = self.inner.vocab();
        let out = py
            .detach_caught(|| -> clirkit_core::Result<Vec<f32>> {
                let mut out = vec![0f32; texts * vocab];
                let batch = Batch {
                    states: data,
                    seq,
                    lengths: &lengths,
                };
                if positive {
                    self.inner.positive_max_logits(&batch, &mut out)?;
                } else {
                    self.inner.max_logits(&batch, &mut out)?;
                }
                Ok(out)
            })
            .py_err()?;
        out.into_pyarray(py).reshape([texts, vocab])
    }
}

define_register!(classes: [PyVocabProjection], functions: []);
