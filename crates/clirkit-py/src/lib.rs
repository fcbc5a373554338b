//! PyO3 bindings for clirkit-core: the `clirkit._native` module. Only conversion lives here;
//! every algorithm is in the core. Heavy calls release the GIL (`py.detach`). Every class is a
//! struct `Py<Name>` exposed to Python as `<Name>` (`#[pyclass(name = "<Name>", ...)]`), so a
//! binding never takes the name of the core type it wraps (`tests/test_package.py` checks).

use pyo3::prelude::*;

mod bm25;
mod bm25_sharded;
mod common;
mod dense;
mod dense_sharded;
mod encode;
mod errors;
mod eval;
mod fusion;
mod impact;
mod impact_approximate;
mod index_kinds;
mod io;
mod multivector;
mod ort_ops;
mod passages;
mod progress;
mod projection;
mod rerank;
mod text;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    progress::register(m)?;
    projection::register(m)?;
    encode::register(m)?;
    io::register(m)?;
    index_kinds::register(m)?;
    text::register(m)?;
    bm25::register(m)?;
    bm25_sharded::register(m)?;
    impact::register(m)?;
    impact_approximate::register(m)?;
    fusion::register(m)?;
    rerank::register(m)?;
    eval::register(m)?;
    dense::register(m)?;
    dense_sharded::register(m)?;
    passages::register(m)?;
    multivector::register(m)?;
    Ok(())
}
