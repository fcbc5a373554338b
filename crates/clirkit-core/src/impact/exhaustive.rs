//! Exact top-k for impact indexes by scoring every posting: each term's postings decoded a block
//! at a time and accumulated as integers (query impact × stored impact) into one `u32` per
//! document, then the best k selected from the dense array. The faster exact algorithm when the
//! query's postings are many next to the collection (small collections, long learned-sparse
//! queries), where pruning cannot skip enough to pay for itself.
//!
//! Sums are exact integers below 2^24 (the index refuses queries that could reach it), so they
//! equal every other algorithm's scores; ties go to the higher doc-id rank, as everywhere.

use super::block_max::QueryTerm;
use crate::postings::codec::{decode_docs, decode_values};
use crate::postings::query::{DocRanks, Hit};
use crate::postings::{BlockMeta, BLOCK_LEN};
use crate::topk::select_positive;

/// The top `k` documents for `terms` (each term at most once), scoring every posting.
pub fn top_k(terms: &[QueryTerm<'_>], k: usize, ranks: DocRanks<'_>) -> Vec<Hit> {
    if k == 0 || terms.is_empty() {
        return Vec::new();
    }
    let mut sums = vec![0u32; ranks.num_docs()];
    let (mut docs, mut values) = ([0u32; BLOCK_LEN], [0u32; BLOCK_LEN]);
    for t in terms {
        let p = &t.postings;
        let mut prev_last = u32::MAX;
        for j in 0..p.blocks {
            let meta = BlockMeta::decode(p.metas, j);
            let mut len = meta.len as usize;
            if !decode_docs(p.data, &meta, prev_last, &mut docs) {
                // As the cursors do: go on with the one document the (checked) metadata vouches
                // for; the searcher turns the mark into an error.
                p.checks.mark_malformed();
                docs[0] = meta.last_doc;
                len = 1;
            }
            decode_values(p.data, &meta, &mut values);
            for (&doc, &value) in docs[..len].iter().zip(&values[..len]) {
                sums[doc as usize] += t.impact * value;
            }
            prev_last = meta.last_doc;
        }
    }
    select_positive(&sums, k, |doc| ranks.rank(doc))
        .into_iter()
        .map(Hit::from)
        .collect()
}
