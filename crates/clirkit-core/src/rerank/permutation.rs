//! Permutations returned by a listwise model: parsing and repair.
//!
//! Parsing follows RankGPT's `clean_response`: every maximal run of ASCII digits is an
//! identifier, anything else is a separator, so `"[3] > [1] > [2]"`, `"3, 1, 2"` and `"[3,1,2]"`
//! all read as 3, 1, 2. Identifiers are 1-based positions in the window. Repair follows
//! `receive_permutation`: duplicates are dropped (the first occurrence wins), out-of-range
//! identifiers are dropped, and the positions never mentioned are appended in their current
//! order.

/// What repair had to fix in one permutation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repairs {
    pub duplicates: u32,
    pub out_of_range: u32,
    pub missing: u32,
}

impl Repairs {
    /// Whether the permutation needed any repair.
    pub fn any(&self) -> bool {
        self.duplicates + self.out_of_range + self.missing > 0
    }
}

/// The identifiers in a model's answer, in order (1-based as written; huge numbers saturate,
/// which makes them out of range).
pub fn parse_permutation(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|t| !t.is_empty())
        .map(|t| t.parse::<u64>().unwrap_or(u64::MAX))
        .collect()
}

/// Turn 1-based identifiers into a full 0-based permutation of `n` positions, with the repairs
/// made. Returns `None` when no identifier is usable (the answer is unparsable): the caller keeps
/// the window's order and counts a failure rather than a repair.
pub fn repair(ids: &[u64], n: usize) -> Option<(Vec<usize>, Repairs)> {
    let mut repairs = Repairs::default();
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for &id in ids {
        if id == 0 || id > n as u64 {
            repairs.out_of_range += 1;
            continue;
        }
        let pos = (id - 1) as usize;
        if std::mem::replace(&mut seen[pos], true) {
            repairs.duplicates += 1;
        } else {
            order.push(pos);
        }
    }
    if order.is_empty() && n > 0 {
        return None;
    }
    for (pos, was_seen) in seen.iter().enumerate() {
        if !was_seen {
            order.push(pos);
            repairs.missing += 1;
        }
    }
    Some((order, repairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rankgpt_text_and_lists() {
        assert_eq!(parse_permutation("[3] > [1] > [2]"), vec![3, 1, 2]);
        assert_eq!(parse_permutation("3,1 ,2"), vec![3, 1, 2]);
        assert_eq!(parse_permutation("no ranking"), Vec::<u64>::new());
        assert_eq!(
            parse_permutation("[99999999999999999999999]"),
            vec![u64::MAX]
        );
    }

    #[test]
    fn repairs_like_receive_permutation() {
        let (order, r) = repair(&[3, 3, 0, 7, 1], 4).unwrap();
        assert_eq!(order, vec![2, 0, 1, 3]);
        assert_eq!(
            r,
            Repairs {
                duplicates: 1,
                out_of_range: 2,
                missing: 2
            }
        );
        let (order, r) = repair(&[2, 1], 2).unwrap();
        assert_eq!((order, r.any()), (vec![1, 0], false));
        assert!(repair(&[9, 0], 3).is_none());
        assert!(repair(&[], 3).is_none());
    }
}
