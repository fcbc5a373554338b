//! Measure names: trec_eval's (`ndcg_cut.10`, `P.5`, `map`), pytrec_eval's output keys
//! (`ndcg_cut_10`, `P_5`), family names with trec_eval's default cutoffs (`ndcg_cut`, `P`), and
//! friendly aliases (`nDCG@10`, `R@100`, `P@5`, `MAP`, `MRR`, `Judged@20`).

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
    /// Fraction of the top k that carry any label in the qrels (`judged.k`, ir_measures' Judged@k).
    Judged,
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

/// One measure: a family and, for "at k" families, its cutoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Measure {
    pub family: Family,
    pub cutoff: usize,
}

impl Measure {
    pub fn new(family: Family, cutoff: usize) -> Self {
        Measure {
            family,
            cutoff: if family.has_cutoff() { cutoff } else { 0 },
        }
    }

    /// The output key, as trec_eval prints it and pytrec_eval returns it: `ndcg_cut_10`, `P_5`,
    /// `map`, `judged_20`.
    pub fn key(&self) -> String {
        if self.family.has_cutoff() {
            format!("{}_{}", self.family.name(), self.cutoff)
        } else {
            self.family.name().to_string()
        }
    }
}

/// Every accepted spelling, for error messages.
pub const KNOWN_MEASURES: &str = "map, map_cut.k, P.k, recall.k, ndcg, ndcg_cut.k, recip_rank, Rprec, bpref, \
success.k, num_ret, num_rel, num_rel_ret, judged.k (family names alone expand to trec_eval's default \
cutoffs; 'ndcg_cut.5,10' lists several; output keys such as ndcg_cut_10 and P_5 are accepted too); \
aliases: nDCG, nDCG@k, MAP, AP, AP@k, P@k, R@k, Recall@k, MRR, RR, R-Prec, Success@k, Judged@k";

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

/// Parse one measure spec into one or more measures.
pub fn parse_measure(spec: &str) -> Result<Vec<Measure>> {
    let spec_trimmed = spec.trim();
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
    let mut out: Vec<Measure> = Vec::new();
    for spec in specs {
        for m in parse_measure(spec.as_ref())? {
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
