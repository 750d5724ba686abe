//! What a running job reports: its stages and progress for the caller (see
//! [`crate::exec::progress`]), and stage times on stderr under `GROUPFIT_TRACE`.

use std::time::Instant;

/// Prints a stage time under `GROUPFIT_TRACE`.
pub(super) fn trace_stamp(started: Instant, what: &str) {
    if crate::util::trace::trace() {
        let memory = crate::util::trace::memory_mib()
            .map(|(rss, peak)| format!(" (RSS {rss} MiB, peak {peak} MiB)"))
            .unwrap_or_default();
        eprintln!(
            "[groupfit] {what}: {:.1} ms{memory}",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}
