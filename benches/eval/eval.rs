//! Criterion benches of evaluation (parsing a run file, and the measures on parsed runs; a run
//! file evaluated piece by piece; reading qrels) and of the run-file kernels under it and under
//! fusion: the shared line tokenizer, the evaluation's run-line tokenizer, score parser and
//! judgement lookups, the fusion reader (piece by piece, and the whole file at once) and writer.
//! `cargo bench -p clirkit-benches --bench eval`

use clirkit_core::eval::qrels_file::read_qrels_index;
use clirkit_core::eval::ranked::{ranked_labels_checked, IdHashes};
use clirkit_core::eval::{
    parse_measures, EvalOptions, Evaluator, QrelsIndex, RunFile, RunQuery, ScoredRef,
};
use clirkit_core::fusion::run_file::{
    parse_run_bytes, read_run_lists, write_run_lists, write_run_lists_to,
};
use clirkit_core::io::run_line_kernels::{for_each_run_line, score_f32};
use clirkit_core::io::trec_lines::{for_each_line, read_bytes};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::io::Write;

const QUERIES: usize = 1000;
const DOCS: usize = 1000;

/// A tiny deterministic generator (no rand dependency in benches).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// (qrels, run as (qid, [(doc, score)])) with 40 judgements and DOCS retrieved per query.
/// A run as ordered (qid, [(docid, score)]) pairs.
type RunPairs = Vec<(String, Vec<(String, f64)>)>;

/// A qrels as (qid, [(docid, label)]) pairs.
type QrelsPairs = Vec<(String, Vec<(String, i32)>)>;

fn data() -> (QrelsIndex, QrelsPairs, RunPairs) {
    let mut rng = Lcg(7);
    let mut qrels = Vec::new();
    let mut run = Vec::new();
    for q in 0..QUERIES {
        let qid = format!("q{q}");
        let judged: Vec<(String, i32)> = (0..40)
            .map(|_| {
                (
                    format!("doc{}", rng.next() % 200_000),
                    (rng.next() % 4) as i32,
                )
            })
            .collect();
        let mut docs: Vec<(String, f64)> = judged
            .iter()
            .take(25)
            .map(|(d, _)| (d.clone(), 0.0))
            .collect();
        while docs.len() < DOCS {
            docs.push((format!("doc{}", rng.next() % 200_000), 0.0));
        }
        docs.sort_by(|a, b| a.0.cmp(&b.0));
        docs.dedup_by(|a, b| a.0 == b.0);
        for d in &mut docs {
            d.1 = (rng.next() % 300_000) as f64 / 10_000.0;
        }
        let mut seen = std::collections::HashSet::new();
        let judged: Vec<(String, i32)> = judged
            .into_iter()
            .filter(|(d, _)| seen.insert(d.clone()))
            .collect();
        qrels.push((qid.clone(), judged));
        run.push((qid, docs));
    }
    let index = QrelsIndex::from_pairs(qrels.iter().map(|(q, d)| {
        (
            q.clone(),
            d.iter().map(|(d, l)| (d.as_bytes(), *l)).collect(),
        )
    }));
    (index, qrels, run)
}

fn bench(c: &mut Criterion) {
    let (qrels, qrels_pairs, run) = data();
    let lines: usize = run.iter().map(|(_, d)| d.len()).sum();
    let measures =
        parse_measures(&["ndcg_cut.20", "map", "recall.1000", "P.10", "judged.20"]).unwrap();
    let evaluator = Evaluator::new(qrels, measures, EvalOptions::default());
    let borrowed = || -> Vec<RunQuery> {
        run.iter()
            .map(|(q, d)| RunQuery {
                qid: q,
                docs: d
                    .iter()
                    .map(|(id, s)| ScoredRef::new(*s, id.as_bytes()))
                    .collect(),
            })
            .collect()
    };

    let mut g = c.benchmark_group("eval");
    g.throughput(Throughput::Elements(lines as u64));
    g.sample_size(10);
    g.bench_function("measures_5_1000q_x_1000d", |b| {
        b.iter_batched(
            borrowed,
            |r| black_box(evaluator.evaluate(r)),
            criterion::BatchSize::LargeInput,
        )
    });

    let dir = tempfile_dir();
    let path = dir.join("run.trec");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for (q, docs) in &run {
        for (rank, (d, s)) in docs.iter().enumerate() {
            writeln!(f, "{q} Q0 {d} {} {s} bench", rank + 1).unwrap();
        }
    }
    f.flush().unwrap();
    drop(f);
    g.bench_function("parse_run_file_1000q_x_1000d", |b| {
        b.iter(|| {
            let file = RunFile::open(&path).unwrap();
            black_box(file.queries().unwrap().len())
        })
    });
    g.bench_function("parse_and_measure_1000q_x_1000d", |b| {
        b.iter(|| {
            let file = RunFile::open(&path).unwrap();
            black_box(evaluator.evaluate(file.queries().unwrap()))
        })
    });
    // The file is large enough for the piece-by-piece path (`eval::run_stream`).
    g.bench_function("evaluate_file_in_pieces_1000q_x_1000d", |b| {
        b.iter(|| black_box(evaluator.evaluate_file(&path).unwrap()))
    });
    // Each query's documents in rank order: the duplicate check and the labels, one hash per id.
    let queries = borrowed();
    g.bench_function("labels_checked_1000q_x_1000d", |b| {
        let (mut seen, mut labels) = (IdHashes::default(), Vec::new());
        b.iter(|| {
            let mut judged = 0;
            for q in &queries {
                let judgements = evaluator.qrels().get(q.qid);
                ranked_labels_checked(&q.docs, judgements, false, &mut seen, &mut labels, None);
                judged += labels.iter().filter(|&&l| l >= 0).count();
            }
            black_box(judged)
        })
    });
    g.finish();

    let judgements: usize = qrels_pairs.iter().map(|(_, d)| d.len()).sum();
    let mut g = c.benchmark_group("qrels");
    g.throughput(Throughput::Elements(judgements as u64));
    g.sample_size(10);
    let qrels_path = dir.join("qrels.trec");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&qrels_path).unwrap());
    for (q, docs) in &qrels_pairs {
        for (d, label) in docs {
            writeln!(f, "{q} 0 {d} {label}").unwrap();
        }
    }
    f.flush().unwrap();
    drop(f);
    g.bench_function("read_qrels_index_1000q_x_40d", |b| {
        b.iter(|| black_box(read_qrels_index(&qrels_path).unwrap().len()))
    });
    g.finish();

    let mut g = c.benchmark_group("run_files");
    g.throughput(Throughput::Elements(lines as u64));
    g.sample_size(10);
    let bytes = std::fs::read(&path).unwrap();
    g.bench_function("tokenize_lines_1000q_x_1000d", |b| {
        b.iter(|| {
            let mut fields = 0;
            for_each_line::<6, ()>(&bytes, |_, line| {
                fields += line.count;
                Ok(())
            })
            .unwrap();
            black_box(fields)
        })
    });
    g.bench_function("tokenize_run_lines_1000q_x_1000d", |b| {
        b.iter(|| {
            let mut fields = 0;
            for_each_run_line::<()>(&bytes, |line| {
                fields += line.count;
                Ok(())
            })
            .unwrap();
            black_box(fields)
        })
    });
    let scores: Vec<String> = run
        .iter()
        .flat_map(|(_, docs)| docs.iter().map(|(_, s)| s.to_string()))
        .collect();
    g.bench_function("scores_to_f32_1000q_x_1000d", |b| {
        b.iter(|| {
            let sum: f32 = scores.iter().filter_map(|s| score_f32(s.as_bytes())).sum();
            black_box(sum)
        })
    });
    // Piece by piece (the file is large enough), then the whole file read and parsed at once.
    g.bench_function("fusion_read_1000q_x_1000d", |b| {
        b.iter(|| black_box(read_run_lists(&path).unwrap().num_entries()))
    });
    g.bench_function("fusion_read_whole_file_1000q_x_1000d", |b| {
        b.iter(|| {
            let bytes = read_bytes(&path).unwrap();
            black_box(parse_run_bytes(&path, &bytes).unwrap().num_entries())
        })
    });
    let lists = read_run_lists(&path).unwrap();
    let out = dir.join("written.trec");
    // Atomic, to a file (direct I/O where the file system has it, fsync included) ...
    g.bench_function("fusion_write_1000q_x_1000d", |b| {
        b.iter(|| write_run_lists(&out, &lists, "bench").unwrap())
    });
    // ... and the formatting alone, into memory.
    let mut text = Vec::new();
    g.bench_function("fusion_format_1000q_x_1000d", |b| {
        b.iter(|| {
            text.clear();
            write_run_lists_to(&mut text, &lists, "bench").unwrap();
            black_box(text.len())
        })
    });
    g.finish();
    std::fs::remove_dir_all(&dir).ok();
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("clirkit-eval-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

criterion_group!(benches, bench);
criterion_main!(benches);
