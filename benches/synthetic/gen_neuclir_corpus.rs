//! Seeded NeuCLIR-shaped synthetic corpus written straight to `corpus.jsonl.zst` (issue 17's 10M benchmark).
//!
//! The same model as `benches/synthetic/gen_zipf_corpus.py --langs zh,fa,ru` (whose Python loop took 13 min per
//! million documents here): each document draws a language by NeuCLIR-1's shares (3.18M / 2.23M / 4.63M),
//! a log-normal text length (median `--doc-median` tokens, shape 0.55, clipped to [5, 1000]) and a 2-8
//! token title, and takes its tokens from its language's own Zipf-Mandelbrot vocabulary (exponent 1.0,
//! offset 2.7, `--vocab` pseudo-words, one prefix letter per language). Queries draw a language and
//! max(2, 1 + Poisson(3)) tokens. The random streams differ from the Python generator's (xoshiro256++ per
//! chunk, alias-table sampling), so the bytes differ; the distributions are the same.
//!
//! Chunks of documents are generated and compressed as independent zstd frames on `--threads` workers and
//! written in order, so the file is identical at any thread count.
//!
//! `cargo run --release -p clirkit-benches --bin gen_neuclir_corpus -- --out DIR --docs 10000000`

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

const LANGS: [&str; 3] = ["zh", "fa", "ru"];
const LANG_SHARES: [f64; 3] = [3.18, 2.23, 4.63];
/// One prefix letter per language, outside the pseudo-words' alphabet (as in `gen_zipf_corpus.py`).
const LANG_PREFIXES: [u8; 3] = [b'x', b'h', b'j'];
const CONSONANTS: &[u8] = b"bdfgkmptvz";
const VOWELS: &[u8] = b"aou";
const ZIPF_EXPONENT: f64 = 1.0;
const ZIPF_OFFSET: f64 = 2.7;
const DOC_SIGMA: f64 = 0.55;
const DOC_MIN: f64 = 5.0;
const DOC_MAX: f64 = 1000.0;
const DOCS_PER_CHUNK: usize = 20_000;

/// xoshiro256++ seeded through SplitMix64: small, fast, and fixed here so the files never depend on a crate.
struct Rng([u64; 4]);

impl Rng {
    fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }

    fn poisson(&mut self, mean: f64) -> usize {
        let limit = (-mean).exp();
        let (mut k, mut p) = (0, self.unit());
        while p > limit {
            k += 1;
            p *= self.unit();
        }
        k
    }
}

/// Vose's alias table: O(1) draws from a fixed discrete distribution (the Zipf ranks).
struct Alias {
    keep: Vec<f64>,
    other: Vec<u32>,
}

impl Alias {
    fn new(weights: &[f64]) -> Self {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        let mut keep: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut other = vec![0u32; n];
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| keep[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            other[s] = l as u32;
            keep[l] -= 1.0 - keep[s];
            if keep[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        for i in small.into_iter().chain(large) {
            keep[i] = 1.0;
        }
        Alias { keep, other }
    }

    fn draw(&self, rng: &mut Rng) -> usize {
        let column = rng.below(self.keep.len());
        if rng.unit() < self.keep[column] {
            column
        } else {
            self.other[column] as usize
        }
    }
}

/// The `index`-th pseudo-word (0-based), shortest first: `content_word` of `gen_zipf_corpus.py`.
fn content_word(mut index: usize) -> Vec<u8> {
    let n_syllables = CONSONANTS.len() * VOWELS.len();
    let mut syllables = 2u32;
    let mut block = n_syllables.pow(syllables) * CONSONANTS.len();
    while index >= block {
        index -= block;
        syllables += 1;
        block = n_syllables.pow(syllables) * CONSONANTS.len();
    }
    let final_consonant = CONSONANTS[index % CONSONANTS.len()];
    index /= CONSONANTS.len();
    let mut parts = Vec::new();
    for _ in 0..syllables {
        let s = index % n_syllables;
        index /= n_syllables;
        parts.push([CONSONANTS[s / VOWELS.len()], VOWELS[s % VOWELS.len()]]);
    }
    let mut word: Vec<u8> = parts.iter().rev().flatten().copied().collect();
    word.push(final_consonant);
    word
}

struct Model {
    /// Per language, its words by rank.
    words: Vec<Vec<Vec<u8>>>,
    ranks: Alias,
    langs: Alias,
    doc_median: f64,
}

impl Model {
    fn push_tokens(&self, rng: &mut Rng, lang: usize, count: usize, out: &mut Vec<u8>) {
        for i in 0..count {
            if i > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(&self.words[lang][self.ranks.draw(rng)]);
        }
    }

    /// Documents `first..first + n` as JSON lines, and their token count.
    fn chunk(
        &self,
        seed: u64,
        chunk: usize,
        first: usize,
        n: usize,
        width: usize,
    ) -> (Vec<u8>, u64) {
        let mut rng = Rng::new(seed ^ (chunk as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
        let mut out = Vec::with_capacity(n * 3000);
        let mut tokens = 0u64;
        for id in first..first + n {
            let lang = self.langs.draw(&mut rng);
            let text_len = (self.doc_median.ln() + DOC_SIGMA * rng.normal())
                .exp()
                .round()
                .clamp(DOC_MIN, DOC_MAX) as usize;
            let title_len = 2 + rng.below(7);
            tokens += (text_len + title_len) as u64;
            write!(
                out,
                "{{\"_id\": \"d{id:0width$}\", \"lang\": \"{}\", \"title\": \"",
                LANGS[lang]
            )
            .unwrap();
            self.push_tokens(&mut rng, lang, title_len, &mut out);
            out.extend_from_slice(b"\", \"text\": \"");
            self.push_tokens(&mut rng, lang, text_len, &mut out);
            out.extend_from_slice(b"\"}\n");
        }
        (out, tokens)
    }
}

struct Args {
    out: PathBuf,
    docs: usize,
    queries: usize,
    seed: u64,
    vocab: usize,
    doc_median: f64,
    threads: usize,
    level: i32,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        out: PathBuf::new(),
        docs: 1_000_000,
        queries: 5_000,
        seed: 42,
        vocab: 300_000,
        doc_median: 300.0,
        threads: 2,
        level: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--out" => args.out = PathBuf::from(&value),
            "--docs" => args.docs = value.parse().map_err(|e| bad(&e))?,
            "--queries" => args.queries = value.parse().map_err(|e| bad(&e))?,
            "--seed" => args.seed = value.parse().map_err(|e| bad(&e))?,
            "--vocab" => args.vocab = value.parse().map_err(|e| bad(&e))?,
            "--doc-median" => args.doc_median = value.parse().map_err(|e| bad(&e))?,
            "--threads" => args.threads = value.parse().map_err(|e| bad(&e))?,
            "--zstd-level" => args.level = value.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown flag {flag} (--out --docs --queries --seed --vocab --doc-median --threads --zstd-level)")),
        }
    }
    if args.out.as_os_str().is_empty()
        || args.docs == 0
        || args.queries == 0
        || args.vocab == 0
        || args.threads == 0
    {
        return Err(
            "--out is required; --docs, --queries, --vocab and --threads must be positive".into(),
        );
    }
    Ok(args)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let started = Instant::now();
    std::fs::create_dir_all(&args.out)?;
    let zipf: Vec<f64> = (1..=args.vocab)
        .map(|r| 1.0 / (r as f64 + ZIPF_OFFSET).powf(ZIPF_EXPONENT))
        .collect();
    let base: Vec<Vec<u8>> = (0..args.vocab).map(content_word).collect();
    let model = Model {
        words: LANG_PREFIXES
            .iter()
            .map(|&p| base.iter().map(|w| [&[p][..], w].concat()).collect())
            .collect(),
        ranks: Alias::new(&zipf),
        langs: Alias::new(&LANG_SHARES),
        doc_median: args.doc_median,
    };
    let width = (args.docs - 1).to_string().len();
    let n_chunks = args.docs.div_ceil(DOCS_PER_CHUNK);
    let next_chunk = AtomicUsize::new(0);
    let corpus_tmp = args.out.join("corpus.jsonl.zst.tmp");
    let mut corpus = BufWriter::new(File::create(&corpus_tmp)?);
    let (mut raw_bytes, mut tokens) = (0u64, 0u64);
    std::thread::scope(|scope| -> std::io::Result<()> {
        let (send, receive) = mpsc::sync_channel::<(usize, Vec<u8>, u64, u64)>(args.threads * 2);
        for _ in 0..args.threads {
            let (send, model, next_chunk, args) = (send.clone(), &model, &next_chunk, &args);
            scope.spawn(move || loop {
                let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
                if chunk >= n_chunks {
                    return;
                }
                let first = chunk * DOCS_PER_CHUNK;
                let n = DOCS_PER_CHUNK.min(args.docs - first);
                let (lines, chunk_tokens) = model.chunk(args.seed, chunk, first, n, width);
                let frame = zstd::bulk::compress(&lines, args.level)
                    .expect("zstd compression of a memory buffer");
                if send
                    .send((chunk, frame, lines.len() as u64, chunk_tokens))
                    .is_err()
                {
                    return;
                }
            });
        }
        drop(send);
        // Frames arrive out of order from the workers; a concatenation of zstd frames is one zstd stream.
        let mut pending = BTreeMap::new();
        let mut next_to_write = 0;
        for (chunk, frame, raw, chunk_tokens) in receive {
            pending.insert(chunk, frame);
            raw_bytes += raw;
            tokens += chunk_tokens;
            while let Some(frame) = pending.remove(&next_to_write) {
                corpus.write_all(&frame)?;
                next_to_write += 1;
            }
        }
        Ok(())
    })?;
    corpus
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;
    std::fs::rename(&corpus_tmp, args.out.join("corpus.jsonl.zst"))?;

    let mut rng = Rng::new(args.seed ^ 0x5155_4552_5953); // the queries' own stream
    let qwidth = (args.queries - 1).to_string().len();
    let mut queries = Vec::new();
    for q in 0..args.queries {
        let lang = model.langs.draw(&mut rng);
        let len = (1 + rng.poisson(3.0)).max(2);
        write!(
            queries,
            "{{\"_id\": \"q{q:0qwidth$}\", \"lang\": \"{}\", \"text\": \"",
            LANGS[lang]
        )?;
        model.push_tokens(&mut rng, lang, len, &mut queries);
        queries.extend_from_slice(b"\"}\n");
    }
    std::fs::write(args.out.join("queries.jsonl"), queries)?;
    let meta = format!(
        "{{\n  \"generator\": \"benches/synthetic/gen_neuclir_corpus.rs\",\n  \"seed\": {},\n  \"docs\": {},\n  \"queries\": {},\n  \
         \"languages\": \"zh,fa,ru (shares 3.18/2.23/4.63)\",\n  \"vocab_content_words_per_language\": {},\n  \
         \"zipf_exponent\": {ZIPF_EXPONENT},\n  \"zipf_offset\": {ZIPF_OFFSET},\n  \"doc_median_tokens\": {},\n  \
         \"doc_sigma\": {DOC_SIGMA},\n  \"tokens\": {tokens},\n  \"uncompressed_bytes\": {raw_bytes},\n  \"seconds\": {:.1}\n}}\n",
        args.seed, args.docs, args.queries, args.vocab, args.doc_median, started.elapsed().as_secs_f64()
    );
    std::fs::write(args.out.join("meta.json"), &meta)?;
    print!("{meta}");
    Ok(())
}
