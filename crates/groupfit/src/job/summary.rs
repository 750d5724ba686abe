//! The training summary ([`Summary`], what `groupfit train --json` prints and
//! the bundle stores): counts, timings, routes, fallbacks, mean validation
//! scores and the chosen configs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fit::Fitted;
use super::memory::MemorySummary;
use super::pooling::PoolingSummary;
use super::prepare::Prepared;
use super::select::primary;
use super::split::Fallbacks;
use crate::data::Task;
use crate::store::{ModelBundle, Scores};

/// Row routes on the validation data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Routes {
    /// Groups served by their own model.
    pub groups_own: usize,
    /// Groups served by the global model.
    pub groups_global: usize,
    /// Groups with no model (they would fall back, and there is no global
    /// model: `--no-global`).
    #[serde(default)]
    pub groups_none: usize,
    /// Validation rows served by their group's own model.
    pub valid_rows_own: usize,
    /// Validation rows served by the global model (fallback or unseen group).
    pub valid_rows_global: usize,
    /// Validation rows with no model (not scored; `--no-global`).
    #[serde(default)]
    pub valid_rows_none: usize,
    /// Of those, rows whose group was not in the training data.
    pub valid_rows_unseen: usize,
}

/// The training summary: `groupfit train --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Groups in the training data.
    pub groups: usize,
    /// Models fitted: (own-model groups + the global model) x configs.
    pub models: usize,
    /// Grid points.
    pub configs: usize,
    /// The strategy that ran.
    pub strategy: String,
    /// Seconds reading, checking and group-encoding the data and splitting off
    /// the validation rows (a family's own data layout counts in `train_s`).
    pub load_s: f64,
    /// Seconds laying out the data for the family, fitting and selecting.
    pub train_s: f64,
    /// Seconds for the whole job.
    pub wall_s: f64,
    /// Mean over groups of the chosen config's validation log-loss (binary).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub valid_logloss: Option<f64>,
    /// Mean over groups (with both classes in validation) of the AUC (binary).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub valid_auc: Option<f64>,
    /// Mean over groups of the chosen config's validation RMSE (regression).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub valid_rmse: Option<f64>,
    /// Groups that have validation rows (the means run over these).
    pub groups_scored: usize,
    /// The model family.
    pub model: String,
    /// binary / regression.
    pub task: Task,
    /// Whether the task was inferred from the target.
    pub task_inferred: bool,
    /// Feature columns used, in model order (numeric and categorical).
    pub features: Vec<String>,
    /// The categorical features and their number of categories.
    #[serde(default)]
    pub categorical: BTreeMap<String, usize>,
    /// Input columns left out, and why (a key, a date or time, a nested
    /// type, all null; the target is not listed).
    #[serde(default)]
    pub ignored: BTreeMap<String, String>,
    /// Training rows.
    pub rows_train: usize,
    /// Validation rows.
    pub rows_valid: usize,
    /// Rows dropped because the target was missing (training and validation files).
    pub rows_dropped_missing_target: usize,
    /// Routes.
    pub routes: Routes,
    /// Fallbacks.
    pub fallback: Fallbacks,
    /// How many groups chose each config.
    pub chosen_configs: BTreeMap<String, usize>,
    /// The config the global model chose (`None`: no global model).
    pub global_config: Option<String>,
    /// Passes over the data.
    pub passes: usize,
    /// Seconds inside the solver's passes over the data (part of `train_s`).
    pub passes_s: f64,
    /// The most groups one plan of the run cut into pieces on two or more
    /// workers (0: every group was scanned whole by one worker).
    #[serde(default)]
    pub cut_groups: usize,
    /// Units that stopped at their iteration limit.
    pub not_converged: usize,
    /// Worker threads.
    pub threads: usize,
    /// With `--hierarchy`: the levels above the groups', coarsest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelSummary>,
    /// With `--shrinkage` (or `--hierarchy`): the blend of the models on a
    /// group's path, and what it saved on the validation rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooling: Option<PoolingSummary>,
    /// The memory estimate made before the features were read, the limit
    /// it was checked against, and the peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemorySummary>,
    /// How the job was asked for (see `TrainSpec::command`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// One level of a hierarchy in the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelSummary {
    /// Its key columns, joined by `/`.
    pub key: String,
    /// Its groups.
    pub groups: usize,
    /// Those with a model of their own.
    pub own_models: usize,
}

/// A trained bundle and its summary.
#[derive(Debug, Clone)]
pub struct TrainOutput {
    /// The bundle to save.
    pub bundle: ModelBundle,
    /// The summary (also stored in the bundle).
    pub summary: Summary,
}

/// What the groups' routes and scores add up to.
pub(super) struct Tally {
    pub routes: Routes,
    /// How many groups chose each config (by name).
    pub chosen_configs: BTreeMap<String, usize>,
    pub means: ScoreMeans,
    /// The global model's config (`None`: no global model).
    pub global_config: Option<usize>,
}

/// Sums for the means over scored groups of the selection metric and the AUC.
#[derive(Default)]
pub(super) struct ScoreMeans {
    primary_sum: f64,
    scored: usize,
    auc_sum: f64,
    auc_count: usize,
}

impl ScoreMeans {
    /// Adds one scored group.
    pub fn add(&mut self, task: Task, scores: &Scores) {
        self.primary_sum += primary(task, scores);
        self.scored += 1;
        if let Some(auc) = scores.auc {
            self.auc_sum += auc;
            self.auc_count += 1;
        }
    }

    fn primary(&self) -> Option<f64> {
        mean(self.primary_sum, self.scored)
    }

    fn auc(&self) -> Option<f64> {
        mean(self.auc_sum, self.auc_count)
    }
}

fn mean(sum: f64, count: usize) -> Option<f64> {
    (count > 0).then(|| sum / count as f64)
}

/// The summary of a trained job; `train_s` and `wall_s` run to now.
pub(super) fn summarise(prepared: &Prepared, fitted: &Fitted, tally: Tally) -> Summary {
    let task = prepared.split.task;
    let grid = &prepared.grid;
    let train_s = prepared.prepared_at.elapsed().as_secs_f64();
    let binary = task == Task::Binary;
    let models = prepared.owners.fit.iter().filter(|&&fit| fit).count() * grid.len();
    Summary {
        groups: prepared.n_groups(),
        models,
        configs: grid.len(),
        strategy: fitted.report.strategy.name().to_string(),
        load_s: prepared.load_s,
        train_s,
        wall_s: prepared.started.elapsed().as_secs_f64(),
        valid_logloss: if binary { tally.means.primary() } else { None },
        valid_auc: if binary { tally.means.auc() } else { None },
        valid_rmse: if binary { None } else { tally.means.primary() },
        groups_scored: tally.means.scored,
        model: prepared.family.name().to_string(),
        task,
        task_inferred: prepared.split.task_inferred,
        features: prepared.feature_names.clone(),
        categorical: prepared.account.categorical.clone(),
        ignored: prepared.account.ignored.clone(),
        rows_train: prepared.split.train_rows.len(),
        rows_valid: prepared.validation.rows.len(),
        rows_dropped_missing_target: prepared.split.dropped + prepared.validation.dropped,
        routes: tally.routes,
        fallback: prepared.owners.fallbacks.clone(),
        chosen_configs: tally.chosen_configs,
        global_config: tally.global_config.map(|k| grid[k].name.clone()),
        passes: fitted.report.passes,
        passes_s: fitted.report.passes_s,
        cut_groups: fitted.report.cut_groups,
        not_converged: fitted.not_converged,
        threads: prepared.threads,
        levels: Vec::new(),
        pooling: None,
        memory: None,
        command: prepared.spec.command.clone(),
    }
}
