//! The model bundle: one file holding every group's chosen model, the global
//! fallback model and what is needed to route and prepare new rows. This
//! module holds the bundle's types; the file format is in `file`, the
//! routing of new rows to their models in `predict` and the validity checks
//! of a loaded bundle in `check`.

mod check;
mod file;
#[cfg(test)]
pub(crate) mod fixtures;
mod pool;
mod predict;

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::data::categorical::Dictionary;
use crate::data::keys::{GroupEncoder, GroupKey};
use crate::data::Task;
use crate::gbdt::GbdtModel;
use crate::linear::LinearModel;
use crate::mlp::MlpModel;
use crate::tune::shrinkage::Shrinkage;
use crate::tune::ConfigEntry;

use crate::codec as floats;

/// The newest format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 9;

/// A fitted model of any family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "lowercase")]
pub enum FittedModel {
    /// A linear model.
    Linear(LinearModel),
    /// Gradient-boosted trees.
    Gbdt(GbdtModel),
    /// A multi-layer perceptron.
    Mlp(MlpModel),
}

impl From<LinearModel> for FittedModel {
    fn from(m: LinearModel) -> Self {
        FittedModel::Linear(m)
    }
}

impl From<GbdtModel> for FittedModel {
    fn from(m: GbdtModel) -> Self {
        FittedModel::Gbdt(m)
    }
}

impl From<MlpModel> for FittedModel {
    fn from(m: MlpModel) -> Self {
        FittedModel::Mlp(m)
    }
}

impl FittedModel {
    /// Checks the model's shapes against `d` features (see
    /// [`ModelBundle::check`]).
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        match self {
            FittedModel::Linear(m) => m.check(d),
            FittedModel::Gbdt(m) => m.check(d),
            FittedModel::Mlp(m) => m.check(d),
        }
    }

    /// The model's one-hot encodings of categorical features.
    pub fn onehot(&self) -> Vec<&crate::data::onehot::OneHot> {
        match self {
            FittedModel::Linear(m) => m.onehot.iter().map(|o| &o.map).collect(),
            FittedModel::Gbdt(_) => Vec::new(),
            FittedModel::Mlp(m) => m.onehot.iter().collect(),
        }
    }

    /// Prediction for one row of raw features (imputed as the bundle says).
    pub fn predict_row(&self, task: Task, x: &[f64]) -> f64 {
        match self {
            FittedModel::Linear(m) => m.predict_row(task, x),
            FittedModel::Gbdt(m) => m.predict_row(task, x),
            FittedModel::Mlp(m) => m.predict_row(task, x),
        }
    }

    /// The model as JSON for people and scripts (`inspect --json`): what the
    /// model file holds, with compact float arrays (MLP weights) shown as
    /// number arrays.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("a model serialises");
        if let FittedModel::Mlp(m) = self {
            if let Some(layers) = v["layers"].as_array_mut() {
                for (lv, l) in layers.iter_mut().zip(&m.layers) {
                    lv["w"] = serde_json::json!(l.w);
                    lv["b"] = serde_json::json!(l.b);
                }
            }
        }
        v
    }

    /// Predictions for rows `range` of column-major features (`cols[j][i]`),
    /// imputed as the bundle says.
    pub fn predict_columns(&self, task: Task, cols: &[Vec<f64>], range: Range<usize>) -> Vec<f64> {
        match self {
            FittedModel::Linear(m) => m.predict_columns(task, cols, range),
            FittedModel::Gbdt(m) => m.predict_columns(task, cols, range),
            FittedModel::Mlp(m) => m.predict_columns(task, cols, range),
        }
    }
}

/// Validation scores of one model on one group's validation rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// Mean log-loss (binary).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub logloss: Option<f64>,
    /// ROC AUC (binary, both classes present).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub auc: Option<f64>,
    /// RMSE (regression).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rmse: Option<f64>,
}

impl Scores {
    /// The selection metric, if scored: log-loss (binary) or RMSE.
    pub fn primary(&self, task: Task) -> Option<f64> {
        match task {
            Task::Binary => self.logloss,
            Task::Regression => self.rmse,
        }
    }
}

/// Which model serves a group's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    /// The group's own model.
    Own,
    /// The global fallback model.
    Global,
    /// No model: the group would fall back, and there is no global model
    /// (trained with `--no-global`).
    None,
}

impl Route {
    /// The route's name in the model file and in reports: `own`, `global`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            Route::Own => "own",
            Route::Global => "global",
            Route::None => "none",
        }
    }
}

/// One trained group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupEntry {
    /// The key, one part per key column (`None` for null).
    pub key: GroupKey,
    /// Training rows.
    pub n_train: usize,
    /// Validation rows.
    pub n_valid: usize,
    /// Own model, global fallback, or none.
    pub route: Route,
    /// Why the group falls back, when it does.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fallback: Option<String>,
    /// Index of the chosen config (own route).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub config: Option<usize>,
    /// The chosen model (own route).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<FittedModel>,
    /// Scores of the model that serves the group, on its validation rows.
    #[serde(default)]
    pub valid: Scores,
    /// The selection metric of every config on the group's validation rows (own route).
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "floats::f64s")]
    pub valid_by_config: Vec<f64>,
    /// Newton iterations (or boosting rounds, epochs) the chosen model took.
    #[serde(default)]
    pub iterations: u32,
    /// The global model's selection metric (log-loss or RMSE) on the
    /// group's validation rows (format 9; own route with a global model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_global: Option<f64>,
    /// Thread-seconds spent training the group's models, every config
    /// (format 9; absent from a remote run's file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_s: Option<f64>,
}

/// The global fallback model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GlobalEntry {
    /// Index of the chosen config.
    pub config: usize,
    /// The model.
    pub model: FittedModel,
    /// Its scores on all validation rows pooled.
    #[serde(default)]
    pub valid: Scores,
}

/// Everything `predict` and `inspect` need, as written by `train`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelBundle {
    /// Format version of the file this was read from or will be written as.
    pub format_version: u32,
    /// The groupfit version that trained it.
    pub groupfit_version: String,
    /// Model family (`linear`).
    pub family: String,
    /// Binary or regression.
    pub task: Task,
    /// Key column names.
    pub key_columns: Vec<String>,
    /// Feature column names, in model order.
    pub features: Vec<String>,
    /// The dictionary of each categorical feature (format 6; the others are
    /// numeric). `predict` codes new rows' values through them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categorical: Vec<Dictionary>,
    /// The target column name.
    pub target: String,
    /// Value substituted for a missing feature (linear: the training mean);
    /// empty when the family takes missing values natively.
    pub impute: Vec<f64>,
    /// The grid.
    pub configs: Vec<ConfigEntry>,
    /// The fallback model (`None`: trained with `--no-global`).
    pub global: Option<GlobalEntry>,
    /// Every group seen in training.
    pub groups: Vec<GroupEntry>,
    /// With `--hierarchy`: the levels above the groups', coarsest first,
    /// each a model set of its own over the first key columns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelGroups>,
    /// With `--shrinkage` (format 8): how a row's prediction blends the
    /// models on its group's path. `None`: the deepest model alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooling: Option<Pooling>,
    /// The training summary (`groupfit train --json`).
    pub summary: serde_json::Value,
}

/// The groups of a bundle at each depth, by key ([`ModelBundle::key_index`]).
#[derive(Debug)]
pub struct KeyIndex {
    /// Per depth, from the coarsest level to the groups.
    depths: Vec<GroupEncoder>,
}

/// Predictions for a table, with the count of rows per route.
#[derive(Debug, Clone, PartialEq)]
pub struct Predictions {
    /// One value per input row, in input order.
    pub values: Vec<f64>,
    /// Rows served by their group's own model.
    pub own: usize,
    /// Rows served by the global model (fallback groups and unseen groups).
    pub global: usize,
    /// Of `global`, rows whose group was not seen in training.
    pub unseen: usize,
    /// The route of every row, in input order.
    pub routes: Vec<RowRoute>,
}

/// One level of a hierarchy: the groups of its key columns' values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelGroups {
    /// The first key columns (`key_columns[..level]`).
    pub key_columns: Vec<String>,
    /// Its groups, as the bundle's own.
    pub groups: Vec<GroupEntry>,
}

/// How predictions blend the models on a group's path: the global model
/// (the root), each level's group, the group's own
/// ([`crate::tune::shrinkage`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pooling {
    /// The mode (`--shrinkage`).
    pub mode: Shrinkage,
    /// Per level below the root (each of `levels`, then the groups'): the
    /// `k` of `auto` in `w = n / (n + k)`; 0 for the other modes.
    pub k: Vec<f64>,
}

/// One group's place on the paths: its level, its parent and the weight of
/// its own model in the blend of its rows' predictions
/// ([`ModelBundle::pool_info`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPool {
    /// Its key columns joined by `/` (`origin`, `origin/dest`).
    pub level: String,
    /// Its parent's key (`None`: the global model is its parent).
    pub parent: Option<GroupKey>,
    /// Its own model's weight (`None`: no model of its own).
    pub weight: Option<f64>,
}

/// Which model served one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowRoute {
    /// Its group's own model.
    Own,
    /// The global model: the group falls back (few rows, one class).
    Fallback,
    /// The global model: the group was not in the training data.
    Unseen,
    /// The model of the row's group at a coarser level (index into
    /// [`ModelBundle::levels`]): its own group has no model, or was not in
    /// the training data.
    Ancestor(u16),
}

impl RowRoute {
    /// `own`, `fallback` or `unseen`.
    pub fn name(self) -> &'static str {
        match self {
            RowRoute::Own => "own",
            RowRoute::Fallback => "fallback",
            RowRoute::Unseen => "unseen",
            RowRoute::Ancestor(_) => "ancestor",
        }
    }
}
