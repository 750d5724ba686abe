//! The process's memory: handing freed heap pages back to the system.

/// Returns the heap's free pages to the system (glibc's `malloc_trim`).
/// glibc keeps freed buffers for reuse, so the resident set of a process
/// that freed a stage's data stays as high as it was. A driver that holds
/// little between stages (the Ray runner's) calls this before its next one.
/// Elsewhere it does nothing.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
