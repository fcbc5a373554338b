//! A sharded search's hits on their way from the shards to whoever merges them, whatever the
//! index kind: each shard's exact top k of a batch of queries, with string ids, merged into each
//! query's top k in canonical order (score descending, then id descending as bytes: the single
//! index's tie rule for BM25 and impact search, whose tie key is the id's rank in byte order),
//! which is the run of the single index over all the shards' documents.

use crate::error::{Error, Result};
use crate::postings::query::Hit;
use crate::ranking::{Run, ScoredDoc};

/// One shard's hits for a batch of queries (its documents' string ids by `doc_id`), as bytes for
/// the trip to whoever merges them: per query `n u32`, then `n` times `score f32 · id length u32 ·
/// id`, little-endian.
pub fn encode_hits<'a>(doc_id: impl Fn(u32) -> &'a str, results: &[Vec<Hit>]) -> Vec<u8> {
    let mut out = Vec::new();
    for hits in results {
        out.extend_from_slice(&(hits.len() as u32).to_le_bytes());
        for hit in hits {
            let id = doc_id(hit.doc).as_bytes();
            out.extend_from_slice(&hit.score.to_le_bytes());
            out.extend_from_slice(&(id.len() as u32).to_le_bytes());
            out.extend_from_slice(id);
        }
    }
    out
}

/// Reads what [`encode_hits`] wrote; anything short or malformed is an error.
struct HitsReader<'a> {
    bytes: &'a [u8],
    shard: usize,
}

fn corrupt(shard: usize) -> Error {
    Error::invalid(format!(
        "the hits of shard {shard} are truncated or corrupt"
    ))
}

impl HitsReader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.bytes.len() < n {
            return Err(corrupt(self.shard));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn query(&mut self, into: &mut Vec<ScoredDoc>) -> Result<()> {
        for _ in 0..self.u32()? {
            let score = f32::from_bits(self.u32()?);
            let len = self.u32()? as usize;
            let shard = self.shard;
            let id = std::str::from_utf8(self.take(len)?).map_err(|_| corrupt(shard))?;
            into.push(ScoredDoc::new(id, score as f64));
        }
        Ok(())
    }
}

/// Merge shards' hits ([`encode_hits`], for the same queries `qids` in order) into each query's
/// top `k` in canonical order: the run of the single index over all the shards' documents.
pub fn merge_hits(parts: &[&[u8]], qids: &[String], k: usize) -> Result<Run> {
    let mut readers: Vec<HitsReader> = parts
        .iter()
        .enumerate()
        .map(|(shard, bytes)| HitsReader { bytes, shard })
        .collect();
    let mut run = Run::new();
    for qid in qids {
        let mut docs = Vec::new();
        for reader in &mut readers {
            reader.query(&mut docs)?;
        }
        run.push(qid.clone(), docs);
    }
    if let Some(reader) = readers.iter().find(|r| !r.bytes.is_empty()) {
        return Err(corrupt(reader.shard));
    }
    run.truncate(k);
    Ok(run)
}
