//! Data ingest: Parquet/Arrow in, numeric columns, group encoding and the
//! group-sorted layout the solvers scan.
//!
//! * [`read_parquet`] reads the projected columns of a file into one Arrow batch.
//! * [`numeric_column`] turns one column into `f64` (nulls become NaN) and
//!   rejects non-numeric types and infinities with a message naming the column.
//! * [`keys::GroupEncoder`] maps key tuples (one or more key columns) to dense
//!   group ids; nulls in a key column form their own group.
//! * [`layout::GroupedMatrix`] holds the features of every row, standardised
//!   per group, as `f32` with the rows of one group contiguous.

pub mod keys;
pub mod layout;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use serde::{Deserialize, Serialize};

use crate::error::{GroupfitError, Result};

/// What the target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// A 0/1 target: models output the probability of 1, scored by log-loss.
    Binary,
    /// A real target: models output the value, scored by RMSE.
    Regression,
}

impl Task {
    /// The lower-case name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Task::Binary => "binary",
            Task::Regression => "regression",
        }
    }

    /// Parses `binary` / `regression`.
    pub fn parse(s: &str) -> Result<Task> {
        match s {
            "binary" => Ok(Task::Binary),
            "regression" => Ok(Task::Regression),
            other => Err(GroupfitError::arg(format!(
                "unknown task '{other}' (expected binary or regression)"
            ))),
        }
    }
}

/// The schema of a Parquet file, without reading its data.
pub fn parquet_schema(path: &Path) -> Result<Arc<Schema>> {
    let file = File::open(path).map_err(|e| GroupfitError::io("read", path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
        GroupfitError::Parquet {
            path: path.display().to_string(),
            reason: e.to_string(),
        }
    })?;
    Ok(builder.schema().clone())
}

/// Reads the named columns of a Parquet file into one record batch, in the
/// order given. A name the file lacks is a [`GroupfitError::MissingColumn`].
pub fn read_parquet(path: &Path, columns: &[String]) -> Result<RecordBatch> {
    let pq_err = |e: &dyn std::fmt::Display| GroupfitError::Parquet {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let file = File::open(path).map_err(|e| GroupfitError::io("read", path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| pq_err(&e))?;
    let schema = builder.schema().clone();
    let mut indices = Vec::with_capacity(columns.len());
    for name in columns {
        match schema.index_of(name) {
            Ok(i) => indices.push(i),
            Err(_) => return Err(missing_column(name, path, &schema)),
        }
    }
    let rows = builder.metadata().file_metadata().num_rows().max(0) as usize;
    let mask = ProjectionMask::roots(builder.parquet_schema(), indices.iter().copied());
    let reader = builder
        .with_projection(mask)
        .with_batch_size(rows.max(1))
        .build()
        .map_err(|e| pq_err(&e))?;
    let mut batches = Vec::new();
    for b in reader {
        batches.push(b.map_err(|e| pq_err(&e))?);
    }
    let projected = match batches.first() {
        Some(b) => b.schema(),
        None => Arc::new(Schema::new(
            indices
                .iter()
                .map(|&i| schema.field(i).clone())
                .collect::<Vec<_>>(),
        )),
    };
    let batch = arrow_select_concat(&projected, &batches).map_err(|e| pq_err(&e))?;
    // Re-order the projected columns into the order asked for.
    let mut cols = Vec::with_capacity(columns.len());
    let mut fields = Vec::with_capacity(columns.len());
    for name in columns {
        let i = batch.schema().index_of(name).map_err(|e| pq_err(&e))?;
        cols.push(batch.column(i).clone());
        fields.push(batch.schema().field(i).clone());
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).map_err(|e| pq_err(&e))
}

fn arrow_select_concat(
    schema: &Arc<Schema>,
    batches: &[RecordBatch],
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    match batches.len() {
        0 => Ok(RecordBatch::new_empty(schema.clone())),
        1 => Ok(batches[0].clone()),
        _ => arrow_select::concat::concat_batches(schema, batches),
    }
}

/// The error for a column the file does not have.
pub fn missing_column(name: &str, path: &Path, schema: &Schema) -> GroupfitError {
    let available: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    GroupfitError::MissingColumn {
        column: name.to_string(),
        path: path.display().to_string(),
        available: available.join(", "),
    }
}

/// Whether an Arrow type can serve as a feature or target.
pub fn is_numeric(dt: &DataType) -> bool {
    dt.is_numeric() || matches!(dt, DataType::Boolean)
}

/// Converts one column to `f64`, nulls as NaN. Non-numeric types are a
/// [`GroupfitError::NonNumericColumn`]; with `reject_inf`, an infinite value is a
/// [`GroupfitError::InfiniteValue`] naming the row.
pub fn numeric_column(
    array: &ArrayRef,
    name: &str,
    path: &Path,
    reject_inf: bool,
) -> Result<Vec<f64>> {
    if !is_numeric(array.data_type()) {
        return Err(GroupfitError::NonNumericColumn {
            column: name.to_string(),
            path: path.display().to_string(),
            dtype: array.data_type().to_string(),
        });
    }
    let cast = arrow_cast::cast(array, &DataType::Float64).map_err(|e| GroupfitError::Parquet {
        path: path.display().to_string(),
        reason: format!("column '{name}': {e}"),
    })?;
    let prim = cast.as_primitive::<Float64Type>();
    let mut out: Vec<f64> = prim.values().to_vec();
    if let Some(nulls) = prim.nulls() {
        for (i, v) in out.iter_mut().enumerate() {
            if nulls.is_null(i) {
                *v = f64::NAN;
            }
        }
    }
    if reject_inf {
        if let Some(row) = out.iter().position(|v| v.is_infinite()) {
            return Err(GroupfitError::InfiniteValue {
                column: name.to_string(),
                path: path.display().to_string(),
                row,
            });
        }
    }
    Ok(out)
}

/// The default feature list: every numeric column that is neither a key nor the target.
pub fn default_features(schema: &Schema, keys: &[String], target: Option<&str>) -> Vec<String> {
    schema
        .fields()
        .iter()
        .filter(|f| is_numeric(f.data_type()))
        .map(|f| f.name().clone())
        .filter(|n| !keys.contains(n) && Some(n.as_str()) != target)
        .collect()
}

/// Deterministic pseudo-random number in [0, 1) for row `i` under `seed`
/// (SplitMix64), used for the validation split so that it does not depend on
/// threads or on the order of work.
pub fn row_uniform(seed: u64, i: u64) -> f64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i)
        .wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};

    #[test]
    fn numeric_column_casts_and_maps_nulls_to_nan() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(3), None, Some(-1)]));
        let v = numeric_column(&a, "x", Path::new("f.parquet"), true).unwrap();
        assert_eq!(v[0], 3.0);
        assert!(v[1].is_nan());
        assert_eq!(v[2], -1.0);
    }

    #[test]
    fn numeric_column_rejects_strings_naming_the_column() {
        let a: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        let e = numeric_column(&a, "carrier", Path::new("f.parquet"), true).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("'carrier'") && msg.contains("not numeric"), "{msg}");
    }

    #[test]
    fn numeric_column_rejects_infinity_with_row() {
        let a: ArrayRef = Arc::new(arrow_array::Float64Array::from(vec![1.0, f64::INFINITY]));
        let e = numeric_column(&a, "f3", Path::new("f.parquet"), true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "column 'f3' in 'f.parquet' has an infinite value at row 1"
        );
    }

    #[test]
    fn row_uniform_is_deterministic_and_spread() {
        assert_eq!(row_uniform(1, 5), row_uniform(1, 5));
        assert_ne!(row_uniform(1, 5), row_uniform(2, 5));
        let n = 10_000;
        let below = (0..n).filter(|&i| row_uniform(0, i) < 0.2).count();
        assert!((1800..2200).contains(&below), "{below}");
    }
}
