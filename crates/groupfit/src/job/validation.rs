//! The validation rows: every row of the `--valid` table with a target, or
//! the rows held out of the training table (whose features are read here
//! when the family reads the training features itself).

use super::arguments::TrainSpec;
use super::input::{check_binary, feature_columns, Feature, Tables};
use super::split::HeldOut;
use crate::data::csv::is_csv;
use crate::data::hierarchy::Hierarchy;
use crate::data::keys::{GroupEncoder, GroupKey};
use crate::data::{numeric_column, read_parquet_rows, Column, Task};
use crate::error::{GroupfitError, Result};
use crate::util::par::resolve_threads;

/// The validation rows and where their features and target are.
pub(super) struct Validation {
    pub source: ValidSource,
    /// Validation rows (indices into the source's columns and target).
    pub rows: Vec<u32>,
    /// Dense group of each validation row (`None`: a group not in training).
    pub groups: Vec<Option<u32>>,
    /// With `--hierarchy`: per level above the finest (1 first), the group
    /// of each row at that level.
    pub level_groups: Vec<Vec<Option<u32>>>,
    /// Rows of the validation table without a target.
    pub dropped: usize,
    /// Where the features of `source` are in a Parquet file, when the
    /// training features were not read (the family reads its own).
    pub file: Option<ValidationFile>,
}

/// A Parquet file holding the validation rows' features.
pub(super) struct ValidationFile {
    pub path: std::path::PathBuf,
    /// The file row of each index into the source's columns; `None`: the
    /// index is the file row.
    pub file_rows: Option<Vec<u32>>,
}

/// Where the validation rows' features and target are.
pub(super) enum ValidSource {
    /// In the training table's columns and target (held-out rows).
    Training,
    /// In columns of their own.
    Own {
        columns: Vec<Column>,
        target: Vec<f64>,
    },
}

/// What the validation rows are looked up in.
#[derive(Clone, Copy)]
pub(super) struct ValidationInput<'a> {
    pub tables: &'a Tables,
    /// The features, as loaded from the training table.
    pub features: &'a [Feature],
    /// Target over every row of the training table.
    pub training_target: &'a [f64],
    pub task: Task,
    /// The key of each (dense) group.
    pub keys: &'a [GroupKey],
    /// With `--hierarchy`: the levels, to look the rows up at each.
    pub hierarchy: Option<&'a Hierarchy>,
}

/// The validation rows: the `--valid` table's, or `held_out`.
pub(super) fn validation(
    spec: &TrainSpec,
    input: ValidationInput<'_>,
    held_out: HeldOut,
) -> Result<Validation> {
    if input.tables.valid.is_some() {
        return from_valid_table(spec, input);
    }
    if input.tables.features_read {
        return Ok(Validation {
            source: ValidSource::Training,
            rows: held_out.rows,
            groups: held_out.groups,
            level_groups: held_out.level_groups,
            dropped: 0,
            file: None,
        });
    }
    // Only the held-out rows' features are read, in their order.
    let tables = input.tables;
    let path = tables.train.path.as_path();
    let threads = resolve_threads(spec.threads);
    let names: Vec<String> = input.features.iter().map(|f| f.name.clone()).collect();
    let held = read_parquet_rows(path, &names, &held_out.rows, threads)?;
    let columns = feature_columns(&held, input.features, path)
        .map_err(|e| at_file_rows(e, &held_out.rows))?;
    let target = held_out
        .rows
        .iter()
        .map(|&row| input.training_target[row as usize])
        .collect();
    Ok(Validation {
        source: ValidSource::Own { columns, target },
        rows: (0..held_out.rows.len() as u32).collect(),
        groups: held_out.groups,
        level_groups: held_out.level_groups,
        dropped: 0,
        file: Some(ValidationFile {
            path: path.to_path_buf(),
            file_rows: Some(held_out.rows),
        }),
    })
}

/// Every row of the `--valid` table with a target.
fn from_valid_table(spec: &TrainSpec, input: ValidationInput<'_>) -> Result<Validation> {
    let table = input.tables.valid.as_ref().expect("a validation table");
    let path = table.path.as_path();
    let key_count = spec.by.len();
    let target = numeric_column(table.batch.column(key_count), &spec.target, path, true)?;
    if input.task == Task::Binary {
        check_binary(&target, &spec.target, path)?;
    }
    let columns = feature_columns(&table.batch, input.features, path)?;
    let lookup = GroupEncoder::from_keys(input.keys).lookup(&table.batch.columns()[..key_count])?;
    let mut rows = Vec::new();
    let mut groups = Vec::new();
    let mut dropped = 0;
    for (row, group) in lookup.into_iter().enumerate() {
        if target[row].is_nan() {
            dropped += 1;
        } else {
            rows.push(row as u32);
            groups.push(group);
        }
    }
    let mut level_groups = Vec::new();
    if let Some(h) = input.hierarchy {
        for level in 1..h.depth() {
            let found =
                GroupEncoder::from_keys(h.keys(level)).lookup(&table.batch.columns()[..level])?;
            level_groups.push(rows.iter().map(|&r| found[r as usize]).collect());
        }
    }
    // The validation file's rows are the columns' indices.
    let file = (!input.tables.features_read && !is_csv(path)).then(|| ValidationFile {
        path: path.to_path_buf(),
        file_rows: None,
    });
    Ok(Validation {
        source: ValidSource::Own { columns, target },
        rows,
        groups,
        level_groups,
        dropped,
        file,
    })
}

/// `error` with its row (a row of the batch of `file_rows`) as the file's row.
fn at_file_rows(error: GroupfitError, file_rows: &[u32]) -> GroupfitError {
    match error {
        GroupfitError::InfiniteValue { column, path, row } => GroupfitError::InfiniteValue {
            column,
            path,
            row: file_rows[row] as usize,
        },
        error => error,
    }
}
