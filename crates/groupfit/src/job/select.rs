//! Selection: every fitted unit is scored on its group's validation rows (the
//! global model on all of them pooled), and each group keeps the config with
//! the smallest log-loss or RMSE; a NaN score (a diverged model) loses.

use std::ops::Range;
use std::time::Instant;

use super::arguments::no_validation_rows;
use super::event::trace_stamp;
use super::fit::Fitted;
use super::prepare::Prepared;
use crate::data::{bucket, imputed_columns, Column, Task};
use crate::error::Result;
use crate::family::UnitFit;
use crate::metrics;
use crate::store::{FittedModel, Scores};
use crate::util::par::par_map;

/// The outcome of validation-based selection.
pub(super) struct Selection {
    /// The global model's config (`None`: no global model).
    pub global_config: Option<usize>,
    /// The global model's scores on all validation rows.
    pub global_scores: Scores,
    /// Per group.
    pub groups: Vec<GroupSelection>,
}

/// One group's validation rows and the config they chose.
#[derive(Default)]
pub(super) struct GroupSelection {
    /// Its validation rows.
    pub n_valid: usize,
    /// The chosen config (`None`: no own models, or no validation rows).
    pub chosen: Option<usize>,
    /// The serving model's scores on its validation rows.
    pub scores: Scores,
    /// The selection metric of every config (own models only).
    pub by_config: Vec<f64>,
    /// The global model's selection metric on these rows (own models only).
    pub global: Option<f64>,
}

impl Selection {
    /// The config of a group without validation rows: the global model's,
    /// or without one the config most groups chose (the first on a tie).
    pub fn default_config(&self, n_configs: usize) -> usize {
        self.global_config.unwrap_or_else(|| {
            let mut votes = vec![0usize; n_configs];
            for chosen in self.groups.iter().filter_map(|group| group.chosen) {
                votes[chosen] += 1;
            }
            argmax_first(&votes)
        })
    }
}

/// Validation rows imputed at once: 16,384 rows of 32 features are 4 MiB.
const BLOCK_ROWS: usize = 16_384;

/// The validation rows sorted by group (unseen groups' rows last). Their
/// features are imputed into dense `f64` columns one block at a time (a
/// group, or a chunk of rows for the global model), never all at once.
struct ValidMatrix<'a> {
    task: Task,
    /// The validation rows' source columns and the family's imputation.
    columns: &'a [Column],
    impute: &'a [f64],
    /// Indices into `columns`, group after group.
    rows: Vec<u32>,
    target: Vec<f64>,
    /// Group `g`'s rows are `start[g]..start[g + 1]`.
    start: Vec<usize>,
    /// The validation row (its index in `valid.rows`) of each matrix row.
    order: Vec<u32>,
}

impl<'a> ValidMatrix<'a> {
    fn build(prepared: &'a Prepared, impute: &'a [f64]) -> Self {
        let valid = prepared.valid_data();
        let n_groups = prepared.n_groups();
        let key = |i: usize| valid.groups[i].map_or(n_groups, |g| g as usize);
        let (order, start) = bucket((0..valid.rows.len()).map(key), n_groups + 1);
        let rows: Vec<u32> = order.iter().map(|&i| valid.rows[i as usize]).collect();
        ValidMatrix {
            task: prepared.split.task,
            columns: valid.columns,
            impute,
            target: rows.iter().map(|&r| valid.target[r as usize]).collect(),
            rows,
            start,
            order,
        }
    }

    /// The predictions of every model of `units` over the matrix rows
    /// `range`. The features are imputed [`BLOCK_ROWS`] rows at a time,
    /// once for all the models.
    fn predict_all(&self, units: &[UnitFit<FittedModel>], range: Range<usize>) -> Vec<Vec<f64>> {
        let mut out: Vec<Vec<f64>> = units
            .iter()
            .map(|_| Vec::with_capacity(range.len()))
            .collect();
        for start in range.clone().step_by(BLOCK_ROWS) {
            let rows = &self.rows[start..(start + BLOCK_ROWS).min(range.end)];
            let block = imputed_columns(self.columns, rows, self.impute, 1);
            for (p, unit) in out.iter_mut().zip(units) {
                p.extend(unit.model.predict_columns(self.task, &block, 0..rows.len()));
            }
        }
        out
    }

    fn group_rows(&self, group: usize) -> Range<usize> {
        self.start[group]..self.start[group + 1]
    }
}

/// The global model's choice and its predictions of every validation row:
/// the same for every level of a hierarchy, so scored once.
pub(super) struct GlobalSelection {
    config: Option<usize>,
    scores: Scores,
    /// Per config, the predictions of every validation row, in the order
    /// of the validation rows.
    predictions: Vec<Vec<f64>>,
}

impl GlobalSelection {
    /// Scores every config of the global model (`units`) on all validation
    /// rows pooled; `impute` is the family's imputation.
    pub(super) fn score(
        prepared: &Prepared,
        impute: &[f64],
        units: &[UnitFit<FittedModel>],
    ) -> Self {
        let started = Instant::now();
        let matrix = ValidMatrix::build(prepared, impute);
        let mut global = select_global(&matrix, units, prepared.threads);
        // From the matrix's order back to the validation rows'.
        for p in &mut global.predictions {
            let mut by_row = vec![0.0; p.len()];
            for (&i, &v) in matrix.order.iter().zip(p.iter()) {
                by_row[i as usize] = v;
            }
            *p = by_row;
        }
        trace_stamp(started, "  selection: global model");
        global
    }
}

/// Scores every config on every group's validation rows and picks the best;
/// `global` is the global model's ([`GlobalSelection::score`]).
pub(super) fn select(
    prepared: &Prepared,
    fitted: &Fitted,
    global: &GlobalSelection,
) -> Result<Selection> {
    let started = Instant::now();
    let n_configs = prepared.grid.len();
    if prepared.validation.rows.is_empty() && n_configs > 1 {
        return Err(no_validation_rows(n_configs));
    }
    let n_groups = prepared.n_groups();
    let threads = prepared.threads;
    let matrix = ValidMatrix::build(prepared, &fitted.impute);
    trace_stamp(started, "  selection: validation matrix");
    let groups = par_map(
        n_groups,
        threads,
        &|g| matrix.group_rows(g).len() + 1,
        &|g| select_group(&matrix, g, &fitted.units[g], global),
    );
    Ok(Selection {
        global_config: global.config,
        global_scores: global.scores.clone(),
        groups,
    })
}

/// Chooses the global model's config on all validation rows pooled.
fn select_global(
    matrix: &ValidMatrix,
    units: &[UnitFit<FittedModel>],
    threads: usize,
) -> GlobalSelection {
    let task = matrix.task;
    let rows = matrix.target.len();
    let chunk = 2048;
    let chunks = if units.is_empty() {
        0
    } else {
        rows.div_ceil(chunk)
    };
    // Chunk outside, configs inside: each chunk of rows is read from memory
    // once (it stays in cache for the other configs), not once per config.
    let per_chunk: Vec<Vec<Vec<f64>>> = par_map(chunks, threads, &|_| 1, &|c| {
        let range = c * chunk..((c + 1) * chunk).min(rows);
        matrix.predict_all(units, range)
    });
    let predictions: Vec<Vec<f64>> = (0..units.len())
        .map(|k| {
            per_chunk
                .iter()
                .flat_map(|p| p[k].iter().copied())
                .collect()
        })
        .collect();
    let by_config: Vec<f64> = predictions
        .iter()
        .map(|p| {
            if rows > 0 {
                primary_only(task, &matrix.target, p)
            } else {
                0.0
            }
        })
        .collect();
    let config = (!units.is_empty()).then(|| argmin(&by_config));
    let scores = match config {
        Some(k) if rows > 0 => score(task, &matrix.target, &predictions[k]),
        _ => Scores::default(),
    };
    GlobalSelection {
        config,
        scores,
        predictions,
    }
}

/// Chooses group `group`'s config on its validation rows (or scores the
/// global model there when the group has no own models).
fn select_group(
    matrix: &ValidMatrix,
    group: usize,
    units: &[UnitFit<FittedModel>],
    global: &GlobalSelection,
) -> GroupSelection {
    let task = matrix.task;
    let range = matrix.group_rows(group);
    let target = &matrix.target[range.clone()];
    let mut selection = GroupSelection {
        n_valid: range.len(),
        ..GroupSelection::default()
    };
    if range.is_empty() {
        return selection;
    }
    let global_predictions = |k: usize| -> Vec<f64> {
        matrix.order[range.clone()]
            .iter()
            .map(|&i| global.predictions[k][i as usize])
            .collect()
    };
    if !units.is_empty() {
        let predictions = matrix.predict_all(units, range.clone());
        selection.by_config = predictions
            .iter()
            .map(|p| primary_only(task, target, p))
            .collect();
        let k = argmin(&selection.by_config);
        selection.chosen = Some(k);
        selection.scores = score(task, target, &predictions[k]);
        selection.global = global
            .config
            .map(|k| primary_only(task, target, &global_predictions(k)));
    } else if let Some(k) = global.config {
        selection.scores = score(task, target, &global_predictions(k));
    }
    selection
}

fn score(task: Task, target: &[f64], predictions: &[f64]) -> Scores {
    match task {
        Task::Binary => Scores {
            logloss: Some(metrics::logloss(target, predictions)),
            auc: metrics::auc(target, predictions),
            rmse: None,
        },
        Task::Regression => Scores {
            rmse: Some(metrics::rmse(target, predictions)),
            ..Scores::default()
        },
    }
}

/// The selection metric alone (no AUC): log-loss or RMSE.
fn primary_only(task: Task, target: &[f64], predictions: &[f64]) -> f64 {
    match task {
        Task::Binary => metrics::logloss(target, predictions),
        Task::Regression => metrics::rmse(target, predictions),
    }
}

/// The selection metric of `scores` (infinite when absent).
pub(super) fn primary(task: Task, scores: &Scores) -> f64 {
    match task {
        Task::Binary => scores.logloss.unwrap_or(f64::INFINITY),
        Task::Regression => scores.rmse.unwrap_or(f64::INFINITY),
    }
}

/// Index of the smallest value (first on ties). NaN (a diverged model's
/// score) loses to every number.
fn argmin(values: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in values.iter().enumerate() {
        if x < values[best] || (values[best].is_nan() && !x.is_nan()) {
            best = i;
        }
    }
    best
}

/// Index of the largest value (the first of equals; 0 when empty).
fn argmax_first(values: &[usize]) -> usize {
    let mut best = 0;
    for (i, &x) in values.iter().enumerate() {
        if x > values[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmin_takes_the_first_smallest_and_nan_loses() {
        assert_eq!(argmin(&[]), 0);
        assert_eq!(argmin(&[0.5, 0.25, 0.25, 1.0]), 1);
        assert_eq!(argmin(&[f64::NAN, 0.7, 0.3]), 2);
        assert_eq!(argmin(&[f64::NAN, f64::INFINITY]), 1);
        assert_eq!(argmin(&[0.9, f64::NAN, 0.8]), 2);
        assert_eq!(argmin(&[f64::NAN, f64::NAN]), 0);
    }
}
