//! CombMNZ (Fox & Shaw, TREC-2 1994): CombSUM multiplied by the number of runs that retrieved
//! the document, which rewards agreement between runs.

/// Turn each document's CombSUM into CombMNZ: times its number of retrieving runs.
pub(crate) fn scale(sums: &mut [f64], hits: &[u32]) {
    for (sum, &n) in sums.iter_mut().zip(hits) {
        *sum *= n as f64;
    }
}
