//! `groupfit explain`: the first stages of a job (arguments, input, split,
//! validation) and then the family's plan instead of its fit — the plan
//! `auto` would run and what every strategy is estimated to cost.

use std::time::Instant;

use serde::Serialize;

use super::arguments::check_arguments;
use super::arguments::TrainSpec;
use super::input::read_files;
use super::memory::{MemoryEstimate, MemoryLimit};
use super::prepare::{prepare, Job, Prepared};
use crate::data::keys::display_key;
use crate::data::Task;
use crate::error::Result;
use crate::exec::{Explain, StrategyPlan};
use crate::plan::Network;
use crate::registry::family;

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
    /// Where the plans run: `native` (threads of one process) or `ray`
    /// (remote workers, priced with the network term).
    pub runner: String,
    /// Worker threads (native) or remote workers (ray).
    pub workers: usize,
    /// The network term of remote workers (ray only).
    pub network: Option<NetworkTerm>,
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
    /// Training's estimated peak memory (this process's, as `train` checks it).
    pub memory: MemoryEstimate,
    /// What `train` would check it against (`None`: not known here).
    pub memory_limit: Option<MemoryLimit>,
}

/// The network a plan of remote workers is priced with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkTerm {
    /// Microseconds of a round trip to a worker.
    pub rtt_us: f64,
    /// Bytes per second to a worker and back.
    pub bytes_per_s: f64,
    /// Where the figures came from: `measured` (this run), a cache file
    /// with its date, or `given` (the command line).
    pub source: String,
}

/// The remote workers a plan is for (`groupfit explain --runner ray`).
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteWorkers {
    /// Workers (Ray actors).
    pub workers: usize,
    /// The network between the driver and them.
    pub network: Network,
    /// Where its figures came from (see [`NetworkTerm::source`]).
    pub source: String,
}

/// Plans `spec` without training: reads and prepares the data as `train`
/// does, runs the planner's pilot, and prices every strategy.
pub fn explain(spec: &TrainSpec) -> Result<ExplainOutput> {
    explain_on(spec, None)
}

/// [`explain`] for `remote` workers (the Ray runner's one-stage plans,
/// priced by [`crate::remote::price`]) when given, else for this machine.
pub fn explain_on(spec: &TrainSpec, remote: Option<&RemoteWorkers>) -> Result<ExplainOutput> {
    explain_from(spec, remote, |family, grid| {
        read_files(spec, family, grid, None, &mut |_| {})
    })
}

/// [`explain_on`] for in-memory Arrow data, as [`super::train_table`] reads it.
pub fn explain_table(
    spec: &TrainSpec,
    train: &arrow_array::RecordBatch,
    valid: Option<&arrow_array::RecordBatch>,
    remote: Option<&RemoteWorkers>,
) -> Result<ExplainOutput> {
    explain_from(spec, remote, |family, grid| {
        super::input::from_batches(spec, family, grid, None, train, valid)
    })
}

/// The stages of [`explain_on`], with the input tables from `load`.
fn explain_from(
    spec: &TrainSpec,
    remote: Option<&RemoteWorkers>,
    load: impl FnOnce(
        &dyn crate::registry::AnyFamily,
        &[crate::tune::ConfigEntry],
    ) -> Result<super::input::Tables>,
) -> Result<ExplainOutput> {
    let started = Instant::now();
    let model_family = family(&spec.model)?;
    let job = Job {
        spec,
        family: model_family.as_ref(),
        started,
    };
    let grid = check_arguments(spec, job.family)?;
    let tables = load(job.family, &grid)?;
    let prepared = prepare(job, grid, tables)?;
    let data = prepared.train_data();
    let Some(r) = remote else {
        let plan = model_family.explain(&data, &prepared.grid)?;
        return Ok(ExplainOutput::new(&plan, &prepared));
    };
    let pricing = crate::remote::price::price(
        model_family.as_ref(),
        &data,
        &prepared.grid,
        r.workers,
        r.network,
    )?;
    let mut out = ExplainOutput::new(&pricing.explain, &prepared);
    out.runner = "ray".to_string();
    out.workers = r.workers;
    out.network = Some(NetworkTerm {
        rtt_us: r.network.rtt_us,
        bytes_per_s: r.network.bytes_per_s,
        source: r.source.clone(),
    });
    Ok(out)
}

impl ExplainOutput {
    fn new(plan: &Explain, prepared: &Prepared) -> Self {
        let data = prepared.train_data();
        let cost = &plan.cost;
        ExplainOutput {
            model: prepared.family.name().to_string(),
            task: data.task,
            groups: data.n_groups,
            groups_own: data.fit[..data.n_groups].iter().filter(|&&f| f).count(),
            global_model: data.fit[data.n_groups],
            units: plan.units,
            rows_train: data.rows.len(),
            features: prepared.features.len(),
            runner: "native".to_string(),
            workers: data.threads,
            network: None,
            auto: plan.auto.name().to_string(),
            whole_run: plan.whole_run,
            memory: prepared.memory.clone(),
            memory_limit: super::memory::limit(prepared.spec),
            calibration: Calibration {
                date: plan.machine.date.clone(),
                cpu: plan.machine.cpu.clone(),
                cached: plan.machine.cached,
                cache_file: crate::exec::calibrate::cache_path().map(|p| p.display().to_string()),
                row_unit_ns: cost.row_unit_ns,
                heavy_unit_ns: cost.heavy_unit_ns,
                apply_unit_us: cost.apply_unit_us,
                shard_us: cost.shard_us,
                stage_us: cost.stage_us,
                combine_ns: cost.combine_ns,
                by_size: cost.by_size,
            },
            strategies: plan
                .strategies
                .iter()
                .map(|strategy| StrategyExplain::new(strategy, prepared))
                .collect(),
        }
    }
}

impl StrategyExplain {
    fn new(plan: &StrategyPlan, prepared: &Prepared) -> Self {
        let keys = &prepared.split.keys;
        let key = |g: usize| {
            if g < keys.len() {
                display_key(&keys[g])
            } else {
                "(global)".to_string()
            }
        };
        let estimate = &plan.estimate;
        StrategyExplain {
            strategy: plan.strategy.name().to_string(),
            pass_s: estimate.total_s,
            compute_s: estimate.compute_s,
            sync_s: estimate.sync_s,
            idle_s: estimate.idle_s,
            state_bytes: estimate.state_bytes,
            stages: estimate.stages,
            groups_whole: estimate.groups_whole,
            groups_cut: estimate.groups_cut,
            jumps: plan.jumps,
            cut: plan
                .cut
                .iter()
                .take(10)
                .map(|&(g, pieces)| CutGroup {
                    key: key(g),
                    rows: prepared.owners.rows_per_group[g],
                    pieces,
                })
                .collect(),
        }
    }
}
