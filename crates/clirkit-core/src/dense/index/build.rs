//! Building a [`DenseIndex`]: checks, PQ codebook training, encoding, and the IVF slot layout.

use super::{BuildOptions, Coarse, DenseIndex, PqPart, StoredVectors, VectorDtype};
use crate::dense::check_matrix;
use crate::dense::codebook::ProductQuantizer;
use crate::dense::fastscan::{layout, BLOCK};
use crate::dense::ivf::{slot_layout, CoarseQuantizer, EMPTY_SLOT};
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io::bytes::Array;
use crate::parallel;

impl DenseIndex {
    /// Build from `data` (row-major, `dim` columns) and one unique id per row.
    pub fn build(data: &[f32], dim: usize, ids: &[String], opts: &BuildOptions) -> Result<Self> {
        let n = check_matrix(data, dim, "embeddings")?;
        if n == 0 {
            return Err(Error::invalid("embeddings: no vectors to index"));
        }
        if ids.len() != n {
            return Err(Error::invalid(format!(
                "{} ids for {n} vectors: give exactly one id per vector",
                ids.len()
            )));
        }
        let table = IdTable::from_ids(ids)?;
        check_options(opts)?;
        let pq = match opts.pq {
            None => None,
            Some(m) => Some(parallel::install(opts.threads, |_| {
                build_pq(data, dim, m, opts)
            })??),
        };
        Ok(DenseIndex {
            dim,
            ntotal: n,
            metric: opts.metric,
            ids: table,
            vectors: opts.keep_vectors.then(|| match opts.vector_dtype {
                VectorDtype::Float32 => StoredVectors::Float32(Array::from(data.to_vec())),
                VectorDtype::Float16 => StoredVectors::Float16(Array::from(to_float16_bits(data))),
            }),
            vector_checks: None,
            pq,
        })
    }
}

/// Refuse option combinations that make no index.
pub(super) fn check_options(opts: &BuildOptions) -> Result<()> {
    if opts.ivf.is_some() && opts.pq.is_none() {
        return Err(Error::invalid(
            "an IVF coarse quantizer needs PQ codes (give pq=M as well)",
        ));
    }
    if opts.pq.is_none() && !opts.keep_vectors {
        return Err(Error::invalid(
            "a flat index is its vectors: keep_vectors=False needs pq=M",
        ));
    }
    if opts.pq.is_none() && opts.vector_dtype == VectorDtype::Float16 {
        return Err(Error::invalid(
            "float16 vectors re-score a PQ index: vector_dtype=float16 needs pq=M",
        ));
    }
    Ok(())
}

/// `values` rounded to IEEE half precision (nearest, ties to even), as bits.
pub(super) fn to_float16_bits(values: &[f32]) -> Vec<u16> {
    values
        .iter()
        .map(|&v| half::f16::from_f32(v).to_bits())
        .collect()
}

/// The codes file's payload: `raw` codes (`m` per row) placed in slot order (padding slots
/// are code 0), packed in blocks for 4 bits.
pub(super) fn codes_in_slot_order(raw: &[u8], slots: &[u32], m: usize, nbits: usize) -> Vec<u8> {
    let mut ordered = vec![0u8; slots.len().div_ceil(BLOCK) * BLOCK * m];
    for (s, &id) in slots.iter().enumerate() {
        if id != EMPTY_SLOT {
            ordered[s * m..(s + 1) * m]
                .copy_from_slice(&raw[id as usize * m..(id as usize + 1) * m]);
        }
    }
    if nbits == 4 {
        let mut packed = Vec::with_capacity(ordered.len() / 2);
        layout::pack(&ordered, m, &mut packed);
        packed
    } else {
        ordered
    }
}

fn build_pq(data: &[f32], dim: usize, m: usize, opts: &BuildOptions) -> Result<PqPart> {
    ProductQuantizer::check_params(dim, m, opts.nbits)?;
    let n = data.len() / dim;
    let rows = super::shards::training_rows(n, opts);
    let sample: Vec<f32> = rows
        .iter()
        .flat_map(|&r| data[r * dim..(r + 1) * dim].iter().copied())
        .collect();
    let pq = ProductQuantizer::train(&sample, dim, m, opts.nbits, opts.seed)?;
    let (assign, coarse) = match opts.ivf {
        None => (None, None),
        Some(nlist) => {
            if nlist == 0 {
                return Err(Error::invalid("ivf: nlist must be at least 1"));
            }
            let q = CoarseQuantizer::train(&sample, dim, nlist, opts.seed ^ 0x1f)?;
            (Some(q.assign(opts.metric, data)), Some(q))
        }
    };
    opts.progress.expect(n);
    let mut raw = Vec::with_capacity(n * m);
    for chunk in data.chunks(dim * 65_536) {
        raw.extend(pq.encode(chunk));
        opts.progress.advance(chunk.len() / dim);
    }
    let (slots, block_starts) = match &assign {
        None => (
            (0..n as u32).collect::<Vec<_>>(),
            vec![0, n.div_ceil(BLOCK) as u64],
        ),
        Some(a) => slot_layout(a, opts.ivf.unwrap_or(1)),
    };
    let codes = codes_in_slot_order(&raw, &slots, m, opts.nbits);
    let coarse = coarse.map(|quantizer| Coarse {
        quantizer,
        slots: Array::from(slots),
        block_starts,
    });
    Ok(PqPart {
        pq,
        codes: Array::from(codes),
        coarse,
    })
}
