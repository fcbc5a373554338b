//! Per-query score normalization used by the score-based fusion methods.
//!
//! Conventions (ranx's, so results are comparable): min-max maps a query's scores to
//! (s - min) / (max - min); z-score maps them to (s - mean) / std with the population standard
//! deviation. A query whose scores are all equal normalizes to 0 under both.

crate::options::option_enum! {
    /// A normalization of one query's scores.
    pub enum Norm("normalization") {
        /// (s - min) / (max - min).
        MinMax = "minmax" | "min-max",
        /// (s - mean) / std (population standard deviation).
        ZScore = "zscore" | "z-score" | "zmuv",
        /// Raw scores.
        None = "none",
    }
}

impl Norm {
    /// The affine map for one query's scores (given in any order).
    pub fn fit(self, scores: impl Iterator<Item = f64> + Clone) -> Normalizer {
        match self {
            Norm::None => Normalizer::Identity,
            Norm::MinMax => {
                let (min, max) = scores.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
                    (lo.min(s), hi.max(s))
                });
                if max > min {
                    Normalizer::Affine {
                        shift: min,
                        divisor: max - min,
                    }
                } else {
                    Normalizer::Zero
                }
            }
            Norm::ZScore => {
                let (n, sum) = scores
                    .clone()
                    .fold((0usize, 0.0), |(n, t), s| (n + 1, t + s));
                if n == 0 {
                    return Normalizer::Zero;
                }
                let mean = sum / n as f64;
                let var = scores.map(|s| (s - mean) * (s - mean)).sum::<f64>() / n as f64;
                let std = var.sqrt();
                if std > 0.0 {
                    Normalizer::Affine {
                        shift: mean,
                        divisor: std,
                    }
                } else {
                    Normalizer::Zero
                }
            }
        }
    }
}

/// A fitted normalization: apply with [`Normalizer::apply`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Normalizer {
    Identity,
    /// All scores were equal.
    Zero,
    Affine {
        shift: f64,
        divisor: f64,
    },
}

impl Normalizer {
    #[inline]
    pub fn apply(self, score: f64) -> f64 {
        match self {
            Normalizer::Identity => score,
            Normalizer::Zero => 0.0,
            Normalizer::Affine { shift, divisor } => (score - shift) / divisor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minmax_and_zscore() {
        let s = [4.0, 2.0, 0.0];
        let mm = Norm::MinMax.fit(s.iter().copied());
        assert_eq!(s.map(|x| mm.apply(x)), [1.0, 0.5, 0.0]);
        let z = Norm::ZScore.fit(s.iter().copied());
        let std = (8.0f64 / 3.0).sqrt();
        assert_eq!(s.map(|x| z.apply(x)), [2.0 / std, 0.0, -2.0 / std]);
        let flat = [3.0, 3.0];
        assert_eq!(Norm::MinMax.fit(flat.iter().copied()).apply(3.0), 0.0);
        assert_eq!(Norm::ZScore.fit(flat.iter().copied()).apply(3.0), 0.0);
        assert!("l2".parse::<Norm>().is_err());
    }
}
