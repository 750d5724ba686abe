//! Tracing: stage and per-pass timings on stderr when `GROUPFIT_TRACE` is set.

/// Whether `GROUPFIT_TRACE` is set: per-pass and per-stage timings on stderr.
pub fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| {
        std::env::var_os("GROUPFIT_TRACE").is_some_and(|v| !v.is_empty() && v != "0")
    })
}

/// The process's resident set and its peak so far, in MiB (`VmRSS` and
/// `VmHWM` of `/proc/self/status`); `None` where that file is not there.
pub fn memory_mib() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| super::mem::kib_field(&status, name).map(|kib| kib / 1024);
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn memory_is_read_where_proc_is_mounted() {
        if std::path::Path::new("/proc/self/status").exists() {
            let (rss, peak) = super::memory_mib().expect("VmRSS and VmHWM");
            assert!(rss > 0 && peak >= rss);
        }
    }
}
