//! Times BM25 batch search from Rust alone (no Python), for profiling the query algorithms:
//! `cargo run --release -p clirkit-benches --example bm25_search_timing -- INDEX_DIR QUERIES K
//! [THREADS [PASSES [STRATEGY]]]`. Prints each pass's queries per second and a checksum of the
//! hits, so strategies and builds can be compared for identical results.

use clirkit_core::bm25::{read_queries, Bm25Index, Bm25Params, Strategy};
use clirkit_core::progress::Progress;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err(
            "usage: bm25_search_timing INDEX_DIR QUERIES K [THREADS [PASSES [STRATEGY]]]".into(),
        );
    }
    let index = Bm25Index::open(&args[1])?;
    let queries = read_queries(&args[2])?;
    let k: usize = args[3].parse()?;
    let threads: usize = args.get(4).map(|t| t.parse()).transpose()?.unwrap_or(0);
    let passes: usize = args.get(5).map(|p| p.parse()).transpose()?.unwrap_or(3);
    let strategy = match args.get(6).map(String::as_str) {
        None | Some("auto") => None,
        Some("maxscore") => Some(Strategy::MaxScore),
        Some("exhaustive") => Some(Strategy::Exhaustive),
        Some("bmw") => Some(Strategy::BlockMaxWand),
        Some(other) => return Err(format!("unknown strategy '{other}'").into()),
    };
    let params = Bm25Params::default();
    for pass in 0..passes {
        let start = Instant::now();
        let results = match strategy {
            None => index.batch_search(&queries, k, None, params, threads, &Progress::default())?,
            Some(s) => queries
                .iter()
                .map(|q| index.search_by(s, &q.text, None, k, params))
                .collect::<Result<Vec<_>, _>>()?,
        };
        let secs = start.elapsed().as_secs_f64();
        let checksum = results.iter().flatten().fold(0u64, |acc, hit| {
            acc.rotate_left(5) ^ (hit.doc as u64) ^ ((hit.score.to_bits() as u64) << 32)
        });
        println!(
            "pass {pass}: {} queries in {secs:.3} s = {:.0} q/s, checksum {checksum:016x}",
            queries.len(),
            queries.len() as f64 / secs
        );
    }
    Ok(())
}
