//! Position bias (PosIR-style): how a system's effectiveness depends on where in the relevant
//! document the answer sits.
//!
//! # Position-aware qrels format
//! A tab-separated file whose first line is a header naming the columns (any order):
//! - `query-id`, `corpus-id`: the query and its relevant document (one row per query);
//! - `span_start`, `span_end`: the answer's character span in the document (end exclusive;
//!   characters = Unicode code points, as Python's `len`);
//! - `doc_chars`: the document's length in characters;
//! - optional `doc_tokens`: its length in tokens (from an analyzer or an encoder's tokenizer);
//! - optional `relevance` (or `score`): the graded label, default 1.
//!
//! `../shared/data/xquad-pos/qrels/positions.tsv` is such a file (without the optional columns).
//!
//! # Definitions
//! - relative position = span midpoint / doc length = `(span_start + span_end) / 2 / doc_chars`,
//!   in [0, 1]; the midpoint is used so a long answer counts where its centre is;
//! - 20 equal-width bins over [0, 1] (a position of exactly 1 falls in the last bin);
//! - length buckets by `doc_tokens` when the file has it (unit "tokens"), else by `doc_chars`
//!   (unit "chars"); as in PosIR, a bucket is closed at its upper edge and the last bucket also
//!   takes the documents beyond the last edge: the default edges 0-512-1024-1536-2048 give Q1 =
//!   length <= 512, Q2 = 513..=1024, Q3 = 1025..=1536 and Q4 = everything longer than 1536
//!   (labels `0-512`, `512-1024`, `1024-1536`, `1536-2048`; one edge alone gives one bucket `0+`);
//! - per bin, the mean of a per-query measure (nDCG@10 by default) over the bin's queries;
//! - PSI = 1 - min/max over the bins of a bucket, bins without queries excluded (and, optionally,
//!   bins with fewer than `min_queries` queries: a bin of one or two queries swings PSI alone).
//!   PSI is 0 when all bins score alike and approaches 1 when some position is (almost) never
//!   found. Undefined (`None`) when no bin qualifies or every qualifying bin's mean is 0.

use crate::error::{Error, Result};
use rustc_hash::FxHashMap;
use std::path::Path;

/// Number of relative-position bins.
pub const DEFAULT_BINS: usize = 20;
/// Default length bucket edges.
pub const DEFAULT_EDGES: [usize; 5] = [0, 512, 1024, 1536, 2048];

/// How queries are binned: position bins, length bucket edges (ascending, from 0; bucket i holds
/// lengths in `(edges[i], edges[i + 1]]`, the first also 0, the last everything longer) and the
/// fewest queries a bin needs to count in PSI.
#[derive(Debug, Clone, PartialEq)]
pub struct Binning {
    pub bins: usize,
    pub edges: Vec<usize>,
    pub min_queries: usize,
}

impl Default for Binning {
    fn default() -> Self {
        Binning {
            bins: DEFAULT_BINS,
            edges: DEFAULT_EDGES.to_vec(),
            min_queries: 1,
        }
    }
}

/// One row of a position-aware qrels file.
#[derive(Debug, Clone, PartialEq)]
pub struct PositionJudgement {
    pub qid: String,
    pub doc_id: String,
    pub span_start: usize,
    pub span_end: usize,
    pub doc_chars: usize,
    pub doc_tokens: Option<usize>,
    pub relevance: i32,
}

impl PositionJudgement {
    /// Span midpoint over document length, in [0, 1].
    pub fn relative_position(&self) -> f64 {
        ((self.span_start + self.span_end) as f64 / 2.0 / self.doc_chars as f64).clamp(0.0, 1.0)
    }
}

/// Read a position-aware qrels file (see the module docs for the format).
pub fn read_positions(path: impl AsRef<Path>) -> Result<Vec<PositionJudgement>> {
    let path = path.as_ref();
    let text = crate::io::trec_lines::read_text(path)?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    let names: Vec<&str> = header.split('\t').map(str::trim).collect();
    let col = |wanted: &[&str]| names.iter().position(|n| wanted.contains(n));
    let required = |wanted: &[&str]| {
        col(wanted).ok_or_else(|| {
            Error::parse(
                path,
                1,
                format!(
                    "header lacks column '{}' (expected query-id, corpus-id, span_start, span_end, doc_chars \
                     [, doc_tokens, relevance]; found: {})",
                    wanted[0],
                    names.join(", ")
                ),
            )
        })
    };
    let (q_col, d_col) = (
        required(&["query-id", "qid"])?,
        required(&["corpus-id", "docid", "doc-id"])?,
    );
    let (s_col, e_col, c_col) = (
        required(&["span_start"])?,
        required(&["span_end"])?,
        required(&["doc_chars"])?,
    );
    let (t_col, r_col) = (col(&["doc_tokens"]), col(&["relevance", "score"]));
    let mut out = Vec::new();
    let mut first_line: FxHashMap<String, u64> = FxHashMap::default();
    for (i, line) in lines {
        let line_no = i as u64 + 1;
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        if fields.len() != names.len() {
            return Err(Error::parse(
                path,
                line_no,
                format!(
                    "expected {} tab-separated columns, found {}",
                    names.len(),
                    fields.len()
                ),
            ));
        }
        let number = |c: usize| -> Result<usize> {
            fields[c].parse::<usize>().map_err(|_| {
                Error::parse(
                    path,
                    line_no,
                    format!("{} '{}' is not a non-negative integer", names[c], fields[c]),
                )
            })
        };
        let (start, end, chars) = (number(s_col)?, number(e_col)?, number(c_col)?);
        if start > end || end > chars || chars == 0 {
            return Err(Error::parse(
                path,
                line_no,
                format!("span {start}..{end} does not fit a document of {chars} characters"),
            ));
        }
        let doc_tokens = t_col.map(number).transpose()?;
        let relevance = match r_col {
            Some(c) => fields[c].parse::<i32>().map_err(|_| {
                Error::parse(
                    path,
                    line_no,
                    format!("relevance '{}' is not an integer", fields[c]),
                )
            })?,
            None => 1,
        };
        let qid = fields[q_col].to_string();
        if let Some(first) = first_line.insert(qid.clone(), line_no) {
            return Err(Error::parse(
                path,
                line_no,
                format!("query '{qid}' appears twice (first at line {first}); one relevant span per query"),
            ));
        }
        out.push(PositionJudgement {
            qid,
            doc_id: fields[d_col].to_string(),
            span_start: start,
            span_end: end,
            doc_chars: chars,
            doc_tokens,
            relevance,
        });
    }
    Ok(out)
}

/// Per-bin means of one bucket of document lengths.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketTable {
    /// e.g. "0-512" or "2048+" ("all" for the whole collection).
    pub label: String,
    /// Queries per bin.
    pub counts: Vec<usize>,
    /// Mean measure per bin; `None` for bins without queries.
    pub means: Vec<Option<f64>>,
    /// 1 - min/max over non-empty bins.
    pub psi: Option<f64>,
    /// Mean over the bucket's queries.
    pub mean: Option<f64>,
}

impl BucketTable {
    fn new(label: String, bins: usize, min_queries: usize, values: &[(usize, f64)]) -> Self {
        let mut sums = vec![0.0; bins];
        let mut counts = vec![0usize; bins];
        for &(b, v) in values {
            sums[b] += v;
            counts[b] += 1;
        }
        let means: Vec<Option<f64>> = sums
            .iter()
            .zip(&counts)
            .map(|(s, &n)| (n > 0).then(|| s / n as f64))
            .collect();
        let present: Vec<f64> = means
            .iter()
            .zip(&counts)
            .filter(|(_, &n)| n >= min_queries.max(1))
            .filter_map(|(m, _)| *m)
            .collect();
        let max = present.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = present.iter().copied().fold(f64::INFINITY, f64::min);
        let psi = (!present.is_empty() && max > 0.0).then(|| 1.0 - min / max);
        let mean = (!values.is_empty())
            .then(|| values.iter().map(|(_, v)| v).sum::<f64>() / values.len() as f64);
        BucketTable {
            label,
            counts,
            means,
            psi,
            mean,
        }
    }
}

/// The position-bias table of one system.
#[derive(Debug, Clone, PartialEq)]
pub struct PositionTable {
    pub bins: usize,
    /// "tokens" or "chars".
    pub length_unit: &'static str,
    /// All evaluated queries together.
    pub overall: BucketTable,
    /// One table per non-empty length bucket, shortest first.
    pub buckets: Vec<BucketTable>,
}

/// Bin index of a relative position.
pub fn bin_of(relative: f64, bins: usize) -> usize {
    ((relative * bins as f64).floor() as usize).min(bins - 1)
}

/// Length bucket of a document: the first bucket whose upper edge it does not exceed (buckets
/// are closed at their upper edge, so a length of exactly 512 is in `0-512`), the last bucket
/// for lengths beyond the last edge, bucket 0 when there is a single edge.
pub fn bucket_of(length: usize, edges: &[usize]) -> usize {
    let last = edges.len().saturating_sub(2);
    edges
        .iter()
        .skip(1)
        .position(|&hi| length <= hi)
        .unwrap_or(last)
        .min(last)
}

/// Build the table from per-query values (queries without a value are not evaluated and left
/// out).
pub fn position_table(
    judgements: &[PositionJudgement],
    values: &FxHashMap<&str, f64>,
    binning: &Binning,
) -> Result<PositionTable> {
    let (bins, edges, min_queries) = (binning.bins, &binning.edges[..], binning.min_queries);
    if bins == 0 {
        return Err(Error::invalid("position bins must be at least 1"));
    }
    if edges.is_empty() || edges[0] != 0 || edges.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::invalid(format!(
            "length bucket edges must be ascending and start at 0, got {edges:?}"
        )));
    }
    let use_tokens = !judgements.is_empty() && judgements.iter().all(|j| j.doc_tokens.is_some());
    let mut all = Vec::new();
    let mut per_bucket: Vec<Vec<(usize, f64)>> =
        vec![Vec::new(); edges.len().saturating_sub(1).max(1)];
    for j in judgements {
        let Some(&v) = values.get(j.qid.as_str()) else {
            continue;
        };
        let b = bin_of(j.relative_position(), bins);
        let length = if use_tokens {
            j.doc_tokens.unwrap_or(0)
        } else {
            j.doc_chars
        };
        let bucket = bucket_of(length, edges);
        all.push((b, v));
        per_bucket[bucket].push((b, v));
    }
    let buckets = per_bucket
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(i, v)| {
            let label = match edges.get(i + 1) {
                Some(hi) => format!("{}-{}", edges[i], hi),
                None => format!("{}+", edges[i]),
            };
            BucketTable::new(label, bins, min_queries, v)
        })
        .collect();
    Ok(PositionTable {
        bins,
        length_unit: if use_tokens { "tokens" } else { "chars" },
        overall: BucketTable::new("all".to_string(), bins, min_queries, &all),
        buckets,
    })
}

/// Evaluate a run on position-aware qrels and build its table. `measure` must name exactly one
/// measure (default in the CLI: `ndcg_cut.10`). `doc_tokens` (doc id -> token count) overrides
/// the file's token lengths, e.g. with counts from an encoder's tokenizer.
pub fn position_bias(
    judgements: &mut [PositionJudgement],
    run: Vec<crate::eval::RunQuery>,
    measure: &str,
    options: crate::eval::EvalOptions,
    binning: &Binning,
    doc_tokens: Option<&std::collections::HashMap<String, usize>>,
) -> Result<(PositionTable, crate::eval::Evaluation)> {
    use crate::eval::{parse_measures, Evaluator, QrelsIndex};
    let measures = parse_measures(&[measure])?;
    if measures.len() != 1 {
        return Err(Error::invalid(format!(
            "position bias needs exactly one measure, '{measure}' names {}",
            measures.len()
        )));
    }
    if let Some(tokens) = doc_tokens {
        for j in judgements.iter_mut() {
            j.doc_tokens = Some(*tokens.get(&j.doc_id).ok_or_else(|| {
                Error::invalid(format!(
                    "no token length for document '{}' (query '{}')",
                    j.doc_id, j.qid
                ))
            })?);
        }
    }
    let qrels = QrelsIndex::from_pairs(
        judgements
            .iter()
            .map(|j| (j.qid.clone(), vec![(j.doc_id.as_bytes(), j.relevance)])),
    );
    let evaluation = Evaluator::new(qrels, measures, options).evaluate(run);
    let values: FxHashMap<&str, f64> = evaluation
        .per_query
        .iter()
        .map(|(q, v)| (q.as_str(), v[0]))
        .collect();
    let table = position_table(judgements, &values, binning)?;
    Ok((table, evaluation))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judgement(qid: &str, start: usize, end: usize, chars: usize) -> PositionJudgement {
        PositionJudgement {
            qid: qid.into(),
            doc_id: "d".into(),
            span_start: start,
            span_end: end,
            doc_chars: chars,
            doc_tokens: None,
            relevance: 1,
        }
    }

    #[test]
    fn hand_computed_bins_and_psi() {
        // 4 bins. q1 midpoint 10/100 = 0.10 -> bin 0; q2 0.20 -> bin 0; q3 0.60 -> bin 2;
        // q4 1.0 -> bin 3; q5 (length 600, second bucket) 0.5 -> bin 2; q6 has no value.
        let js = vec![
            judgement("q1", 5, 15, 100),
            judgement("q2", 18, 22, 100),
            judgement("q3", 50, 70, 100),
            judgement("q4", 100, 100, 100),
            judgement("q5", 250, 350, 600),
            judgement("q6", 0, 1, 100),
        ];
        let values: FxHashMap<&str, f64> = [
            ("q1", 1.0),
            ("q2", 0.5),
            ("q3", 0.25),
            ("q4", 0.0),
            ("q5", 0.75),
        ]
        .into_iter()
        .collect();
        let binning = |edges: &[usize], min_queries| Binning {
            bins: 4,
            edges: edges.to_vec(),
            min_queries,
        };
        let t = position_table(&js, &values, &binning(&[0, 512, 1024], 1)).unwrap();
        assert_eq!(t.length_unit, "chars");
        assert_eq!(t.overall.counts, [2, 0, 2, 1]);
        assert_eq!(t.overall.means, [Some(0.75), None, Some(0.5), Some(0.0)]);
        assert_eq!(t.overall.psi, Some(1.0));
        assert_eq!(t.buckets.len(), 2);
        assert_eq!(t.buckets[0].label, "0-512");
        assert_eq!(
            t.buckets[0].means,
            [Some(0.75), None, Some(0.25), Some(0.0)]
        );
        assert_eq!(t.buckets[1].label, "512-1024");
        assert_eq!(t.buckets[1].means, [None, None, Some(0.75), None]);
        assert_eq!(t.buckets[1].psi, Some(0.0));
        let all_values = values;
        let values: FxHashMap<&str, f64> = [("q1", 0.8), ("q3", 0.2)].into_iter().collect();
        let t = position_table(&js, &values, &binning(&[0], 1)).unwrap();
        assert!((t.overall.psi.unwrap() - 0.75).abs() < 1e-12);
        assert_eq!(t.overall.mean, Some(0.5));
        // bins 0 (q1, q2) and 2 (q3, q5) have 2 queries; bin 3 (q4, value 0) is too small to count
        let t = position_table(&js, &all_values, &binning(&[0], 2)).unwrap();
        assert!((t.overall.psi.unwrap() - (1.0 - 0.5 / 0.75)).abs() < 1e-12);
    }

    #[test]
    fn buckets_are_closed_at_their_upper_edge_and_the_last_takes_longer_documents() {
        let edges = [0, 512, 1024, 1536, 2048];
        let got: Vec<usize> = [0, 1, 512, 513, 1024, 1025, 1536, 1537, 2048, 2049, 100_000]
            .iter()
            .map(|&n| bucket_of(n, &edges))
            .collect();
        assert_eq!(got, [0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 3]);
        assert_eq!(bucket_of(7, &[0]), 0);
        assert_eq!(bucket_of(700, &[0, 512]), 0);
        // a 512-character document is in 0-512; the long one joins the last bucket, no fifth opens
        let js = vec![
            judgement("a", 0, 10, 512),
            judgement("b", 0, 10, 513),
            judgement("c", 0, 10, 9000),
        ];
        let values: FxHashMap<&str, f64> =
            [("a", 1.0), ("b", 0.5), ("c", 0.25)].into_iter().collect();
        let binning = Binning {
            bins: 2,
            edges: vec![0, 512, 1024],
            min_queries: 1,
        };
        let t = position_table(&js, &values, &binning).unwrap();
        let labels: Vec<&str> = t.buckets.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(labels, ["0-512", "512-1024"]);
        assert_eq!(t.buckets[0].counts, [1, 0]);
        assert_eq!(t.buckets[1].counts, [2, 0]);
        assert_eq!(t.buckets[1].mean, Some(0.375));
        let one = Binning {
            edges: vec![0],
            ..binning
        };
        let t = position_table(&js, &values, &one).unwrap();
        assert_eq!(t.buckets.len(), 1);
        assert_eq!(t.buckets[0].label, "0+");
    }

    #[test]
    fn reads_the_format_and_rejects_bad_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("positions.tsv");
        std::fs::write(
            &p,
            "query-id\tcorpus-id\tspan_start\tspan_end\tdoc_chars\nq1\td1\t29\t32\t1214\n",
        )
        .unwrap();
        let js = read_positions(&p).unwrap();
        assert_eq!(js[0].span_end, 32);
        assert!((js[0].relative_position() - 30.5 / 1214.0).abs() < 1e-15);
        std::fs::write(
            &p,
            "query-id\tcorpus-id\tspan_start\tspan_end\tdoc_chars\nq1\td1\t29\t3200\t1214\n",
        )
        .unwrap();
        assert!(read_positions(&p)
            .unwrap_err()
            .to_string()
            .contains("positions.tsv:2: span 29..3200"));
        std::fs::write(&p, "query-id\tcorpus-id\tspan_start\tspan_end\tdoc_chars\nq1\td1\t1\t2\t9\nq1\td2\t1\t2\t9\n")
            .unwrap();
        assert!(read_positions(&p)
            .unwrap_err()
            .to_string()
            .contains(":3: query 'q1' appears twice"));
        std::fs::write(&p, "query-id\tcorpus-id\tspan_start\n").unwrap();
        assert!(read_positions(&p)
            .unwrap_err()
            .to_string()
            .contains("lacks column 'span_end'"));
    }
}
