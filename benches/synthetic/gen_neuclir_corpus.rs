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
//! With `--split-langs` each language's documents go to their own `docs-zh.jsonl.zst`, `docs-fa.jsonl.zst`,
//! `docs-ru.jsonl.zst` (a NeuCLIR collection's layout; the same documents, in the same order within a
//! language), their ids to `docs-LANG.ids.txt`. `--sparse N` writes SPLADE-like vectors beside them
//! (`vectors-LANG.jsonl.zst`, or `vectors.jsonl.zst`): each document's own words, at most N, weighted
//! log(1 + tf) times a random factor, from a stream of their own (the documents do not change).
//! `--seed-every P` lists every P-th document in `seeds.tsv` (id, language, row in its language's
//! file, title) for the bench's synthetic topics and qrels.
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

    /// Documents `first..first + n` as JSON lines (see [`Chunk`]).
    fn chunk(&self, seed: u64, chunk: usize, first: usize, n: usize, args: &Args) -> Chunk {
        let width = (args.docs - 1).to_string().len();
        let mut rng = Rng::new(seed ^ (chunk as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
        // the vectors' own stream, so the documents never depend on whether vectors are written
        let mut weights = Rng::new(seed ^ (chunk as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
        let outs_n = if args.split { LANGS.len() } else { 1 };
        let mut c = Chunk {
            outs: (0..outs_n).map(|_| Vec::with_capacity(n * 3000)).collect(),
            vectors: vec![Vec::new(); if args.sparse > 0 { outs_n } else { 0 }],
            ids: vec![Vec::new(); if args.split { outs_n } else { 0 }],
            tokens: 0,
            counts: [0; 3],
            seeds: Vec::new(),
        };
        let mut tf: Vec<u32> = Vec::new();
        for id in first..first + n {
            let lang = self.langs.draw(&mut rng);
            let slot = if args.split { lang } else { 0 };
            let out = &mut c.outs[slot];
            let text_len = (self.doc_median.ln() + DOC_SIGMA * rng.normal())
                .exp()
                .round()
                .clamp(DOC_MIN, DOC_MAX) as usize;
            let title_len = 2 + rng.below(7);
            c.tokens += (text_len + title_len) as u64;
            write!(
                out,
                "{{\"_id\": \"d{id:0width$}\", \"lang\": \"{}\", \"title\": \"",
                LANGS[lang]
            )
            .unwrap();
            let title_at = out.len();
            self.push_tokens(&mut rng, lang, title_len, out);
            let title_end = out.len();
            out.extend_from_slice(b"\", \"text\": \"");
            let text_at = out.len();
            self.push_tokens(&mut rng, lang, text_len, out);
            let text_end = out.len();
            out.extend_from_slice(b"\"}\n");
            if args.seed_every > 0 && id % args.seed_every == 0 {
                let title = String::from_utf8(out[title_at..title_end].to_vec()).unwrap();
                c.seeds.push((id, lang, c.counts[lang], title));
            }
            c.counts[lang] += 1;
            if args.split {
                writeln!(c.ids[slot], "d{id:0width$}").unwrap();
            }
            if args.sparse > 0 {
                // SPLADE-like: the document's own words (title and text, first occurrences first, at
                // most `sparse` of them), each weighted log(1 + tf) times a random factor in [0.5, 2.5).
                tf.clear();
                let words = out[title_at..title_end]
                    .split(|&b| b == b' ')
                    .chain(out[text_at..text_end].split(|&b| b == b' '));
                let mut seen: std::collections::HashMap<&[u8], usize> = Default::default();
                for word in words {
                    let next = seen.len();
                    let at = *seen.entry(word).or_insert(next);
                    if at == tf.len() {
                        tf.push(0);
                    }
                    tf[at] += 1;
                }
                let mut order: Vec<(&[u8], usize)> = seen.into_iter().collect();
                order.sort_unstable_by_key(|&(_, at)| at);
                let v = &mut c.vectors[slot];
                write!(v, "{{\"id\": \"d{id:0width$}\", \"vector\": {{").unwrap();
                for (i, (word, at)) in order.iter().take(args.sparse).enumerate() {
                    let w = ((1.0 + tf[*at] as f64).ln() * (0.5 + 2.0 * weights.unit()) * 1000.0)
                        .round()
                        / 1000.0;
                    let sep = if i > 0 { ", " } else { "" };
                    write!(v, "{sep}\"{}\": {w}", std::str::from_utf8(word).unwrap()).unwrap();
                }
                v.extend_from_slice(b"}}\n");
            }
        }
        c
    }
}

/// What one chunk of documents produced: the JSON lines (one buffer, or with `--split-langs` one per
/// language in `LANGS` order; the same documents in the same order either way), their vectors' lines
/// laid out alike (with `--sparse`), the token count, each language's document count, and the seed
/// documents (`--seed-every`): (id, language, row in the chunk's part of its language, title).
struct Chunk {
    outs: Vec<Vec<u8>>,
    vectors: Vec<Vec<u8>>,
    /// With `--split-langs`, each language's document ids, one a line (`docs-LANG.ids.txt`).
    ids: Vec<Vec<u8>>,
    tokens: u64,
    counts: [usize; 3],
    seeds: Vec<(usize, usize, usize, String)>,
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
    /// Write `docs-zh.jsonl.zst`, `docs-fa.jsonl.zst`, `docs-ru.jsonl.zst` (a NeuCLIR collection's
    /// layout) instead of one `corpus.jsonl.zst`.
    split: bool,
    /// Terms per document of SPLADE-like vectors written beside the documents (0: none).
    sparse: usize,
    /// Every `seed_every`-th document is a seed (0: none), listed in `seeds.tsv`: the bench makes
    /// topics from seeds' titles and judges them relevant.
    seed_every: usize,
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
        split: false,
        sparse: 0,
        seed_every: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--split-langs" {
            args.split = true;
            continue;
        }
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
            "--sparse" => args.sparse = value.parse().map_err(|e| bad(&e))?,
            "--seed-every" => args.seed_every = value.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown flag {flag} (--out --docs --queries --seed --vocab --doc-median --threads --zstd-level --split-langs --sparse --seed-every)")),
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
    let parts: Vec<&str> = if args.split { LANGS.to_vec() } else { vec![""] };
    let mut names: Vec<String> = parts
        .iter()
        .map(|l| {
            if l.is_empty() {
                "corpus.jsonl.zst".into()
            } else {
                format!("docs-{l}.jsonl.zst")
            }
        })
        .collect();
    if args.sparse > 0 {
        names.extend(parts.iter().map(|l| {
            if l.is_empty() {
                "vectors.jsonl.zst".into()
            } else {
                format!("vectors-{l}.jsonl.zst")
            }
        }));
    }
    let mut files = Vec::new();
    for name in &names {
        files.push(BufWriter::new(File::create(
            args.out.join(format!("{name}.tmp")),
        )?));
    }
    let mut id_files = Vec::new();
    if args.split {
        for l in LANGS {
            id_files.push(BufWriter::new(File::create(
                args.out.join(format!("docs-{l}.ids.txt")),
            )?));
        }
    }
    let (mut raw_bytes, mut tokens) = (0u64, 0u64);
    let mut rows = [0usize; 3];
    let mut seeds = String::new();
    std::thread::scope(|scope| -> std::io::Result<()> {
        let (send, receive) = mpsc::sync_channel::<(usize, Chunk, Vec<Vec<u8>>)>(args.threads * 2);
        for _ in 0..args.threads {
            let (send, model, next_chunk, args) = (send.clone(), &model, &next_chunk, &args);
            scope.spawn(move || loop {
                let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
                if chunk >= n_chunks {
                    return;
                }
                let first = chunk * DOCS_PER_CHUNK;
                let n = DOCS_PER_CHUNK.min(args.docs - first);
                let mut c = model.chunk(args.seed, chunk, first, n, args);
                let frames = c
                    .outs
                    .iter()
                    .chain(&c.vectors)
                    .map(|lines| {
                        zstd::bulk::compress(lines, args.level)
                            .expect("zstd compression of a memory buffer")
                    })
                    .collect();
                c.vectors = Vec::new();
                if send.send((chunk, c, frames)).is_err() {
                    return;
                }
            });
        }
        drop(send);
        // Frames arrive out of order from the workers; a concatenation of zstd frames is one zstd stream.
        let mut pending = BTreeMap::new();
        let mut next_to_write = 0;
        for (chunk, c, frames) in receive {
            pending.insert(chunk, (c, frames));
            while let Some((c, frames)) = pending.remove(&next_to_write) {
                raw_bytes += c.outs.iter().map(|o| o.len() as u64).sum::<u64>();
                tokens += c.tokens;
                for (file, frame) in files.iter_mut().zip(frames) {
                    file.write_all(&frame)?;
                }
                for (file, ids) in id_files.iter_mut().zip(&c.ids) {
                    file.write_all(ids)?;
                }
                for (id, lang, row, title) in &c.seeds {
                    let row = if args.split { rows[*lang] + row } else { *id };
                    seeds.push_str(&format!(
                        "d{id:0width$}\t{}\t{row}\t{title}\n",
                        LANGS[*lang]
                    ));
                }
                for (total, n) in rows.iter_mut().zip(c.counts) {
                    *total += n;
                }
                next_to_write += 1;
            }
        }
        Ok(())
    })?;
    for file in id_files {
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    for (file, name) in files.into_iter().zip(&names) {
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(args.out.join(format!("{name}.tmp")), args.out.join(name))?;
    }
    if args.seed_every > 0 {
        std::fs::write(args.out.join("seeds.tsv"), &seeds)?;
    }

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
         \"doc_sigma\": {DOC_SIGMA},\n  \"tokens\": {tokens},\n  \"docs_per_language\": \"zh={} fa={} ru={}\",\n  \"uncompressed_bytes\": {raw_bytes},\n  \"seconds\": {:.1}\n}}\n",
        args.seed, args.docs, args.queries, args.vocab, args.doc_median, rows[0], rows[1], rows[2],
        started.elapsed().as_secs_f64()
    );
    std::fs::write(args.out.join("meta.json"), &meta)?;
    print!("{meta}");
    Ok(())
}
