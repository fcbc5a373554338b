//! Times `evaluate_files` end to end (qrels and run parsed from their files, nDCG@20, MAP,
//! R@1000, P@10, Judged@20), in wall and CPU time, and prints the aggregate values so that two
//! builds can be checked for identical results.
//!
//!     cargo run --release -p clirkit-benches --example eval_timing -- QRELS RUN [REPEAT]

use clirkit_core::eval::{evaluate_files, EvalOptions};
use std::time::Instant;

/// CPU time of this process (all threads) so far, in seconds.
fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: eval_timing QRELS RUN [REPEAT]";
    let (qrels, run) = (args.get(1).expect(usage), args.get(2).expect(usage));
    let repeat: usize = args.get(3).map_or(1, |r| r.parse().expect(usage));
    let measures = ["ndcg_cut.20", "map", "recall.1000", "P.10", "judged.20"];
    for _ in 0..repeat {
        let (t, c) = (Instant::now(), cpu_seconds());
        let result = evaluate_files(qrels, run, &measures, EvalOptions::default()).unwrap();
        println!(
            "evaluate: {:.3} s wall, {:.3} s CPU; {:?} = {:?}",
            t.elapsed().as_secs_f64(),
            cpu_seconds() - c,
            result.keys(),
            result.aggregate
        );
    }
}
