//! The fast run-line kernels of the TREC line layer ([`super::trec_lines`]), used by
//! piece-by-piece evaluation ([`crate::eval::run_stream`]): a tokenizer
//! that finds a line's fields from two bit masks of a 64-byte window instead of one separator
//! at a time, and a score parser that gives the score at evaluation's precision without a
//! division. Both give exactly what the general code gives (fields as `split_ascii_whitespace`
//! cuts them; `parse_score(text) as f32`), and hand anything unusual to it.

use crate::io::trec_lines::{for_each_line, parse_score, LineFields};

/// Where a run line's query id, document id and score are (byte ranges in the chunk), and how
/// many fields it has in all; the ranges mean nothing when it has fewer than five.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFields {
    pub qid: (usize, usize),
    pub doc: (usize, usize),
    pub score: (usize, usize),
    pub count: usize,
}

impl RunFields {
    fn from_general(line: &LineFields<6>, offset: usize) -> Self {
        let at = |i: usize| (line.ranges[i].0 + offset, line.ranges[i].1 + offset);
        RunFields {
            qid: at(0),
            doc: at(2),
            score: at(4),
            count: line.count,
        }
    }
}

const WINDOW: usize = 64;

/// Call `on_line(fields)` for every non-blank line of `chunk`, in order, with the fields
/// [`for_each_line`] finds. A line that ends within the 64 bytes from its start is cut by bit
/// operations on a mask of its whitespace; a longer line, and the chunk's last 64 bytes, go to
/// [`for_each_line`].
pub fn for_each_run_line<E>(
    chunk: &[u8],
    mut on_line: impl FnMut(&RunFields) -> Result<(), E>,
) -> Result<(), E> {
    let mut at = 0;
    while at + WINDOW <= chunk.len() {
        let window: &[u8; WINDOW] = chunk[at..at + WINDOW].try_into().expect("64 bytes");
        let (space, newline) = whitespace_masks(window);
        if newline == 0 {
            let end = memchr::memchr(b'\n', &chunk[at..]).map_or(chunk.len(), |i| at + i + 1);
            general_lines(&chunk[at..end], at, &mut on_line)?;
            at = end;
            continue;
        }
        let len = newline.trailing_zeros() as usize;
        let word = !space & ((1u64 << len) - 1);
        let mut starts = word & !(word << 1);
        let mut ends = word & !(word >> 1);
        let count = starts.count_ones() as usize;
        if count > 0 {
            let mut fields = [(0, 0); 5];
            if count >= 5 {
                for field in &mut fields {
                    let (start, last) = (starts.trailing_zeros(), ends.trailing_zeros());
                    *field = (at + start as usize, at + last as usize + 1);
                    starts &= starts - 1;
                    ends &= ends - 1;
                }
            }
            on_line(&RunFields {
                qid: fields[0],
                doc: fields[2],
                score: fields[4],
                count,
            })?;
        }
        at += len + 1;
    }
    general_lines(&chunk[at..], at, &mut on_line)
}

/// The lines of `lines` (at `offset` in the chunk) through the general tokenizer.
fn general_lines<E>(
    lines: &[u8],
    offset: usize,
    on_line: &mut impl FnMut(&RunFields) -> Result<(), E>,
) -> Result<(), E> {
    for_each_line::<6, E>(lines, |_, line| {
        on_line(&RunFields::from_general(line, offset))
    })
}

/// Bit i set in the first mask when byte i is ASCII whitespace (`u8::is_ascii_whitespace`), in
/// the second when it is `\n`.
#[inline]
#[cfg(target_arch = "x86_64")]
fn whitespace_masks(window: &[u8; WINDOW]) -> (u64, u64) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let (mut space, mut newline) = (0u64, 0u64);
    for block in 0..WINDOW / 16 {
        // SAFETY: SSE2 is part of every x86_64 CPU; the load reads 16 bytes of `window`.
        let (s, n) = unsafe {
            let v = _mm_loadu_si128(window.as_ptr().add(16 * block).cast::<__m128i>());
            let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
            let n = eq(b'\n');
            let s = _mm_or_si128(
                _mm_or_si128(eq(b' '), eq(b'\t')),
                _mm_or_si128(_mm_or_si128(eq(b'\r'), eq(0x0C)), n),
            );
            (_mm_movemask_epi8(s), _mm_movemask_epi8(n))
        };
        space |= u64::from(s as u16) << (16 * block);
        newline |= u64::from(n as u16) << (16 * block);
    }
    (space, newline)
}

#[inline]
#[cfg(not(target_arch = "x86_64"))]
fn whitespace_masks(window: &[u8; WINDOW]) -> (u64, u64) {
    let (mut space, mut newline) = (0u64, 0u64);
    for (i, &b) in window.iter().enumerate() {
        space |= u64::from(b.is_ascii_whitespace()) << i;
        newline |= u64::from(b == b'\n') << i;
    }
    (space, newline)
}

/// `1e-k` and `1e k` for the fraction digits of a plain score (the latter exact).
const NEG_POW10: [f64; 16] = [
    1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12, 1e-13, 1e-14,
    1e-15,
];
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// A run line's score at evaluation's precision: `parse_score(text)` rounded to `f32`, `-0`
/// folded into `+0` (as [`crate::eval::ScoredRef::new`] does); `None` when it is not a finite
/// number.
///
/// A plain decimal of at most 15 digits is `m / 10^k` with both exact doubles: its double is the
/// quotient correctly rounded. Multiplying by `1e-k` instead lands within a few units in the last
/// place of that double, so both round to the same `f32` unless the product is within a few
/// units of a point half-way between two floats; only then is the division done.
#[inline]
pub fn score_f32(text: &[u8]) -> Option<f32> {
    if let Some(score) = plain_score(text) {
        return Some(score);
    }
    let score = parse_score(std::str::from_utf8(text).ok()?)?;
    score.is_finite().then_some(score as f32 + 0.0)
}

#[inline]
fn plain_score(text: &[u8]) -> Option<f32> {
    let (negative, digits) = match text.first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.len() > 16 {
        return None;
    }
    let mut mantissa: u64 = 0;
    let mut dot = None;
    for (i, &c) in digits.iter().enumerate() {
        let digit = c.wrapping_sub(b'0');
        if digit < 10 {
            mantissa = mantissa * 10 + u64::from(digit);
        } else if c == b'.' && dot.is_none() {
            dot = Some(i);
        } else {
            return None;
        }
    }
    let fraction = dot.map_or(0, |i| digits.len() - 1 - i);
    let count = digits.len() - usize::from(dot.is_some());
    if count == 0 || count > 15 {
        return None;
    }
    if mantissa == 0 {
        return Some(0.0);
    }
    // Below 10^15 < 2^53: exact.
    let approximate = mantissa as i64 as f64 * NEG_POW10[fraction];
    // A double rounds to float on its 29 low bits; half-way is 2^28. The product is within 3
    // units of the quotient's double; 16 leaves room.
    let dropped = (approximate.to_bits() & ((1 << 29) - 1)) as i64;
    let value = if (dropped - (1 << 28)).abs() <= 16 {
        mantissa as i64 as f64 / POW10[fraction]
    } else {
        approximate
    };
    let value = value as f32;
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn general(chunk: &[u8]) -> Vec<RunFields> {
        let mut out = Vec::new();
        general_lines::<()>(chunk, 0, &mut |f| {
            out.push(*f);
            Ok(())
        })
        .unwrap();
        out
    }

    fn fast(chunk: &[u8]) -> Vec<RunFields> {
        let mut out = Vec::new();
        for_each_run_line::<()>(chunk, |f| {
            out.push(*f);
            Ok(())
        })
        .unwrap();
        out
    }

    /// Only the fields of lines with five or six fields are used.
    fn used(fields: Vec<RunFields>) -> Vec<RunFields> {
        fields
            .into_iter()
            .map(|f| match f.count {
                5.. => f,
                _ => RunFields {
                    qid: (0, 0),
                    doc: (0, 0),
                    score: (0, 0),
                    count: f.count,
                },
            })
            .collect()
    }

    #[test]
    fn same_fields_as_the_general_tokenizer() {
        let mut text = String::new();
        let separators = [" ", "\t", "  ", " \t", "\r", "\x0c", "\x0b", "\x01"];
        for i in 0..3000usize {
            let sep = separators[i % separators.len()];
            let pad = "x".repeat((i * 7) % 90);
            let lead = if i % 13 == 0 { " " } else { "" };
            text.push_str(&format!(
                "{lead}q{}{sep}Q0{sep}doc{i}{pad}{sep}{i}{sep}{}.5{sep}tag",
                i / 40,
                i % 17
            ));
            text.push_str(["\n", "\r\n", " \n", "\n\n", " extra\n", "\n"][i % 6]);
            if i % 29 == 0 {
                text.push_str("q1 Q0 d\n");
            }
        }
        text.push_str("q9 Q0 last 1 2 t");
        let bytes = text.as_bytes();
        for cut in [0, 1, 63, 64, 65, 1000, bytes.len()] {
            let chunk = &bytes[..cut.min(bytes.len())];
            assert_eq!(used(fast(chunk)), used(general(chunk)), "cut {cut}");
        }
        assert!(fast(bytes).len() > 3000);
    }

    #[test]
    fn scores_equal_the_general_parser_rounded_to_f32() {
        let reference = |s: &str| {
            parse_score(s)
                .filter(|v| v.is_finite())
                .map(|v| v as f32 + 0.0)
        };
        let mut cases: Vec<String> = [
            "0",
            "-0",
            "+0",
            "-0.0",
            "1",
            "1.",
            ".5",
            "+.5",
            "-",
            "+",
            ".",
            "",
            "1.2.3",
            "1e5",
            "-1e-3",
            "nan",
            "inf",
            "-inf",
            "1e400",
            "0x10",
            "12a",
            "999999999999999",
            "9999999999999999",
            "99999999999999999",
            "0.000000000000001",
            "3.4028235e38",
            "3.5e38",
            "123456789012345.",
            ".123456789012345",
            "00000000000000001",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Decimals of at most 15 digits at and around points half-way between two floats.
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..300_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let f = f32::from_bits((state as u32).clamp(0x3586_37BD, 0x5368_D4A5));
            let half = (f64::from(f) + f64::from(f32::from_bits(f.to_bits() + 1))) / 2.0;
            let whole = if half >= 1.0 {
                half.log10() as usize + 1
            } else {
                1
            };
            let fraction = (15 - whole.min(15)).saturating_sub((state >> 40) as usize % 4);
            let sign = ["", "-", "+"][(state >> 50) as usize % 3];
            cases.push(format!("{sign}{half:.fraction$}"));
        }
        for case in &cases {
            let got = score_f32(case.as_bytes());
            assert_eq!(
                got.map(f32::to_bits),
                reference(case).map(f32::to_bits),
                "{case:?}"
            );
        }
    }
}
