//! Paired significance tests between two systems' per-query values: Student's paired t-test
//! (two-sided; the t distribution's CDF through the regularized incomplete beta function, no
//! external math library) and a paired randomization (sign-flip permutation) test, plus
//! Bonferroni and Holm corrections for comparing several systems.

use crate::error::{Error, Result};
use crate::rng::SplitMix64;
use rayon::prelude::*;

/// A paired test's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestResult {
    /// Mean of (b - a) over queries.
    pub mean_difference: f64,
    /// The t statistic (t-test) or the observed mean difference (randomization test).
    pub statistic: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    pub queries: usize,
}

/// Refuses paired samples `a` and `b` of different lengths (the error: `same_length`, then the
/// two lengths) or of fewer than `min` values (the error: `at_least_min`).
pub(crate) fn check_paired(
    a: &[f64],
    b: &[f64],
    same_length: &str,
    min: usize,
    at_least_min: &str,
) -> Result<()> {
    if a.len() != b.len() {
        return Err(Error::invalid(format!(
            "{same_length}, got {} and {} values",
            a.len(),
            b.len()
        )));
    }
    if a.len() < min {
        return Err(Error::invalid(at_least_min));
    }
    Ok(())
}

fn differences(a: &[f64], b: &[f64]) -> Result<Vec<f64>> {
    check_paired(
        a,
        b,
        "paired test needs the same queries on both sides",
        2,
        "paired test needs at least 2 queries",
    )?;
    Ok(a.iter().zip(b).map(|(x, y)| y - x).collect())
}

/// Two-sided paired t-test of b against a.
pub fn paired_t_test(a: &[f64], b: &[f64]) -> Result<TestResult> {
    let d = differences(a, b)?;
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let var = d.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    let (t, p) = if var == 0.0 {
        // All differences equal: no evidence when they are 0, certainty otherwise.
        if mean == 0.0 {
            (0.0, 1.0)
        } else {
            (mean.signum() * f64::INFINITY, 0.0)
        }
    } else {
        let t = mean / (var / n).sqrt();
        (t, student_t_two_sided_p(t, n - 1.0))
    };
    Ok(TestResult {
        mean_difference: mean,
        statistic: t,
        p_value: p,
        queries: d.len(),
    })
}

/// P(|T| >= |t|) for Student's t with `df` degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2).
pub fn student_t_two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// The t with P(T >= t) = `upper` for Student's t with `df` degrees of freedom (0 < `upper` <= 0.5):
/// the one-sided critical value, found by bisection on [`student_t_two_sided_p`].
pub fn student_t_upper_quantile(upper: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while student_t_two_sided_p(hi, df) > 2.0 * upper && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if student_t_two_sided_p(mid, df) > 2.0 * upper {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// ln Γ(x) for x > 0 (Lanczos approximation, g = 7, n = 9; ~15 significant digits).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx)
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, &c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// I_x(a, b), the regularized incomplete beta function, by its continued fraction (modified
/// Lentz), using the symmetry I_x(a,b) = 1 - I_{1-x}(b,a) where that converges faster.
pub fn regularized_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-15;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=10_000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        for num in [
            m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)),
        ] {
            d = 1.0 + num * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + num / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// Two-sided paired randomization test: under the null hypothesis each query's two values are
/// exchangeable, so the sign of each difference is flipped at random `permutations` times; the
/// p-value is (1 + permutations with |mean| >= observed |mean|) / (1 + permutations).
pub fn randomization_test(
    a: &[f64],
    b: &[f64],
    permutations: usize,
    seed: u64,
) -> Result<TestResult> {
    let d = differences(a, b)?;
    if permutations == 0 {
        return Err(Error::invalid(
            "randomization test needs at least 1 permutation",
        ));
    }
    let n = d.len() as f64;
    let observed = d.iter().sum::<f64>() / n;
    // Tolerance so that permutations equal to the observed value up to rounding count as extreme.
    let threshold = observed.abs() * (1.0 - 1e-12) - 1e-15;
    let extreme: usize = (0..permutations)
        .into_par_iter()
        .map(|i| {
            // One stream per permutation makes the result independent of thread count.
            let mut rng =
                SplitMix64::from_state(seed ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
            let mut sum = 0.0;
            let mut bits = 0u64;
            for (j, x) in d.iter().enumerate() {
                if j % 64 == 0 {
                    bits = rng.next_u64();
                }
                sum += if bits & 1 == 1 { -x } else { *x };
                bits >>= 1;
            }
            usize::from((sum / n).abs() >= threshold)
        })
        .sum();
    Ok(TestResult {
        mean_difference: observed,
        statistic: observed,
        p_value: (1 + extreme) as f64 / (1 + permutations) as f64,
        queries: d.len(),
    })
}

crate::options::option_enum! {
    /// A correction of p-values for multiple comparisons.
    pub enum Correction("correction") {
        Holm = "holm",
        Bonferroni = "bonferroni",
        /// The p-values as they are.
        None = "none",
    }
}

impl Correction {
    /// The adjusted p-values, in the input order.
    pub fn adjust(self, p: &[f64]) -> Vec<f64> {
        match self {
            Correction::Holm => holm(p),
            Correction::Bonferroni => bonferroni(p),
            Correction::None => p.to_vec(),
        }
    }
}

/// Bonferroni: p * m, capped at 1.
pub fn bonferroni(p: &[f64]) -> Vec<f64> {
    let m = p.len() as f64;
    p.iter().map(|&x| (x * m).min(1.0)).collect()
}

/// Holm's step-down correction (adjusted p-values, in the input order).
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]).then(i.cmp(&j)));
    let mut out = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_distribution_matches_reference_values() {
        // scipy.stats.t.sf(|t|, df) * 2
        assert!((student_t_two_sided_p(2.0, 10.0) - 0.073_388_034_770_740_37).abs() < 1e-10);
        assert!((student_t_two_sided_p(1.0, 1.0) - 0.5).abs() < 1e-12);
        assert!((student_t_two_sided_p(-3.5, 29.0) - 0.001_524_446_314_654_602).abs() < 1e-10);
        assert!((student_t_two_sided_p(0.0, 5.0) - 1.0).abs() < 1e-12);
        assert!((ln_gamma(10.0) - 362_880f64.ln()).abs() < 1e-12);
        // scipy.stats.t.ppf(0.95, df)
        assert!((student_t_upper_quantile(0.05, 49.0) - 1.676_550_892_616_853_5).abs() < 1e-9);
        assert!((student_t_upper_quantile(0.05, 1.0) - 6.313_751_514_675_037).abs() < 1e-8);
        assert!((student_t_upper_quantile(0.025, 10.0) - 2.228_138_851_986_274).abs() < 1e-9);
    }

    #[test]
    fn paired_t_by_hand() {
        let a = [0.1, 0.2, 0.3, 0.4];
        let b = [0.2, 0.25, 0.45, 0.5];
        // d = .1 .05 .15 .1: mean .1, sd sqrt(.005/3)
        let r = paired_t_test(&a, &b).unwrap();
        let t = 0.1 / ((0.005f64 / 3.0).sqrt() / 2.0);
        assert!((r.statistic - t).abs() < 1e-9);
        assert!((r.p_value - 0.016_276_603_459_428_57).abs() < 1e-10); // scipy.stats.ttest_rel
        assert_eq!(paired_t_test(&a, &a).unwrap().p_value, 1.0);
        assert!(paired_t_test(&a, &b[..3]).is_err());
    }

    #[test]
    fn randomization_is_seeded_and_sensible() {
        let a: Vec<f64> = (0..50).map(|i| (i % 7) as f64 / 10.0).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 0.05).collect();
        let r1 = randomization_test(&a, &b, 2000, 42).unwrap();
        let r2 = randomization_test(&a, &b, 2000, 42).unwrap();
        assert_eq!(r1, r2);
        assert!(r1.p_value < 0.001);
        let same = randomization_test(&a, &a, 500, 1).unwrap();
        assert_eq!(same.p_value, 1.0);
        // Exact enumeration on 3 queries: diffs 1, -1, 1 -> |mean| >= 1/3 always -> p ~ 1
        let r = randomization_test(&[0.0, 1.0, 0.0], &[1.0, 0.0, 1.0], 1000, 7).unwrap();
        assert_eq!(r.p_value, 1.0);
    }

    #[test]
    fn corrections() {
        let p = [0.01, 0.04, 0.03, 0.5];
        assert_eq!(bonferroni(&p), [0.04, 0.16, 0.12, 1.0]);
        let h = holm(&p);
        let want = [0.04, 0.09, 0.09, 0.5];
        for (x, y) in h.iter().zip(want) {
            assert!((x - y).abs() < 1e-12, "{h:?}");
        }
        let none: Correction = "none".parse().unwrap();
        assert_eq!(none.adjust(&p), p);
        assert_eq!(Correction::NAMES, ["holm", "bonferroni", "none"]);
    }
}
