//! Times a BM25 index build from Rust alone (no Python), for profiling the builder:
//! `cargo run --release -p clirkit-benches --example bm25_build -- CORPUS.jsonl INDEX_DIR [THREADS
//! [MEMORY_BUDGET_MIB]]`.

use clirkit_core::bm25::{build, BuildOptions};
use std::path::Path;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err(
            "usage: bm25_build CORPUS.jsonl INDEX_DIR [THREADS [MEMORY_BUDGET_MIB]]".into(),
        );
    }
    let threads = args.get(3).map(|t| t.parse()).transpose()?.unwrap_or(0);
    let defaults = BuildOptions::default();
    let budget_mib: Option<usize> = args.get(4).map(|m| m.parse()).transpose()?;
    let opts = BuildOptions {
        threads,
        memory_budget_bytes: budget_mib.map_or(defaults.memory_budget_bytes, |m| m << 20),
        ..defaults
    };
    let index = Path::new(&args[2]);
    if index.join("meta.json").exists() {
        std::fs::remove_dir_all(index)?;
    }
    let start = Instant::now();
    let summary = build(Path::new(&args[1]), index, &opts)?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{} docs, {} terms, {} spilled runs in {secs:.2} s = {:.0} docs/s",
        summary.num_docs,
        summary.num_terms,
        summary.spilled_runs,
        summary.num_docs as f64 / secs
    );
    Ok(())
}
