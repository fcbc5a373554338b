//! The tile shape every kernel of [`super`] shares.

/// Vocabulary entries per packed tile: four 16-lane registers.
pub const TILE: usize = 64;
/// Tokens per kernel step (with [`TILE`], 24 accumulator registers).
pub const ROWS: usize = 6;
