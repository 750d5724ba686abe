//! Tracing: stage and per-pass timings on stderr when `GROUPFIT_TRACE` is set.

/// Whether `GROUPFIT_TRACE` is set: per-pass and per-stage timings on stderr.
pub fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| {
        std::env::var_os("GROUPFIT_TRACE").is_some_and(|v| !v.is_empty() && v != "0")
    })
}
