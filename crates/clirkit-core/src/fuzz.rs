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
use crate::bm25::format::{TermEntry, BM25_TERM_FILES, POSTINGS_KIND};
use crate::eval::run_file::RunFile;
use crate::fusion::run_file::parse_run_bytes;
use crate::ids::IdTable;
use crate::io::format::{chunk_crcs, Kind, MappedFile, CHUNK_LEN, HEADER_LEN, MAGIC};
use crate::io::id_text::id_problem;
use crate::io::input::{read_input, without_bom, Compression};
use crate::io::jsonl::{parse_record, FieldSpec};
use crate::io::manifest::{self, Bm25Manifest};
use crate::io::trec::{read_qrels, read_run, write_run_to};
use crate::postings::{postings_intact, Cursor};
use crate::rerank::permutation::{parse_permutation, repair};
use std::io::Write;
use std::path::Path;

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
        if let Ok(table) = IdTable::open(&crafted) {
            for (i, id) in table.iter().enumerate() {
                assert!(table.find(id).is_some_and(|j| table.get(j) == id), "{i}");
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
