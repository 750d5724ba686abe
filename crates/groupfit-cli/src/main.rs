//! `groupfit`: the command-line front of the engine. Thin by design: it parses
//! arguments, calls `groupfit::job`, and renders results.

mod explain;
mod format;
mod inspect;
mod progress;
mod summary;

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use groupfit::data::Task;
use groupfit::error::GroupfitError;
use groupfit::job::{self, TrainSpec};
use groupfit::plan::Strategy;
use groupfit::tune::shrinkage::Shrinkage;

use format::fmt_int;
use progress::Bar;

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
    /// Predict every row of a Parquet or CSV file with a model file (rows routed to their group's model).
    Predict(PredictArgs),
    /// Show what a model file holds: groups, chosen configs, validation scores, fallbacks.
    Inspect(InspectArgs),
    /// Show, without training, the plan each strategy would run and what `auto` picks.
    Explain(ExplainArgs),
    /// Write an HTML report of a model file: scores by group size, routes, configs, cost, and each family's plot.
    Report(ReportArgs),
}

#[derive(Args)]
struct JobArgs {
    /// Training data (Parquet, or CSV: .csv or .csv.gz).
    #[arg(long)]
    data: PathBuf,
    /// Validation data (Parquet or CSV). Without it, --valid-fraction of the rows are held out.
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
    /// Feature columns (default: every numeric, text or dictionary column that is
    /// not a key or the target; text and dictionary columns are categorical).
    #[arg(long, value_delimiter = ',')]
    features: Option<Vec<String>>,
    /// Categorical columns: text ones are anyway; this also makes integer columns
    /// categorical (and adds them to the features).
    #[arg(long, value_delimiter = ',')]
    categorical: Option<Vec<String>>,
    /// The most distinct training values a categorical column may have.
    #[arg(long, default_value_t = groupfit::data::categorical::DEFAULT_MAX_CATEGORIES)]
    max_categories: usize,
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
    /// Seed for the validation split and seeded training (mlp; gbdt's feature_fraction and quantized gradients).
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
    /// With two or more --by columns: also train a model set at every prefix
    /// level (a, then a/b, ...) in the same passes. A group without a model
    /// of its own, or unseen in training, uses its nearest ancestor's.
    #[arg(long)]
    hierarchy: bool,
    /// How a row's prediction blends the models on its group's path: none,
    /// auto (n / (n + k), k chosen per level on validation rows), equal,
    /// relative, constant:ALPHA or min_n_obs:N. Without --hierarchy the
    /// path is the global model and the group's [default: auto with
    /// --hierarchy, none without]
    #[arg(long, value_name = "MODE")]
    shrinkage: Option<String>,
    /// The most memory training may use, like 4G or 512M. A job whose
    /// estimated peak is higher fails before its features are read
    /// [default: the memory available: the cgroup limit or MemAvailable]
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
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
    /// Where the plans run: native (this machine's threads) or ray (remote
    /// workers, one stage a pass, priced with the network term).
    #[arg(long, value_enum, default_value_t = RunnerArg::Native)]
    runner: RunnerArg,
    /// Remote workers (with --runner ray).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// The network as ROUND_TRIP_US,MB_PER_S (with --runner ray); default:
    /// the last one a Ray run measured (network.json in the cache directory).
    #[arg(long, value_name = "RTT_US,MB_PER_S")]
    network: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RunnerArg {
    Native,
    Ray,
}

#[derive(Args)]
struct PredictArgs {
    /// Model file written by `groupfit train`.
    #[arg(long)]
    model: PathBuf,
    /// Rows to predict (Parquet, or CSV: .csv or .csv.gz), with the key and feature columns.
    #[arg(long)]
    data: PathBuf,
    /// Output: the key columns plus `prediction`, input row order; CSV if it ends in .csv or .csv.gz, else Parquet.
    #[arg(long)]
    out: PathBuf,
    /// Also write a `route` column: own, fallback (group too small / one class), unseen,
    /// or level:KEYS (a level of the hierarchy served the row).
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

#[derive(Args)]
struct ReportArgs {
    /// Model file.
    model: PathBuf,
    /// Output: one self-contained HTML file (inline SVG plots, no scripts).
    #[arg(long)]
    out: PathBuf,
    /// Also score the rows of this file (Parquet or CSV with the key, feature and target columns).
    #[arg(long)]
    valid: Option<PathBuf>,
    /// Worker threads for scoring --valid (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print a JSON report on stdout.
    #[arg(long)]
    json: bool,
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

/// Ends the process on SIGINT (Ctrl-C) or SIGTERM at once: the temporary
/// files being written are removed, no output is renamed into place (an
/// existing one is left as it was), one line says so, and the exit code is
/// 128 plus the signal's number (130, 143).
fn exit_on_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let _held = groupfit::util::fs::remove_temporaries();
            let name = if signal == SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            // On a terminal, the progress bar's line is cleared first.
            let clear = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                "\r\x1b[2K"
            } else {
                ""
            };
            eprintln!("{clear}error: interrupted by {name}; no output was written");
            std::process::exit(128 + signal);
        }
    });
}

fn main() {
    keep_freed_memory();
    exit_on_signals();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train(a) => train(a),
        Command::Predict(a) => predict(a),
        Command::Inspect(a) => inspect(a),
        Command::Explain(a) => explain(a),
        Command::Report(a) => report(a),
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

impl JobArgs {
    fn spec(self) -> Result<TrainSpec> {
        let a = self;
        Ok(TrainSpec {
            valid: a.valid,
            valid_fraction: a.valid_fraction,
            features: a.features,
            categorical: a.categorical,
            max_categories: a.max_categories,
            task: a.task.as_deref().map(Task::parse).transpose()?,
            model: a.model,
            params: a.params,
            min_rows: a.min_rows,
            threads: a.threads,
            seed: a.seed,
            strategy: Strategy::parse(&a.strategy)?,
            global_model: !a.no_global,
            hierarchy: a.hierarchy,
            shrinkage: a.shrinkage.as_deref().map(Shrinkage::parse).transpose()?,
            max_memory: a.max_memory.as_deref().map(max_memory).transpose()?,
            ..TrainSpec::new(a.data, a.by, a.target)
        })
    }
}

/// `--max-memory` in bytes.
fn max_memory(text: &str) -> Result<u64, GroupfitError> {
    groupfit::util::mem::parse_size(text).ok_or_else(|| {
        GroupfitError::arg(format!(
            "--max-memory: cannot read '{text}' as a size (like 4G, 512M or 1.5GB)"
        ))
    })
}

fn explain(a: ExplainArgs) -> Result<()> {
    let remote = match a.runner {
        RunnerArg::Native => None,
        RunnerArg::Ray => Some(remote_workers(a.workers, a.network.as_deref())?),
    };
    let e = job::explain_on(&a.job.spec()?, remote.as_ref())?;
    if a.json {
        emit(&serde_json::to_string(&e)?);
        return Ok(());
    }
    explain::print_explain(&e);
    Ok(())
}

/// The remote workers of `explain --runner ray`: `--network` when given,
/// else the last network a Ray run measured.
fn remote_workers(workers: usize, network: Option<&str>) -> Result<job::RemoteWorkers> {
    if workers == 0 {
        return Err(GroupfitError::arg("--workers must be at least 1").into());
    }
    let (network, source) = match network {
        Some(text) => (parse_network(text)?, "given".to_string()),
        None => {
            let (m, path) = groupfit::remote::price::remembered()?;
            let date = groupfit::exec::calibrate::civil_date(m.day);
            (m.network, format!("measured {date}, {}", path.display()))
        }
    };
    Ok(job::RemoteWorkers {
        workers,
        network,
        source,
    })
}

/// `--network ROUND_TRIP_US,MB_PER_S`.
fn parse_network(text: &str) -> Result<groupfit::plan::Network> {
    let bad = || {
        GroupfitError::arg(format!(
            "--network '{text}': expected ROUND_TRIP_US,MB_PER_S, two positive numbers (e.g. 500,1000)"
        ))
    };
    let (a, b) = text.split_once(',').ok_or_else(bad)?;
    let (rtt, mbs): (f64, f64) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if !(rtt.is_finite() && mbs.is_finite() && rtt > 0.0 && mbs > 0.0) {
        return Err(bad().into());
    }
    Ok(groupfit::plan::Network {
        rtt_us: rtt,
        bytes_per_s: mbs * 1e6,
    })
}

/// This process's command line, `groupfit` first, each argument quoted
/// for a POSIX shell where it needs it.
fn command_line() -> String {
    let quote = |a: String| {
        let plain = !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_=.,/:+@%".contains(c));
        if plain {
            a
        } else {
            format!("'{}'", a.replace('\'', "'\\''"))
        }
    };
    std::iter::once("groupfit".to_string())
        .chain(std::env::args().skip(1).map(quote))
        .collect::<Vec<_>>()
        .join(" ")
}

fn train(a: TrainArgs) -> Result<()> {
    let start = Instant::now();
    let spec = TrainSpec {
        command: Some(command_line()),
        ..a.job.spec()?
    };
    // An unwritable --out is reported now, not after training.
    groupfit::util::fs::check_writable(&a.out)?;
    let mut bar = Bar::new(a.json);
    let out = job::train(&spec, &mut |p| bar.event(p));
    let mut out = match out {
        Ok(out) => out,
        Err(e) => {
            bar.finish();
            return Err(e.into());
        }
    };
    out.summary.wall_s = start.elapsed().as_secs_f64();
    out.bundle.summary = serde_json::to_value(&out.summary)?;
    let saving = Instant::now();
    bar.stage(job::Stage::Writing);
    let saved = out.bundle.save(&a.out);
    bar.finish();
    saved?;
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
        let csv = [Some(&spec.data), spec.valid.as_ref()]
            .into_iter()
            .flatten()
            .any(|p| groupfit::data::csv::is_csv(p));
        summary::print_train_summary(&out.bundle, &out.summary, &a.out, csv);
    }
    Ok(())
}

fn predict(a: PredictArgs) -> Result<()> {
    let r = job::predict_file(&a.model, &a.data, &a.out, a.with_route)?;
    if a.json {
        emit(&serde_json::to_string(&r)?);
    } else {
        let level = if r.level > 0 {
            format!("a level above {}, ", fmt_int(r.level))
        } else {
            String::new()
        };
        eprintln!(
            "predicted {} rows -> {} (own model {}, {level}global model {}, of which unseen groups {})",
            fmt_int(r.rows),
            a.out.display(),
            fmt_int(r.own),
            fmt_int(r.global),
            fmt_int(r.unseen)
        );
    }
    Ok(())
}

fn report(a: ReportArgs) -> Result<()> {
    let r = groupfit::report::write_report(&a.model, a.valid.as_deref(), &a.out, a.threads)?;
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        v["out"] = a.out.display().to_string().into();
        emit(&serde_json::to_string(&v)?);
    } else {
        eprintln!(
            "wrote {} ({} plots, {} groups, {:.1} MB, {:.2}s)",
            a.out.display(),
            r.plots,
            fmt_int(r.groups),
            r.bytes as f64 / 1e6,
            r.seconds
        );
    }
    Ok(())
}

fn inspect(a: InspectArgs) -> Result<()> {
    inspect::inspect(&a.model, a.json, a.top)
}
