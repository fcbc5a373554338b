//! Reads one TREC file with one of the crate's readers, `REPEAT` times, and prints what it read:
//! a whole-process timing target for comparing two builds of the readers on the same file.
//!
//!     cargo run --release -p clirkit-benches --example trec_read_timing -- MODE FILE [REPEAT]
//!
//! MODE: `read_run` (generic run reader), `fusion` (the fusion run reader), `eval_run` (the
//! evaluation run reader), `qrels` (generic qrels reader), `qrels_index` (the evaluation one).

use clirkit_core::eval::qrels_file::read_qrels_index;
use clirkit_core::eval::RunFile;
use clirkit_core::fusion::run_file::read_run_lists;
use clirkit_core::io::trec::{read_qrels, read_run};

/// Entries over all queries.
fn total<T>(queries: &[(String, Vec<T>)]) -> usize {
    queries.iter().map(|q| q.1.len()).sum()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: trec_read_timing MODE FILE [REPEAT]";
    let mode = args.get(1).expect(usage);
    let path = args.get(2).expect(usage);
    let repeat: usize = args.get(3).map_or(1, |r| r.parse().expect(usage));
    let mut entries = 0usize;
    for _ in 0..repeat {
        entries += match mode.as_str() {
            "read_run" => total(&read_run(path).unwrap().queries),
            "fusion" => read_run_lists(path).unwrap().num_entries(),
            "eval_run" => {
                let file = RunFile::open(path).unwrap();
                file.queries().unwrap().iter().map(|q| q.docs.len()).sum()
            }
            "qrels" => total(&read_qrels(path).unwrap().queries),
            "qrels_index" => read_qrels_index(path).unwrap().len(),
            _ => panic!("{usage}"),
        };
    }
    println!("{mode}: {entries} entries");
}
