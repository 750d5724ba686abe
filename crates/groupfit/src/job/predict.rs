//! Prediction with a trained bundle: [`predict_file`] (Parquet or CSV in,
//! Parquet or CSV out), [`predict_batch`] (a file in, Arrow out) and
//! [`predict_table`] (Arrow in and out); each row is routed to its group's
//! model.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use serde::Serialize;

use super::input::project;
use crate::data::csv::{is_csv, write_csv};
use crate::data::{missing_column, read_table, table_schema};
use crate::error::{GroupfitError, Result};
use crate::store::ModelBundle;
use crate::util::par::resolve_threads;

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
    /// With `--hierarchy`: rows served by a level above their group's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub level: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Predictions for every row of `data`, with the input's key columns, then
/// `prediction` and, with `with_route`, `route` (`own`, `fallback`,
/// `unseen`, or with `--hierarchy` the key columns of the level that served
/// the row, as `level:origin`).
pub fn predict_batch(
    bundle: &ModelBundle,
    data: &Path,
    with_route: bool,
) -> Result<(RecordBatch, PredictReport)> {
    let schema = table_schema(data)?;
    for column in bundle.key_columns.iter().chain(&bundle.features) {
        if schema.index_of(column).is_err() {
            return Err(missing_column(column, data, &schema));
        }
    }
    let batch = read_table(data, &bundle_columns(bundle), resolve_threads(0))?;
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
    let batch = project(batch, &bundle_columns(bundle), label)?;
    let key_count = bundle.key_columns.len();
    let keys: Vec<ArrayRef> = batch.columns()[..key_count].to_vec();
    let predictions = bundle.predict(
        &keys,
        &batch.columns()[key_count..],
        label,
        resolve_threads(0),
    )?;
    let mut fields: Vec<Field> = batch.schema().fields()[..key_count]
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("prediction", DataType::Float64, false));
    let mut columns = keys;
    columns.push(Arc::new(Float64Array::from(predictions.values.clone())));
    if with_route {
        fields.push(Field::new("route", DataType::Utf8, false));
        columns.push(Arc::new(StringArray::from_iter_values(
            predictions.routes.iter().map(|r| bundle.route_label(*r)),
        )));
    }
    let out = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| GroupfitError::arg(format!("cannot assemble predictions: {e}")))?;
    Ok((
        out,
        PredictReport {
            rows: predictions.values.len(),
            own: predictions.own,
            global: predictions.global,
            unseen: predictions.unseen,
            level: predictions.values.len() - predictions.own - predictions.global,
        },
    ))
}

/// The bundle's key columns, then its features.
fn bundle_columns(bundle: &ModelBundle) -> Vec<String> {
    let mut wanted = bundle.key_columns.clone();
    wanted.extend(bundle.features.iter().cloned());
    wanted
}

/// Loads `model`, predicts `data` and writes `out` (key columns +
/// `prediction` [+ `route`]) atomically: CSV when `out` ends in `.csv` or
/// `.csv.gz`, else Parquet.
pub fn predict_file(
    model: &Path,
    data: &Path,
    out: &Path,
    with_route: bool,
) -> Result<PredictReport> {
    let bundle = ModelBundle::load(model)?;
    let (batch, report) = predict_batch(&bundle, data, with_route)?;
    if is_csv(out) {
        write_csv(out, &batch)?;
    } else {
        write_parquet(out, &batch)?;
    }
    Ok(report)
}

/// Writes one batch as Parquet, atomically.
pub fn write_parquet(path: &Path, batch: &RecordBatch) -> Result<()> {
    crate::util::fs::write_atomic(path, |f| {
        let mut writer = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), None)
            .map_err(|e| GroupfitError::io("write", path, e))?;
        writer
            .write(batch)
            .map_err(|e| GroupfitError::io("write", path, e))?;
        writer
            .close()
            .map_err(|e| GroupfitError::io("write", path, e))?;
        Ok(())
    })
}
