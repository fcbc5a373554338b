//! Rank correlation between two orderings of the same items (e.g. systems ranked by two
//! benchmarks): Spearman's ρ and Kendall's τ-b, with two-sided p-values computed as SciPy's
//! `spearmanr` and `kendalltau` compute them (t distribution for ρ; for τ the exact null
//! distribution without ties on up to 33 items, else the normal approximation with the tie-corrected
//! variance). Inputs with a constant side have no correlation: both numbers are NaN, as in SciPy.

use crate::error::{Error, Result};
use crate::eval::significance::{check_paired, ln_gamma, student_t_two_sided_p};

/// A correlation coefficient with its two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Correlation {
    pub coefficient: f64,
    pub p_value: f64,
    pub items: usize,
}

fn check_pairs(x: &[f64], y: &[f64]) -> Result<()> {
    check_paired(
        x,
        y,
        "rank correlation needs two orderings of the same items",
        3,
        "rank correlation needs at least 3 items",
    )?;
    if let Some(bad) = x.iter().chain(y).find(|v| v.is_nan()) {
        return Err(Error::invalid(format!(
            "rank correlation got a {bad} value"
        )));
    }
    Ok(())
}

/// 1-based ranks, ties sharing the average of the ranks they span.
pub fn average_ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Ranks start+1 ..= end share their mean.
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}

fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    if sxx == 0.0 || syy == 0.0 {
        return f64::NAN;
    }
    // numpy.corrcoef's order of operations (covariance over n - 1, divided by each deviation in
    // turn), so a perfect correlation comes out as exactly 1.
    let f = n - 1.0;
    (sxy / f / (sxx / f).sqrt() / (syy / f).sqrt()).clamp(-1.0, 1.0)
}

/// Spearman's ρ (Pearson's r of the average ranks) and its two-sided p-value from Student's t
/// with n - 2 degrees of freedom, as `scipy.stats.spearmanr`.
pub fn spearman(x: &[f64], y: &[f64]) -> Result<Correlation> {
    check_pairs(x, y)?;
    let rho = pearson(&average_ranks(x), &average_ranks(y));
    let dof = (x.len() - 2) as f64;
    let p_value = if rho.is_nan() {
        f64::NAN
    } else {
        let t = rho * (dof / ((rho + 1.0) * (1.0 - rho))).max(0.0).sqrt();
        student_t_two_sided_p(t, dof)
    };
    Ok(Correlation {
        coefficient: rho,
        p_value,
        items: x.len(),
    })
}

/// Tie statistics of one side: Σt(t-1)/2, Σt(t-1)(t-2), Σt(t-1)(2t+5) over groups of t tied values.
fn tie_counts(values: &[f64]) -> (i64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (mut pairs, mut t0, mut t1) = (0i64, 0.0, 0.0);
    let mut start = 0;
    while start < sorted.len() {
        let mut end = start + 1;
        while end < sorted.len() && sorted[end] == sorted[start] {
            end += 1;
        }
        let t = (end - start) as i64;
        if t > 1 {
            pairs += t * (t - 1) / 2;
            let t = t as f64;
            t0 += t * (t - 1.0) * (t - 2.0);
            t1 += t * (t - 1.0) * (2.0 * t + 5.0);
        }
        start = end;
    }
    (pairs, t0, t1)
}

/// Kendall's τ-b and its two-sided p-value, as `scipy.stats.kendalltau` (method "auto").
pub fn kendall_tau(x: &[f64], y: &[f64]) -> Result<Correlation> {
    check_pairs(x, y)?;
    let n = x.len();
    // Pairs tied on one side contribute 0 to concordant - discordant.
    let (mut concordant_minus_discordant, mut discordant) = (0i64, 0i64);
    for i in 0..n {
        for j in i + 1..n {
            let s = (x[i] - x[j]).signum() * (y[i] - y[j]).signum();
            if x[i] != x[j] && y[i] != y[j] {
                concordant_minus_discordant += s as i64;
                discordant += i64::from(s < 0.0);
            }
        }
    }
    let total = (n * (n - 1) / 2) as i64;
    let (x_ties, x0, x1) = tie_counts(x);
    let (y_ties, y0, y1) = tie_counts(y);
    if x_ties == total || y_ties == total {
        return Ok(Correlation {
            coefficient: f64::NAN,
            p_value: f64::NAN,
            items: n,
        });
    }
    let tau = (concordant_minus_discordant as f64
        / ((total - x_ties) as f64).sqrt()
        / ((total - y_ties) as f64).sqrt())
    .clamp(-1.0, 1.0);
    let no_ties = x_ties == 0 && y_ties == 0;
    let p_value = if no_ties && (n <= 33 || discordant.min(total - discordant) <= 1) {
        kendall_exact_p(n, (total - discordant) as u64)
    } else {
        let m = (n * (n - 1)) as f64;
        let nf = n as f64;
        let var = (m * (2.0 * nf + 5.0) - x1 - y1) / 18.0
            + (2 * x_ties * y_ties) as f64 / m
            + x0 * y0 / (9.0 * m * (nf - 2.0));
        let z = concordant_minus_discordant as f64 / var.sqrt();
        erfc(z.abs() / std::f64::consts::SQRT_2)
    };
    Ok(Correlation {
        coefficient: tau,
        p_value,
        items: n,
    })
}

/// Two-sided exact p-value of `concordant` concordant pairs among `n` untied items: twice the
/// lower tail of the number of inversions of a random permutation (Kendall 1948, p. 68), the
/// recurrence SciPy's `_kendall_p_exact` uses.
fn kendall_exact_p(n: usize, concordant: u64) -> f64 {
    let total = (n * (n - 1) / 2) as u64;
    let c = concordant.min(total - concordant) as usize;
    let factorial = |k: usize| (1..=k).fold(1.0f64, |acc, i| acc * i as f64);
    let p = if n <= 2 {
        1.0
    } else if c == 0 {
        if n < 171 {
            2.0 / factorial(n)
        } else {
            0.0
        }
    } else if c == 1 {
        if n < 172 {
            2.0 / factorial(n - 1)
        } else {
            0.0
        }
    } else if 4 * c as u64 == (n * (n - 1)) as u64 {
        1.0
    } else {
        // counts[k] = permutations of j items with k inversions, for k <= c, grown j = 3..=n.
        // Reached only for n <= 33 (larger n is exact only when c <= 1), so the counts stay finite.
        let mut counts = vec![0.0f64; c + 1];
        counts[0] = 1.0;
        counts[1] = 1.0;
        for j in 3..=n {
            let mut running = 0.0;
            for v in counts.iter_mut() {
                running += *v;
                *v = running;
            }
            if j <= c {
                for k in (j..=c).rev() {
                    counts[k] -= counts[k - j];
                }
            }
        }
        2.0 * counts.iter().sum::<f64>() / factorial(n)
    };
    p.clamp(0.0, 1.0)
}

/// The complementary error function: erfc(x) = Q(1/2, x²) for x >= 0, with Q the regularized
/// upper incomplete gamma function.
pub fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    regularized_upper_gamma(0.5, x * x)
}

/// Q(a, x) = Γ(a, x) / Γ(a): its series below x = a + 1, its continued fraction (modified Lentz) above.
fn regularized_upper_gamma(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let ln_front = a * x.ln() - x - ln_gamma(a);
    if x < a + 1.0 {
        let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-17 {
                break;
            }
        }
        return 1.0 - sum * ln_front.exp();
    }
    const TINY: f64 = 1e-300;
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / TINY;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..10_000 {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < TINY {
            d = TINY;
        }
        c = b + an / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h * ln_front.exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 + 1e-9 * b.abs()
    }

    #[test]
    fn erfc_matches_reference_values() {
        // math.erfc
        assert!(close(erfc(0.0), 1.0));
        assert!(close(erfc(0.5), 0.479_500_122_186_953_5));
        assert!(close(erfc(1.5), 0.033_894_853_524_689_27));
        assert!(close(erfc(4.0), 1.541_725_790_028_002e-8));
        assert!(close(erfc(-1.0), 1.842_700_792_949_715));
    }

    #[test]
    fn average_ranks_share_ties() {
        assert_eq!(
            average_ranks(&[10.0, 20.0, 10.0, 5.0]),
            [2.5, 4.0, 2.5, 1.0]
        );
    }

    #[test]
    fn spearman_matches_scipy() {
        // scipy.stats.spearmanr([1, 2, 3, 4, 5], [5, 6, 7, 8, 7])
        let r = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5.0, 6.0, 7.0, 8.0, 7.0]).unwrap();
        assert!(close(r.coefficient, 0.820_782_681_668_123_6), "{r:?}");
        assert!(close(r.p_value, 0.088_587_005_313_543_8), "{r:?}");
        let perfect = spearman(&[1.0, 2.0, 3.0], &[3.0, 4.0, 9.0]).unwrap();
        assert_eq!((perfect.coefficient, perfect.p_value), (1.0, 0.0));
        assert!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0])
            .unwrap()
            .coefficient
            .is_nan());
        assert!(spearman(&[1.0, 2.0], &[1.0, 2.0]).is_err());
        assert!(spearman(&[1.0, 2.0, 3.0], &[1.0, 2.0]).is_err());
    }

    #[test]
    fn kendall_matches_scipy() {
        // scipy.stats.kendalltau([12, 2, 1, 12, 2], [1, 4, 7, 1, 0]): ties, asymptotic p
        let r = kendall_tau(&[12.0, 2.0, 1.0, 12.0, 2.0], &[1.0, 4.0, 7.0, 1.0, 0.0]).unwrap();
        assert!(close(r.coefficient, -0.471_404_520_791_031_7), "{r:?}");
        assert!(close(r.p_value, 0.282_745_459_932_774_67), "{r:?}");
        // scipy.stats.kendalltau([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5]): no ties, exact p
        let r = kendall_tau(
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            &[2.0, 1.0, 4.0, 3.0, 6.0, 5.0],
        )
        .unwrap();
        assert!(close(r.coefficient, 0.6), "{r:?}");
        assert!(close(r.p_value, 0.136_111_111_111_111_1), "{r:?}");
    }
}
