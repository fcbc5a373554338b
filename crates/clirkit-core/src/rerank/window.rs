//! The window plan: which slices of a ranked list a listwise model sees, in which order.

use crate::error::{Error, Result};
use std::ops::Range;

/// Depth `N`, window `w` and stride `s` of a sliding-window pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPlan {
    pub depth: usize,
    pub window: usize,
    pub stride: usize,
}

impl Default for WindowPlan {
    /// RankGPT's setting: the top 100 in windows of 20, stride 10 (9 windows).
    fn default() -> Self {
        WindowPlan {
            depth: 100,
            window: 20,
            stride: 10,
        }
    }
}

impl WindowPlan {
    pub fn new(depth: usize, window: usize, stride: usize) -> Result<Self> {
        if depth == 0 || window == 0 || stride == 0 {
            return Err(Error::invalid(format!(
                "depth, window and stride must be at least 1 (got {depth}, {window}, {stride})"
            )));
        }
        if stride > window {
            return Err(Error::invalid(format!(
                "stride {stride} is larger than window {window}: documents between windows would never be reranked"
            )));
        }
        Ok(WindowPlan {
            depth,
            window,
            stride,
        })
    }

    /// The windows for a list of `len` documents, in the order they are processed.
    ///
    /// With `n = min(depth, len)`: the first window ends at `n`, each next one ends `stride`
    /// earlier, a window is `[max(0, end - window), end)`, and the window that starts at 0 is
    /// the last. This is RankGPT's `sliding_windows` (9 windows for 100/20/10) with the start
    /// clamped at 0 (as rank_llm does), so the top is reranked also when `n - window` is not a
    /// multiple of `stride` (RankGPT's loop stops early there).
    pub fn windows(&self, len: usize) -> Vec<Range<usize>> {
        let n = self.depth.min(len);
        let mut out = Vec::new();
        if n == 0 {
            return out;
        }
        let mut end = n;
        loop {
            let start = end.saturating_sub(self.window);
            out.push(start..end);
            if start == 0 {
                return out;
            }
            end -= self.stride;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rankgpt_default_is_nine_windows_bottom_up() {
        let w = WindowPlan::default().windows(1000);
        assert_eq!(w.len(), 9);
        assert_eq!(w[0], 80..100);
        assert_eq!(w[1], 70..90);
        assert_eq!(w[8], 0..20);
    }

    #[test]
    fn short_lists_and_unaligned_depths() {
        let plan = WindowPlan::new(100, 20, 10).unwrap();
        assert_eq!(plan.windows(15), vec![0..15]);
        assert_eq!(plan.windows(0), Vec::<Range<usize>>::new());
        assert_eq!(plan.windows(25), vec![5..25, 0..15]);
        assert_eq!(
            WindowPlan::new(95, 20, 10).unwrap().windows(100).last(),
            Some(&(0..15))
        );
        assert!(WindowPlan::new(100, 10, 20).is_err());
        assert!(WindowPlan::new(100, 0, 1).is_err());
    }
}
