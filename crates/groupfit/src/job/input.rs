//! Reading the input: the feature plan (given or defaulted) checked against
//! the schema, the key, target and feature columns read from Parquet or taken
//! from in-memory Arrow tables, and the training table turned into a numeric
//! target, feature columns (categorical ones as codes) and group ids.

use std::path::{Path, PathBuf};
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Schema};

use super::arguments::TrainSpec;
use super::columns::{check_present, plan_columns, ColumnAccount, ColumnPlan, Declared};
use super::event::trace_stamp;
use super::memory::{check, estimate, InputMemory, MemoryEstimate, MemoryLimit};
use crate::data::categorical::{all_null, Dictionary, Encoding, FeatureKind};
use crate::data::csv::is_csv;
use crate::data::keys::GroupEncoder;
use crate::data::{
    column_indices, missing_column, numeric_column, parquet_rows, read_table, table_schema, Column,
};
use crate::error::{GroupfitError, Result};
use crate::exec::{OnProgress, Progress, Stage};
use crate::registry::AnyFamily;
use crate::tune::ConfigEntry;
use crate::util::par::resolve_threads;

/// A table holding the keys, then the target, then (if read) the features,
/// with the path that names it in messages.
pub(super) struct Table {
    pub batch: RecordBatch,
    pub path: PathBuf,
}

/// The checked feature plan and the tables to train and validate on.
pub(super) struct Tables {
    pub plan: ColumnPlan,
    pub train: Table,
    /// Whether the training table holds the features (otherwise the family
    /// reads them itself from the training file).
    pub features_read: bool,
    /// The validation table (`--valid`); `None`: rows are held out of `train`.
    pub valid: Option<Table>,
    /// The training table's key ids (taken by `load`).
    pub groups: Option<EncodedGroups>,
    /// The job's estimated peak memory.
    pub memory: MemoryEstimate,
}

/// The training table as numbers: target, feature columns, group ids.
pub(super) struct Loaded {
    /// Target over every row of the training table (NaN: missing).
    pub target: Vec<f64>,
    /// The features used (all-null default ones left out), in model order.
    pub features: Vec<Feature>,
    /// Feature columns over every row (categorical ones as codes); empty
    /// unless the features were read.
    pub columns: Vec<Column>,
    /// What was done with each column.
    pub account: ColumnAccount,
    pub groups: EncodedGroups,
}

/// One feature: its name and, if categorical, its dictionary.
#[derive(Debug, Clone)]
pub(super) struct Feature {
    pub name: String,
    pub dictionary: Option<Dictionary>,
}

impl Feature {
    /// How a family sees it.
    pub fn kind(&self) -> FeatureKind {
        match &self.dictionary {
            None => FeatureKind::Numeric,
            Some(d) => FeatureKind::Categorical {
                levels: d.levels.len() as u32,
            },
        }
    }

    /// How a table's column of it is read.
    pub fn encoding(&self) -> Encoding<'_> {
        match &self.dictionary {
            None => Encoding::Numeric,
            Some(d) => Encoding::Categorical(d),
        }
    }
}

/// Every distinct key of the training table, and each row's key id.
pub(super) struct EncodedGroups {
    pub encoder: GroupEncoder,
    /// Key id (index into `encoder.keys()`) of each row of the training table.
    pub row_keys: Vec<u32>,
}

/// Reads the Parquet or CSV inputs of `spec` (only the columns it needs);
/// the training file's features only when `family` does not read them
/// itself, which it does from Parquet only and when none is categorical.
/// From Parquet, the keys and the target are read first: the job's memory
/// is estimated and checked against `limit` before the features are read.
pub(super) fn read_files(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    grid: &[ConfigEntry],
    limit: Option<&MemoryLimit>,
    on: &mut OnProgress<'_>,
) -> Result<Tables> {
    let path = spec.data.as_path();
    let schema = table_schema(path)?;
    let plan = plan_columns(spec, &schema, path)?;
    let valid_schema = match &spec.valid {
        Some(valid_path) => {
            let valid_schema = table_schema(valid_path)?;
            check_present(spec, &plan.features, &valid_schema, valid_path)?;
            Some(valid_schema)
        }
        None => None,
    };
    on(Progress::stage(Stage::Reading));
    let wanted = wanted_columns(spec, &plan.features);
    let head = spec.by.len() + 1;
    let threads = resolve_threads(spec.threads);
    let csv = is_csv(path);
    // A family that reads the features itself gets the keys and the target;
    // categorical features are coded here, so then every feature is read.
    let features_read = !family.features_from_file(grid)
        || csv
        || plan.declared.iter().any(|d| *d != Declared::Numeric);
    // CSV has no row count to estimate from before reading: it is read
    // whole, and its features count as held.
    let first = if csv && features_read {
        &wanted[..]
    } else {
        &wanted[..head]
    };
    let mut batch = read_table(path, first, threads)?;
    let groups = encode_groups(spec, &batch)?;
    // A CSV validation file is read now, for its row count.
    let mut valid = match &spec.valid {
        Some(valid_path) if is_csv(valid_path) => Some(Table {
            batch: read_table(valid_path, &wanted, threads)?,
            path: valid_path.clone(),
        }),
        _ => None,
    };
    let valid_rows = match (&spec.valid, &valid) {
        (_, Some(table)) => table.batch.num_rows(),
        (Some(valid_path), None) => parquet_rows(valid_path)?,
        (None, None) => 0,
    };
    let feature_bytes = |schema: &Schema, held: bool| {
        feature_row_bytes(schema, &plan.features, &plan.declared, held)
    };
    let input = InputMemory {
        table_rows: batch.num_rows(),
        valid_table_rows: valid_rows,
        features: plan.features.len(),
        feature_row_bytes: if features_read {
            feature_bytes(&schema, csv)
        } else {
            0
        },
        valid_row_bytes: valid_schema
            .as_deref()
            .map_or(0, |s| feature_bytes(s, valid.is_some())),
        keys_bytes: batch.get_array_memory_size() as u64,
    };
    let memory = checked_estimate(spec, family, grid, limit, input, &groups)?;
    if features_read && !csv {
        let features = read_table(path, &wanted[head..], threads)?;
        batch = join_columns(&batch, &features, path)?;
    }
    if let (Some(valid_path), None) = (&spec.valid, &valid) {
        valid = Some(Table {
            batch: read_table(valid_path, &wanted, threads)?,
            path: valid_path.clone(),
        });
    }
    Ok(Tables {
        plan,
        train: Table {
            batch,
            path: path.to_path_buf(),
        },
        features_read,
        valid,
        groups: Some(groups),
        memory,
    })
}

/// Takes the columns `spec` needs from in-memory tables; `spec.data` and
/// `spec.valid` only name them in messages. The job's memory is estimated
/// (the tables' `f32` and `f64` columns are shared, not copied) and
/// checked against `limit`.
pub(super) fn from_batches(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    grid: &[ConfigEntry],
    limit: Option<&MemoryLimit>,
    train: &RecordBatch,
    valid: Option<&RecordBatch>,
) -> Result<Tables> {
    let path = spec.data.as_path();
    let plan = plan_columns(spec, &train.schema(), path)?;
    let wanted = wanted_columns(spec, &plan.features);
    let batch = project(train, &wanted, path)?;
    let valid_path = spec
        .valid
        .clone()
        .unwrap_or_else(|| PathBuf::from("validation data"));
    let valid = match valid {
        Some(valid) => {
            check_present(spec, &plan.features, &valid.schema(), &valid_path)?;
            Some(Table {
                batch: project(valid, &wanted, &valid_path)?,
                path: valid_path,
            })
        }
        None => None,
    };
    let groups = encode_groups(spec, &batch)?;
    let held =
        |t: &RecordBatch| feature_row_bytes(&t.schema(), &plan.features, &plan.declared, true);
    let input = InputMemory {
        table_rows: batch.num_rows(),
        valid_table_rows: valid.as_ref().map_or(0, |v| v.batch.num_rows()),
        features: plan.features.len(),
        feature_row_bytes: held(&batch),
        valid_row_bytes: valid.as_ref().map_or(0, |v| held(&v.batch)),
        keys_bytes: 0,
    };
    let memory = checked_estimate(spec, family, grid, limit, input, &groups)?;
    Ok(Tables {
        plan,
        train: Table {
            batch,
            path: path.to_path_buf(),
        },
        features_read: true,
        valid,
        groups: Some(groups),
        memory,
    })
}

/// The job's estimated peak memory, checked against `limit`.
fn checked_estimate(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    grid: &[ConfigEntry],
    limit: Option<&MemoryLimit>,
    input: InputMemory,
    groups: &EncodedGroups,
) -> Result<MemoryEstimate> {
    let memory = estimate(
        spec,
        family,
        grid,
        input,
        &groups.row_keys,
        groups.encoder.len(),
    )?;
    check(spec, &memory, limit)?;
    Ok(memory)
}

/// Every row's key id, from the key columns (the first `spec.by.len()`) of `batch`.
fn encode_groups(spec: &TrainSpec, batch: &RecordBatch) -> Result<EncodedGroups> {
    let mut encoder = GroupEncoder::new(spec.by.len());
    let row_keys = encoder.encode(&batch.columns()[..spec.by.len()])?;
    Ok(EncodedGroups { encoder, row_keys })
}

/// Bytes one row of the features `names` (declared as `declared`) of
/// `schema` takes once read: `f32` ones 4 and `f64` ones 8 (nothing when
/// `held`: those columns are used as they are), any other 8 (converted to
/// `f64`, or to category codes).
fn feature_row_bytes(schema: &Schema, names: &[String], declared: &[Declared], held: bool) -> u64 {
    names
        .iter()
        .zip(declared)
        .map(
            |(name, d)| match (d, schema.field_with_name(name).map(|f| f.data_type())) {
                (Declared::Numeric, Ok(DataType::Float32)) => u64::from(!held) * 4,
                (Declared::Numeric, Ok(DataType::Float64)) => u64::from(!held) * 8,
                _ => 8,
            },
        )
        .sum()
}

/// The columns of `a` then those of `b` (as many rows), as one batch.
fn join_columns(a: &RecordBatch, b: &RecordBatch, path: &Path) -> Result<RecordBatch> {
    let schema = Schema::new(
        a.schema()
            .fields()
            .iter()
            .chain(b.schema().fields().iter())
            .cloned()
            .collect::<Vec<_>>(),
    );
    let columns = a.columns().iter().chain(b.columns()).cloned().collect();
    RecordBatch::try_new(std::sync::Arc::new(schema), columns).map_err(|e| GroupfitError::Parquet {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// Converts the training table: the target, the features (if read; the
/// dictionaries of categorical ones built) and the group ids of every row.
pub(super) fn load(
    spec: &TrainSpec,
    tables: &Tables,
    groups: EncodedGroups,
    started: Instant,
) -> Result<Loaded> {
    let Table { batch, path } = &tables.train;
    let key_count = spec.by.len();
    if batch.num_rows() == 0 {
        return Err(GroupfitError::EmptyInput {
            path: path.display().to_string(),
            detail: String::new(),
        });
    }
    let target = numeric_column(batch.column(key_count), &spec.target, path, true)?;
    let plan = &tables.plan;
    let mut account = ColumnAccount {
        ignored: plan.ignored.iter().cloned().collect(),
        ..ColumnAccount::default()
    };
    let mut features = Vec::with_capacity(plan.features.len());
    let mut columns = Vec::new();
    for (j, (name, declared)) in plan.features.iter().zip(&plan.declared).enumerate() {
        let mut dictionary = None;
        if tables.features_read {
            let array = batch.column(key_count + 1 + j);
            if plan.defaulted && all_null(array.as_ref()) {
                account.ignored.insert(name.clone(), "all null".into());
                continue;
            }
            columns.push(match *declared {
                Declared::Numeric => Encoding::Numeric.read(array, name, path)?,
                Declared::Categorical(values) => {
                    let (dict, codes) =
                        Dictionary::build(array, name, path, values, spec.max_categories)?;
                    dictionary = Some(dict);
                    codes
                }
            });
        }
        match &dictionary {
            Some(d) => {
                account.categorical.insert(name.clone(), d.levels.len());
            }
            None => account.numeric.push(name.clone()),
        }
        features.push(Feature {
            name: name.clone(),
            dictionary,
        });
    }
    if features.is_empty() {
        return Err(GroupfitError::arg(format!(
            "'{}' has no feature columns besides the keys and the target (all-null ones left out)",
            path.display()
        )));
    }
    trace_stamp(started, "numeric columns");
    Ok(Loaded {
        target,
        features,
        columns,
        account,
        groups,
    })
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

/// Keys, then the target, then the features.
fn wanted_columns(spec: &TrainSpec, features: &[String]) -> Vec<String> {
    let mut wanted = spec.by.clone();
    wanted.push(spec.target.clone());
    wanted.extend(features.iter().cloned());
    wanted
}

/// The columns `wanted` of `batch`, in that order.
pub(super) fn project(batch: &RecordBatch, wanted: &[String], path: &Path) -> Result<RecordBatch> {
    let indices = column_indices(&batch.schema(), wanted, path)?;
    batch
        .project(&indices)
        .map_err(|e| GroupfitError::arg(format!("cannot select columns: {e}")))
}

/// The feature columns of `batch` (found by name), read as `features` says
/// (categorical ones through their dictionaries).
pub(super) fn feature_columns(
    batch: &RecordBatch,
    features: &[Feature],
    path: &Path,
) -> Result<Vec<Column>> {
    features
        .iter()
        .map(|f| {
            let array = batch
                .column_by_name(&f.name)
                .ok_or_else(|| missing_column(&f.name, path, &batch.schema()))?;
            f.encoding().read(array, &f.name, path)
        })
        .collect()
}
