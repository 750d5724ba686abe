//! Prediction with a trained bundle: [`predict_file`] (Parquet or CSV in,
//! Parquet or CSV out, streamed), [`PredictStream`] (a file in, Arrow
//! batches out), [`predict_batch`] (a file in, one Arrow batch out) and
//! [`predict_table`] (Arrow in and out); each row is routed to its group's
//! model.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use serde::Serialize;

use super::input::project;
use crate::data::csv::{is_csv, write_csv_batches};
use crate::data::{missing_column, read_table, table_batches, table_schema, Batches, STREAM_ROWS};
use crate::error::{GroupfitError, Result};
use crate::store::{KeyIndex, ModelBundle};
use crate::util::par::resolve_threads;

/// What [`predict_file`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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
    let batch = read_for(bundle, data)?;
    predict_table(bundle, &batch, data, with_route)
}

/// The columns of `data` that `bundle` predicts from (its key and feature
/// columns), read whole; a missing one is an error naming it and the file.
pub fn read_for(bundle: &ModelBundle, data: &Path) -> Result<RecordBatch> {
    let schema = table_schema(data)?;
    for column in bundle.key_columns.iter().chain(&bundle.features) {
        if schema.index_of(column).is_err() {
            return Err(missing_column(column, data, &schema));
        }
    }
    read_table(data, &bundle_columns(bundle), resolve_threads(0))
}

/// [`predict_batch`] for in-memory Arrow data: `batch` must hold the bundle's
/// key and feature columns (others are ignored); `label` names it in messages.
pub fn predict_table(
    bundle: &ModelBundle,
    batch: &RecordBatch,
    label: &Path,
    with_route: bool,
) -> Result<(RecordBatch, PredictReport)> {
    predict_indexed(bundle, &bundle.key_index(), batch, label, with_route)
}

/// [`predict_table`] with the bundle's key index built by the caller (once
/// for every batch of a file: a model of a million groups takes seconds to
/// index).
pub fn predict_indexed(
    bundle: &ModelBundle,
    index: &KeyIndex,
    batch: &RecordBatch,
    label: &Path,
    with_route: bool,
) -> Result<(RecordBatch, PredictReport)> {
    let batch = project(batch, &bundle_columns(bundle), label)?;
    let key_count = bundle.key_columns.len();
    let keys: Vec<ArrayRef> = batch.columns()[..key_count].to_vec();
    let predictions = bundle.predict_indexed(
        index,
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
/// `.csv.gz`, else Parquet. The input is read [`STREAM_ROWS`] rows at a
/// time and each batch is written once predicted, so memory is bounded by
/// the batch and the model, not the input. The output's rows are the
/// input's, in order. An error leaves no output.
pub fn predict_file(
    model: &Path,
    data: &Path,
    out: &Path,
    with_route: bool,
) -> Result<PredictReport> {
    let bundle = ModelBundle::load(model)?;
    let stream = PredictStream::open(&bundle, data, with_route)?;
    let empty = stream.empty()?;
    let mut report = PredictReport::default();
    let batches = stream.map(|b| {
        let (batch, r) = b?;
        report.add(&r);
        Ok(batch)
    });
    if is_csv(out) {
        write_csv_batches(out, &empty, batches)?;
    } else {
        write_parquet_batches(out, &empty, batches)?;
    }
    Ok(report)
}

/// The predictions of a file, batch by batch: each batch of
/// [`STREAM_ROWS`] input rows is read, predicted ([`predict_table`]) and
/// handed on.
pub struct PredictStream<'a> {
    bundle: &'a ModelBundle,
    index: KeyIndex,
    path: std::path::PathBuf,
    with_route: bool,
    batches: Batches,
}

impl<'a> PredictStream<'a> {
    /// Opens `data` ([`input_batches`]).
    pub fn open(bundle: &'a ModelBundle, data: &Path, with_route: bool) -> Result<Self> {
        Ok(PredictStream {
            bundle,
            index: bundle.key_index(),
            path: data.to_path_buf(),
            with_route,
            batches: input_batches(bundle, data)?,
        })
    }

    /// The output of no rows (its schema: what an empty input writes).
    pub fn empty(&self) -> Result<RecordBatch> {
        let schema = table_schema(&self.path)?;
        let input = RecordBatch::new_empty(schema);
        Ok(predict_indexed(
            self.bundle,
            &self.index,
            &input,
            &self.path,
            self.with_route,
        )?
        .0)
    }
}

/// The bundle's key and feature columns of `data`, [`STREAM_ROWS`] rows
/// at a time; the first one `data` lacks is a
/// [`GroupfitError::MissingColumn`].
pub fn input_batches(bundle: &ModelBundle, data: &Path) -> Result<Batches> {
    table_batches(data, &bundle_columns(bundle), STREAM_ROWS)
}

impl Iterator for PredictStream<'_> {
    type Item = Result<(RecordBatch, PredictReport)>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = self.batches.next()?;
        Some(batch.and_then(|b| {
            predict_indexed(self.bundle, &self.index, &b, &self.path, self.with_route)
        }))
    }
}

impl PredictReport {
    /// Adds another batch's counts.
    pub fn add(&mut self, other: &PredictReport) {
        self.rows += other.rows;
        self.own += other.own;
        self.global += other.global;
        self.unseen += other.unseen;
        self.level += other.level;
    }
}

/// Writes the batches as one Parquet file, atomically: the first error
/// leaves no file. `empty` gives the schema when no batch comes.
pub fn write_parquet_batches(
    path: &Path,
    empty: &RecordBatch,
    batches: impl Iterator<Item = Result<RecordBatch>>,
) -> Result<()> {
    crate::util::fs::write_atomic(path, |f| {
        let err = |e: parquet::errors::ParquetError| GroupfitError::io("write", path, e);
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(f, empty.schema(), None).map_err(err)?;
        for batch in batches {
            writer.write(&batch?).map_err(err)?;
        }
        writer.close().map_err(err)?;
        Ok(())
    })
}

/// Writes one batch as Parquet, atomically.
pub fn write_parquet(path: &Path, batch: &RecordBatch) -> Result<()> {
    write_parquet_batches(path, batch, std::iter::once(Ok(batch.clone())))
}
