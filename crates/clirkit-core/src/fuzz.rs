//! Fuzz targets for every parser of bytes clirkit did not write itself, or that a crafted file
//! can replace: JSONL records, TREC runs and qrels (each reader against the others), the input
//! layer (compression, byte-order marks), checked file headers and id tables, index manifests,
//! and a model's permutation answers. Each target states what must hold for any input: no panic,
//! and the readers of one format agree.
//!
//! Under `cargo test` each target runs its seed corpus (`src/__fuzz__/<target>/corpus`, cut from
//! the test data) and a short random run; `cargo bolero test --engine libfuzzer` drives the same
//! targets coverage-guided (see `fuzz/README.md` at the repository root).

use crate::bm25::docvectors::FrequencyOnly;
use crate::bm25::format::{Bm25Manifest, BM25_TERM_FILES, POSTINGS_KIND};
use crate::dense::{BuildOptions as DenseBuildOptions, DenseIndex, SearchOptions as DenseSearch};
use crate::eval::run_file::RunFile;
use crate::fusion::run_file::parse_run_bytes;
use crate::ids::IdTable;
use crate::io::format::{chunk_crcs, Header, Kind, MappedFile, CHUNK_LEN, HEADER_LEN, MAGIC};
use crate::io::id_text::id_problem;
use crate::io::input::{read_input, without_bom, Compression};
use crate::io::jsonl::{parse_record, FieldSpec, LineBlock, LineReader};
use crate::io::manifest;
use crate::io::trec::{read_qrels, read_run, write_run_to};
use crate::postings::termdict::TermEntry;
use crate::postings::{postings_intact, Cursor};
use crate::rerank::permutation::{parse_permutation, repair};
use std::io::Write;
use std::path::Path;
use std::sync::OnceLock;

/// Random inputs per target under plain `cargo test` (the corpus always runs whole).
const TEST_ITERATIONS: usize = 500;

/// A target over raw bytes (`check!` must be expanded in each test: it names the test).
macro_rules! check {
    () => {
        bolero::check!().with_iterations(TEST_ITERATIONS)
    };
}

/// `bytes` written to a file named `name` in a fresh temporary directory.
fn file_with(name: &str, bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

#[test]
fn fuzz_jsonl_record() {
    check!().for_each(|bytes: &[u8]| {
        for spec in [FieldSpec::corpus(), FieldSpec::queries()] {
            if let Ok(record) = parse_record(Path::new("f.jsonl"), 1, bytes, &spec) {
                assert_eq!(id_problem(&record.id), None, "{:?}", record.id);
            }
        }
    });
}

#[test]
fn fuzz_trec_run() {
    check!().for_each(|bytes: &[u8]| {
        // Compressed streams are the input layer's target (`fuzz_input_layer`); here the readers
        // are compared on what they parse, which the fused reader is handed already decoded.
        if Compression::of(bytes) != Compression::Plain {
            return;
        }
        let (_dir, path) = file_with("f.trec", bytes);
        // The three run readers accept and refuse the same files.
        let generic = read_run(&path);
        let fused = parse_run_bytes(&path, without_bom(bytes));
        let file = RunFile::open(&path).unwrap();
        let evaluated = file.queries();
        assert_eq!(generic.is_ok(), fused.is_ok(), "{generic:?}");
        // The evaluation reader splits on every control character, as documented there (it
        // finds separators 8 bytes at a time); elsewhere they agree.
        let controls = bytes.iter().any(|&b| b < b' ' && !b.is_ascii_whitespace());
        if !controls {
            assert_eq!(generic.is_ok(), evaluated.is_ok(), "{evaluated:?}");
        }
        if let Ok(run) = generic {
            let mut written = Vec::new();
            if write_run_to(&mut written, &run, "t").is_ok() {
                let (_dir, again) = file_with("again.trec", &written);
                assert_eq!(read_run(&again).unwrap(), run);
            }
        }
    });
}

#[test]
fn fuzz_qrels() {
    check!().for_each(|bytes: &[u8]| {
        let (_dir, path) = file_with("f.qrels", bytes);
        let generic = read_qrels(&path);
        let indexed = crate::eval::qrels_file::read_qrels_index(&path);
        assert_eq!(generic.is_ok(), indexed.is_ok(), "{generic:?}");
    });
}

#[test]
fn fuzz_input_layer() {
    check!().for_each(|bytes: &[u8]| {
        let (dir, path) = file_with("f.in", bytes);
        let _ = read_input(&path);
        let packed = dir.path().join("f.in.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        std::fs::write(&packed, gz.finish().unwrap()).unwrap();
        assert_eq!(read_input(&packed).unwrap(), without_bom(bytes));
    });
}

/// The records of `content` as the line reader must give them: split at `\n`, a `\r` before it
/// dropped, no empty piece after a final `\n`.
fn model_lines(content: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = content.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let ended = content.ends_with(b"\n");
    let count = lines.len();
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| match l.strip_suffix(b"\r") {
            Some(stripped) if i + 1 < count || ended => stripped,
            _ => l,
        })
        .collect()
}

#[test]
fn fuzz_line_reader_with_record_cap() {
    check!().for_each(|bytes: &[u8]| {
        // The first byte picks the cap (1 to 64 bytes) and whether the file is gzip; the rest is it.
        let Some((&pick, content)) = bytes.split_first() else {
            return;
        };
        let cap = usize::from(pick & 63) + 1;
        let stored = if pick & 64 != 0 {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(content).unwrap();
            gz.finish().unwrap()
        } else if Compression::of(content) == Compression::Plain {
            content.to_vec()
        } else {
            return; // a compressed stream of its own: the input layer's target
        };
        let (_dir, path) = file_with("f.jsonl", &stored);
        let expected = model_lines(without_bom(content));
        let first_long = expected.iter().position(|l| l.len() > cap);
        let mut reader = LineReader::open(&path).unwrap().with_max_record(cap);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        let outcome = loop {
            match reader.next_line(&mut buf) {
                Ok(Some(line)) => {
                    assert!(
                        buf.len() <= cap,
                        "a {}-byte record passed a {cap}-byte cap",
                        buf.len()
                    );
                    assert_eq!(line as usize, got.len() + 1);
                    got.push(buf.clone());
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e.to_string()),
            }
        };
        match first_long {
            None => {
                assert!(outcome.is_ok(), "{outcome:?}");
                assert_eq!(got, expected);
            }
            Some(i) => {
                let e = outcome.unwrap_err();
                assert!(
                    e.contains(&format!("f.jsonl:{}: record longer than", i + 1)),
                    "{e}"
                );
                assert_eq!(got, expected[..i]);
            }
        }
        // Blocks of lines stop at the same record.
        let mut reader = LineReader::open(&path).unwrap().with_max_record(cap);
        let mut block = LineBlock::default();
        let blocks = loop {
            match reader.next_block(3, &mut block) {
                Ok(()) if block.is_empty() => break Ok(()),
                Ok(()) => (0..block.len()).for_each(|i| assert!(block.line(i).1.len() <= cap)),
                Err(e) => break Err(e),
            }
        };
        assert_eq!(blocks.is_ok(), first_long.is_none());
    });
}

/// The file [`crate::io::format::write_checked`] makes of `payload`: header, payload, chunk CRC
/// trailer (without its fsync, which would slow a fuzz run a hundredfold).
fn checked_file(kind: Kind, version: u32, payload: &[u8]) -> Vec<u8> {
    let mut file = vec![0u8; HEADER_LEN];
    file[0..8].copy_from_slice(MAGIC);
    file[8..16].copy_from_slice(&kind);
    file[16..20].copy_from_slice(&version.to_le_bytes());
    file[24..32].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    file[32..36].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    file[36..40].copy_from_slice(&CHUNK_LEN.to_le_bytes());
    file.extend_from_slice(payload);
    file.extend(chunk_crcs(payload, CHUNK_LEN).flat_map(u32::to_le_bytes));
    file
}

#[test]
fn fuzz_checked_file_and_id_table() {
    const KIND: Kind = *b"IDTABLE\0";
    check!().for_each(|bytes: &[u8]| {
        // As a file whose header is fuzzed too, and as a payload behind a valid header and CRC.
        let (dir, path) = file_with("ids.bin", bytes);
        let _ = MappedFile::open(&path, KIND, 1, true);
        let _ = IdTable::open(&path);
        let crafted = dir.path().join("crafted.bin");
        std::fs::write(&crafted, checked_file(KIND, 1, bytes)).unwrap();
        // A lookup never answers another id's number; once `verify`'s order check passes, it
        // finds every id (a crafted order behind a recomputed CRC can make it miss: open does
        // not check the order, fuzz/README.md, "Found").
        if let Ok(table) = IdTable::open(&crafted) {
            let ordered = table.check_lookup_order().is_ok();
            for (i, id) in table.iter().enumerate() {
                match table.find(id) {
                    Some(j) => assert_eq!(table.get(j), id, "{i}"),
                    None => assert!(!ordered, "{i}: id missed in a table whose order checked"),
                }
            }
        }
    });
}

#[test]
fn fuzz_postings() {
    check!().for_each(|bytes: &[u8]| {
        // A term entry (blocks u32, offset u64) then a postings payload behind a valid header
        // and chunk CRCs, so the block decoder itself meets the crafted bytes. The entry is
        // reduced to a few blocks inside the payload, where random inputs would rarely land;
        // the block count's high bits give the document count (none: all of u32).
        let Some((entry, payload)) = bytes.split_first_chunk::<12>() else {
            return;
        };
        let blocks = u32::from_le_bytes(entry[..4].try_into().unwrap());
        let offset = u64::from_le_bytes(entry[4..].try_into().unwrap());
        let entry = TermEntry {
            text_offset: 0,
            text_len: 0,
            doc_freq: 0,
            postings_offset: offset % (payload.len() as u64 + 1),
            blocks: blocks % 8,
        };
        let num_docs = match blocks >> 3 {
            0 => u32::MAX as usize,
            n => n as usize,
        };
        let (_dir, path) = file_with(
            "postings.bin",
            &checked_file(POSTINGS_KIND, BM25_TERM_FILES.version, payload),
        );
        let file = MappedFile::open(&path, POSTINGS_KIND, BM25_TERM_FILES.version, true).unwrap();
        if let Ok(postings) = entry.postings(&file, num_docs) {
            let mut cursor = Cursor::new(postings, FrequencyOnly);
            let doc_freq = cursor.doc_freq();
            let mut docs = Vec::new();
            cursor.drain(|doc, _| docs.push(doc));
            assert!(docs.len() <= doc_freq, "{} > {doc_freq}", docs.len());
            // Whatever the bytes, the walk stays in range and in order; where the blocks did
            // not decode as their metadata states, the file is reported corrupt.
            assert!(docs.iter().all(|&d| (d as usize) < num_docs), "{docs:?}");
            assert!(docs.windows(2).all(|w| w[0] < w[1]), "{docs:?}");
            let _ = postings_intact(&file);
        }
    });
}

#[test]
fn fuzz_manifest() {
    check!().for_each(|bytes: &[u8]| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("meta.json"), bytes).unwrap();
        let _ = manifest::read::<Bm25Manifest>(dir.path());
    });
}

#[test]
fn fuzz_permutation_answer() {
    check!()
        .with_type::<(u8, String)>()
        .for_each(|(n, answer)| {
            let n = *n as usize;
            if let Some((order, _)) = repair(&parse_permutation(answer), n) {
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>());
            }
        });
}

/// An index directory's files as (name, bytes), by name.
type IndexFiles = Vec<(String, Vec<u8>)>;

/// A small real index of each dense kind, built once and deterministically: exact flat (with
/// vectors), 4-bit fast-scan PQ under IVF (with vectors, for refine) and 8-bit PQ (without).
/// The seed corpus of `fuzz_dense_index` is cut from them (`dense_seeds_are_current`).
fn dense_indexes() -> &'static [IndexFiles] {
    static INDEXES: OnceLock<Vec<IndexFiles>> = OnceLock::new();
    INDEXES.get_or_init(|| {
        let mut rng = crate::rng::SplitMix64::new(16);
        let (n, dim) = (300, 8);
        let data: Vec<f32> = (0..n * dim).map(|_| rng.unit() as f32 - 0.5).collect();
        let ids: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
        let kinds = [
            (None, 4, None, true),
            (Some(2), 4, Some(4), true),
            (Some(2), 8, None, false),
        ];
        kinds
            .into_iter()
            .map(|(pq, nbits, ivf, keep_vectors)| {
                let opts = DenseBuildOptions {
                    pq,
                    nbits,
                    ivf,
                    keep_vectors,
                    threads: 1,
                    ..DenseBuildOptions::default()
                };
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("idx");
                DenseIndex::build(&data, dim, &ids, &opts)
                    .unwrap()
                    .save(&path)
                    .unwrap();
                let mut files: IndexFiles = std::fs::read_dir(&path)
                    .unwrap()
                    .map(|e| {
                        let e = e.unwrap();
                        let name = e.file_name().into_string().unwrap();
                        (name, std::fs::read(e.path()).unwrap())
                    })
                    .collect();
                files.sort();
                files
            })
            .collect()
    })
}

/// The manifest fields `fuzz_dense_index` may set (a dotted name is nested).
const DENSE_MANIFEST_FIELDS: [&str; 9] = [
    "dim",
    "ntotal",
    "metric",
    "vectors",
    "pq",
    "ivf",
    "pq.m",
    "pq.nbits",
    "ivf.nlist",
];

/// Set manifest field `DENSE_MANIFEST_FIELDS[bytes[0]]` from the rest of `bytes`.
fn edit_dense_manifest(meta: &mut serde_json::Value, bytes: &[u8]) {
    use serde_json::Value;
    let Some((&field, rest)) = bytes.split_first() else {
        return;
    };
    let number = rest
        .first_chunk::<8>()
        .map_or(0, |b| u64::from_le_bytes(*b));
    let field = DENSE_MANIFEST_FIELDS[field as usize % DENSE_MANIFEST_FIELDS.len()];
    let value = match field {
        "metric" => Value::String(String::from_utf8_lossy(rest).into_owned()),
        "vectors" => Value::Bool(number & 1 == 1),
        "pq" | "ivf" => Value::Null,
        _ => Value::from(number),
    };
    let mut target = meta;
    let mut names = field.split('.').peekable();
    while let Some(name) = names.next() {
        if names.peek().is_none() {
            if let Some(object) = target.as_object_mut() {
                object.insert(name.to_string(), value);
            }
            return;
        }
        match target.get_mut(name) {
            Some(inner) => target = inner,
            None => return,
        }
    }
}

#[test]
fn fuzz_dense_index() {
    let indexes = dense_indexes();
    check!().for_each(|bytes: &[u8]| {
        // Which index, which of its files (or, past the last, a manifest field), and whether
        // the rest replaces the whole file or only its payload (behind a valid header with
        // recomputed CRCs, so the decoders themselves meet the bytes); the manifest's digests
        // are recomputed either way, so the open-time digest check lets the file through.
        let Some((&[kind, target, whole], rest)) = bytes.split_first_chunk::<3>() else {
            return;
        };
        let files = &indexes[kind as usize % indexes.len()];
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let data_files: Vec<&(String, Vec<u8>)> = files
            .iter()
            .filter(|(name, _)| name != "meta.json")
            .collect();
        match data_files.get(target as usize % (data_files.len() + 1)) {
            Some((name, original)) if whole % 2 == 0 => {
                let header = Header::parse(original).unwrap();
                let crafted = checked_file(header.kind, header.version, rest);
                std::fs::write(dir.path().join(name), crafted).unwrap();
                manifest::reseal(dir.path(), |_| ()).unwrap();
            }
            Some((name, _)) => {
                std::fs::write(dir.path().join(name), rest).unwrap();
                manifest::reseal(dir.path(), |_| ()).unwrap();
            }
            None => manifest::reseal(dir.path(), |meta| edit_dense_manifest(meta, rest)).unwrap(),
        }
        let Ok(index) = DenseIndex::open(dir.path()) else {
            return;
        };
        let dim = index.dim();
        if dim > 4096 {
            return;
        }
        let queries: Vec<f32> = (0..3 * dim).map(|i| (i % 13) as f32 - 6.0).collect();
        let qids: Vec<String> = (0..3).map(|q| format!("q{q}")).collect();
        let refine = if index.has_vectors() { 20 } else { 0 };
        for (k, nprobe, refine) in [(5, 2, 0), (3, 64, refine)] {
            let opts = DenseSearch {
                k,
                nprobe,
                refine,
                threads: 1,
                ..Default::default()
            };
            if let Ok(hits) = index.search(&queries, dim, &opts) {
                for &(_, id) in hits.iter().flatten() {
                    assert!((id as usize) < index.ntotal(), "{id}");
                }
                let _ = index.to_run(hits, &qids);
            }
        }
        let _ = crate::index_kinds::verify(dir.path());
    });
}

/// The seed corpus of `fuzz_dense_index`: every file of every index in `dense_indexes` (its
/// payload, and whole), and each manifest field set to a few values.
fn dense_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (kind, files) in dense_indexes().iter().enumerate() {
        let data_files = files.iter().filter(|(name, _)| name != "meta.json");
        for (target, (_, bytes)) in data_files.enumerate() {
            let header = Header::parse(bytes).unwrap();
            let payload = &bytes[HEADER_LEN..HEADER_LEN + header.payload_len as usize];
            seeds.push([&[kind as u8, target as u8, 0][..], payload].concat());
        }
        let target = files.len() - 1;
        for field in 0..DENSE_MANIFEST_FIELDS.len() as u8 {
            for value in [0u64, 1, 4, 1 << 40] {
                let edit = [
                    &[kind as u8, target as u8, 1, field][..],
                    &value.to_le_bytes(),
                ]
                .concat();
                seeds.push(edit);
            }
        }
    }
    seeds
}

/// The committed seeds of `fuzz_dense_index` are those of today's dense format;
/// `CLIRKIT_WRITE_FUZZ_SEEDS=1` rewrites them (the `regression-*` inputs stay).
#[test]
fn dense_seeds_are_current() {
    let corpus =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/__fuzz__/fuzz__dense_index/corpus");
    let seeds = dense_seeds();
    if std::env::var_os("CLIRKIT_WRITE_FUZZ_SEEDS").is_some() {
        std::fs::create_dir_all(&corpus).unwrap();
        for entry in std::fs::read_dir(&corpus).unwrap() {
            let path = entry.unwrap().path();
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("seed-")
            {
                std::fs::remove_file(path).unwrap();
            }
        }
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(corpus.join(format!("seed-{i:03}")), seed).unwrap();
        }
    }
    for (i, seed) in seeds.iter().enumerate() {
        let path = corpus.join(format!("seed-{i:03}"));
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(
            committed == *seed,
            "{} is stale: rerun with CLIRKIT_WRITE_FUZZ_SEEDS=1",
            path.display()
        );
    }
}
