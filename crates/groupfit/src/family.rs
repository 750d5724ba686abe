//! Model families: how `job::train` reaches linear models, trees and networks
//! through one interface.
//!
//! A family gets the prepared training data ([`TrainData`]: raw feature
//! columns, target, training rows with their dense group ids, which groups get
//! their own models, the validation rows) and the grid, and returns one fitted
//! model per (group, config) unit ([`FamilyFit`]). Everything around it —
//! reading, group encoding, the split, fallbacks, validation scoring, config
//! selection, the bundle — is shared and lives in [`crate::job`].
//!
//! Adding a family: implement [`Family`], add a match arm to [`family`] and its
//! name to [`MODELS`], and a variant to [`crate::store::FittedModel`].

use crate::data::keys::GroupKey;
use crate::data::layout::{GroupedMatrix, LayoutInput};
use crate::data::{Column, Task};
use crate::error::{GroupfitError, Result};
use crate::exec::{Explain, PassProgress, RunReport};
use crate::linear::grouped::{explain_grouped, fit_grouped};
use crate::plan::Strategy;
use crate::store::FittedModel;
use crate::tune::{linear_configs, ConfigEntry};

/// Model families `train` knows, as named by `--model`.
pub const MODELS: &[&str] = &["linear", "gbdt", "mlp"];

/// The family called `name`.
pub fn family(name: &str) -> Result<Box<dyn Family + Send + Sync>> {
    match name {
        "linear" => Ok(Box::new(Linear)),
        "gbdt" => Ok(Box::new(Gbdt)),
        "mlp" => Ok(Box::new(crate::mlp::grouped::Mlp)),
        _ => Err(GroupfitError::arg(format!(
            "unknown model '{name}' (available: {})",
            MODELS.join(", ")
        ))),
    }
}

/// Validation rows: indices into `columns`/`target`, with each row's dense
/// group (`None`: a group not in the training data).
#[derive(Debug, Clone, Copy)]
pub struct ValidData<'a> {
    /// Raw feature columns (NaN = missing), in feature order.
    pub columns: &'a [Column],
    /// Target values.
    pub target: &'a [f64],
    /// Validation rows (indices into `columns` and `target`).
    pub idx: &'a [u32],
    /// Dense group of each validation row.
    pub gid: &'a [Option<u32>],
}

/// Where a family that reads the training features itself finds them (see
/// [`Family::features_from_file`]).
#[derive(Debug, Clone, Copy)]
pub struct FeatureSource<'a> {
    /// The training file; [`TrainData::rows`] are its row numbers.
    pub path: &'a std::path::Path,
    /// The target column's name.
    pub target: &'a str,
    /// The feature columns' names, in feature order.
    pub features: &'a [String],
}

/// The prepared training data a family fits.
#[derive(Debug, Clone, Copy)]
pub struct TrainData<'a> {
    /// Binary or regression.
    pub task: Task,
    /// Raw feature columns over all rows of the training input (NaN = missing);
    /// empty when the family reads them itself from [`TrainData::source`].
    pub columns: &'a [Column],
    /// Set when the features were not read (the family asked for it and the
    /// training input is a file): where to read them.
    pub source: Option<FeatureSource<'a>>,
    /// Values replacing a missing feature, when given from outside (a worker
    /// fitting some of the groups gets the means over every training row);
    /// otherwise a family that imputes computes them from `rows`.
    pub impute: Option<&'a [f64]>,
    /// Target over all rows of the training input.
    pub target: &'a [f64],
    /// Training rows (indices into `columns`/`target`), target never NaN.
    pub rows: &'a [u32],
    /// Dense group id of each training row.
    pub group_of: &'a [u32],
    /// Groups (dense ids `0..n_groups`).
    pub n_groups: usize,
    /// The key of each group (dense id order): families that draw random
    /// numbers per group seed them from the key, not from the dense id, so a
    /// group trained alone equals the group trained among others.
    pub keys: &'a [GroupKey],
    /// `n_groups + 1` flags: which groups get their own models; the last entry
    /// is the global model, fitted on every training row (unset with
    /// `--no-global`, and on remote workers that do not hold it).
    pub fit: &'a [bool],
    /// Validation rows (for early stopping; selection happens in `job`).
    pub valid: ValidData<'a>,
    /// Execution strategy.
    pub strategy: Strategy,
    /// Worker threads (resolved, at least 1).
    pub threads: usize,
    /// Seed of any randomised part of the family.
    pub seed: u64,
}

/// One fitted (group, config) unit.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct UnitFit {
    /// The model, ready to predict raw (imputed per [`FamilyFit::impute`]) rows.
    pub model: FittedModel,
    /// Iterations (Newton steps, boosting rounds, epochs) taken.
    pub iterations: u32,
    /// Whether it met its stopping criterion (rather than an iteration limit).
    pub converged: bool,
}

/// What a family returns.
#[derive(Debug, Clone)]
pub struct FamilyFit {
    /// Per group (`n_groups + 1`, the global model last): empty when the group
    /// is not fitted, otherwise one unit per config in grid order.
    pub units: Vec<Vec<UnitFit>>,
    /// Per-feature values replacing NaN before `predict_row`; empty: no
    /// imputation, NaN reaches the model.
    pub impute: Vec<f64>,
    /// What the pass driver did.
    pub report: RunReport,
}

/// A model family.
pub trait Family {
    /// Its `--model` name.
    fn name(&self) -> &'static str;
    /// Checks the grid's parameters (before any data is read).
    fn check(&self, configs: &[ConfigEntry]) -> Result<()>;
    /// Whether the family reads the training rows' features itself, from
    /// [`TrainData::source`], when the training input is a Parquet file: the
    /// caller then reads only the keys and the target of that file (and the
    /// features of held-out validation rows). The Ray runner's actors do this,
    /// so the driver never holds the training features.
    fn features_from_file(&self) -> bool {
        false
    }
    /// The cost of one model that does not grow with its rows, in training
    /// rows (of the same model) that cost as much: whole groups are placed on
    /// workers by rows plus this, so a worker given many small groups is not
    /// undercharged. 0 unless the family says otherwise.
    fn model_overhead_rows(&self, configs: &[ConfigEntry]) -> usize {
        let _ = configs;
        0
    }
    /// Fits every (group, config) unit with `data.fit[g]` set.
    fn fit(
        &self,
        data: &TrainData<'_>,
        configs: &[ConfigEntry],
        on: &mut dyn FnMut(PassProgress),
    ) -> Result<FamilyFit>;
    /// What the planner would do with this job, without training (`groupfit
    /// explain`): the family builds its data layout and starting units and
    /// hands its pass family to [`crate::exec::explain`].
    fn explain(&self, data: &TrainData<'_>, configs: &[ConfigEntry]) -> Result<Explain> {
        let _ = (data, configs);
        Err(GroupfitError::arg(format!(
            "explain is not available for the {} family",
            self.name()
        )))
    }
}

/// The linear family's layout: group-sorted, standardised, with the global
/// pseudo-group when the global model is fitted.
fn linear_layout(data: &TrainData<'_>) -> Result<GroupedMatrix> {
    GroupedMatrix::build(LayoutInput {
        columns: data.columns,
        target: data.target,
        rows: data.rows,
        group_of: data.group_of,
        n_groups: data.n_groups,
        with_global: data.fit[data.n_groups],
        threads: data.threads,
    })
}

/// Regularised linear and logistic regression (sklearn's objective).
pub struct Linear;

impl Family for Linear {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn check(&self, configs: &[ConfigEntry]) -> Result<()> {
        linear_configs(configs).map(|_| ())
    }

    fn fit(
        &self,
        data: &TrainData<'_>,
        configs: &[ConfigEntry],
        on: &mut dyn FnMut(PassProgress),
    ) -> Result<FamilyFit> {
        let configs = linear_configs(configs)?;
        let matrix = linear_layout(data)?;
        if crate::util::trace::trace() {
            eprintln!("[groupfit] linear layout built");
        }
        let (fitted, report) = fit_grouped(
            &matrix,
            data.task,
            &configs,
            data.fit,
            data.strategy,
            data.threads,
            on,
        );
        let mut units: Vec<Vec<UnitFit>> = fitted
            .into_iter()
            .map(|us| {
                us.into_iter()
                    .map(|u| UnitFit {
                        model: FittedModel::Linear(u.model),
                        iterations: u.iterations,
                        converged: u.converged,
                    })
                    .collect()
            })
            .collect();
        // Without the global pseudo-group, its (empty) entry.
        units.resize_with(data.n_groups + 1, Vec::new);
        Ok(FamilyFit {
            units,
            impute: matrix.impute().to_vec(),
            report,
        })
    }

    fn explain(&self, data: &TrainData<'_>, configs: &[ConfigEntry]) -> Result<Explain> {
        let configs = linear_configs(configs)?;
        let matrix = linear_layout(data)?;
        Ok(explain_grouped(
            &matrix,
            data.task,
            &configs,
            data.fit,
            data.threads,
        ))
    }
}

/// Histogram gradient-boosted trees (LightGBM's parameters and defaults);
/// missing values are handled natively, so there is no imputation.
pub struct Gbdt;

impl Family for Gbdt {
    fn name(&self) -> &'static str {
        "gbdt"
    }

    fn check(&self, configs: &[ConfigEntry]) -> Result<()> {
        crate::gbdt::configs(configs).map(|_| ())
    }

    fn model_overhead_rows(&self, configs: &[ConfigEntry]) -> usize {
        // A tree's split searches (about two per leaf) each visit every bin
        // of every feature, where a row is visited by about two or three
        // histograms per tree: a booster costs about `num_leaves * max_bin`
        // rows beyond its own. On the benchmark data (1,000 Zipf groups,
        // num_leaves 15 and 31) two Ray actors then took 35.6 s and 40.7 s;
        // placed by rows alone, the slower took 57 s.
        crate::gbdt::configs(configs).map_or(0, |cs| {
            let total: usize = cs
                .iter()
                .map(|c| c.num_leaves() as usize * c.max_bin() as usize)
                .sum();
            total / cs.len().max(1)
        })
    }

    fn fit(
        &self,
        data: &TrainData<'_>,
        configs: &[ConfigEntry],
        on: &mut dyn FnMut(PassProgress),
    ) -> Result<FamilyFit> {
        let configs = crate::gbdt::configs(configs)?;
        let (fitted, report) = crate::gbdt::grouped::fit_grouped(data, &configs, on);
        let units = fitted
            .into_iter()
            .map(|us| {
                us.into_iter()
                    .map(|u| UnitFit {
                        model: FittedModel::Gbdt(u.model),
                        iterations: u.rounds as u32,
                        converged: true,
                    })
                    .collect()
            })
            .collect();
        Ok(FamilyFit {
            units,
            impute: Vec::new(),
            report,
        })
    }

    fn explain(&self, data: &TrainData<'_>, configs: &[ConfigEntry]) -> Result<Explain> {
        let configs = crate::gbdt::configs(configs)?;
        Ok(crate::gbdt::grouped::explain_grouped(data, &configs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::Grid;

    #[test]
    fn trees_weigh_num_leaves_times_max_bin_per_model() {
        let grid = |specs: &[&str]| {
            Grid::parse(&specs.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap()
                .points()
        };
        // The mean over the grid: (15 + 31) / 2 * 255.
        let trees = grid(&["num_leaves=15,31"]);
        assert_eq!(Gbdt.model_overhead_rows(&trees), 23 * 255);
        assert_eq!(Gbdt.model_overhead_rows(&grid(&["max_bin=63"])), 31 * 63);
        assert_eq!(Linear.model_overhead_rows(&grid(&["C=0.1,1"])), 0);
    }
}
