//! The training / validation split and the fallbacks: rows without a target
//! are dropped, a seeded fraction is held out (unless `--valid` is given),
//! the task is inferred, groups are numbered by their training rows, and
//! groups below `--min-rows` or with one class fall back to the global model.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::arguments::TrainSpec;
use super::event::trace_stamp;
use super::input::{check_binary, EncodedGroups};
use crate::data::hierarchy::Hierarchy;
use crate::data::keys::GroupKey;
use crate::data::{row_uniform, Task};
use crate::error::{GroupfitError, Result};

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

/// The training rows and their groups.
pub(super) struct Split {
    /// Binary or regression (given or inferred).
    pub task: Task,
    /// Whether the task was inferred from the target.
    pub task_inferred: bool,
    /// Training rows (indices into the training table), target never NaN.
    pub train_rows: Vec<u32>,
    /// Dense group of each training row.
    pub train_groups: Vec<u32>,
    /// The key of each group: groups are those with training rows, in order
    /// of first appearance.
    pub keys: Vec<GroupKey>,
    /// Rows of the training table without a target.
    pub dropped: usize,
    /// With `--hierarchy`: the prefix levels of `keys`.
    pub hierarchy: Option<Hierarchy>,
}

/// The rows held out of the training table for validation (none with `--valid`).
pub(super) struct HeldOut {
    /// Indices into the training table.
    pub rows: Vec<u32>,
    /// Dense group of each (`None`: a group without training rows).
    pub groups: Vec<Option<u32>>,
    /// With `--hierarchy`: per level above the finest (1 first), the group
    /// of each row at that level.
    pub level_groups: Vec<Vec<Option<u32>>>,
}

impl Split {
    /// Groups (dense ids `0..n_groups`).
    pub fn n_groups(&self) -> usize {
        self.keys.len()
    }
}

/// Which groups get their own models.
pub(super) struct Owners {
    /// Training rows per group, and in all (last entry).
    pub rows_per_group: Vec<usize>,
    /// `n_groups + 1` flags: which groups get their own models; the last is
    /// the global model.
    pub fit: Vec<bool>,
    /// Why each group without its own model fell back.
    pub fallback_reason: Vec<Option<String>>,
    /// The counts of those reasons.
    pub fallbacks: Fallbacks,
}

/// Where the split reads from.
#[derive(Clone, Copy)]
pub(super) struct SplitInput<'a> {
    /// Target over every row of the training table.
    pub target: &'a [f64],
    /// The training table's path, for messages.
    pub path: &'a Path,
    /// Whether validation rows come from their own table (`--valid`).
    pub valid_table: bool,
}

/// Splits the training table's rows, infers the task and numbers the groups.
pub(super) fn split(
    spec: &TrainSpec,
    input: SplitInput<'_>,
    groups: EncodedGroups,
    started: Instant,
) -> Result<(Split, HeldOut)> {
    let SplitInput {
        target,
        path,
        valid_table,
    } = input;
    let dropped = target.iter().filter(|v| v.is_nan()).count();
    let mut train_rows = Vec::with_capacity(target.len());
    let mut held_out = Vec::new();
    for (row, value) in target.iter().enumerate() {
        if value.is_nan() {
            continue;
        }
        if !valid_table && row_uniform(spec.seed, row as u64) < spec.valid_fraction {
            held_out.push(row as u32);
        } else {
            train_rows.push(row as u32);
        }
    }
    if train_rows.is_empty() {
        let rows = target.len();
        let detail = if dropped == rows {
            format!(": all {rows} rows have a missing target '{}'", spec.target)
        } else {
            ": no training rows remain after the validation split".to_string()
        };
        return Err(GroupfitError::EmptyInput {
            path: path.display().to_string(),
            detail,
        });
    }
    let task = match spec.task {
        Some(task) => task,
        None => infer_task(target, &train_rows),
    };
    if task == Task::Binary {
        check_binary(target, &spec.target, path)?;
    }
    let numbering = number_groups(&groups, &train_rows);
    let held_out_groups = held_out
        .iter()
        .map(|&row| {
            let group = numbering.dense[groups.row_keys[row as usize] as usize];
            (group != u32::MAX).then_some(group)
        })
        .collect();
    let hierarchy = spec.hierarchy.then(|| Hierarchy::new(&numbering.keys));
    // Each held-out row's group at every level above the finest, found by
    // its key's prefix (its finest group may have no training rows).
    let level_groups = hierarchy.as_ref().map_or_else(Vec::new, |h| {
        (1..h.depth())
            .map(|level| {
                let ids = h.prefix_ids(level);
                held_out
                    .iter()
                    .map(|&row| {
                        let key = &groups.encoder.keys()[groups.row_keys[row as usize] as usize];
                        ids.get(&key[..level]).copied()
                    })
                    .collect()
            })
            .collect()
    });
    drop(groups.encoder);
    trace_stamp(started, "split");
    let split = Split {
        task,
        task_inferred: spec.task.is_none(),
        train_rows,
        train_groups: numbering.train_groups,
        keys: numbering.keys,
        dropped,
        hierarchy,
    };
    let held_out = HeldOut {
        rows: held_out,
        groups: held_out_groups,
        level_groups,
    };
    Ok((split, held_out))
}

/// Binary if every training row's target is 0 or 1, otherwise regression.
fn infer_task(target: &[f64], train_rows: &[u32]) -> Task {
    if train_rows
        .iter()
        .all(|&row| target[row as usize] == 0.0 || target[row as usize] == 1.0)
    {
        Task::Binary
    } else {
        Task::Regression
    }
}

/// Dense group ids: groups with training rows, in order of first appearance.
struct Numbering {
    /// Dense group of each key id (`u32::MAX`: no training rows).
    dense: Vec<u32>,
    keys: Vec<GroupKey>,
    train_groups: Vec<u32>,
}

fn number_groups(groups: &EncodedGroups, train_rows: &[u32]) -> Numbering {
    let mut dense = vec![u32::MAX; groups.encoder.len()];
    let mut keys = Vec::new();
    let mut train_groups = Vec::with_capacity(train_rows.len());
    for &row in train_rows {
        let key = groups.row_keys[row as usize] as usize;
        if dense[key] == u32::MAX {
            dense[key] = keys.len() as u32;
            keys.push(groups.encoder.keys()[key].clone());
        }
        train_groups.push(dense[key]);
    }
    Numbering {
        dense,
        keys,
        train_groups,
    }
}

/// Decides which groups get their own models: a group below `--min-rows`, or
/// with one class (binary), falls back. A binary training set with one class
/// overall is an error.
pub(super) fn choose_owners(
    spec: &TrainSpec,
    split: &Split,
    input: SplitInput<'_>,
) -> Result<Owners> {
    let target = input.target;
    let n_groups = split.n_groups();
    let mut rows_per_group = vec![0usize; n_groups + 1];
    let mut positives = vec![0usize; n_groups + 1];
    for (&row, &group) in split.train_rows.iter().zip(&split.train_groups) {
        rows_per_group[group as usize] += 1;
        positives[group as usize] += (target[row as usize] == 1.0) as usize;
    }
    rows_per_group[n_groups] = split.train_rows.len();
    positives[n_groups] = positives[..n_groups].iter().sum();
    let mut fit = vec![false; n_groups + 1];
    let mut fallback_reason: Vec<Option<String>> = vec![None; n_groups];
    let mut fallbacks = Fallbacks {
        min_rows: spec.min_rows,
        ..Fallbacks::default()
    };
    let one_class = |g: usize| positives[g] == 0 || positives[g] == rows_per_group[g];
    for group in 0..n_groups {
        if rows_per_group[group] < spec.min_rows {
            fallbacks.few_rows += 1;
            fallback_reason[group] = Some(format!(
                "{} training rows < --min-rows {}",
                rows_per_group[group], spec.min_rows
            ));
        } else if split.task == Task::Binary && one_class(group) {
            fallbacks.one_class += 1;
            let class = if positives[group] == 0 { 0.0 } else { 1.0 };
            fallback_reason[group] = Some(format!("one class only ({class}) in training"));
        } else {
            fit[group] = true;
        }
    }
    fit[n_groups] = spec.global_model;
    if split.task == Task::Binary && one_class(n_groups) {
        let value = if positives[n_groups] == 0 { 0.0 } else { 1.0 };
        // Both classes in the file: the split held the other one out.
        let held_out = if target.iter().any(|&t| !t.is_nan() && t != value) {
            format!(
                " in its {} training rows; the rest were held out by --valid-fraction {}",
                rows_per_group[n_groups], spec.valid_fraction
            )
        } else {
            String::new()
        };
        return Err(GroupfitError::SingleClass {
            column: spec.target.clone(),
            path: input.path.display().to_string(),
            value,
            split: held_out,
        });
    }
    Ok(Owners {
        rows_per_group,
        fit,
        fallback_reason,
        fallbacks,
    })
}
