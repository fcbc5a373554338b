//! Times RRF fusion of run files already loaded, in wall and CPU time (all threads, from
//! `/proc/self/task/*/schedstat`), and prints a checksum of the fused run (query ids, doc ids,
//! score bits, in order) so that two builds can be checked for bit-identical output. With
//! `--output`, the first fused run is also written there and the write and the whole file to file
//! job (load + fuse + write) are timed; with `--pipelined` too, the job fuses and writes with
//! `fuse_to_file` instead (timed right after the load, before the fusions that give the checksum).
//!
//!     cargo run --release -p clirkit-benches --example fusion_timing -- RUN... [--repeat N] [--output F [--pipelined]]
//!
//! `RAYON_NUM_THREADS=1` gives the single-thread cost.

use clirkit_core::fusion::run_file::{read_run_lists, write_run_lists};
use clirkit_core::fusion::{fuse, fuse_to_file, FusionOptions, Method, RunLists};
use std::time::Instant;

/// CPU time of all threads of this process so far, in seconds (Linux).
/// Prints `label: W s wall, C s CPU` for the time since `since` (a wall instant and CPU seconds).
fn report(label: &str, since: (Instant, f64)) {
    println!(
        "{label}: {:.3} s wall, {:.3} s CPU",
        since.0.elapsed().as_secs_f64(),
        cpu_seconds() - since.1
    );
}

fn cpu_seconds() -> f64 {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").expect("Linux /proc") {
        let stat =
            std::fs::read_to_string(task.unwrap().path().join("schedstat")).unwrap_or_default();
        ns += stat
            .split_whitespace()
            .next()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
    }
    ns as f64 * 1e-9
}

fn checksum(run: &RunLists) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x100000001b3);
        }
    };
    for q in 0..run.num_queries() {
        eat(run.query_id(q).as_bytes());
        for (doc, score) in run.query_docs(q) {
            eat(doc.as_bytes());
            eat(&score.to_bits().to_le_bytes());
        }
    }
    h
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut repeat = 3;
    if let Some(i) = args.iter().position(|a| a == "--repeat") {
        repeat = args[i + 1].parse().expect("--repeat N");
        args.drain(i..i + 2);
    }
    let mut output = None;
    if let Some(i) = args.iter().position(|a| a == "--output") {
        output = Some(args[i + 1].clone());
        args.drain(i..i + 2);
    }
    let pipelined = match args.iter().position(|a| a == "--pipelined") {
        Some(i) => {
            args.remove(i);
            true
        }
        None => false,
    };
    let start = (Instant::now(), cpu_seconds());
    let (t, c) = (Instant::now(), cpu_seconds());
    let runs: Vec<RunLists> = args.iter().map(|p| read_run_lists(p).unwrap()).collect();
    println!(
        "load: {:.3} s wall, {:.3} s CPU, {} entries",
        t.elapsed().as_secs_f64(),
        cpu_seconds() - c,
        runs.iter().map(|r| r.num_entries()).sum::<usize>()
    );
    let refs: Vec<&RunLists> = runs.iter().collect();
    let options = FusionOptions::new(Method::Rrf { k: 60.0 });
    if let (Some(out), true) = (output.take(), pipelined) {
        let since = (Instant::now(), cpu_seconds());
        fuse_to_file(&refs, &options, &out, "clirkit-fuse").unwrap();
        report("fuse + write, pipelined", since);
        report("file to file (load + fuse + write, pipelined)", start);
    }
    for _ in 0..repeat {
        let (t, c) = (Instant::now(), cpu_seconds());
        let fused = fuse(&refs, &options).unwrap();
        let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
        println!(
            "fuse: {wall:.3} s wall, {cpu:.3} s CPU, {} entries, checksum {:016x}",
            fused.num_entries(),
            checksum(&fused)
        );
        if let Some(out) = &output {
            let since = (Instant::now(), cpu_seconds());
            write_run_lists(out, &fused, "clirkit-fuse").unwrap();
            report("write", since);
            report("file to file (load + first fuse + write)", start);
            break;
        }
    }
}
