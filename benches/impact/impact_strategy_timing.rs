//! Times impact search's exact paths against each other, query by query, in one process:
//! `cargo run --release -p clirkit-benches --example impact_strategy_timing -- INDEX_DIR QUERIES K
//! [ROUNDS [MAX_TERMS [PER_QUERY_TSV [PATHS]]]]]`.
//!
//! Every round runs the whole query set once by each path (block-max pruning over document blocks,
//! integer exhaustive, MaxScore and block-max WAND over cursors, `auto` as this build picks, and
//! `auto-808b28a`: the rule `auto` had from 808b28a to its fix, exhaustive when the collection is
//! at most 4x the query's postings, block-max otherwise), each query timed, the paths in a seeded
//! random order per round, so load drifts fall on every path alike and no path runs a query right
//! after the same query (warm caches). Each query's time per path is its median over the rounds; the table sums them (seconds, and queries per second) and adds
//! `oracle`, the sum of each query's fastest fixed path (of those timed), as the floor a per-query
//! choice could reach (a little optimistic: the minimum of noisy medians). Every path's hits must equal block-max's (documents, scores and order), or it stops.
//! `MAX_TERMS` (0 = all) keeps each query's heaviest terms, for short queries from long ones.
//! `PER_QUERY_TSV` gets one row per query: its shape (terms, postings, documents, k) and each path's
//! median seconds (`-` for none). `PATHS` (comma-separated names, default all) leaves the others
//! out, e.g. block-max WAND on long queries, where it is many times slower than the rest.

use clirkit_core::impact::{read_queries, ExactPath, Hit, ImpactIndex, QueryShape, Strategy};
use clirkit_core::rng::SplitMix64;
use std::io::Write;

/// CPU time of the calling thread, in seconds: unlike wall time, not counting the time the thread
/// waits for a core, so the figures hold on a loaded machine (the timed code is single-threaded).
fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the clock id is a constant Linux defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

type Path = (&'static str, fn(&QueryShape) -> ExactPath);

const PATHS: [Path; 6] = [
    ("blockmax", |_| ExactPath::BlockMax),
    ("exhaustive", |_| ExactPath::Exhaustive),
    ("maxscore", |_| ExactPath::Cursors(Strategy::MaxScore)),
    ("bmw", |_| ExactPath::Cursors(Strategy::BlockMaxWand)),
    ("auto", QueryShape::auto_path),
    ("auto-808b28a", |s| {
        if s.num_docs <= s.postings.saturating_mul(4) {
            ExactPath::Exhaustive
        } else {
            ExactPath::BlockMax
        }
    }),
];
/// The paths `oracle` chooses among (not the rules).
const FIXED: usize = 4;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: impact_strategy_timing INDEX_DIR QUERIES K \
                    [ROUNDS [MAX_TERMS [PER_QUERY_TSV|- [PATHS]]]]"
            .into());
    }
    let index = ImpactIndex::open(&args[1])?;
    let mut queries = read_queries(&args[2])?;
    let k: usize = args[3].parse()?;
    let rounds: usize = args.get(4).map(|r| r.parse()).transpose()?.unwrap_or(3);
    let max_terms: usize = args.get(5).map(|m| m.parse()).transpose()?.unwrap_or(0);
    if max_terms > 0 {
        for q in &mut queries {
            q.terms
                .sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            q.terms.truncate(max_terms);
        }
    }
    let mut tsv = args
        .get(6)
        .filter(|p| p.as_str() != "-")
        .map(std::fs::File::create)
        .transpose()?;
    let wanted: Vec<usize> = match args.get(7) {
        None => (0..PATHS.len()).collect(),
        Some(list) => list
            .split(',')
            .map(|name| {
                PATHS
                    .iter()
                    .position(|p| p.0 == name)
                    .ok_or_else(|| format!("unknown path '{name}'"))
            })
            .collect::<Result<_, _>>()?,
    };
    if let Some(f) = tsv.as_mut() {
        let names: Vec<&str> = PATHS.iter().map(|p| p.0).collect();
        writeln!(
            f,
            "query\tterms\tpostings\tnum_docs\tk\t{}",
            names.join("\t")
        )?;
    }
    let shapes = queries
        .iter()
        .map(|q| index.query_shape(&q.terms, k))
        .collect::<Result<Vec<_>, _>>()?;
    // times[path][query]: one time per round.
    let mut times = vec![vec![Vec::with_capacity(rounds); queries.len()]; PATHS.len()];
    let mut reference: Vec<Option<Vec<Hit>>> = vec![None; queries.len()];
    let mut rng = SplitMix64::new(33);
    for _ in 0..rounds {
        let mut order = wanted.clone();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for p in order {
            for (qi, q) in queries.iter().enumerate() {
                let start = thread_cpu_seconds();
                let hits = index.search_with(&q.terms, k, |shape| (PATHS[p].1)(&shape))?;
                times[p][qi].push(thread_cpu_seconds() - start);
                match &reference[qi] {
                    None => reference[qi] = Some(hits),
                    Some(r) if *r != hits => {
                        return Err(format!("query {}: {} differs", q.id, PATHS[p].0).into())
                    }
                    Some(_) => {}
                }
            }
        }
    }
    let mut totals = [0f64; PATHS.len()];
    let mut oracle = 0f64;
    let mut chosen = std::collections::BTreeMap::<String, usize>::new();
    for (qi, q) in queries.iter().enumerate() {
        let medians: Vec<f64> = times
            .iter_mut()
            .map(|t| {
                let t = &mut t[qi];
                t.sort_by(f64::total_cmp);
                t.get(t.len() / 2).copied().unwrap_or(f64::NAN)
            })
            .collect();
        for (total, m) in totals.iter_mut().zip(&medians) {
            *total += m;
        }
        oracle += medians[..FIXED]
            .iter()
            .copied()
            .filter(|m| !m.is_nan())
            .fold(f64::MAX, f64::min);
        let shape = &shapes[qi];
        *chosen
            .entry(format!("{:?}", shape.auto_path()))
            .or_default() += 1;
        if let Some(f) = tsv.as_mut() {
            let cells: Vec<String> = medians
                .iter()
                .map(|m| match m.is_nan() {
                    true => "-".to_string(),
                    false => format!("{m:.3e}"),
                })
                .collect();
            let (t, p, n) = (shape.terms, shape.postings, shape.num_docs);
            writeln!(f, "{}\t{t}\t{p}\t{n}\t{k}\t{}", q.id, cells.join("\t"))?;
        }
    }
    let n = queries.len() as f64;
    println!(
        "{} queries, k={k}, {rounds} rounds, auto chose {chosen:?}",
        queries.len()
    );
    println!(
        "{:<14} {:>10} {:>10} {:>8}",
        "path", "CPU s", "QPS", "/ oracle"
    );
    let measured = wanted.iter().map(|&p| (PATHS[p].0, totals[p]));
    for (name, total) in measured.chain([("oracle", oracle)]) {
        let ratio = total / oracle;
        println!("{name:<14} {total:>10.4} {:>10.1} {ratio:>8.3}", n / total);
    }
    Ok(())
}
