//! Shared helpers for the criterion benches live in the bench files themselves; this crate only hosts them.
