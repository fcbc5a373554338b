//! Measure names: trec_eval's (`ndcg_cut.10`, `P.5`, `map`), pytrec_eval's output keys
//! (`ndcg_cut_10`, `P_5`), family names with trec_eval's default cutoffs (`ndcg_cut`, `P`),
//! friendly aliases (`nDCG@10`, `R@100`, `P@5`, `MAP`, `MRR`, `Judged@20`), ir_measures' names
//! for the measures trec_eval lacks (`RBP(rel=1)`, `RBP(rel=1,p=0.9)`, `alpha_nDCG@20`,
//! `alpha_nDCG(alpha=0.7)@20`), and the `neuclir` preset (NeuCLIR's official measures).

use crate::error::{Error, Result};

/// trec_eval's default cutoffs for `P`, `recall`, `map_cut`, `ndcg_cut` (and clirkit's `judged`).
pub const DEFAULT_CUTOFFS: [usize; 9] = [5, 10, 15, 20, 30, 100, 200, 500, 1000];
/// trec_eval's default cutoffs for `success`.
pub const SUCCESS_CUTOFFS: [usize; 3] = [1, 5, 10];

/// A measure family. Families marked "at k" need a cutoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Mean average precision (`map`).
    Map,
    /// Average precision over the top k (`map_cut.k`).
    MapCut,
    /// Precision at k (`P.k`).
    Precision,
    /// Recall at k (`recall.k`).
    Recall,
    /// nDCG over the whole ranking, gains = graded labels (`ndcg`).
    Ndcg,
    /// nDCG at k (`ndcg_cut.k`).
    NdcgCut,
    /// Reciprocal rank of the first relevant document (`recip_rank`).
    RecipRank,
    /// Precision at R, R = number of relevant documents (`Rprec`).
    Rprec,
    /// Binary preference (`bpref`).
    Bpref,
    /// 1 if a relevant document is in the top k (`success.k`).
    Success,
    /// Documents retrieved (`num_ret`; summed, not averaged, over queries).
    NumRet,
    /// Relevant documents in the qrels (`num_rel`; summed).
    NumRel,
    /// Relevant documents retrieved (`num_rel_ret`; summed).
    NumRelRet,
    /// Fraction of the top min(k, retrieved) that carry any label in the qrels (`judged.k`,
    /// ir_measures' Judged@k).
    Judged,
    /// Rank-biased precision with binary gain (ir_measures' `RBP(rel=r,p=x)`).
    Rbp,
    /// α-nDCG at k over the query's aspects (ndeval's alpha-nDCG@k, ir_measures' `alpha_nDCG@k`).
    AlphaNdcg,
}

impl Family {
    /// The trec_eval name.
    pub fn name(self) -> &'static str {
        match self {
            Family::Map => "map",
            Family::MapCut => "map_cut",
            Family::Precision => "P",
            Family::Recall => "recall",
            Family::Ndcg => "ndcg",
            Family::NdcgCut => "ndcg_cut",
            Family::RecipRank => "recip_rank",
            Family::Rprec => "Rprec",
            Family::Bpref => "bpref",
            Family::Success => "success",
            Family::NumRet => "num_ret",
            Family::NumRel => "num_rel",
            Family::NumRelRet => "num_rel_ret",
            Family::Judged => "judged",
            Family::Rbp => "RBP",
            Family::AlphaNdcg => "alpha_nDCG",
        }
    }

    pub fn has_cutoff(self) -> bool {
        matches!(
            self,
            Family::MapCut
                | Family::Precision
                | Family::Recall
                | Family::NdcgCut
                | Family::Success
                | Family::Judged
                | Family::AlphaNdcg
        )
    }

    /// The cutoffs a bare family name expands to (trec_eval's defaults).
    pub fn default_cutoffs(self) -> &'static [usize] {
        match self {
            Family::Success => &SUCCESS_CUTOFFS,
            f if f.has_cutoff() => &DEFAULT_CUTOFFS,
            _ => &[],
        }
    }

    /// Counts are summed over queries in the `all` row (as trec_eval does); the rest are means.
    pub fn is_count(self) -> bool {
        matches!(self, Family::NumRet | Family::NumRel | Family::NumRelRet)
    }

    /// Families measured from each rank's judged document (its aspects), not its label alone.
    pub fn needs_aspects(self) -> bool {
        self == Family::AlphaNdcg
    }

    /// Families named with trec_eval's syntax (the others have ir_measures' names only).
    const ALL: [Family; 14] = [
        Family::Map,
        Family::MapCut,
        Family::Precision,
        Family::Recall,
        Family::Ndcg,
        Family::NdcgCut,
        Family::RecipRank,
        Family::Rprec,
        Family::Bpref,
        Family::Success,
        Family::NumRet,
        Family::NumRel,
        Family::NumRelRet,
        Family::Judged,
    ];

    fn from_trec_name(name: &str) -> Option<Family> {
        Family::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// Friendly names used with `@k` or alone: nDCG@10, P@5, R@100, AP, MRR, Judged@20, ...
    fn from_alias(name: &str) -> Option<(Family, Family)> {
        // (family without cutoff, family with cutoff)
        let lower = name.to_ascii_lowercase();
        Some(match lower.as_str() {
            "ndcg" => (Family::Ndcg, Family::NdcgCut),
            "map" | "ap" => (Family::Map, Family::MapCut),
            "p" | "precision" => (Family::Precision, Family::Precision),
            "r" | "recall" => (Family::Recall, Family::Recall),
            "mrr" | "rr" | "recip_rank" => (Family::RecipRank, Family::RecipRank),
            "rprec" | "r-prec" | "r_prec" => (Family::Rprec, Family::Rprec),
            "bpref" => (Family::Bpref, Family::Bpref),
            "success" => (Family::Success, Family::Success),
            "judged" => (Family::Judged, Family::Judged),
            "numret" | "num_ret" => (Family::NumRet, Family::NumRet),
            "numrel" | "num_rel" => (Family::NumRel, Family::NumRel),
            "numrelret" | "num_rel_ret" => (Family::NumRelRet, Family::NumRelRet),
            _ => return None,
        })
    }
}

/// One measure: a family, for "at k" families its cutoff, and for ir_measures' parameterised
/// measures their parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Measure {
    pub family: Family,
    pub cutoff: usize,
    /// `rel` of `RBP` and `alpha_nDCG`: the least label that counts as a gain (0 elsewhere).
    pub rel: i32,
    /// The bits of `p` (RBP's persistence) or `alpha` (α-nDCG's redundancy penalty), so that
    /// measures compare and hash exactly; 0 elsewhere.
    param_bits: u64,
}

/// RBP's default persistence (ir_measures' and cwl_eval's).
pub const RBP_DEFAULT_P: f64 = 0.8;
/// α-nDCG's default α (ndeval's).
pub const ALPHA_DEFAULT: f64 = 0.5;

impl Measure {
    pub fn new(family: Family, cutoff: usize) -> Self {
        let param = match family {
            Family::Rbp => RBP_DEFAULT_P,
            Family::AlphaNdcg => ALPHA_DEFAULT,
            _ => 0.0,
        };
        let rel = i32::from(matches!(family, Family::Rbp | Family::AlphaNdcg));
        Measure {
            family,
            cutoff: if family.has_cutoff() { cutoff } else { 0 },
            rel,
            param_bits: param.to_bits(),
        }
    }

    /// `RBP(rel=rel,p=p)`.
    pub fn rbp(rel: i32, p: f64) -> Self {
        Measure {
            rel,
            param_bits: p.to_bits(),
            ..Measure::new(Family::Rbp, 0)
        }
    }

    /// `alpha_nDCG(rel=rel,alpha=alpha)@k`.
    pub fn alpha_ndcg(k: usize, rel: i32, alpha: f64) -> Self {
        Measure {
            rel,
            param_bits: alpha.to_bits(),
            ..Measure::new(Family::AlphaNdcg, k)
        }
    }

    /// RBP's `p` or α-nDCG's `alpha`.
    pub fn param(&self) -> f64 {
        f64::from_bits(self.param_bits)
    }

    /// The output key: as trec_eval prints it and pytrec_eval returns it (`ndcg_cut_10`, `P_5`,
    /// `map`, `judged_20`), or, for the measures trec_eval lacks, as ir_measures writes them
    /// (`RBP(rel=1)`, `RBP(rel=1,p=0.9)`, `alpha_nDCG@20`, `alpha_nDCG(alpha=0.7)@20`), default
    /// parameters left out.
    pub fn key(&self) -> String {
        match self.family {
            Family::Rbp => {
                let p = self.param();
                if p == RBP_DEFAULT_P {
                    format!("RBP(rel={})", self.rel)
                } else {
                    format!("RBP(rel={},p={p})", self.rel)
                }
            }
            Family::AlphaNdcg => {
                let mut params = Vec::new();
                if self.rel != 1 {
                    params.push(format!("rel={}", self.rel));
                }
                if self.param() != ALPHA_DEFAULT {
                    params.push(format!("alpha={}", self.param()));
                }
                let params = match params.is_empty() {
                    true => String::new(),
                    false => format!("({})", params.join(",")),
                };
                format!("alpha_nDCG{params}@{}", self.cutoff)
            }
            f if f.has_cutoff() => format!("{}_{}", f.name(), self.cutoff),
            f => f.name().to_string(),
        }
    }
}

/// Every accepted spelling, for error messages.
pub const KNOWN_MEASURES: &str = "map, map_cut.k, P.k, recall.k, ndcg, ndcg_cut.k, recip_rank, Rprec, bpref, \
success.k, num_ret, num_rel, num_rel_ret, judged.k (family names alone expand to trec_eval's default \
cutoffs; 'ndcg_cut.5,10' lists several; output keys such as ndcg_cut_10 and P_5 are accepted too); \
aliases: nDCG, nDCG@k, MAP, AP, AP@k, P@k, R@k, Recall@k, MRR, RR, R-Prec, Success@k, Judged@k; \
ir_measures' RBP(rel=r) and RBP(rel=r,p=x) (binary gain, p = 0.8 by default), alpha_nDCG@k and \
alpha_nDCG(alpha=a,rel=r)@k (alpha = 0.5, rel = 1 by default); the preset 'neuclir' (nDCG@20 MAP \
RBP(rel=1) R@100 R@1000 Judged@20, plus alpha_nDCG@20 on multilingual tasks)";

/// NeuCLIR's official measures (the `neuclir` preset); multilingual tasks add [`NEUCLIR_MLIR`].
pub const NEUCLIR: [&str; 6] = [
    "nDCG@20",
    "MAP",
    "RBP(rel=1)",
    "R@100",
    "R@1000",
    "Judged@20",
];
/// What the `neuclir` preset adds on multilingual (MLIR) tasks: α-nDCG with the documents'
/// languages as aspects.
pub const NEUCLIR_MLIR: &str = "alpha_nDCG@20";

fn parse_cutoffs(spec: &str, list: &str) -> Result<Vec<usize>> {
    list.split(',')
        .map(|k| match k.trim().parse::<usize>() {
            Ok(k) if k > 0 => Ok(k),
            _ => Err(Error::invalid(format!(
                "measure '{spec}': cutoff '{k}' is not a positive integer"
            ))),
        })
        .collect()
}

fn unknown(spec: &str) -> Error {
    Error::invalid(format!(
        "unknown measure '{spec}'; known measures: {KNOWN_MEASURES}"
    ))
}

/// ir_measures' parameterised spellings: `RBP(rel=1,p=0.9)`, `alpha_nDCG@20`,
/// `alpha_nDCG(alpha=0.7,rel=2)@20` (names case-insensitive, ndeval's `alpha-nDCG@20` too);
/// `None` when `spec` names neither.
fn parse_ir_measures(spec: &str) -> Option<Result<Vec<Measure>>> {
    let (head, cutoffs) = match spec.rsplit_once('@') {
        Some((head, k)) if !k.contains(')') => (head.trim(), Some(k)),
        _ => (spec, None),
    };
    let (name, params) = match head.split_once('(') {
        Some((name, rest)) => (name.trim(), Some(rest)),
        None => (head, None),
    };
    let family = match name.to_ascii_lowercase().as_str() {
        "rbp" => Family::Rbp,
        "alpha_ndcg" | "alpha-ndcg" | "α_ndcg" | "α-ndcg" => Family::AlphaNdcg,
        _ => return None,
    };
    Some(parse_parameterised(spec, family, params, cutoffs))
}

fn parse_parameterised(
    spec: &str,
    family: Family,
    params: Option<&str>,
    cutoffs: Option<&str>,
) -> Result<Vec<Measure>> {
    let bad = |why: String| Error::invalid(format!("measure '{spec}': {why}"));
    let mut rel = None;
    let mut value = None;
    let value_name = if family == Family::Rbp { "p" } else { "alpha" };
    if let Some(params) = params {
        let inner = params
            .trim_end()
            .strip_suffix(')')
            .ok_or_else(|| bad("no closing ')'".into()))?;
        for param in inner.split(',').filter(|p| !p.trim().is_empty()) {
            let (key, v) = param
                .split_once('=')
                .ok_or_else(|| bad(format!("parameter '{}' is not name=value", param.trim())))?;
            let (key, v) = (key.trim(), v.trim());
            if key == "rel" {
                let r = v
                    .parse::<i32>()
                    .map_err(|_| bad(format!("rel '{v}' is not an integer")))?;
                rel = Some(r);
            } else if key == value_name {
                let x = v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| (0.0..=1.0).contains(x))
                    .ok_or_else(|| bad(format!("{value_name} '{v}' is not a number in [0, 1]")))?;
                value = Some(x);
            } else {
                return Err(bad(format!(
                    "unknown parameter '{key}' ({} takes rel and {value_name})",
                    family.name()
                )));
            }
        }
    }
    match family {
        Family::Rbp => {
            if cutoffs.is_some() {
                return Err(bad(
                    "RBP takes no cutoff (ir_measures' cwl_eval provider has none)".into(),
                ));
            }
            let rel = rel.ok_or_else(|| {
                bad(
                    "RBP needs rel=r, the least label counted as a gain of 1, e.g. RBP(rel=1) \
                     (graded RBP is not computed: ir_measures' default provider refuses it too)"
                        .into(),
                )
            })?;
            Ok(vec![Measure::rbp(rel, value.unwrap_or(RBP_DEFAULT_P))])
        }
        _ => {
            let cutoffs = cutoffs
                .ok_or_else(|| bad("alpha_nDCG needs a cutoff, e.g. alpha_nDCG@20".into()))?;
            Ok(parse_cutoffs(spec, cutoffs)?
                .into_iter()
                .map(|k| Measure::alpha_ndcg(k, rel.unwrap_or(1), value.unwrap_or(ALPHA_DEFAULT)))
                .collect())
        }
    }
}

/// Parse one measure spec into one or more measures (the `neuclir` preset without its
/// multilingual addition: see [`parse_measures_for`]).
pub fn parse_measure(spec: &str) -> Result<Vec<Measure>> {
    let spec_trimmed = spec.trim();
    if spec_trimmed.eq_ignore_ascii_case("neuclir") {
        return parse_measures(&NEUCLIR);
    }
    if let Some(parsed) = parse_ir_measures(spec_trimmed) {
        return parsed;
    }
    let expand = |family: Family, cutoffs: Option<Vec<usize>>| -> Result<Vec<Measure>> {
        match (family.has_cutoff(), cutoffs) {
            (true, Some(ks)) => Ok(ks.into_iter().map(|k| Measure::new(family, k)).collect()),
            (true, None) => Ok(family
                .default_cutoffs()
                .iter()
                .map(|&k| Measure::new(family, k))
                .collect()),
            (false, None) => Ok(vec![Measure::new(family, 0)]),
            (false, Some(_)) => Err(Error::invalid(format!(
                "measure '{spec}': '{}' takes no cutoff",
                family.name()
            ))),
        }
    };
    // Alias form: NAME@k
    if let Some((name, k)) = spec_trimmed.split_once('@') {
        let (plain, cut) = Family::from_alias(name).ok_or_else(|| unknown(spec))?;
        let family = if cut.has_cutoff() { cut } else { plain };
        return expand(family, Some(parse_cutoffs(spec, k)?));
    }
    // trec_eval form: family or family.k1,k2
    if let Some((name, ks)) = spec_trimmed.split_once('.') {
        let family = Family::from_trec_name(name).ok_or_else(|| unknown(spec))?;
        return expand(family, Some(parse_cutoffs(spec, ks)?));
    }
    if let Some(family) = Family::from_trec_name(spec_trimmed) {
        return expand(family, None);
    }
    // Output-key form: family_k (e.g. ndcg_cut_10, P_5, judged_20)
    if let Some((name, k)) = spec_trimmed.rsplit_once('_') {
        if let Some(family) = Family::from_trec_name(name).filter(|f| f.has_cutoff()) {
            return expand(family, Some(parse_cutoffs(spec, k)?));
        }
    }
    if let Some((plain, _)) = Family::from_alias(spec_trimmed) {
        return expand(plain, None);
    }
    Err(unknown(spec))
}

/// Parse several specs; duplicates are dropped, first appearance order is kept.
pub fn parse_measures<S: AsRef<str>>(specs: &[S]) -> Result<Vec<Measure>> {
    parse_measures_for(specs, false)
}

/// [`parse_measures`] for a task that is multilingual (`mlir`: documents in several languages,
/// their languages the aspects of α-nDCG) or not: on a multilingual task the `neuclir` preset
/// adds [`NEUCLIR_MLIR`].
pub fn parse_measures_for<S: AsRef<str>>(specs: &[S], mlir: bool) -> Result<Vec<Measure>> {
    let mut out: Vec<Measure> = Vec::new();
    for spec in specs {
        let mut measures = parse_measure(spec.as_ref())?;
        if mlir && spec.as_ref().trim().eq_ignore_ascii_case("neuclir") {
            measures.extend(parse_measure(NEUCLIR_MLIR)?);
        }
        for m in measures {
            if !out.contains(&m) {
                out.push(m);
            }
        }
    }
    if out.is_empty() {
        return Err(Error::invalid(format!(
            "no measures given; known measures: {KNOWN_MEASURES}"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(spec: &str) -> Vec<String> {
        parse_measure(spec)
            .unwrap()
            .iter()
            .map(Measure::key)
            .collect()
    }

    #[test]
    fn trec_eval_names_and_aliases() {
        assert_eq!(keys("ndcg_cut.10"), ["ndcg_cut_10"]);
        assert_eq!(keys("ndcg_cut_10"), ["ndcg_cut_10"]);
        assert_eq!(keys("nDCG@10"), ["ndcg_cut_10"]);
        assert_eq!(keys("nDCG"), ["ndcg"]);
        assert_eq!(keys("P.5,10"), ["P_5", "P_10"]);
        assert_eq!(keys("P@5"), ["P_5"]);
        assert_eq!(keys("R@100"), ["recall_100"]);
        assert_eq!(keys("MAP"), ["map"]);
        assert_eq!(keys("AP@10"), ["map_cut_10"]);
        assert_eq!(keys("MRR"), ["recip_rank"]);
        assert_eq!(keys("RR"), ["recip_rank"]);
        assert_eq!(keys("Judged@20"), ["judged_20"]);
        assert_eq!(keys("Rprec"), ["Rprec"]);
        assert_eq!(keys("success").len(), 3);
        assert_eq!(keys("ndcg_cut")[8], "ndcg_cut_1000");
    }

    #[test]
    fn ir_measures_names_and_the_neuclir_preset() {
        let cases: [(&str, &[&str]); 6] = [
            ("RBP(rel=1)", &["RBP(rel=1)"]),
            ("RBP(p=0.8, rel=1)", &["RBP(rel=1)"]),
            ("rbp(p=0.9,rel=2)", &["RBP(rel=2,p=0.9)"]),
            ("alpha_nDCG@20", &["alpha_nDCG@20"]),
            ("alpha-nDCG@5,10", &["alpha_nDCG@5", "alpha_nDCG@10"]),
            (
                "alpha_nDCG(alpha=0.7,rel=2)@20",
                &["alpha_nDCG(rel=2,alpha=0.7)@20"],
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(keys(spec), want, "{spec}");
        }
        let m = parse_measure("RBP(rel=1,p=0.9)").unwrap()[0];
        assert_eq!((m.family, m.rel, m.param()), (Family::Rbp, 1, 0.9));
        // keys parse back to themselves
        for key in ["RBP(rel=2,p=0.9)", "alpha_nDCG(rel=2,alpha=0.7)@20"] {
            assert_eq!(keys(key), [key]);
        }
        for bad in [
            "RBP",
            "RBP(rel=1)@10",
            "RBP(rel=1,p=1.5)",
            "RBP(q=1)",
            "alpha_nDCG",
            "RBP(rel=1",
        ] {
            assert!(parse_measure(bad).is_err(), "{bad}");
        }
        let plain: Vec<String> = parse_measures(&["neuclir"])
            .unwrap()
            .iter()
            .map(Measure::key)
            .collect();
        assert_eq!(
            plain,
            [
                "ndcg_cut_20",
                "map",
                "RBP(rel=1)",
                "recall_100",
                "recall_1000",
                "judged_20"
            ]
        );
        let mlir = parse_measures_for(&["neuclir"], true).unwrap();
        assert_eq!(mlir.len(), 7);
        assert_eq!(mlir[6].key(), "alpha_nDCG@20");
    }

    #[test]
    fn bad_names_list_known_ones() {
        let e = parse_measure("ndgc@10").unwrap_err().to_string();
        assert!(
            e.contains("unknown measure 'ndgc@10'") && e.contains("ndcg_cut.k"),
            "{e}"
        );
        assert!(parse_measure("P.0").is_err());
        assert!(parse_measure("map.5").is_err());
        assert!(parse_measures::<&str>(&[]).is_err());
        assert_eq!(parse_measures(&["P.5", "P_5", "P@5"]).unwrap().len(), 1);
    }
}
