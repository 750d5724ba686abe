//! `groupfit`: the command-line front of the engine. Thin by design: it parses
//! arguments, calls `groupfit::job`, and renders results.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use groupfit::data::keys::display_key;
use groupfit::data::Task;
use groupfit::job::{self, Event, TrainSpec};
use groupfit::plan::Strategy;
use groupfit::store::{FittedModel, ModelBundle, Route};

#[derive(Parser)]
#[command(
    name = "groupfit",
    version,
    about = "GROUP BY for machine learning: one model per group, trained together"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train one model per (group, config), keep the best config per group, write a model file.
    Train(TrainArgs),
    /// Predict every row of a Parquet file with a model file (rows routed to their group's model).
    Predict(PredictArgs),
    /// Show what a model file holds: groups, chosen configs, validation scores, fallbacks.
    Inspect(InspectArgs),
    /// Show, without training, the plan each strategy would run and what `auto` picks.
    Explain(ExplainArgs),
}

#[derive(Args)]
struct JobArgs {
    /// Training data (Parquet).
    #[arg(long)]
    data: PathBuf,
    /// Validation data (Parquet). Without it, --valid-fraction of the rows are held out.
    #[arg(long, conflicts_with = "valid_fraction")]
    valid: Option<PathBuf>,
    /// Fraction of the training file's rows held out for validation (seeded).
    #[arg(long, default_value_t = 0.2)]
    valid_fraction: f64,
    /// Key column(s): repeat or separate with commas (--by origin,dest).
    #[arg(long, required = true, value_delimiter = ',')]
    by: Vec<String>,
    /// Target column.
    #[arg(long)]
    target: String,
    /// Feature columns (default: every numeric column that is not a key or the target).
    #[arg(long, value_delimiter = ',')]
    features: Option<Vec<String>>,
    /// binary or regression (default: binary if every target value is 0 or 1).
    #[arg(long)]
    task: Option<String>,
    /// Model family: linear, gbdt or mlp.
    #[arg(long, default_value = "linear")]
    model: String,
    /// Hyper-parameter values, NAME=V1,V2,...; repeat for several; the grid is their product.
    #[arg(long = "param")]
    params: Vec<String>,
    /// Groups with fewer training rows use the global model.
    #[arg(long, default_value_t = 10)]
    min_rows: usize,
    /// Worker threads (default: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Seed for the validation split.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Execution strategy: auto (cost model), tp (whole groups per thread), dp (each
    /// group split over all threads), fused (row ranges, one scan) or hybrid
    /// (small groups whole, large ones sharded, one scan).
    #[arg(long, default_value = "auto")]
    strategy: String,
    /// Do not train the global model (on every training row, about the cost
    /// of all the groups' models together): groups below --min-rows or with
    /// one class then get no model, and predicting rows of such groups, or
    /// of groups unseen in training, is an error.
    #[arg(long)]
    no_global: bool,
}

#[derive(Args)]
struct TrainArgs {
    #[command(flatten)]
    job: JobArgs,
    /// Where to write the model file.
    #[arg(long)]
    out: PathBuf,
    /// Print one JSON summary object on stdout and nothing else there.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ExplainArgs {
    #[command(flatten)]
    job: JobArgs,
    /// Accepted and ignored, so that a `train` command line can be explained as is.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the plan as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PredictArgs {
    /// Model file written by `groupfit train`.
    #[arg(long)]
    model: PathBuf,
    /// Rows to predict (Parquet), with the key and feature columns.
    #[arg(long)]
    data: PathBuf,
    /// Output Parquet: the key columns plus `prediction`, input row order.
    #[arg(long)]
    out: PathBuf,
    /// Also write a `route` column: own, fallback (group too small / one class) or unseen.
    #[arg(long)]
    with_route: bool,
    /// Print a JSON report on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct InspectArgs {
    /// Model file.
    model: PathBuf,
    /// Print the whole bundle description as JSON.
    #[arg(long)]
    json: bool,
    /// How many groups to list (largest first); 0 lists all.
    #[arg(long, default_value_t = 20)]
    top: usize,
}

/// Keeps freed memory in the process for reuse: a training run allocates and
/// frees many column-sized buffers (Parquet pages, columns, statistics), and
/// on virtual machines each page the process gets fresh from the kernel costs
/// a fault, often a host-side one too. glibc otherwise maps every buffer above
/// 128 KiB-32 MiB anew and returns it on free.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before any
    // thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

fn main() {
    keep_freed_memory();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train(a) => train(a),
        Command::Predict(a) => predict(a),
        Command::Inspect(a) => inspect(a),
        Command::Explain(a) => explain(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Writes one line to stdout; a closed pipe (`| head`) is not an error.
fn emit(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
}

/// A progress bar on stderr, drawn only on a terminal and only once a run has
/// taken more than a second.
struct Progress {
    start: Instant,
    enabled: bool,
    drawn: bool,
    stage: String,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        Progress {
            start: Instant::now(),
            enabled: !quiet && std::io::stderr().is_terminal(),
            drawn: false,
            stage: String::new(),
        }
    }

    fn event(&mut self, e: Event) {
        if !self.enabled {
            return;
        }
        match e {
            Event::Stage(s) => self.stage = s.to_string(),
            Event::Pass(p) => {
                if self.start.elapsed().as_secs_f64() < 1.0 {
                    return;
                }
                let done = p.total - p.active;
                let width = 30;
                let filled = if p.total > 0 {
                    done * width / p.total
                } else {
                    width
                };
                eprint!(
                    "\r{} [{}{}] {}/{} models converged, pass {}  {:.1}s",
                    self.stage,
                    "#".repeat(filled),
                    "-".repeat(width - filled),
                    done,
                    p.total,
                    p.pass,
                    self.start.elapsed().as_secs_f64()
                );
                let _ = std::io::stderr().flush();
                self.drawn = true;
            }
        }
    }

    fn finish(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}

impl JobArgs {
    fn spec(self) -> Result<TrainSpec> {
        let a = self;
        Ok(TrainSpec {
            valid: a.valid,
            valid_fraction: a.valid_fraction,
            features: a.features,
            task: a.task.as_deref().map(Task::parse).transpose()?,
            model: a.model,
            params: a.params,
            min_rows: a.min_rows,
            threads: a.threads,
            seed: a.seed,
            strategy: Strategy::parse(&a.strategy)?,
            global_model: !a.no_global,
            ..TrainSpec::new(a.data, a.by, a.target)
        })
    }
}

fn explain(a: ExplainArgs) -> Result<()> {
    let e = job::explain(&a.job.spec()?)?;
    if a.json {
        emit(&serde_json::to_string(&e)?);
        return Ok(());
    }
    let c = &e.calibration;
    emit(&format!(
        "plan for {} {} models: {} groups ({} with own models){}, {} units, {} training rows, {} features, {} workers",
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
        e.workers
    ));
    emit(&format!(
        "cost model: {:.2} ns per unit-row{}, {:.2} us per update, {:.2} us per shard (pilot run on this data); {:.1} us per stage, {:.2} ns per combined statistic ({} on {}, {})",
        c.row_unit_ns,
        if c.heavy_unit_ns > 0.0 {
            format!(" (+{:.2} ns where the Hessian is summed)", c.heavy_unit_ns)
        } else {
            String::new()
        },
        c.apply_unit_us,
        c.shard_us,
        c.stage_us,
        c.combine_ns,
        if c.cached { "cached" } else { "measured" },
        c.date,
        c.cache_file.as_deref().unwrap_or("not cached")
    ));
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
    Ok(())
}

fn fmt_bytes(b: usize) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn train(a: TrainArgs) -> Result<()> {
    let start = Instant::now();
    let spec = a.job.spec()?;
    // An unwritable --out is reported now, not after training.
    groupfit::util::fs::check_writable(&a.out)?;
    let mut progress = Progress::new(a.json);
    let out = job::train(&spec, &mut |e| progress.event(e));
    progress.finish();
    let mut out = out?;
    out.summary.wall_s = start.elapsed().as_secs_f64();
    out.bundle.summary = serde_json::to_value(&out.summary)?;
    let saving = Instant::now();
    out.bundle.save(&a.out)?;
    if groupfit::util::trace::trace() {
        eprintln!(
            "[groupfit] save: {:.1} ms",
            saving.elapsed().as_secs_f64() * 1e3
        );
    }
    out.summary.wall_s = start.elapsed().as_secs_f64();
    if a.json {
        emit(&serde_json::to_string(&out.summary)?);
    } else {
        print_train_summary(&out.bundle, &out.summary, &a.out);
    }
    Ok(())
}

fn fmt_int(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn metric_name(task: Task) -> &'static str {
    match task {
        Task::Binary => "log-loss",
        Task::Regression => "RMSE",
    }
}

fn primary(task: Task, s: &groupfit::store::Scores) -> Option<f64> {
    match task {
        Task::Binary => s.logloss,
        Task::Regression => s.rmse,
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

fn print_train_summary(b: &ModelBundle, s: &job::Summary, out: &Path) {
    let e = |line: String| eprintln!("{line}");
    e(format!(
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
    ));
    e(format!(
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
    ));
    let mut vals: Vec<f64> = b
        .groups
        .iter()
        .filter(|g| g.n_valid > 0)
        .filter_map(|g| primary(b.task, &g.valid))
        .collect();
    vals.sort_by(f64::total_cmp);
    if !vals.is_empty() {
        e(format!(
            "validation {} per group ({} groups): mean {:.4}  min {:.4}  p25 {:.4}  median {:.4}  p75 {:.4}  max {:.4}",
            metric_name(b.task),
            vals.len(),
            vals.iter().sum::<f64>() / vals.len() as f64,
            vals[0],
            quantile(&vals, 0.25),
            quantile(&vals, 0.5),
            quantile(&vals, 0.75),
            vals[vals.len() - 1]
        ));
    }
    if let Some(auc) = s.valid_auc {
        e(format!(
            "validation AUC, mean over groups with both classes: {auc:.4}"
        ));
    }
    let chosen: Vec<String> = s
        .chosen_configs
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    e(format!(
        "chosen configs: {}; global model: {}",
        chosen.join(", "),
        s.global_config.as_deref().unwrap_or("none (--no-global)")
    ));
    // Groups without a model of their own: served by the global model, or
    // by none without one (--no-global).
    let (route, what, count) = if s.global_config.is_some() {
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
    let fb: Vec<String> = b
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
    if !fb.is_empty() {
        e(format!(
            "{what}: {count} groups ({} with < {} rows, {} with one class), e.g. {}",
            s.fallback.few_rows,
            s.fallback.min_rows,
            s.fallback.one_class,
            fb.join("; ")
        ));
    }
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
    if !slow.is_empty() {
        e(format!("slowest groups: {}", slow.join(", ")));
    }
    if s.global_config.is_some() {
        e(format!(
            "validation rows routed: own model {}, global model {} (of which unseen groups {})",
            fmt_int(s.routes.valid_rows_own),
            fmt_int(s.routes.valid_rows_global),
            fmt_int(s.routes.valid_rows_unseen)
        ));
    } else {
        e(format!(
            "validation rows routed: own model {}, no model {} (of which unseen groups {}; not scored)",
            fmt_int(s.routes.valid_rows_own),
            fmt_int(s.routes.valid_rows_none),
            fmt_int(s.routes.valid_rows_unseen)
        ));
    }
    if s.not_converged > 0 {
        e(format!(
            "warning: {} models stopped at their iteration limit (raise --param max_iter)",
            s.not_converged
        ));
    }
    e(format!("wrote {}", out.display()));
}

fn predict(a: PredictArgs) -> Result<()> {
    let r = job::predict_file(&a.model, &a.data, &a.out, a.with_route)?;
    if a.json {
        emit(&serde_json::to_string(&r)?);
    } else {
        eprintln!(
            "predicted {} rows -> {} (own model {}, global model {}, of which unseen groups {})",
            fmt_int(r.rows),
            a.out.display(),
            fmt_int(r.own),
            fmt_int(r.global),
            fmt_int(r.unseen)
        );
    }
    Ok(())
}

/// Per-feature gain importance of a tree model, largest first (None for other families).
fn importance(features: &[String], m: Option<&FittedModel>) -> Option<Vec<(String, f64)>> {
    match m? {
        FittedModel::Gbdt(g) => {
            let mut v: Vec<(String, f64)> = features
                .iter()
                .cloned()
                .zip(g.importance.iter().copied())
                .collect();
            v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            Some(v)
        }
        _ => None,
    }
}

/// `f3 41%, f0 22%, f7 9%`: the `k` features with the largest share of the gain.
fn top_importance(imp: &[(String, f64)], k: usize) -> String {
    let total: f64 = imp.iter().map(|(_, g)| g).sum();
    if total <= 0.0 {
        return "-".into();
    }
    imp.iter()
        .take(k)
        .filter(|(_, g)| *g > 0.0)
        .map(|(f, g)| format!("{f} {:.0}%", 100.0 * g / total))
        .collect::<Vec<_>>()
        .join(", ")
}

fn inspect(a: InspectArgs) -> Result<()> {
    let b = ModelBundle::load(&a.model)?;
    if a.json {
        let groups: Vec<serde_json::Value> = b
            .groups
            .iter()
            .map(|g| {
                let mut v = serde_json::json!({
                    "key": display_key(&g.key),
                    // One part per key column (null for a null key): for
                    // scripts, with nothing to unquote.
                    "key_parts": g.key,
                    "n_train": g.n_train,
                    "n_valid": g.n_valid,
                    "route": g.route,
                    "config": g.config.map(|k| b.configs[k].name.clone()),
                    "valid": g.valid,
                    "valid_by_config": g.valid_by_config,
                    "fallback": g.fallback,
                    "iterations": g.iterations,
                    "model": g.model.as_ref().map(FittedModel::to_json),
                });
                if let Some(imp) = importance(&b.features, g.model.as_ref()) {
                    v["importance"] = imp
                        .into_iter()
                        .map(|(f, g)| (f, serde_json::json!(g)))
                        .collect::<serde_json::Map<_, _>>()
                        .into();
                }
                v
            })
            .collect();
        let global = b.global.as_ref().map(|gl| {
            let mut v = serde_json::json!({"config": b.configs[gl.config].name, "valid": gl.valid, "model": gl.model.to_json()});
            if let Some(imp) = importance(&b.features, Some(&gl.model)) {
                v["importance"] = imp
                    .into_iter()
                    .map(|(f, g)| (f, serde_json::json!(g)))
                    .collect::<serde_json::Map<_, _>>()
                    .into();
            }
            v
        });
        let v = serde_json::json!({
            "format_version": b.format_version,
            "groupfit_version": b.groupfit_version,
            "family": b.family,
            "task": b.task,
            "key_columns": b.key_columns,
            "features": b.features,
            "target": b.target,
            "configs": b.configs.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
            "impute": b.impute,
            "global": global,
            "groups": groups,
            "summary": b.summary,
        });
        emit(&serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let mut buf: Vec<u8> = Vec::new();
    let o = &mut buf;
    writeln!(
        o,
        "model file   {} (format v{}, groupfit {})",
        a.model.display(),
        b.format_version,
        b.groupfit_version
    )?;
    writeln!(
        o,
        "family       {} ({}), target '{}'",
        b.family,
        b.task.name(),
        b.target
    )?;
    writeln!(o, "keys         {}", b.key_columns.join(", "))?;
    writeln!(
        o,
        "features     {} ({})",
        b.features.len(),
        b.features.join(", ")
    )?;
    writeln!(
        o,
        "configs      {}",
        b.configs
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    )?;
    let own = b.groups.iter().filter(|g| g.route == Route::Own).count();
    writeln!(
        o,
        "groups       {} ({} own model, {} {})",
        b.groups.len(),
        own,
        b.groups.len() - own,
        if b.global.is_some() {
            "global fallback"
        } else {
            "no model"
        }
    )?;
    match &b.global {
        Some(gl) => writeln!(
            o,
            "global       config {}, validation {} {}",
            b.configs[gl.config].name,
            metric_name(b.task),
            primary(b.task, &gl.valid).map_or("-".into(), |v| format!("{v:.4}"))
        )?,
        None => writeln!(o, "global       none (trained with --no-global)")?,
    }
    let mut order: Vec<usize> = (0..b.groups.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(b.groups[i].n_train));
    let shown = if a.top == 0 {
        order.len()
    } else {
        a.top.min(order.len())
    };
    writeln!(o)?;
    let trees = b.family == "gbdt";
    writeln!(
        o,
        "{:<24} {:>9} {:>9}  {:<7} {:<18} {:>10}{}",
        "group",
        "n_train",
        "n_valid",
        "route",
        "config",
        metric_name(b.task),
        if trees {
            "  top features (share of gain)"
        } else {
            ""
        }
    )?;
    for &i in &order[..shown] {
        let g = &b.groups[i];
        let imp = if trees {
            let m = g.model.as_ref().or(b.global.as_ref().map(|gl| &gl.model));
            format!(
                "  {}",
                importance(&b.features, m).map_or("-".into(), |v| top_importance(&v, 3))
            )
        } else {
            String::new()
        };
        writeln!(
            o,
            "{:<24} {:>9} {:>9}  {:<7} {:<18} {:>10}{imp}",
            display_key(&g.key),
            g.n_train,
            g.n_valid,
            g.route.name(),
            g.config
                .map_or_else(|| "-".to_string(), |k| b.configs[k].name.clone()),
            primary(b.task, &g.valid).map_or("-".into(), |v| format!("{v:.4}"))
        )?;
    }
    if shown < order.len() {
        writeln!(
            o,
            "... {} more groups (--top 0 lists all)",
            order.len() - shown
        )?;
    }
    let fallbacks: Vec<String> = b
        .groups
        .iter()
        .filter(|g| g.route == Route::Global)
        .map(|g| {
            format!(
                "{}: {}",
                display_key(&g.key),
                g.fallback.as_deref().unwrap_or("")
            )
        })
        .collect();
    if !fallbacks.is_empty() {
        writeln!(o)?;
        writeln!(o, "fallback groups ({}):", fallbacks.len())?;
        for f in fallbacks
            .iter()
            .take(if a.top == 0 { usize::MAX } else { a.top })
        {
            writeln!(o, "  {f}")?;
        }
    }
    let _ = std::io::stdout().lock().write_all(&buf);
    Ok(())
}
