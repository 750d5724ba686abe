//! What a running job reports: its stages and passes, as [`Event`]s for the
//! caller, and stage times on stderr under `GROUPFIT_TRACE`.

use std::time::Instant;

use crate::exec::PassProgress;

/// What a long job reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A stage starts.
    Stage(&'a str),
    /// A pass over the data finished.
    Pass(PassProgress),
}

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
