//! The interface of a model family: what it is given ([`TrainData`]) and
//! what it returns ([`FamilyFit`], one fitted model per (group, config)
//! unit).
//!
//! A family lives in its own folder (`linear/`, `gbdt/`, `mlp/`) and
//! implements [`Family`] there, with its own fitted model type. Everything
//! around it (reading, group encoding, the split, fallbacks, validation
//! scoring, config selection, the bundle) is shared and lives in `job`,
//! which reaches the families by name through `registry`.

use crate::data::categorical::FeatureKind;
use crate::data::keys::GroupKey;
use crate::data::{Column, Task};
use crate::error::{GroupfitError, Result};
use crate::exec::{Explain, OnProgress, RunReport, Sequence};
use crate::plan::{LoadShape, Strategy};
use crate::tune::{ConfigEntry, NoWords, ParamWords};

/// Validation rows: indices into `columns`/`target`, with each row's dense
/// group (`None`: a group not in the training data).
#[derive(Debug, Clone, Copy)]
pub struct ValidData<'a> {
    /// Raw feature columns (NaN = missing), in feature order.
    pub columns: &'a [Column],
    /// Target values.
    pub target: &'a [f64],
    /// Validation rows (indices into `columns` and `target`).
    pub rows: &'a [u32],
    /// Dense group of each validation row.
    pub groups: &'a [Option<u32>],
    /// Where the features of `columns` are in a Parquet file, when the
    /// family reads the training features itself: a remote worker then
    /// reads its own validation rows too.
    pub file: Option<ValidFile<'a>>,
}

/// The Parquet file behind the validation columns.
#[derive(Debug, Clone, Copy)]
pub struct ValidFile<'a> {
    /// The file.
    pub path: &'a std::path::Path,
    /// The file row of each index into the columns; `None`: the index is
    /// the file row.
    pub file_rows: Option<&'a [u32]>,
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
    /// What each feature is: numbers, or codes of a categorical feature
    /// (see [`crate::data::categorical`]). Codes are never imputed.
    pub kinds: &'a [FeatureKind],
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
pub struct UnitFit<M> {
    /// The model, ready to predict raw (imputed per [`FamilyFit::impute`]) rows.
    pub model: M,
    /// Iterations (Newton steps, boosting rounds, epochs) taken.
    pub iterations: u32,
    /// Whether it met its stopping criterion (rather than an iteration limit).
    pub converged: bool,
}

/// What a family returns.
#[derive(Debug, Clone)]
pub struct FamilyFit<M> {
    /// Per group (`n_groups + 1`, the global model last): empty when the group
    /// is not fitted, otherwise one unit per config in grid order.
    pub units: Vec<Vec<UnitFit<M>>>,
    /// Per-feature values replacing NaN before `predict_row`; empty: no
    /// imputation, NaN reaches the model.
    pub impute: Vec<f64>,
    /// What the pass driver did.
    pub report: RunReport,
}

impl<M> FamilyFit<M> {
    /// The same fit with every model converted by `f`.
    pub fn map_models<N>(self, mut f: impl FnMut(M) -> N) -> FamilyFit<N> {
        let units = self
            .units
            .into_iter()
            .map(|us| {
                us.into_iter()
                    .map(|u| UnitFit {
                        model: f(u.model),
                        iterations: u.iterations,
                        converged: u.converged,
                    })
                    .collect()
            })
            .collect();
        FamilyFit {
            units,
            impute: self.impute,
            report: self.report,
        }
    }
}

/// Fits a grid in parts (`parts`: config indices, each config in one part;
/// e.g. the configs that share a one-hot encoding, so a layout): `fit(i,
/// ks, on)` fits part `i`, whose configs are `ks`, reporting its progress
/// to `on`, and the units go back in grid order. A part's share of the
/// progress is its share of the configs. The parts' reports add up
/// (passes, seconds; the most cut groups); the imputation values are the
/// first part's.
pub fn fit_parts<M>(
    data: &TrainData<'_>,
    parts: &[Vec<usize>],
    on: &mut OnProgress<'_>,
    mut fit: impl FnMut(usize, &[usize], &mut OnProgress<'_>) -> Result<FamilyFit<M>>,
) -> Result<FamilyFit<M>> {
    let n_configs: usize = parts.iter().map(Vec::len).sum();
    if let [only] = parts {
        if only.iter().copied().eq(0..n_configs) {
            return fit(0, only, on);
        }
    }
    let fitted = data.fit.iter().filter(|&&f| f).count();
    let mut seq = Sequence::new(
        on,
        parts.iter().map(|ks| ks.len() as f64).collect(),
        parts.iter().map(|ks| ks.len() * fitted).collect(),
    );
    let mut units: Vec<Vec<Option<UnitFit<M>>>> = Vec::new();
    let mut merged: Option<(Vec<f64>, RunReport)> = None;
    for (i, ks) in parts.iter().enumerate() {
        let part = fit(i, ks, &mut seq.part(i))?;
        units.resize_with(part.units.len(), Vec::new);
        for (slot, us) in units.iter_mut().zip(part.units) {
            if us.is_empty() {
                continue;
            }
            slot.resize_with(n_configs, || None);
            for (&k, u) in ks.iter().zip(us) {
                slot[k] = Some(u);
            }
        }
        match &mut merged {
            None => merged = Some((part.impute, part.report)),
            Some((_, r)) => {
                r.passes += part.report.passes;
                r.passes_s += part.report.passes_s;
                r.cut_groups = r.cut_groups.max(part.report.cut_groups);
            }
        }
    }
    let (impute, report) = merged.ok_or_else(|| GroupfitError::arg("no configs to fit"))?;
    let units = units
        .into_iter()
        .map(|us| {
            us.into_iter()
                .map(|u| u.expect("every config in one part"))
                .collect()
        })
        .collect();
    Ok(FamilyFit {
        units,
        impute,
        report,
    })
}

/// The shape of a training job as its memory estimate sees it, known
/// before the features are read (see [`Family::memory`]).
#[derive(Debug, Clone, Copy)]
pub struct MemoryShape<'a> {
    /// Training rows of each group given a model of its own.
    pub group_rows: &'a [usize],
    /// Training rows in all (the global model's, when it is fitted).
    pub train_rows: usize,
    /// Validation rows.
    pub valid_rows: usize,
    /// Features.
    pub features: usize,
    /// Groups in all (with a model or not).
    pub groups: usize,
    /// Whether the global model is fitted.
    pub global: bool,
    /// Worker threads.
    pub threads: usize,
}

impl MemoryShape<'_> {
    /// The training rows of each model fitted: the groups', then, with the
    /// global model, every row again (a family's layout holds them so).
    pub fn model_rows(&self) -> impl Iterator<Item = usize> + '_ {
        let global = self.global.then_some(self.train_rows);
        self.group_rows.iter().copied().chain(global)
    }
}

/// One named part of a memory estimate, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MemoryTerm {
    /// What it holds (`"layout"`, `"boosters"`).
    pub name: &'static str,
    /// Bytes.
    pub bytes: u64,
}

/// What a sharded family's workers need beyond their pieces' training rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardNeeds {
    /// Their groups' validation rows (gbdt's early stopping).
    pub validation: bool,
    /// Every training row in the statistics rounds (linear, mlp: the
    /// imputation values are the means over all rows): without the global
    /// model, the groups without models are placed for their statistics.
    pub global_rows: bool,
    /// The global pseudo-group's rows in table order (mlp: its batches
    /// index them so); otherwise group after group, as linear's blocks are.
    pub global_in_table_order: bool,
    /// Every group whole on one worker: the grid has no remote partial
    /// step (gbdt's quantized gradients take a scale from all of a group's
    /// rows each round).
    pub whole_groups: bool,
}

/// A model family.
pub trait Family {
    /// The fitted model of one unit.
    type Model;
    /// Its `--model` name.
    fn name(&self) -> &'static str;
    /// The parameters it takes as words (the grid stores numbers).
    fn words(&self) -> &dyn ParamWords {
        &NoWords
    }
    /// Checks the grid's parameters (before any data is read).
    fn check(&self, configs: &[ConfigEntry]) -> Result<()>;
    /// Whether the family reads the training rows' features itself, from
    /// [`TrainData::source`], when the training input is a Parquet file: the
    /// caller then reads only the keys and the target of that file (and the
    /// features of held-out validation rows). The Ray runner's actors do this,
    /// so the driver never holds the training features (unless `configs`
    /// place groups whole: the driver ships their rows).
    fn features_from_file(&self, configs: &[ConfigEntry]) -> bool {
        let _ = configs;
        false
    }
    /// Whether the family runs with groups cut over remote workers: it
    /// implements [`crate::shard::Sharded`], registered in
    /// [`crate::registry::with_sharded`]. Otherwise the Ray runner places
    /// its groups whole.
    fn sharded(&self) -> bool {
        false
    }
    /// What a sharded family's workers need beyond their pieces' rows with
    /// this grid.
    fn shard_needs(&self, configs: &[ConfigEntry]) -> ShardNeeds {
        let _ = configs;
        ShardNeeds::default()
    }
    /// The cost of one model that does not grow with its rows, in training
    /// rows (of the same model) that cost as much: whole groups are placed on
    /// workers by rows plus this, so a worker given many small groups is not
    /// undercharged. 0 unless the family says otherwise.
    fn model_overhead_rows(&self, configs: &[ConfigEntry]) -> usize {
        let _ = configs;
        0
    }
    /// The planner's view of groups of `rows` training rows with this grid,
    /// before any unit exists (the Ray runner places its groups with it):
    /// one [`LoadShape`] per entry of `rows`. The default: no heavy rows,
    /// one step, one sync.
    fn load_shapes(&self, task: Task, configs: &[ConfigEntry], rows: &[usize]) -> Vec<LoadShape> {
        let _ = (task, configs);
        vec![LoadShape::default(); rows.len()]
    }
    /// The family's own memory at its peak while it fits a job of `shape`
    /// with this grid: its layout and per-unit state, not the input columns
    /// it is given. Empty: the family holds nothing worth counting here (a
    /// remote runner's workers hold the data).
    fn memory(&self, shape: &MemoryShape<'_>, configs: &[ConfigEntry]) -> Result<Vec<MemoryTerm>> {
        let _ = (shape, configs);
        Ok(Vec::new())
    }
    /// Fits every (group, config) unit with `data.fit[g]` set.
    fn fit(
        &self,
        data: &TrainData<'_>,
        configs: &[ConfigEntry],
        on: &mut OnProgress<'_>,
    ) -> Result<FamilyFit<Self::Model>>;
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
