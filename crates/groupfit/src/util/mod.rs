//! The bottom layer's helpers: threads, tracing, atomic file writes,
//! freed memory and numbers as text.
//! It imports nothing of the crate but [`crate::error`].

pub mod fs;
pub mod mem;
pub mod par;
pub mod text;
pub mod trace;
