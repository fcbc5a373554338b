//! CombMNZ (Fox & Shaw, TREC-2 1994): CombSUM multiplied by the number of runs that retrieved
//! the document, which rewards agreement between runs.

/// The final scores: each document's CombSUM times its number of retrieving runs.
pub(crate) fn finish<'a>(ids: &[&'a [u8]], sums: &[f64], hits: &[u32]) -> Vec<(&'a [u8], f64)> {
    ids.iter()
        .zip(sums.iter().zip(hits))
        .map(|(&id, (&sum, &n))| (id, sum * n as f64))
        .collect()
}
