//! The bottom layer's helpers: threads, tracing, atomic file writes and
//! freed memory.
//! It imports nothing of the crate but [`crate::error`].

pub mod fs;
pub mod mem;
pub mod par;
pub mod trace;
