//! `groupfit train`'s text summary on stderr: what was trained, how well it
//! validates, which configs and fallbacks were chosen, where rows went.

use std::path::Path;

use groupfit::data::keys::display_key;
use groupfit::job::Summary;
use groupfit::store::{ModelBundle, Route};

use crate::format::fmt_int;

/// Prints the summary of a trained bundle written to `out`; `csv`: some
/// input was CSV.
pub fn print_train_summary(b: &ModelBundle, s: &Summary, out: &Path, csv: bool) {
    let lines = [
        Some(trained_line(s)),
        csv.then(|| "read CSV, types inferred (Parquet reads faster)".to_string()),
        Some(task_line(b, s)),
        Some(columns_line(s)),
        validation_line(b),
        s.valid_auc
            .map(|auc| format!("validation AUC, mean over groups with both classes: {auc:.4}")),
        Some(chosen_line(s)),
        fallback_line(b, s),
        levels_line(s),
        pooling_line(s),
        slowest_line(b),
        Some(routed_line(s)),
        memory_line(s),
        (s.not_converged > 0).then(|| {
            format!(
                "warning: {} models stopped at their iteration limit (raise --param max_iter)",
                s.not_converged
            )
        }),
        Some(format!("wrote {}", out.display())),
    ];
    for line in lines.into_iter().flatten() {
        eprintln!("{line}");
    }
}

/// The peak memory, the estimate made before reading the features, and
/// the limit it was checked against.
fn memory_line(s: &Summary) -> Option<String> {
    use groupfit::util::mem::show_size;
    let m = s.memory.as_ref()?;
    let peak = m
        .peak_bytes
        .map_or_else(String::new, |b| format!("peak {}, ", show_size(b)));
    let limit = m.limit.as_ref().map_or_else(String::new, |l| {
        format!(" (limit {}, {})", show_size(l.bytes), l.source)
    });
    Some(format!(
        "memory: {peak}estimated {}{limit}",
        show_size(m.estimate.bytes)
    ))
}

/// With `--hierarchy`: each level's groups and own models, coarsest first.
fn levels_line(s: &Summary) -> Option<String> {
    if s.levels.is_empty() {
        return None;
    }
    let parts: Vec<String> = s
        .levels
        .iter()
        .map(|l| {
            format!(
                "{}: {} groups, {} with a model",
                l.key,
                fmt_int(l.groups),
                fmt_int(l.own_models)
            )
        })
        .collect();
    Some(format!(
        "levels above the groups: {}; a group without a model uses its nearest level's",
        parts.join("; ")
    ))
}

/// With `--shrinkage` or `--hierarchy`: the mode, each level's `k`
/// (`auto`) and the validation metric against no pooling.
fn pooling_line(s: &Summary) -> Option<String> {
    let p = s.pooling.as_ref()?;
    let ks = if p.mode == "auto" {
        let parts: Vec<String> = p
            .levels
            .iter()
            .map(|l| format!("{} {}", l.key, l.k))
            .collect();
        format!(" (k: {})", parts.join(", "))
    } else {
        String::new()
    };
    let effect = match (p.loss, p.loss_none) {
        (Some(pooled), Some(none)) => format!(
            ": validation {} {pooled:.4}, {none:.4} without pooling ({:+.1}%) over {} rows",
            p.metric,
            100.0 * (pooled - none) / none,
            fmt_int(p.rows)
        ),
        _ => ": no validation rows to score it".to_string(),
    };
    Some(format!("shrinkage {}{ks}{effect}", p.mode))
}

/// Groups, configs, models, timings, strategy, passes, threads.
fn trained_line(s: &Summary) -> String {
    format!(
        "trained {} groups x {} configs: {} models (incl. global) in {:.2}s (load {:.2}s, train {:.2}s), strategy {}, {} pass{}, {} threads",
        fmt_int(s.groups),
        s.configs,
        fmt_int(s.models),
        s.wall_s,
        s.load_s,
        s.train_s,
        s.strategy,
        s.passes,
        if s.passes == 1 { "" } else { "es" },
        s.threads
    )
}

/// The task, target, features and row counts.
fn task_line(b: &ModelBundle, s: &Summary) -> String {
    format!(
        "task {}{}, target '{}', {} features; {} training rows, {} validation rows{}",
        s.task.name(),
        if s.task_inferred {
            " (inferred from the target)"
        } else {
            ""
        },
        b.target,
        s.features.len(),
        fmt_int(s.rows_train),
        fmt_int(s.rows_valid),
        if s.rows_dropped_missing_target > 0 {
            format!(
                "; dropped {} rows with a missing target",
                fmt_int(s.rows_dropped_missing_target)
            )
        } else {
            String::new()
        }
    )
}

/// Which columns were numeric features, which categorical, which left out.
fn columns_line(s: &Summary) -> String {
    let numeric: Vec<&str> = s
        .features
        .iter()
        .filter(|f| !s.categorical.contains_key(*f))
        .map(String::as_str)
        .collect();
    let mut line = format!("features: {} numeric", numeric.len());
    if !numeric.is_empty() {
        line += &format!(" ({})", short_list(&numeric));
    }
    if !s.categorical.is_empty() {
        let cats: Vec<String> = s
            .categorical
            .iter()
            .map(|(c, n)| format!("{c}: {n} categor{}", if *n == 1 { "y" } else { "ies" }))
            .collect();
        line += &format!("; {} categorical ({})", cats.len(), cats.join(", "));
    }
    if !s.ignored.is_empty() {
        let left: Vec<String> = s
            .ignored
            .iter()
            .map(|(c, why)| format!("{c}: {why}"))
            .collect();
        line += &format!("; left out: {}", left.join(", "));
    }
    line
}

/// Up to eight names, then how many more.
fn short_list(names: &[&str]) -> String {
    if names.len() <= 8 {
        return names.join(", ");
    }
    format!("{}, and {} more", names[..8].join(", "), names.len() - 8)
}

/// The distribution over groups of the validation metric (none without scores).
fn validation_line(b: &ModelBundle) -> Option<String> {
    let mut vals: Vec<f64> = b
        .groups
        .iter()
        .filter(|g| g.n_valid > 0)
        .filter_map(|g| g.valid.primary(b.task))
        .collect();
    vals.sort_by(f64::total_cmp);
    if vals.is_empty() {
        return None;
    }
    Some(format!(
        "validation {} per group ({} groups): mean {:.4}  min {:.4}  p25 {:.4}  median {:.4}  p75 {:.4}  max {:.4}",
        b.task.metric_name(),
        vals.len(),
        vals.iter().sum::<f64>() / vals.len() as f64,
        vals[0],
        quantile(&vals, 0.25),
        quantile(&vals, 0.5),
        quantile(&vals, 0.75),
        vals[vals.len() - 1]
    ))
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// How many groups chose each config, and the global model's config.
fn chosen_line(s: &Summary) -> String {
    let chosen: Vec<String> = s
        .chosen_configs
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    format!(
        "chosen configs: {}; global model: {}",
        chosen.join(", "),
        s.global_config.as_deref().unwrap_or("none (--no-global)")
    )
}

/// Groups without a model of their own: served by the global model, or by
/// none without one (--no-global); with up to five examples.
fn fallback_line(b: &ModelBundle, s: &Summary) -> Option<String> {
    let (route, what, count) = if !s.levels.is_empty() {
        let route = if s.global_config.is_some() {
            Route::Global
        } else {
            Route::None
        };
        let count = s.routes.groups_global + s.routes.groups_none;
        (
            route,
            "without a model of their own (served by the nearest level above with one)",
            count,
        )
    } else if s.global_config.is_some() {
        (
            Route::Global,
            "fallback to the global model",
            s.routes.groups_global,
        )
    } else {
        (
            Route::None,
            "no model (no global model to fall back to)",
            s.routes.groups_none,
        )
    };
    let examples: Vec<String> = b
        .groups
        .iter()
        .filter(|g| g.route == route)
        .take(5)
        .map(|g| {
            format!(
                "{} ({})",
                display_key(&g.key),
                g.fallback.as_deref().unwrap_or("")
            )
        })
        .collect();
    if examples.is_empty() {
        return None;
    }
    Some(format!(
        "{what}: {count} groups ({} with < {} rows, {} with one class), e.g. {}",
        s.fallback.few_rows,
        s.fallback.min_rows,
        s.fallback.one_class,
        examples.join("; ")
    ))
}

/// The three own-model groups with the most rows x iterations.
fn slowest_line(b: &ModelBundle) -> Option<String> {
    let mut slow: Vec<_> = b.groups.iter().filter(|g| g.route == Route::Own).collect();
    slow.sort_by_key(|g| std::cmp::Reverse(g.n_train as u64 * g.iterations as u64));
    let slow: Vec<String> = slow
        .iter()
        .take(3)
        .map(|g| {
            format!(
                "{} ({} rows x {} iterations)",
                display_key(&g.key),
                fmt_int(g.n_train),
                g.iterations
            )
        })
        .collect();
    (!slow.is_empty()).then(|| format!("slowest groups: {}", slow.join(", ")))
}

/// Where the validation rows went.
fn routed_line(s: &Summary) -> String {
    if !s.levels.is_empty() {
        format!(
            "validation rows routed: own model {}, a level above or the global model {} (of which unseen groups {})",
            fmt_int(s.routes.valid_rows_own),
            fmt_int(s.routes.valid_rows_global + s.routes.valid_rows_none),
            fmt_int(s.routes.valid_rows_unseen)
        )
    } else if s.global_config.is_some() {
        format!(
            "validation rows routed: own model {}, global model {} (of which unseen groups {})",
            fmt_int(s.routes.valid_rows_own),
            fmt_int(s.routes.valid_rows_global),
            fmt_int(s.routes.valid_rows_unseen)
        )
    } else {
        format!(
            "validation rows routed: own model {}, no model {} (of which unseen groups {}; not scored)",
            fmt_int(s.routes.valid_rows_own),
            fmt_int(s.routes.valid_rows_none),
            fmt_int(s.routes.valid_rows_unseen)
        )
    }
}
