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

use crate::error::Result;
use crate::registry::{family, AnyFamily};

mod arguments;
mod assemble;
mod columns;
mod event;
mod explain;
mod fit;
mod input;
mod predict;
mod prepare;
mod select;
mod split;
mod summary;
mod validation;

pub use arguments::TrainSpec;
pub use columns::ColumnAccount;
use event::trace_stamp;
pub use event::Event;
pub use explain::{explain, Calibration, CutGroup, ExplainOutput, StrategyExplain};
pub use predict::{predict_batch, predict_file, predict_table, write_parquet, PredictReport};
pub use split::Fallbacks;
pub use summary::{Routes, Summary, TrainOutput};

use prepare::{prepare, Job, Prepared};

/// Trains one model per (group, config) from Parquet or CSV files
/// (`spec.data`, `spec.valid`), selects per group, and returns the bundle.
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
    train_from(spec, family, on, |on, started| {
        let tables = input::read_files(spec, family, on)?;
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
    train_from(spec, family, on, |_, _| {
        input::from_batches(spec, train, valid)
    })
}

/// The stages every training job runs: the argument checks, then `load`
/// (given the event sink and the start time) for the input tables, then
/// preparation, fitting, selection and assembly.
fn train_from(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    on: &mut dyn FnMut(Event),
    load: impl FnOnce(&mut dyn FnMut(Event), Instant) -> Result<input::Tables>,
) -> Result<TrainOutput> {
    let job = Job {
        spec,
        family,
        started: Instant::now(),
    };
    let grid = arguments::check_arguments(spec, family)?;
    let tables = load(on, job.started)?;
    let prepared = prepare(job, grid, tables)?;
    train_prepared(prepared, on)
}

/// Fits a prepared job, selects each group's config and assembles the bundle.
fn train_prepared(prepared: Prepared, on: &mut dyn FnMut(Event)) -> Result<TrainOutput> {
    let fitted = fit::fit(&prepared, on)?;
    on(Event::Stage("scoring"));
    let selection = select::select(&prepared, &fitted)?;
    trace_stamp(prepared.started, "selection");
    Ok(assemble::assemble(prepared, fitted, selection))
}
