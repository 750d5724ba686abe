//! Whole groups on workers in other processes: how the Ray runner serves the
//! families that have no remote partial step (trees and networks).
//!
//! The driver places every fitted group, and the global model, whole on one
//! worker ([`place_whole`]: largest first to the least-loaded worker, the
//! placement [`super::place::place`] makes when no group is cut). A worker
//! gets a [`WholeSpec`] and its rows in table order: the training and
//! validation rows of its groups, or every row when it fits the global model.
//! [`fit_whole`] runs the registered family on them with the engine's own
//! strategies and threads, and returns a [`WholeFit`]. A group's models do not
//! depend on the other groups trained with it (the family seeds every group
//! from its key, bins and standardises per group, and takes imputation values
//! from the driver), so the models are the native runner's.
//!
//! A worker keeps no state between calls: a dead worker's shard is fitted
//! again from the start by its replacement.

use serde::{Deserialize, Serialize};

use crate::data::categorical::FeatureKind;
use crate::data::keys::GroupKey;
use crate::data::{Column, Task};
use crate::error::{GroupfitError, Result};
use crate::family::{TrainData, UnitFit, ValidData};
use crate::plan::Strategy;
use crate::registry::family;
use crate::store::FittedModel;
use crate::tune::ConfigEntry;

/// What one worker fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WholeSpec {
    /// The family (`--model` name).
    pub model: String,
    /// Binary or regression.
    pub task: Task,
    /// The grid.
    pub configs: Vec<ConfigEntry>,
    /// The run's seed.
    pub seed: u64,
    /// The driver's ids of the groups this worker fits, in local-id order.
    pub groups: Vec<usize>,
    /// Their keys (families seed a group's random numbers from its key).
    pub keys: Vec<GroupKey>,
    /// Whether this worker also fits the global model (its shard then holds
    /// every training and validation row).
    pub global: bool,
    /// The values replacing a missing feature, computed by the driver over
    /// every training row.
    pub impute: Vec<f64>,
    /// Number of features.
    pub d: usize,
    /// What each feature is (empty: all numeric).
    #[serde(default)]
    pub kinds: Vec<FeatureKind>,
}

impl WholeSpec {
    /// The local group id of rows of groups this worker does not fit (only
    /// present when it fits the global model).
    pub fn other(&self) -> u32 {
        self.groups.len() as u32
    }
}

/// What a worker returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WholeFit {
    /// Per group of the spec (local-id order), one unit per config.
    pub groups: Vec<Vec<UnitFit<FittedModel>>>,
    /// The global model's units (empty unless the spec fits it).
    pub global: Vec<UnitFit<FittedModel>>,
    /// The family's imputation values (empty: none).
    pub impute: Vec<f64>,
    /// Passes the family's driver ran.
    pub passes: usize,
    /// Seconds inside the passes.
    pub passes_s: f64,
    /// Groups the worker's own plans cut over its threads ([`crate::exec::RunReport::cut_groups`]).
    #[serde(default)]
    pub cut_groups: usize,
}

/// Places groups (`weights[g]` the cost of group `g`'s models in training
/// rows: its rows plus the family's [`crate::family::Family::model_overhead_rows`];
/// `fit[g]` whether fitted; the last entry is the global model) whole on
/// `workers` workers: the planner's `tp` (largest first to the least-loaded
/// worker). Per worker:
/// its groups (ascending) and whether it fits the global model. Workers with
/// nothing to do are left out.
pub fn place_whole(weights: &[usize], fit: &[bool], workers: usize) -> Vec<(Vec<usize>, bool)> {
    let global = weights.len().saturating_sub(1);
    super::place::by_rows(Strategy::Tp, weights, fit, workers)
        .expect("tp is a remote plan")
        .into_iter()
        .filter(|pieces| !pieces.is_empty())
        .map(|pieces| {
            let fits_global = pieces.iter().any(|p| p.group == global);
            let groups = pieces
                .iter()
                .map(|p| p.group)
                .filter(|&g| g != global)
                .collect();
            (groups, fits_global)
        })
        .collect()
}

/// A worker's rows: features, target and each row's local group id (an id of
/// [`WholeSpec::groups`], or [`WholeSpec::other`]; for validation rows,
/// `None` for a group not in the training data).
#[derive(Debug, Clone, Copy)]
pub struct WholeRows<'a, G> {
    /// Raw feature columns (NaN = missing).
    pub columns: &'a [Column],
    /// Target.
    pub target: &'a [f64],
    /// Local group of each row.
    pub group: &'a [G],
}

/// Fits the spec's groups (and the global model) on a worker's rows with
/// `threads` threads.
pub fn fit_whole(
    spec: &WholeSpec,
    train: WholeRows<'_, u32>,
    valid: WholeRows<'_, Option<u32>>,
    threads: usize,
) -> Result<WholeFit> {
    let fam = family(&spec.model)?;
    let n_own = spec.groups.len();
    let n = train.target.len();
    if train.columns.len() != spec.d
        || valid.columns.len() != spec.d
        || train.group.len() != n
        || valid.group.len() != valid.target.len()
        || spec.keys.len() != n_own
        || spec.impute.len() != spec.d
        || !(spec.kinds.is_empty() || spec.kinds.len() == spec.d)
        || train.group.iter().any(|&g| g as usize > n_own)
    {
        return Err(GroupfitError::arg(
            "remote worker protocol: a whole-group shard does not match its spec",
        ));
    }
    // Local groups: the spec's, then one for the other groups' rows (never fitted).
    let mut keys = spec.keys.clone();
    keys.push(Vec::new());
    let mut fit = vec![true; n_own];
    fit.push(false);
    fit.push(spec.global);
    let kinds = if spec.kinds.is_empty() {
        vec![FeatureKind::Numeric; spec.d]
    } else {
        spec.kinds.clone()
    };
    let rows: Vec<u32> = (0..n as u32).collect();
    let valid_rows: Vec<u32> = (0..valid.target.len() as u32).collect();
    let data = TrainData {
        task: spec.task,
        columns: train.columns,
        source: None,
        kinds: &kinds,
        impute: Some(&spec.impute),
        target: train.target,
        rows: &rows,
        group_of: train.group,
        n_groups: n_own + 1,
        keys: &keys,
        fit: &fit,
        valid: ValidData {
            columns: valid.columns,
            target: valid.target,
            rows: &valid_rows,
            groups: valid.group,
            file: None,
        },
        strategy: Strategy::Auto,
        threads: threads.max(1),
        seed: spec.seed,
    };
    let out = fam.fit(&data, &spec.configs, &mut |_| {})?;
    let mut units = out.units;
    let global = if spec.global {
        units.pop().unwrap_or_default()
    } else {
        Vec::new()
    };
    units.truncate(n_own);
    Ok(WholeFit {
        groups: units,
        global,
        impute: out.impute,
        passes: out.report.passes,
        passes_s: out.report.passes_s,
        cut_groups: out.report.cut_groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_placement_balances_rows_and_keeps_groups_whole() {
        // groups of 5000, 300, 200 (not fitted: 100) and the global model (5600).
        let rows = [5000, 300, 200, 100, 5600];
        let fit = [true, true, true, false, true];
        let p = place_whole(&rows, &fit, 2);
        assert_eq!(p, vec![(vec![], true), (vec![0, 1, 2], false)]);
        // One worker takes everything; more workers than units leave some idle.
        assert_eq!(place_whole(&rows, &fit, 1), vec![(vec![0, 1, 2], true)]);
        assert_eq!(place_whole(&rows, &fit, 8).len(), 4);
        // A per-model overhead of 3,000 rows: the global model (8,600) and
        // group 0 (8,000) first, group 1 (3,300) to the lighter 8,000, then
        // group 2 (3,200) to the global model's worker (8,600 < 11,300);
        // by rows alone it joined the other groups.
        let weights: Vec<usize> = rows.iter().map(|r| r + 3000).collect();
        assert_eq!(
            place_whole(&weights, &fit, 2),
            vec![(vec![2], true), (vec![0, 1], false)]
        );
    }
}
