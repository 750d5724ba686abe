//! Reading the input: the feature list (given or defaulted) checked against
//! the schema, the key, target and feature columns read from Parquet or taken
//! from in-memory Arrow tables, and the training table turned into a numeric
//! target, feature columns and group ids.

use std::path::{Path, PathBuf};
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_schema::Schema;

use super::arguments::TrainSpec;
use super::event::{trace_stamp, Event};
use crate::data::csv::is_csv;
use crate::data::keys::GroupEncoder;
use crate::data::{
    default_features, is_numeric, missing_column, numeric_column, read_table, table_schema, Column,
};
use crate::error::{GroupfitError, Result};
use crate::registry::AnyFamily;
use crate::util::par::resolve_threads;

/// A table holding the keys, then the target, then (if read) the features,
/// with the path that names it in messages.
pub(super) struct Table {
    pub batch: RecordBatch,
    pub path: PathBuf,
}

/// The checked feature list and the tables to train and validate on.
pub(super) struct Tables {
    pub features: Vec<String>,
    pub train: Table,
    /// Whether the training table holds the features (otherwise the family
    /// reads them itself from the training file).
    pub features_read: bool,
    /// The validation table (`--valid`); `None`: rows are held out of `train`.
    pub valid: Option<Table>,
}

/// The training table as numbers: target, feature columns, group ids.
pub(super) struct Loaded {
    /// Target over every row of the training table (NaN: missing).
    pub target: Vec<f64>,
    /// Feature columns over every row; empty unless the features were read.
    pub columns: Vec<Column>,
    pub groups: EncodedGroups,
}

/// Every distinct key of the training table, and each row's key id.
pub(super) struct EncodedGroups {
    pub encoder: GroupEncoder,
    /// Key id (index into `encoder.keys()`) of each row of the training table.
    pub row_keys: Vec<u32>,
}

/// Reads the Parquet or CSV inputs of `spec` (only the columns it needs);
/// the training file's features only when `family` does not read them
/// itself, which it does from Parquet only.
pub(super) fn read_files(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    on: &mut dyn FnMut(Event),
) -> Result<Tables> {
    let path = spec.data.as_path();
    let schema = table_schema(path)?;
    let features = resolve_features(spec, &schema, path)?;
    if let Some(valid_path) = &spec.valid {
        check_columns(spec, &features, &*table_schema(valid_path)?, valid_path)?;
    }
    on(Event::Stage("reading"));
    let wanted = wanted_columns(spec, &features);
    let threads = resolve_threads(spec.threads);
    // A family that reads the features itself gets the keys and the target.
    let features_read = !family.features_from_file() || is_csv(path);
    let batch = if features_read {
        read_table(path, &wanted, threads)?
    } else {
        read_table(path, &wanted[..spec.by.len() + 1], threads)?
    };
    let valid = match &spec.valid {
        Some(valid_path) => Some(Table {
            batch: read_table(valid_path, &wanted, threads)?,
            path: valid_path.clone(),
        }),
        None => None,
    };
    Ok(Tables {
        features,
        train: Table {
            batch,
            path: path.to_path_buf(),
        },
        features_read,
        valid,
    })
}

/// Takes the columns `spec` needs from in-memory tables; `spec.data` and
/// `spec.valid` only name them in messages.
pub(super) fn from_batches(
    spec: &TrainSpec,
    train: &RecordBatch,
    valid: Option<&RecordBatch>,
) -> Result<Tables> {
    let path = spec.data.as_path();
    let features = resolve_features(spec, &train.schema(), path)?;
    let wanted = wanted_columns(spec, &features);
    let batch = project(train, &wanted, path)?;
    let valid_path = spec
        .valid
        .clone()
        .unwrap_or_else(|| PathBuf::from("validation data"));
    let valid = match valid {
        Some(valid) => {
            check_columns(spec, &features, &valid.schema(), &valid_path)?;
            Some(Table {
                batch: project(valid, &wanted, &valid_path)?,
                path: valid_path,
            })
        }
        None => None,
    };
    Ok(Tables {
        features,
        train: Table {
            batch,
            path: path.to_path_buf(),
        },
        features_read: true,
        valid,
    })
}

/// Converts the training table: the target, the features (if read) and the
/// group ids of every row.
pub(super) fn load(spec: &TrainSpec, tables: &Tables, started: Instant) -> Result<Loaded> {
    let Table { batch, path } = &tables.train;
    let key_count = spec.by.len();
    if batch.num_rows() == 0 {
        return Err(GroupfitError::EmptyInput {
            path: path.display().to_string(),
            detail: String::new(),
        });
    }
    let target = numeric_column(batch.column(key_count), &spec.target, path, true)?;
    let columns = if tables.features_read {
        feature_columns(batch, key_count + 1, &tables.features, path)?
    } else {
        Vec::new()
    };
    trace_stamp(started, "numeric columns");
    let mut encoder = GroupEncoder::new(key_count);
    let row_keys = encoder.encode(&batch.columns()[..key_count])?;
    trace_stamp(started, "group encoding");
    Ok(Loaded {
        target,
        columns,
        groups: EncodedGroups { encoder, row_keys },
    })
}

/// Checks that the keys, the target and the features are in `schema`, and
/// that the target and the features are numeric.
fn check_columns(
    spec: &TrainSpec,
    features: &[String],
    schema: &Schema,
    path: &Path,
) -> Result<()> {
    for column in spec
        .by
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(spec.target.as_str()))
        .chain(features.iter().map(String::as_str))
    {
        if schema.index_of(column).is_err() {
            return Err(missing_column(column, path, schema));
        }
    }
    for column in features
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(spec.target.as_str()))
    {
        let dtype = schema.field_with_name(column).unwrap().data_type();
        if !is_numeric(dtype) {
            return Err(GroupfitError::NonNumericColumn {
                column: column.to_string(),
                path: path.display().to_string(),
                dtype: dtype.to_string(),
            });
        }
    }
    Ok(())
}

/// Checks that a binary target holds only 0, 1 or missing values.
pub(super) fn check_binary(target: &[f64], column: &str, path: &Path) -> Result<()> {
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

/// The feature list (given or defaulted), checked against `schema`.
fn resolve_features(spec: &TrainSpec, schema: &Schema, path: &Path) -> Result<Vec<String>> {
    let features = match &spec.features {
        Some(features) if features.is_empty() => {
            return Err(GroupfitError::arg(
                "--features names no column; name at least one (or leave it out for every numeric column)",
            ))
        }
        Some(features) => features.clone(),
        None => default_features(schema, &spec.by, Some(&spec.target)),
    };
    check_columns(spec, &features, schema, path)?;
    if let Some(feature) = features
        .iter()
        .find(|f| spec.by.contains(f) || **f == spec.target)
    {
        return Err(GroupfitError::arg(format!(
            "column '{feature}' cannot be both a feature and a key or the target"
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
pub(super) fn project(batch: &RecordBatch, wanted: &[String], path: &Path) -> Result<RecordBatch> {
    let schema = batch.schema();
    let indices = wanted
        .iter()
        .map(|column| {
            schema
                .index_of(column)
                .map_err(|_| missing_column(column, path, &schema))
        })
        .collect::<Result<Vec<_>>>()?;
    batch
        .project(&indices)
        .map_err(|e| GroupfitError::arg(format!("cannot select columns: {e}")))
}

/// The feature columns of `batch` (from column `first` on), checked.
pub(super) fn feature_columns(
    batch: &RecordBatch,
    first: usize,
    features: &[String],
    path: &Path,
) -> Result<Vec<Column>> {
    features
        .iter()
        .enumerate()
        .map(|(j, feature)| Column::from_array(batch.column(first + j), feature, path, true))
        .collect()
}
