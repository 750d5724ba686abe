//! The user-level jobs: [`train`] (file in, bundle out), [`train_table`]
//! (Arrow in memory), [`explain`] (the plan without training) and
//! [`predict_file`] / [`predict_batch`] / [`predict_table`].
//!
//! Training runs one stage after another, each in its own module, handing a
//! typed value to the next:
//!
//! 1. `arguments` — the spec's checks that need no data; the grid.
//! 2. `input` — the feature list, the tables (Parquet or Arrow), the numeric
//!    target and features, group ids.
//! 3. `split` — rows without a target dropped, validation rows held out, the
//!    task inferred, groups numbered; which groups fall back.
//! 4. `validation` — the validation rows (the `--valid` table's or the
//!    held-out ones); `prepare` gathers stages 2-4 into a `Prepared` job.
//! 5. `fit` — the family fits every (group, config) unit and the global model.
//! 6. `select` — every unit scored on its group's validation rows; the best
//!    config per group kept.
//! 7. `assemble` — the [`ModelBundle`](crate::store::ModelBundle) and its
//!    [`Summary`] (`summary`).
//!
//! `explain` runs stages 1-4 and then asks the family for its plan.

use std::time::Instant;

use arrow_array::RecordBatch;

use crate::error::{GroupfitError, Result};
use crate::registry::{family, AnyFamily};
use crate::tune::ConfigEntry;

mod arguments;
mod assemble;
mod columns;
mod event;
mod explain;
mod fit;
mod input;
mod levels;
mod memory;
mod pooling;
mod predict;
mod prepare;
mod select;
mod split;
mod summary;
mod validation;

pub use crate::exec::{OnProgress, Progress, Stage};
pub use arguments::TrainSpec;
pub use columns::ColumnAccount;
use event::trace_stamp;
pub use explain::{
    explain, explain_on, explain_table, Calibration, CutGroup, ExplainOutput, NetworkTerm,
    RemoteWorkers, StrategyExplain,
};
pub use memory::{MemoryEstimate, MemoryLimit, MemorySummary};
pub use pooling::{PoolLevel, PoolingSummary};
pub use predict::{
    input_batches, predict_batch, predict_file, predict_indexed, predict_table, read_for,
    write_parquet, write_parquet_batches, PredictReport, PredictStream,
};
pub use split::Fallbacks;
pub use summary::{LevelSummary, Routes, Summary, TrainOutput};

use prepare::{prepare, Job, Prepared};

/// Trains one model per (group, config) from Parquet or CSV files
/// (`spec.data`, `spec.valid`), selects per group, and returns the bundle.
pub fn train(spec: &TrainSpec, on: &mut OnProgress<'_>) -> Result<TrainOutput> {
    train_with(spec, family(&spec.model)?.as_ref(), on)
}

/// [`train`] with the fitting done by `family` instead of the registry's
/// family for `spec.model` (a runner that fits a registered family's units
/// elsewhere, e.g. on Ray workers, still gets the shared reading, split,
/// scoring and selection).
pub fn train_with(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    on: &mut OnProgress<'_>,
) -> Result<TrainOutput> {
    train_from(spec, family, on, |on, started, grid, limit| {
        let tables = input::read_files(spec, family, grid, limit, on)?;
        trace_stamp(started, "read parquet");
        Ok(tables)
    })
}

/// Trains from in-memory Arrow data: `train` holds the training rows,
/// `valid` (when given) the validation rows, and `spec.data` / `spec.valid`
/// only name them in messages. Without `valid`, `spec.valid_fraction` of the
/// training rows are held out as in [`train`].
pub fn train_table(
    spec: &TrainSpec,
    train: &RecordBatch,
    valid: Option<&RecordBatch>,
    on: &mut OnProgress<'_>,
) -> Result<TrainOutput> {
    train_table_with(spec, family(&spec.model)?.as_ref(), train, valid, on)
}

/// [`train_table`] with the fitting done by `family` (see [`train_with`]).
pub fn train_table_with(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    train: &RecordBatch,
    valid: Option<&RecordBatch>,
    on: &mut OnProgress<'_>,
) -> Result<TrainOutput> {
    train_from(spec, family, on, |_, _, grid, limit| {
        input::from_batches(spec, family, grid, limit, train, valid)
    })
}

/// The stages every training job runs: the argument checks, then `load`
/// (given the event sink, the start time, the grid and the memory limit)
/// for the input tables, then preparation, fitting, selection and assembly.
fn train_from(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    on: &mut OnProgress<'_>,
    load: impl FnOnce(
        &mut OnProgress<'_>,
        Instant,
        &[ConfigEntry],
        Option<&MemoryLimit>,
    ) -> Result<input::Tables>,
) -> Result<TrainOutput> {
    let job = Job {
        spec,
        family,
        started: Instant::now(),
    };
    let grid = arguments::check_arguments(spec, family)?;
    if let Some(cap) = crate::math::simd::unknown_cap() {
        return Err(GroupfitError::arg(format!(
            "GROUPFIT_SIMD='{cap}' names no SIMD level (scalar, avx2, avx512, avx512vbmi2)"
        )));
    }
    if crate::util::trace::trace() {
        eprintln!("[groupfit] simd: {}", crate::math::simd::level().name());
    }
    let limit = memory::limit(spec);
    let tables = load(on, job.started, &grid, limit.as_ref())?;
    let prepared = prepare(job, grid, tables)?;
    train_prepared(prepared, limit, on)
}

/// Fits a prepared job, selects each group's config and assembles the bundle.
fn train_prepared(
    mut prepared: Prepared,
    limit: Option<MemoryLimit>,
    on: &mut OnProgress<'_>,
) -> Result<TrainOutput> {
    if let Some(mode) = pooling::mode(&prepared) {
        mode.check_rows(prepared.split.train_rows.len() as u64)?;
    }
    let (mut fitted, trained) = fit::fit(&prepared, on)?;
    on(trained.at(Stage::Scoring));
    let mut levels = Vec::new();
    let mut level_models = 0;
    // The global model (with levels, the root's units) is scored once for all levels.
    let global_units = prepared
        .flat
        .as_ref()
        .map_or(prepared.n_groups(), |f| f.root);
    let global =
        select::GlobalSelection::score(&prepared, &fitted.impute, &fitted.units[global_units]);
    if let Some(root) = prepared.flat.as_ref().map(|f| f.root) {
        // Each level above the finest is selected as a job of its own (its
        // groups, owners and validation groups swapped in), with the root's
        // units as its global model; then the finest the same way.
        for part in std::mem::take(&mut prepared.levels) {
            let mut own = fitted.take_level(part.base, part.split.n_groups(), root);
            let split = std::mem::replace(&mut prepared.split, part.split);
            let owners = std::mem::replace(&mut prepared.owners, part.owners);
            let groups = std::mem::replace(&mut prepared.validation.groups, part.valid_groups);
            let selection = select::select(&prepared, &own, &global)?;
            let (entries, _) =
                assemble::group_entries(&prepared, &mut own.units, &own.report.group_s, &selection);
            let fitted_groups = prepared.owners.fit[..prepared.n_groups()]
                .iter()
                .filter(|&&f| f)
                .count();
            level_models += fitted_groups * prepared.grid.len();
            levels.push(crate::store::LevelGroups {
                key_columns: prepared.spec.by[..part.level].to_vec(),
                groups: entries,
            });
            prepared.split = split;
            prepared.owners = owners;
            prepared.validation.groups = groups;
        }
        let not_converged = fitted.not_converged;
        fitted = fitted.take_level(0, prepared.n_groups(), root);
        fitted.not_converged = not_converged;
    }
    let selection = select::select(&prepared, &fitted, &global)?;
    trace_stamp(prepared.started, "selection");
    let mut out = assemble::assemble(&prepared, fitted, selection);
    if !levels.is_empty() {
        out.summary.models += level_models;
        out.summary.levels = levels
            .iter()
            .map(|l| LevelSummary {
                key: l.key_columns.join("/"),
                groups: l.groups.len(),
                own_models: l.groups.iter().filter(|g| g.model.is_some()).count(),
            })
            .collect();
        out.bundle.levels = levels;
    }
    out.summary.pooling = pooling::pool(&prepared, &mut out.bundle);
    trace_stamp(prepared.started, "pooling");
    out.summary.memory = Some(MemorySummary {
        estimate: prepared.memory.clone(),
        limit,
        peak_bytes: crate::util::mem::peak_bytes(),
    });
    out.summary.train_s = prepared.prepared_at.elapsed().as_secs_f64();
    out.summary.wall_s = prepared.started.elapsed().as_secs_f64();
    out.bundle.summary = serde_json::to_value(&out.summary).expect("summary serialises");
    Ok(out)
}
