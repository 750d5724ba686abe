//! `groupfit explain`: the plan each strategy would run, as text.

use groupfit::job::ExplainOutput;

use crate::emit;
use crate::format::{fmt_bytes, fmt_int};

/// Prints the plan: the job, the cost model, every strategy's estimate and
/// the groups each strategy cuts.
pub fn print_explain(e: &ExplainOutput) {
    print_job_and_costs(e);
    print_estimates(e);
    print_cuts(e);
}

/// The job's size and the cost model's constants.
fn print_job_and_costs(e: &ExplainOutput) {
    let c = &e.calibration;
    emit(&format!(
        "plan for {} {} models: {} groups ({} with own models){}, {} units, {} training rows, {} features, {} {}",
        e.model,
        e.task.name(),
        fmt_int(e.groups),
        fmt_int(e.groups_own),
        if e.global_model {
            " + global"
        } else {
            ", no global model"
        },
        fmt_int(e.units),
        fmt_int(e.rows_train),
        e.features,
        e.workers,
        if e.runner == "ray" {
            "Ray workers"
        } else {
            "workers"
        }
    ));
    emit(&format!(
        "cost model: {:.2} ns per unit-row{}, {:.2} us per update, {:.2} us per shard (pilot run on {}); {:.1} us per stage, {:.2} ns per combined statistic ({})",
        c.row_unit_ns,
        if c.heavy_unit_ns > 0.0 {
            format!(" (+{:.2} ns where the Hessian is summed)", c.heavy_unit_ns)
        } else {
            String::new()
        },
        c.apply_unit_us,
        c.shard_us,
        if e.network.is_some() {
            "a sample of this data"
        } else {
            "this data"
        },
        c.stage_us,
        c.combine_ns,
        machine_source(e)
    ));
    if let Some(n) = &e.network {
        emit(&format!(
            "network: {:.0} us round trip, {} per second ({}); a stage is two round trips and a snapshot of a worker's units, a combined statistic 16 bytes",
            n.rtt_us,
            fmt_bytes(n.bytes_per_s as usize),
            n.source
        ));
    }
    emit(&memory_line(e));
    if let Some(b) = &c.by_size {
        let at: Vec<String> = b
            .points
            .iter()
            .map(|(r, ns)| format!("{ns:.2} at {} rows", fmt_int(*r)))
            .collect();
        emit(&format!(
            "whole passes by group size (ns per unit-row; pilot run, in between by the logarithm of the size): {}",
            at.join(", ")
        ));
    }
}

/// Training's estimated peak memory, its largest parts, and the limit
/// `train` would check it against.
fn memory_line(e: &ExplainOutput) -> String {
    use groupfit::util::mem::show_size;
    let parts: Vec<String> = e
        .memory
        .parts
        .iter()
        .take(3)
        .map(|(n, b)| format!("{n} {}", show_size(*b)))
        .collect();
    let limit = e.memory_limit.as_ref().map_or_else(String::new, |l| {
        let verdict = if e.memory.bytes > l.bytes {
            "over"
        } else {
            "within"
        };
        format!(
            "; {verdict} the limit of {} ({})",
            show_size(l.bytes),
            l.source
        )
    });
    format!(
        "memory: training needs about {} ({}){limit}",
        show_size(e.memory.bytes),
        parts.join(", ")
    )
}

/// Where the stage and combine constants came from.
fn machine_source(e: &ExplainOutput) -> String {
    let c = &e.calibration;
    let when = format!(
        "{} on {}, {}",
        if c.cached { "cached" } else { "measured" },
        c.date,
        c.cache_file.as_deref().unwrap_or("not cached")
    );
    match e.network {
        Some(_) => format!("with the network below; adding {when}"),
        None => when,
    }
}

/// One line per strategy: its estimated pass and its shape.
fn print_estimates(e: &ExplainOutput) {
    emit(if e.whole_run {
        "estimated rest of the run (every unit active, all its steps left):"
    } else {
        "estimated first pass (every unit active):"
    });
    emit(&format!(
        "  {:<8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>8} {:>8} {:>8}",
        "strategy",
        "pass ms",
        "compute",
        "sync",
        "idle",
        "stages",
        "state",
        "whole",
        "cut",
        "jumps"
    ));
    for s in &e.strategies {
        emit(&format!(
            "  {:<8} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>8} {:>10} {:>8} {:>8} {:>8}{}",
            s.strategy,
            s.pass_s * 1e3,
            s.compute_s * 1e3,
            s.sync_s * 1e3,
            s.idle_s * 1e3,
            fmt_int(s.stages),
            fmt_bytes(s.state_bytes),
            fmt_int(s.groups_whole),
            fmt_int(s.groups_cut),
            fmt_int(s.jumps),
            if s.strategy == e.auto {
                "  <- auto"
            } else {
                ""
            }
        ));
    }
}

/// The groups each strategy cuts over several workers.
fn print_cuts(e: &ExplainOutput) {
    for s in &e.strategies {
        if s.cut.is_empty() {
            continue;
        }
        let list: Vec<String> = s
            .cut
            .iter()
            .map(|g| format!("{} ({} rows, {} shards)", g.key, fmt_int(g.rows), g.pieces))
            .collect();
        let more = s.groups_cut.saturating_sub(s.cut.len());
        emit(&format!(
            "  {} cuts: {}{}",
            s.strategy,
            list.join(", "),
            if more > 0 {
                format!(" and {} more", fmt_int(more))
            } else {
                String::new()
            }
        ));
    }
}
