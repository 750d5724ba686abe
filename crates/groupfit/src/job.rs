//! The user-level jobs: [`train`] (file in, bundle out) and [`predict_file`].
//!
//! `train` reads the data, encodes groups, builds the group-sorted layout,
//! fits every (group, config) unit plus the global model in one run of the
//! pass driver, scores every unit on its group's validation rows, keeps the best
//! config per group and assembles the [`ModelBundle`] and its [`Summary`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};

use crate::data::keys::{display_key, GroupEncoder, GroupKey};
use crate::data::{
    default_features, is_numeric, missing_column, numeric_column, parquet_schema, read_parquet,
    read_parquet_rows, row_uniform, Column, Task,
};
use crate::error::{GroupfitError, Result};
use crate::exec::PassProgress;
use crate::family::{FamilyFit, FeatureSource, TrainData, UnitFit, ValidData};
use crate::registry::{family, AnyFamily};
use crate::metrics;
use crate::plan::Strategy;
use crate::store::{
    FittedModel, GlobalEntry, GroupEntry, ModelBundle, Route, Scores, FORMAT_VERSION,
};
use crate::tune::{ConfigEntry, Grid};
use crate::util::par::{resolve_threads, MAX_THREADS};

/// Model families `train` knows (see [`crate::family`]).
pub use crate::registry::MODELS;

/// What to train. Build it with struct-update syntax over [`TrainSpec::new`].
#[derive(Debug, Clone)]
pub struct TrainSpec {
    /// Training data (Parquet).
    pub data: PathBuf,
    /// Validation data (Parquet); when absent, `valid_fraction` of the training
    /// file's rows are held out.
    pub valid: Option<PathBuf>,
    /// Fraction of rows held out for validation when `valid` is absent.
    pub valid_fraction: f64,
    /// Key columns.
    pub by: Vec<String>,
    /// Target column.
    pub target: String,
    /// Feature columns; `None`: every numeric column that is not a key or the target.
    pub features: Option<Vec<String>>,
    /// Binary or regression; `None`: binary if every target is 0 or 1.
    pub task: Option<Task>,
    /// Model family.
    pub model: String,
    /// Grid specs, `NAME=V1,V2`.
    pub params: Vec<String>,
    /// Groups with fewer training rows use the global model.
    pub min_rows: usize,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Seed of the validation split (and of any randomised family).
    pub seed: u64,
    /// Execution strategy.
    pub strategy: Strategy,
    /// Whether to train the global model (on every training row) that
    /// serves groups without a model of their own and groups unseen in
    /// training. Without it (`--no-global`), such groups have no model and
    /// predicting their rows is an error.
    pub global_model: bool,
}

impl TrainSpec {
    /// A spec with defaults: hold out 20 %, linear, `min_rows` 10, all cores, seed 0, `auto`.
    pub fn new(data: impl Into<PathBuf>, by: Vec<String>, target: impl Into<String>) -> Self {
        TrainSpec {
            data: data.into(),
            valid: None,
            valid_fraction: 0.2,
            by,
            target: target.into(),
            features: None,
            task: None,
            model: "linear".into(),
            params: Vec::new(),
            min_rows: 10,
            threads: 0,
            seed: 0,
            strategy: Strategy::Auto,
            global_model: true,
        }
    }
}

/// What a long job reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A stage starts.
    Stage(&'a str),
    /// A pass over the data finished.
    Pass(PassProgress),
}

/// Row routes on the validation data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Routes {
    /// Groups served by their own model.
    pub groups_own: usize,
    /// Groups served by the global model.
    pub groups_global: usize,
    /// Groups with no model (they would fall back, and there is no global
    /// model: `--no-global`).
    #[serde(default)]
    pub groups_none: usize,
    /// Validation rows served by their group's own model.
    pub valid_rows_own: usize,
    /// Validation rows served by the global model (fallback or unseen group).
    pub valid_rows_global: usize,
    /// Validation rows with no model (not scored; `--no-global`).
    #[serde(default)]
    pub valid_rows_none: usize,
    /// Of those, rows whose group was not in the training data.
    pub valid_rows_unseen: usize,
}

/// Why groups fell back to the global model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fallbacks {
    /// The `--min-rows` threshold.
    pub min_rows: usize,
    /// Groups with fewer training rows than that.
    pub few_rows: usize,
    /// Groups whose binary target has one class.
    pub one_class: usize,
}

/// The training summary: `groupfit train --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Groups in the training data.
    pub groups: usize,
    /// Models fitted: (own-model groups + the global model) x configs.
    pub models: usize,
    /// Grid points.
    pub configs: usize,
    /// The strategy that ran.
    pub strategy: String,
    /// Seconds reading, checking and group-encoding the data and splitting off
    /// the validation rows (a family's own data layout counts in `train_s`).
    pub load_s: f64,
    /// Seconds laying out the data for the family, fitting and selecting.
    pub train_s: f64,
    /// Seconds for the whole job.
    pub wall_s: f64,
    /// Mean over groups of the chosen config's validation log-loss (binary).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub valid_logloss: Option<f64>,
    /// Mean over groups (with both classes in validation) of the AUC (binary).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub valid_auc: Option<f64>,
    /// Mean over groups of the chosen config's validation RMSE (regression).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub valid_rmse: Option<f64>,
    /// Groups that have validation rows (the means run over these).
    pub groups_scored: usize,
    /// The model family.
    pub model: String,
    /// binary / regression.
    pub task: Task,
    /// Whether the task was inferred from the target.
    pub task_inferred: bool,
    /// Feature columns used.
    pub features: Vec<String>,
    /// Training rows.
    pub rows_train: usize,
    /// Validation rows.
    pub rows_valid: usize,
    /// Rows dropped because the target was missing (training and validation files).
    pub rows_dropped_missing_target: usize,
    /// Routes.
    pub routes: Routes,
    /// Fallbacks.
    pub fallback: Fallbacks,
    /// How many groups chose each config.
    pub chosen_configs: BTreeMap<String, usize>,
    /// The config the global model chose (`None`: no global model).
    pub global_config: Option<String>,
    /// Passes over the data.
    pub passes: usize,
    /// Seconds inside the solver's passes over the data (part of `train_s`).
    pub passes_s: f64,
    /// The most groups one plan of the run cut into pieces on two or more
    /// workers (0: every group was scanned whole by one worker).
    #[serde(default)]
    pub cut_groups: usize,
    /// Units that stopped at their iteration limit.
    pub not_converged: usize,
    /// Worker threads.
    pub threads: usize,
}

/// A trained bundle and its summary.
#[derive(Debug, Clone)]
pub struct TrainOutput {
    /// The bundle to save.
    pub bundle: ModelBundle,
    /// The summary (also stored in the bundle).
    pub summary: Summary,
}

/// Rows to score: indices into feature columns, their group (None: unseen) and target.
struct ScoreRows<'a> {
    cols: &'a [Column],
    impute: &'a [f64],
    target: &'a [f64],
    idx: Vec<u32>,
    gid: Vec<Option<u32>>,
}

fn check_columns(
    path: &Path,
    schema: &Schema,
    by: &[String],
    target: &str,
    features: &[String],
) -> Result<()> {
    for c in by
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(target))
        .chain(features.iter().map(String::as_str))
    {
        if schema.index_of(c).is_err() {
            return Err(missing_column(c, path, schema));
        }
    }
    for f in features
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(target))
    {
        let dt = schema.field_with_name(f).unwrap().data_type();
        if !is_numeric(dt) {
            return Err(GroupfitError::NonNumericColumn {
                column: f.to_string(),
                path: path.display().to_string(),
                dtype: dt.to_string(),
            });
        }
    }
    Ok(())
}

fn check_binary(target: &[f64], column: &str, path: &Path) -> Result<()> {
    if let Some((row, &value)) = target
        .iter()
        .enumerate()
        .find(|(_, &v)| !v.is_nan() && v != 0.0 && v != 1.0)
    {
        return Err(GroupfitError::BadBinaryTarget {
            column: column.to_string(),
            path: path.display().to_string(),
            value,
            row,
        });
    }
    Ok(())
}

fn score(task: Task, y: &[f64], p: &[f64]) -> Scores {
    match task {
        Task::Binary => Scores {
            logloss: Some(metrics::logloss(y, p)),
            auc: metrics::auc(y, p),
            rmse: None,
        },
        Task::Regression => Scores {
            rmse: Some(metrics::rmse(y, p)),
            ..Scores::default()
        },
    }
}

/// The selection metric alone (no AUC): log-loss or RMSE.
fn primary_only(task: Task, y: &[f64], p: &[f64]) -> f64 {
    match task {
        Task::Binary => metrics::logloss(y, p),
        Task::Regression => metrics::rmse(y, p),
    }
}

fn primary(task: Task, s: &Scores) -> f64 {
    match task {
        Task::Binary => s.logloss.unwrap_or(f64::INFINITY),
        Task::Regression => s.rmse.unwrap_or(f64::INFINITY),
    }
}

/// Index of the smallest value (first on ties). NaN (a diverged model's
/// score) loses to every number.
fn argmin(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x < v[best] || (v[best].is_nan() && !x.is_nan()) {
            best = i;
        }
    }
    best
}

/// Index of the largest value (the first of equals; 0 when empty).
fn argmax_first(v: &[usize]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// Trains one model per (group, config) from Parquet files (`spec.data`,
/// `spec.valid`), selects per group, and returns the bundle.
pub fn train(spec: &TrainSpec, on: &mut dyn FnMut(Event)) -> Result<TrainOutput> {
    train_with(spec, family(&spec.model)?.as_ref(), on)
}

/// [`train`] with the fitting done by `family` instead of the registry's
/// family for `spec.model` (a runner that fits a registered family's units
/// elsewhere, e.g. on Ray workers, still gets the shared reading, split,
/// scoring and selection).
pub fn train_with(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    on: &mut dyn FnMut(Event),
) -> Result<TrainOutput> {
    let t0 = Instant::now();
    let input = read_inputs(spec, family, on)?;
    trace_stamp(t0, "read parquet");
    input
        .run(spec, family, t0, Mode::Train, on)
        .map(Outcome::trained)
}

/// Trains from in-memory Arrow data: `train` holds the training rows,
/// `valid` (when given) the validation rows, and `spec.data` / `spec.valid`
/// only name them in messages. Without `valid`, `spec.valid_fraction` of the
/// training rows are held out as in [`train`].
pub fn train_table(
    spec: &TrainSpec,
    train: &RecordBatch,
    valid: Option<&RecordBatch>,
    on: &mut dyn FnMut(Event),
) -> Result<TrainOutput> {
    train_table_with(spec, family(&spec.model)?.as_ref(), train, valid, on)
}

/// [`train_table`] with the fitting done by `family` (see [`train_with`]).
pub fn train_table_with(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    train: &RecordBatch,
    valid: Option<&RecordBatch>,
    on: &mut dyn FnMut(Event),
) -> Result<TrainOutput> {
    let t0 = Instant::now();
    let points = prepare(spec, family)?;
    let path = spec.data.as_path();
    let features = resolve_features(spec, &train.schema(), path)?;
    let wanted = wanted_columns(spec, &features);
    let batch = project(train, &wanted, path)?;
    let vlabel = spec
        .valid
        .clone()
        .unwrap_or_else(|| PathBuf::from("validation data"));
    let vbatch = match valid {
        Some(v) => {
            check_columns(&vlabel, &v.schema(), &spec.by, &spec.target, &features)?;
            Some(project(v, &wanted, &vlabel)?)
        }
        None => None,
    };
    fit_tables(
        spec,
        family,
        points,
        features,
        (&batch, path),
        true,
        vbatch.as_ref().map(|b| (b, vlabel.as_path())),
        t0,
        Mode::Train,
        on,
    )
    .map(Outcome::trained)
}

/// What [`fit_tables`] is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Train,
    Explain,
}

/// What [`fit_tables`] produced.
enum Outcome {
    Trained(TrainOutput),
    Explained(ExplainOutput),
}

impl Outcome {
    fn trained(self) -> TrainOutput {
        match self {
            Outcome::Trained(t) => t,
            Outcome::Explained(_) => unreachable!("train mode trains"),
        }
    }
}

/// Where the cost model's constants came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// UTC date the machine constants were measured.
    pub date: String,
    /// The CPU they were measured on.
    pub cpu: String,
    /// Whether they were read from the cache file.
    pub cached: bool,
    /// The cache file (absent when no cache directory is usable).
    pub cache_file: Option<String>,
    /// Nanoseconds per unit-row of the family's scan (pilot run on this data).
    pub row_unit_ns: f64,
    /// Extra nanoseconds per unit-row of a heavy row (the linear family's
    /// Hessian sample; pilot run), 0 for families without heavy rows.
    pub heavy_unit_ns: f64,
    /// Microseconds per unit update (pilot run).
    pub apply_unit_us: f64,
    /// Microseconds of fixed cost per shard (pilot run).
    pub shard_us: f64,
    /// Microseconds per stage: workers' start and barrier (micro-benchmark).
    pub stage_us: f64,
    /// Nanoseconds to combine one statistic (micro-benchmark).
    pub combine_ns: f64,
    /// Where the family prices a whole group's pass by its size (gbdt), the
    /// three group sizes timed and their nanoseconds per unit-row (pilot
    /// run; JSON `{"points": [[rows, ns], ...]}`).
    pub by_size: Option<crate::plan::SizeCurve>,
}

/// A group cut over several workers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CutGroup {
    /// The group's key (`(global)` for the global model's rows).
    pub key: String,
    /// Its training rows.
    pub rows: usize,
    /// Shards it is cut into.
    pub pieces: usize,
}

/// One strategy's estimated pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StrategyExplain {
    /// The strategy.
    pub strategy: String,
    /// Estimated seconds of a pass (`compute_s + sync_s + idle_s`).
    pub pass_s: f64,
    /// Useful work per worker.
    pub compute_s: f64,
    /// Stage barriers plus the serial reduction and update of cut groups.
    pub sync_s: f64,
    /// Waiting for the slowest worker (load imbalance).
    pub idle_s: f64,
    /// Bytes of model state plus partial statistics of cut groups.
    pub state_bytes: usize,
    /// Reductions (stages) per pass.
    pub stages: usize,
    /// Groups computed whole by one worker.
    pub groups_whole: usize,
    /// Groups cut over several workers.
    pub groups_cut: usize,
    /// Shards a worker scans after a shard they do not follow in the layout;
    /// among estimates within 0.5% of the cheapest, `auto` takes the fewest.
    pub jumps: usize,
    /// The largest cut groups (at most 10).
    pub cut: Vec<CutGroup>,
}

/// What `groupfit explain` prints: the plan `auto` would run and what every
/// strategy is estimated to cost, without training.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExplainOutput {
    /// The model family.
    pub model: String,
    /// binary / regression.
    pub task: Task,
    /// Groups in the training data.
    pub groups: usize,
    /// Groups that get their own models.
    pub groups_own: usize,
    /// Whether the global model is trained (not with `--no-global`).
    pub global_model: bool,
    /// Units (models) to train, the global model's included.
    pub units: usize,
    /// Training rows.
    pub rows_train: usize,
    /// Feature columns.
    pub features: usize,
    /// Worker threads.
    pub workers: usize,
    /// The strategy `auto` picks.
    pub auto: String,
    /// The cost model's constants.
    pub calibration: Calibration,
    /// Every fixed strategy, the estimate per pass with every unit active
    /// (or of the rest of the run, see `whole_run`).
    pub strategies: Vec<StrategyExplain>,
    /// Whether the estimates cover the rest of the run (a family that
    /// knows its units' steps left, the MLP) rather than the first pass.
    pub whole_run: bool,
}

fn explain_output(
    e: &crate::exec::Explain,
    data: &TrainData<'_>,
    model: &str,
    keys: &[GroupKey],
    n_rows: &[usize],
    features: usize,
) -> ExplainOutput {
    let key = |g: usize| {
        if g < keys.len() {
            display_key(&keys[g])
        } else {
            "(global)".to_string()
        }
    };
    ExplainOutput {
        model: model.to_string(),
        task: data.task,
        groups: data.n_groups,
        groups_own: data.fit[..data.n_groups].iter().filter(|&&f| f).count(),
        global_model: data.fit[data.n_groups],
        units: e.units,
        rows_train: data.rows.len(),
        features,
        workers: data.threads,
        auto: e.auto.name().to_string(),
        whole_run: e.whole_run,
        calibration: Calibration {
            date: e.machine.date.clone(),
            cpu: e.machine.cpu.clone(),
            cached: e.machine.cached,
            cache_file: crate::exec::calibrate::cache_path().map(|p| p.display().to_string()),
            row_unit_ns: e.cost.row_unit_ns,
            heavy_unit_ns: e.cost.heavy_unit_ns,
            apply_unit_us: e.cost.apply_unit_us,
            shard_us: e.cost.shard_us,
            stage_us: e.cost.stage_us,
            combine_ns: e.cost.combine_ns,
            by_size: e.cost.by_size,
        },
        strategies: e
            .strategies
            .iter()
            .map(|p| StrategyExplain {
                strategy: p.strategy.name().to_string(),
                pass_s: p.estimate.total_s,
                compute_s: p.estimate.compute_s,
                sync_s: p.estimate.sync_s,
                idle_s: p.estimate.idle_s,
                state_bytes: p.estimate.state_bytes,
                stages: p.estimate.stages,
                groups_whole: p.estimate.groups_whole,
                groups_cut: p.estimate.groups_cut,
                jumps: p.jumps,
                cut: p
                    .cut
                    .iter()
                    .take(10)
                    .map(|&(g, pieces)| CutGroup {
                        key: key(g),
                        rows: n_rows[g],
                        pieces,
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Plans `spec` without training: reads and prepares the data as `train`
/// does, runs the planner's pilot, and prices every strategy.
pub fn explain(spec: &TrainSpec) -> Result<ExplainOutput> {
    let t0 = Instant::now();
    let fam = family(&spec.model)?;
    let input = read_inputs(spec, fam.as_ref(), &mut |_| {})?;
    match input.run(spec, fam.as_ref(), t0, Mode::Explain, &mut |_| {})? {
        Outcome::Explained(e) => Ok(e),
        Outcome::Trained(_) => unreachable!("explain mode does not train"),
    }
}

/// The checked grid and features, and the data read from Parquet.
struct Inputs {
    points: Vec<ConfigEntry>,
    features: Vec<String>,
    /// Keys, target and (unless the family reads them itself) features.
    batch: RecordBatch,
    /// Whether `batch` holds the features.
    features_read: bool,
    valid: Option<RecordBatch>,
}

impl Inputs {
    fn run(
        self,
        spec: &TrainSpec,
        family: &dyn AnyFamily,
        t0: Instant,
        mode: Mode,
        on: &mut dyn FnMut(Event),
    ) -> Result<Outcome> {
        fit_tables(
            spec,
            family,
            self.points,
            self.features,
            (&self.batch, spec.data.as_path()),
            self.features_read,
            self.valid.as_ref().zip(spec.valid.as_deref()),
            t0,
            mode,
            on,
        )
    }
}

/// Checks `spec` and reads its Parquet inputs (only the columns it needs).
fn read_inputs(spec: &TrainSpec, family: &dyn AnyFamily, on: &mut dyn FnMut(Event)) -> Result<Inputs> {
    let points = prepare(spec, family)?;
    let path = spec.data.as_path();
    let schema = parquet_schema(path)?;
    let features = resolve_features(spec, &schema, path)?;
    if let Some(vp) = &spec.valid {
        check_columns(vp, &*parquet_schema(vp)?, &spec.by, &spec.target, &features)?;
    }
    on(Event::Stage("reading"));
    let wanted = wanted_columns(spec, &features);
    let threads = resolve_threads(spec.threads);
    // A family that reads the features itself gets the keys and the target.
    let features_read = !family.features_from_file();
    let batch = if features_read {
        read_parquet(path, &wanted, threads)?
    } else {
        read_parquet(path, &wanted[..spec.by.len() + 1], threads)?
    };
    let valid = match &spec.valid {
        Some(vp) => Some(read_parquet(vp, &wanted, threads)?),
        None => None,
    };
    Ok(Inputs {
        points,
        features,
        batch,
        features_read,
        valid,
    })
}

/// Prints a stage time under `GROUPFIT_TRACE`.
fn trace_stamp(t0: Instant, what: &str) {
    if crate::util::trace::trace() {
        eprintln!(
            "[groupfit] {what}: {:.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
}

/// The error for a grid of `n_configs` with nothing to choose among them by.
fn no_validation_rows(n_configs: usize) -> GroupfitError {
    GroupfitError::arg(format!(
        "no validation rows to choose among {n_configs} configs; pass --valid or a --valid-fraction above 0"
    ))
}

/// Checks the arguments that need no data; returns the grid.
fn prepare(spec: &TrainSpec, fam: &dyn AnyFamily) -> Result<Vec<ConfigEntry>> {
    let points = Grid::parse(&spec.params, fam.words())?.points();
    fam.check(&points)?;
    if spec.by.is_empty() {
        return Err(GroupfitError::arg(
            "at least one key column is needed (--by)",
        ));
    }
    if spec.valid.is_none() && !(0.0..1.0).contains(&spec.valid_fraction) {
        return Err(GroupfitError::arg(format!(
            "--valid-fraction must be in [0, 1), got {}",
            spec.valid_fraction
        )));
    }
    if spec.min_rows == 0 {
        return Err(GroupfitError::arg("--min-rows must be at least 1"));
    }
    if spec.threads > MAX_THREADS {
        return Err(GroupfitError::arg(format!(
            "--threads must be at most {MAX_THREADS} (0: one per core), got {}",
            spec.threads
        )));
    }
    if spec.by.contains(&spec.target) {
        return Err(GroupfitError::arg(format!(
            "column '{}' cannot be both a key (--by) and the target",
            spec.target
        )));
    }
    // Without validation rows nothing can choose among configs or stop early:
    // say so before reading the data, not after training.
    if spec.valid.is_none() && spec.valid_fraction == 0.0 {
        if points.len() > 1 {
            return Err(no_validation_rows(points.len()));
        }
        if points.iter().any(|p| {
            p.params
                .get("early_stopping_rounds")
                .is_some_and(|&e| e > 0.0)
        }) {
            return Err(GroupfitError::arg(
                "early_stopping_rounds needs validation rows; pass --valid or a --valid-fraction above 0",
            ));
        }
    }
    Ok(points)
}

/// The feature list (given or defaulted), checked against `schema`.
fn resolve_features(spec: &TrainSpec, schema: &Schema, path: &Path) -> Result<Vec<String>> {
    let features = match &spec.features {
        Some(f) if f.is_empty() => {
            return Err(GroupfitError::arg(
                "--features names no column; name at least one (or leave it out for every numeric column)",
            ))
        }
        Some(f) => f.clone(),
        None => default_features(schema, &spec.by, Some(&spec.target)),
    };
    check_columns(path, schema, &spec.by, &spec.target, &features)?;
    if let Some(f) = features
        .iter()
        .find(|f| spec.by.contains(f) || **f == spec.target)
    {
        return Err(GroupfitError::arg(format!(
            "column '{f}' cannot be both a feature and a key or the target"
        )));
    }
    if features.is_empty() {
        return Err(GroupfitError::arg(format!(
            "'{}' has no numeric feature columns besides the keys and the target",
            path.display()
        )));
    }
    Ok(features)
}

/// Keys, then the target, then the features.
fn wanted_columns(spec: &TrainSpec, features: &[String]) -> Vec<String> {
    let mut wanted = spec.by.clone();
    wanted.push(spec.target.clone());
    wanted.extend(features.iter().cloned());
    wanted
}

/// The columns `wanted` of `batch`, in that order.
fn project(batch: &RecordBatch, wanted: &[String], path: &Path) -> Result<RecordBatch> {
    let schema = batch.schema();
    let idx = wanted
        .iter()
        .map(|c| {
            schema
                .index_of(c)
                .map_err(|_| missing_column(c, path, &schema))
        })
        .collect::<Result<Vec<_>>>()?;
    batch
        .project(&idx)
        .map_err(|e| GroupfitError::arg(format!("cannot select columns: {e}")))
}

/// The feature columns of `batch` (from column `first` on), checked; with
/// `rows`, batch row `i` is file row `rows[i]`, and an error names the file row.
fn feature_columns(
    batch: &RecordBatch,
    first: usize,
    features: &[String],
    path: &Path,
    rows: Option<&[u32]>,
) -> Result<Vec<Column>> {
    features
        .iter()
        .enumerate()
        .map(|(j, f)| Column::from_array(batch.column(first + j), f, path, true))
        .collect::<Result<_>>()
        .map_err(|e| match (e, rows) {
            (GroupfitError::InfiniteValue { column, path, row }, Some(rows)) => {
                GroupfitError::InfiniteValue {
                    column,
                    path,
                    row: rows[row] as usize,
                }
            }
            (e, _) => e,
        })
}

/// The shared body of [`train`] and [`train_table`]: `train` and `valid` hold
/// the keys, the target and (`train` only if `features_read`) the features,
/// in that order. Without `features_read`, the family reads the training
/// features from `path` itself, and the held-out rows' features (no `valid`)
/// are read here.
#[allow(clippy::too_many_arguments)]
fn fit_tables(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    points: Vec<ConfigEntry>,
    features: Vec<String>,
    (batch, path): (&RecordBatch, &Path),
    features_read: bool,
    valid: Option<(&RecordBatch, &Path)>,
    t0: Instant,
    mode: Mode,
    on: &mut dyn FnMut(Event),
) -> Result<Outcome> {
    let stamp = |what: &str| trace_stamp(t0, what);
    let nk = spec.by.len();
    let threads = resolve_threads(spec.threads);
    let n = batch.num_rows();
    if n == 0 {
        return Err(GroupfitError::EmptyInput {
            path: path.display().to_string(),
            detail: String::new(),
        });
    }
    let target = numeric_column(batch.column(nk), &spec.target, path, true)?;
    let cols = if features_read {
        feature_columns(batch, nk + 1, &features, path, None)?
    } else {
        Vec::new()
    };
    stamp("numeric columns");
    let mut enc = GroupEncoder::new(nk);
    let gid_all = enc.encode(&batch.columns()[..nk])?;
    stamp("group encoding");

    // Training / validation split, dropping rows without a target.
    let mut dropped = target.iter().filter(|v| v.is_nan()).count();
    let mut train_rows = Vec::with_capacity(n);
    let mut held_out = Vec::new();
    for i in 0..n {
        if target[i].is_nan() {
            continue;
        }
        if valid.is_none() && row_uniform(spec.seed, i as u64) < spec.valid_fraction {
            held_out.push(i as u32);
        } else {
            train_rows.push(i as u32);
        }
    }
    if train_rows.is_empty() {
        let detail = if dropped == n {
            format!(": all {n} rows have a missing target '{}'", spec.target)
        } else {
            ": no training rows remain after the validation split".to_string()
        };
        return Err(GroupfitError::EmptyInput {
            path: path.display().to_string(),
            detail,
        });
    }
    let task_inferred = spec.task.is_none();
    let task = match spec.task {
        Some(t) => t,
        None => {
            if train_rows
                .iter()
                .all(|&r| target[r as usize] == 0.0 || target[r as usize] == 1.0)
            {
                Task::Binary
            } else {
                Task::Regression
            }
        }
    };
    if task == Task::Binary {
        check_binary(&target, &spec.target, path)?;
    }

    // Groups are those with training rows, in order of first appearance.
    let mut dense = vec![u32::MAX; enc.len()];
    let mut keys = Vec::new();
    let mut train_gid = Vec::with_capacity(train_rows.len());
    for &r in &train_rows {
        let g = gid_all[r as usize] as usize;
        if dense[g] == u32::MAX {
            dense[g] = keys.len() as u32;
            keys.push(enc.keys()[g].clone());
        }
        train_gid.push(dense[g]);
    }
    let n_groups = keys.len();
    drop(enc);
    stamp("split");

    // Which groups get their own models.
    let mut n_rows = vec![0usize; n_groups + 1];
    let mut n_pos = vec![0usize; n_groups + 1];
    for (&r, &g) in train_rows.iter().zip(&train_gid) {
        n_rows[g as usize] += 1;
        n_pos[g as usize] += (target[r as usize] == 1.0) as usize;
    }
    n_rows[n_groups] = train_rows.len();
    n_pos[n_groups] = n_pos[..n_groups].iter().sum();
    let mut fit = vec![false; n_groups + 1];
    let mut fallback_reason: Vec<Option<String>> = vec![None; n_groups];
    let mut fallbacks = Fallbacks {
        min_rows: spec.min_rows,
        ..Fallbacks::default()
    };
    let one_class = |g: usize| n_pos[g] == 0 || n_pos[g] == n_rows[g];
    for g in 0..n_groups {
        if n_rows[g] < spec.min_rows {
            fallbacks.few_rows += 1;
            fallback_reason[g] = Some(format!(
                "{} training rows < --min-rows {}",
                n_rows[g], spec.min_rows
            ));
        } else if task == Task::Binary && one_class(g) {
            fallbacks.one_class += 1;
            let class = if n_pos[g] == 0 { 0.0 } else { 1.0 };
            fallback_reason[g] = Some(format!("one class only ({class}) in training"));
        } else {
            fit[g] = true;
        }
    }
    fit[n_groups] = spec.global_model;
    if task == Task::Binary && one_class(n_groups) {
        let value = if n_pos[n_groups] == 0 { 0.0 } else { 1.0 };
        // Both classes in the file: the split held the other one out.
        let split = if target.iter().any(|&t| !t.is_nan() && t != value) {
            format!(
                " in its {} training rows; the rest were held out by --valid-fraction {}",
                n_rows[n_groups], spec.valid_fraction
            )
        } else {
            String::new()
        };
        return Err(GroupfitError::SingleClass {
            column: spec.target.clone(),
            path: path.display().to_string(),
            value,
            split,
        });
    }

    // Validation rows.
    let valid_target;
    let valid_cols;
    let (vcols, vtarget, vidx, vgid) = if let Some((vb, vp)) = valid {
        valid_target = numeric_column(vb.column(nk), &spec.target, vp, true)?;
        if task == Task::Binary {
            check_binary(&valid_target, &spec.target, vp)?;
        }
        valid_cols = feature_columns(vb, nk + 1, &features, vp, None)?;
        let lookup = GroupEncoder::from_keys(&keys).lookup(&vb.columns()[..nk])?;
        let mut idx = Vec::new();
        let mut gid = Vec::new();
        for (i, g) in lookup.into_iter().enumerate() {
            if valid_target[i].is_nan() {
                dropped += 1;
            } else {
                idx.push(i as u32);
                gid.push(g);
            }
        }
        (&valid_cols[..], &valid_target[..], idx, gid)
    } else {
        let gid = held_out
            .iter()
            .map(|&r| {
                let g = dense[gid_all[r as usize] as usize];
                (g != u32::MAX).then_some(g)
            })
            .collect();
        if features_read {
            (&cols[..], &target[..], held_out, gid)
        } else {
            // Only the held-out rows' features are read, in their order.
            let held = read_parquet_rows(path, &features, &held_out, threads)?;
            valid_cols = feature_columns(&held, 0, &features, path, Some(&held_out))?;
            valid_target = held_out.iter().map(|&r| target[r as usize]).collect();
            let idx = (0..held_out.len() as u32).collect();
            (&valid_cols[..], &valid_target[..], idx, gid)
        }
    };
    stamp("validation data");
    let load_s = t0.elapsed().as_secs_f64();
    let t_train = Instant::now();

    let data = TrainData {
        task,
        columns: &cols,
        source: (!features_read).then_some(FeatureSource {
            path,
            target: &spec.target,
            features: &features,
        }),
        impute: None,
        target: &target,
        rows: &train_rows,
        group_of: &train_gid,
        n_groups,
        keys: &keys,
        fit: &fit,
        valid: ValidData {
            columns: vcols,
            target: vtarget,
            idx: &vidx,
            gid: &vgid,
        },
        strategy: spec.strategy,
        threads,
        seed: spec.seed,
    };
    if mode == Mode::Explain {
        let e = family.explain(&data, &points)?;
        return Ok(Outcome::Explained(explain_output(
            &e,
            &data,
            family.name(),
            &keys,
            &n_rows,
            features.len(),
        )));
    }
    on(Event::Stage("training"));
    let fitted = family.fit(&data, &points, &mut |p| on(Event::Pass(p)))?;
    stamp("fit");
    let FamilyFit {
        units: mut fitted,
        impute,
        report,
    } = fitted;
    let not_converged = fitted.iter().flatten().filter(|u| !u.converged).count();

    on(Event::Stage("scoring"));
    let rows = ScoreRows {
        cols: vcols,
        impute: &impute,
        target: vtarget,
        idx: vidx,
        gid: vgid,
    };
    let selection = select(task, &rows, &fitted, n_groups, points.len(), threads)?;
    stamp("selection");

    // Assemble the bundle: each group's chosen model (and the global
    // model) is moved out of `fitted`, not copied (20,000 networks are
    // hundreds of megabytes).
    // A group without validation rows takes the global model's config, or
    // without one the config most groups chose (the first on a tie).
    let default_config = selection.global_config.unwrap_or_else(|| {
        let mut votes = vec![0usize; points.len()];
        for k in selection.groups.iter().filter_map(|s| s.chosen) {
            votes[k] += 1;
        }
        argmax_first(&votes)
    });
    let mut routes = Routes {
        valid_rows_unseen: rows.gid.iter().filter(|g| g.is_none()).count(),
        ..Routes::default()
    };
    let mut chosen_configs: BTreeMap<String, usize> = BTreeMap::new();
    let mut groups = Vec::with_capacity(n_groups);
    let (mut sum_primary, mut n_scored, mut sum_auc, mut n_auc) = (0.0, 0usize, 0.0, 0usize);
    for g in 0..n_groups {
        let sel = &selection.groups[g];
        let own = fit[g];
        let (route, config, model, iterations) = if own {
            let k = sel.chosen.unwrap_or(default_config);
            let u: UnitFit<FittedModel> = fitted[g].swap_remove(k);
            *chosen_configs.entry(points[k].name.clone()).or_default() += 1;
            (Route::Own, Some(k), Some(u.model), u.iterations)
        } else if selection.global_config.is_some() {
            (Route::Global, None, None, 0)
        } else {
            (Route::None, None, None, 0)
        };
        match route {
            Route::Own => {
                routes.groups_own += 1;
                routes.valid_rows_own += sel.n_valid;
            }
            Route::Global => routes.groups_global += 1,
            Route::None => {
                routes.groups_none += 1;
                routes.valid_rows_none += sel.n_valid;
            }
        }
        if sel.n_valid > 0 && route != Route::None {
            sum_primary += primary(task, &sel.scores);
            n_scored += 1;
            if let Some(a) = sel.scores.auc {
                sum_auc += a;
                n_auc += 1;
            }
        }
        groups.push(GroupEntry {
            key: keys[g].clone(),
            n_train: n_rows[g],
            n_valid: sel.n_valid,
            route,
            fallback: fallback_reason[g].clone(),
            config,
            model,
            valid: sel.scores.clone(),
            valid_by_config: sel.by_config.clone(),
            iterations,
        });
    }
    if selection.global_config.is_some() {
        routes.valid_rows_global = rows.idx.len() - routes.valid_rows_own;
    } else {
        // Unseen groups' rows have no model either.
        routes.valid_rows_none += routes.valid_rows_unseen;
    }
    let mean = |s: f64, k: usize| (k > 0).then(|| s / k as f64);
    let train_s = t_train.elapsed().as_secs_f64();
    let summary = Summary {
        groups: n_groups,
        models: fit.iter().filter(|&&f| f).count() * points.len(),
        configs: points.len(),
        strategy: report.strategy.name().to_string(),
        load_s,
        train_s,
        wall_s: t0.elapsed().as_secs_f64(),
        valid_logloss: if task == Task::Binary {
            mean(sum_primary, n_scored)
        } else {
            None
        },
        valid_auc: if task == Task::Binary {
            mean(sum_auc, n_auc)
        } else {
            None
        },
        valid_rmse: if task == Task::Regression {
            mean(sum_primary, n_scored)
        } else {
            None
        },
        groups_scored: n_scored,
        model: family.name().to_string(),
        task,
        task_inferred,
        features: features.clone(),
        rows_train: train_rows.len(),
        rows_valid: rows.idx.len(),
        rows_dropped_missing_target: dropped,
        routes,
        fallback: fallbacks,
        chosen_configs,
        global_config: selection.global_config.map(|k| points[k].name.clone()),
        passes: report.passes,
        passes_s: report.passes_s,
        cut_groups: report.cut_groups,
        not_converged,
        threads,
    };
    let bundle = ModelBundle {
        format_version: FORMAT_VERSION,
        groupfit_version: env!("CARGO_PKG_VERSION").to_string(),
        family: family.name().to_string(),
        task,
        key_columns: spec.by.clone(),
        features,
        target: spec.target.clone(),
        impute,
        configs: points,
        global: selection.global_config.map(|k| GlobalEntry {
            config: k,
            model: fitted[n_groups].swap_remove(k).model,
            valid: selection.global_scores,
        }),
        groups,
        summary: serde_json::to_value(&summary).expect("summary serialises"),
    };
    Ok(Outcome::Trained(TrainOutput { bundle, summary }))
}

/// The outcome of validation-based selection.
struct Selection {
    /// `None`: no global model.
    global_config: Option<usize>,
    global_scores: Scores,
    groups: Vec<GroupSelection>,
}

#[derive(Default)]
struct GroupSelection {
    n_valid: usize,
    chosen: Option<usize>,
    scores: Scores,
    by_config: Vec<f64>,
}

/// Scores every config on every group's validation rows and picks the best.
fn select(
    task: Task,
    rows: &ScoreRows<'_>,
    fitted: &[Vec<UnitFit<FittedModel>>],
    n_groups: usize,
    n_configs: usize,
    threads: usize,
) -> Result<Selection> {
    let t0 = Instant::now();
    let n = rows.idx.len();
    if n == 0 && n_configs > 1 {
        return Err(no_validation_rows(n_configs));
    }
    // Validation rows sorted by group (unseen rows last), as a dense imputed matrix.
    let key = |i: usize| rows.gid[i].map_or(n_groups, |g| g as usize);
    let (order, start) = crate::data::bucket((0..n).map(key), n_groups + 1);
    let src: Vec<u32> = order.iter().map(|&i| rows.idx[i as usize]).collect();
    let xc = crate::data::imputed_columns(rows.cols, &src, rows.impute, threads);
    let ys: Vec<f64> = src.iter().map(|&r| rows.target[r as usize]).collect();
    trace_stamp(t0, "  selection: validation matrix");
    let predict = |m: &FittedModel, range: std::ops::Range<usize>| -> Vec<f64> {
        m.predict_columns(task, &xc, range)
    };
    // Global model (if any): chosen on all validation rows pooled.
    let global = &fitted[n_groups];
    let chunk = 2048;
    let n_chunks = if global.is_empty() {
        0
    } else {
        n.div_ceil(chunk)
    };
    // Chunk outside, configs inside: each chunk of rows is read from memory
    // once (it stays in cache for the other configs), not once per config.
    let per_chunk: Vec<Vec<Vec<f64>>> = crate::util::par::par_map(n_chunks, threads, &|_| 1, &|c| {
        let range = c * chunk..((c + 1) * chunk).min(n);
        global
            .iter()
            .map(|u| predict(&u.model, range.clone()))
            .collect()
    });
    let global_pred: Vec<Vec<f64>> = (0..global.len())
        .map(|k| {
            per_chunk
                .iter()
                .flat_map(|p| p[k].iter().copied())
                .collect()
        })
        .collect();
    let global_by: Vec<f64> = (0..global.len())
        .map(|k| {
            if n > 0 {
                primary_only(task, &ys, &global_pred[k])
            } else {
                0.0
            }
        })
        .collect();
    let global_config = (!global.is_empty()).then(|| argmin(&global_by));
    let global_scores = match global_config {
        Some(k) if n > 0 => score(task, &ys, &global_pred[k]),
        _ => Scores::default(),
    };
    trace_stamp(t0, "  selection: global model");

    let groups = crate::util::par::par_map(n_groups, threads, &|g| start[g + 1] - start[g] + 1, &|g| {
        let range = start[g]..start[g + 1];
        let yb = &ys[range.clone()];
        let mut sel = GroupSelection {
            n_valid: range.len(),
            ..GroupSelection::default()
        };
        if range.is_empty() {
            return sel;
        }
        if !fitted[g].is_empty() {
            let preds: Vec<Vec<f64>> = fitted[g]
                .iter()
                .map(|u| predict(&u.model, range.clone()))
                .collect();
            sel.by_config = preds.iter().map(|p| primary_only(task, yb, p)).collect();
            let k = argmin(&sel.by_config);
            sel.chosen = Some(k);
            sel.scores = score(task, yb, &preds[k]);
        } else if let Some(k) = global_config {
            sel.scores = score(task, yb, &global_pred[k][range]);
        }
        sel
    });
    Ok(Selection {
        global_config,
        global_scores,
        groups,
    })
}

/// What [`predict_file`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictReport {
    /// Rows predicted.
    pub rows: usize,
    /// Rows served by their group's own model.
    pub own: usize,
    /// Rows served by the global model.
    pub global: usize,
    /// Of those, rows of groups not seen in training.
    pub unseen: usize,
}

/// Predictions for every row of `data`, with the input's key columns, then
/// `prediction` and, with `with_route`, `route` (`own`, `fallback`, `unseen`).
pub fn predict_batch(
    bundle: &ModelBundle,
    data: &Path,
    with_route: bool,
) -> Result<(RecordBatch, PredictReport)> {
    let schema = parquet_schema(data)?;
    for c in bundle.key_columns.iter().chain(&bundle.features) {
        if schema.index_of(c).is_err() {
            return Err(missing_column(c, data, &schema));
        }
    }
    let mut wanted = bundle.key_columns.clone();
    wanted.extend(bundle.features.iter().cloned());
    let batch = read_parquet(data, &wanted, resolve_threads(0))?;
    predict_table(bundle, &batch, data, with_route)
}

/// [`predict_batch`] for in-memory Arrow data: `batch` must hold the bundle's
/// key and feature columns (others are ignored); `label` names it in messages.
pub fn predict_table(
    bundle: &ModelBundle,
    batch: &RecordBatch,
    label: &Path,
    with_route: bool,
) -> Result<(RecordBatch, PredictReport)> {
    let data = label;
    let mut wanted = bundle.key_columns.clone();
    wanted.extend(bundle.features.iter().cloned());
    let batch = project(batch, &wanted, data)?;
    let nk = bundle.key_columns.len();
    let keys: Vec<ArrayRef> = batch.columns()[..nk].to_vec();
    let preds = bundle.predict(&keys, &batch.columns()[nk..], data, resolve_threads(0))?;
    let mut fields: Vec<Field> = batch.schema().fields()[..nk]
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("prediction", DataType::Float64, false));
    let mut columns = keys;
    columns.push(Arc::new(Float64Array::from(preds.values.clone())));
    if with_route {
        fields.push(Field::new("route", DataType::Utf8, false));
        columns.push(Arc::new(arrow_array::StringArray::from_iter_values(
            preds.routes.iter().map(|r| r.name()),
        )));
    }
    let out = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| GroupfitError::arg(format!("cannot assemble predictions: {e}")))?;
    Ok((
        out,
        PredictReport {
            rows: preds.values.len(),
            own: preds.own,
            global: preds.global,
            unseen: preds.unseen,
        },
    ))
}

/// Loads `model`, predicts `data` and writes `out` (Parquet: key columns +
/// `prediction` [+ `route`]) atomically.
pub fn predict_file(
    model: &Path,
    data: &Path,
    out: &Path,
    with_route: bool,
) -> Result<PredictReport> {
    let bundle = ModelBundle::load(model)?;
    let (batch, report) = predict_batch(&bundle, data, with_route)?;
    write_parquet(out, &batch)?;
    Ok(report)
}

/// Writes one batch as Parquet, atomically.
pub fn write_parquet(path: &Path, batch: &RecordBatch) -> Result<()> {
    crate::util::fs::write_atomic(path, |f| {
        let mut w = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), None)
            .map_err(|e| GroupfitError::io("write", path, e))?;
        w.write(batch)
            .map_err(|e| GroupfitError::io("write", path, e))?;
        w.close().map_err(|e| GroupfitError::io("write", path, e))?;
        Ok(())
    })
}

/// The display form of every group key in a bundle, in bundle order.
pub fn group_names(bundle: &ModelBundle) -> Vec<String> {
    bundle.groups.iter().map(|g| display_key(&g.key)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmin_takes_the_first_smallest_and_nan_loses() {
        assert_eq!(argmin(&[]), 0);
        assert_eq!(argmin(&[0.5, 0.25, 0.25, 1.0]), 1);
        assert_eq!(argmin(&[f64::NAN, 0.7, 0.3]), 2);
        assert_eq!(argmin(&[f64::NAN, f64::INFINITY]), 1);
        assert_eq!(argmin(&[0.9, f64::NAN, 0.8]), 2);
        assert_eq!(argmin(&[f64::NAN, f64::NAN]), 0);
    }
}
