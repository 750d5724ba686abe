//! Small bundles for the store's unit tests: one numeric feature `x`, one
//! config, linear models.

use crate::data::Task;
use crate::linear::LinearModel;

use super::{FittedModel, GlobalEntry, GroupEntry, ModelBundle, Route, Scores, FORMAT_VERSION};

/// The linear model `coef x + intercept`.
pub fn linear(coef: f64, intercept: f64) -> FittedModel {
    FittedModel::Linear(LinearModel {
        coef: vec![coef],
        intercept,
        onehot: Vec::new(),
    })
}

/// A group of `n_train` rows: its own `model`, or (without one) the
/// global model's route, fallen back for too few rows.
pub fn entry(key: &[&str], n_train: usize, model: Option<FittedModel>) -> GroupEntry {
    let route = if model.is_some() {
        Route::Own
    } else {
        Route::Global
    };
    GroupEntry {
        key: key.iter().map(|k| Some(k.to_string())).collect(),
        n_train,
        n_valid: 0,
        route,
        fallback: (route != Route::Own).then(|| "too few rows".into()),
        config: model.as_ref().map(|_| 0),
        model,
        valid: Scores::default(),
        valid_by_config: Vec::new(),
        iterations: 0,
        valid_global: None,
        train_s: None,
    }
}

/// A regression bundle over `key_columns` and the feature `x` (imputed
/// with 0): the `global` model and the `groups`.
pub fn bundle(
    key_columns: &[&str],
    global: Option<FittedModel>,
    groups: Vec<GroupEntry>,
) -> ModelBundle {
    ModelBundle {
        format_version: FORMAT_VERSION,
        groupfit_version: "test".into(),
        family: "linear".into(),
        task: Task::Regression,
        key_columns: key_columns.iter().map(|k| k.to_string()).collect(),
        features: vec!["x".into()],
        categorical: Vec::new(),
        target: "y".into(),
        impute: vec![0.0],
        configs: vec![crate::tune::ConfigEntry {
            name: "default".into(),
            params: Default::default(),
        }],
        global: global.map(|model| GlobalEntry {
            config: 0,
            model,
            valid: Scores::default(),
        }),
        groups,
        levels: Vec::new(),
        pooling: None,
        summary: serde_json::json!({}),
    }
}
