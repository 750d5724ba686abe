//! The bottom layer's helpers: threads, tracing and atomic file writes.
//! It imports nothing of the crate but [`crate::error`].

pub mod fs;
pub mod par;
pub mod trace;
