//! What to train ([`TrainSpec`]) and the checks of it that need no data: the
//! grid, the keys, the target not a key, the thread limit, and validation rows
//! for a grid or early stopping — all said before any file is read.

use std::path::PathBuf;

use crate::data::Task;
use crate::error::{GroupfitError, Result};
use crate::plan::Strategy;
use crate::registry::{AllWords, AnyFamily};
use crate::tune::shrinkage::Shrinkage;
use crate::tune::{ConfigEntry, Grid};
use crate::util::par::MAX_THREADS;

/// What to train. Build it with struct-update syntax over [`TrainSpec::new`].
#[derive(Debug, Clone)]
pub struct TrainSpec {
    /// Training data (Parquet).
    pub data: PathBuf,
    /// Validation data (Parquet); when absent, `valid_fraction` of the training
    /// file's rows are held out.
    pub valid: Option<PathBuf>,
    /// Fraction of rows held out for validation when `valid` is absent.
    pub valid_fraction: f64,
    /// Key columns.
    pub by: Vec<String>,
    /// Target column.
    pub target: String,
    /// Feature columns; `None`: every numeric, text or dictionary column that
    /// is not a key or the target.
    pub features: Option<Vec<String>>,
    /// Columns to treat as categorical besides text ones (integers); they are
    /// features too.
    pub categorical: Option<Vec<String>>,
    /// The most distinct training values a categorical column may have.
    pub max_categories: usize,
    /// Binary or regression; `None`: binary if every target is 0 or 1.
    pub task: Option<Task>,
    /// Model family.
    pub model: String,
    /// Grid specs, `NAME=V1,V2`.
    pub params: Vec<String>,
    /// Groups with fewer training rows use the global model.
    pub min_rows: usize,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Seed of the validation split (and of any randomised family).
    pub seed: u64,
    /// Execution strategy.
    pub strategy: Strategy,
    /// Whether to train the global model (on every training row) that
    /// serves groups without a model of their own and groups unseen in
    /// training. Without it (`--no-global`), such groups have no model and
    /// predicting their rows is an error.
    pub global_model: bool,
    /// `--hierarchy`: a model set at every prefix level of `by` (`a`, `a/b`,
    /// ...) besides the finest groups, trained in the same passes; a group
    /// without a model of its own uses its nearest ancestor's.
    pub hierarchy: bool,
    /// `--shrinkage`: how a row's prediction blends the models on its
    /// group's path. `None`: `auto` with `hierarchy`, `none` without.
    pub shrinkage: Option<Shrinkage>,
    /// `--max-memory`: the most memory the job may use, in bytes; `None`:
    /// what the machine has available (cgroup limit or `MemAvailable`).
    pub max_memory: Option<u64>,
    /// How the job was asked for (the CLI's command line, the Python call),
    /// kept in the summary for `report`; `None`: not recorded.
    pub command: Option<String>,
}

impl TrainSpec {
    /// A spec with defaults: hold out 20 %, linear, `min_rows` 10, all cores, seed 0, `auto`.
    pub fn new(data: impl Into<PathBuf>, by: Vec<String>, target: impl Into<String>) -> Self {
        TrainSpec {
            data: data.into(),
            valid: None,
            valid_fraction: 0.2,
            by,
            target: target.into(),
            features: None,
            categorical: None,
            max_categories: crate::data::categorical::DEFAULT_MAX_CATEGORIES,
            task: None,
            model: "linear".into(),
            params: Vec::new(),
            min_rows: 10,
            threads: 0,
            seed: 0,
            strategy: Strategy::Auto,
            global_model: true,
            hierarchy: false,
            shrinkage: None,
            max_memory: None,
            command: None,
        }
    }
}

/// The error for a grid of `n_configs` with nothing to choose among them by.
pub(super) fn no_validation_rows(n_configs: usize) -> GroupfitError {
    GroupfitError::arg(format!(
        "no validation rows to choose among {n_configs} configs; pass --valid or a --valid-fraction above 0"
    ))
}

/// Checks the arguments that need no data; returns the grid.
pub(super) fn check_arguments(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
) -> Result<Vec<ConfigEntry>> {
    let grid = Grid::parse(&spec.params, &AllWords)?.points();
    family.check(&grid)?;
    if spec.by.is_empty() {
        return Err(GroupfitError::arg(
            "at least one key column is needed (--by)",
        ));
    }
    if spec.hierarchy && spec.by.len() < 2 {
        return Err(GroupfitError::arg(format!(
            "--hierarchy needs two or more key columns (--by a,b), got {}",
            spec.by.len()
        )));
    }
    if !spec.hierarchy && !spec.global_model && spec.shrinkage.is_some_and(|s| s != Shrinkage::None)
    {
        return Err(GroupfitError::arg(
            "--shrinkage without --hierarchy blends each group with the global model; it cannot go with --no-global",
        ));
    }
    if spec.valid.is_none() && !(0.0..1.0).contains(&spec.valid_fraction) {
        return Err(GroupfitError::arg(format!(
            "--valid-fraction must be in [0, 1), got {}",
            spec.valid_fraction
        )));
    }
    if spec.max_categories == 0 {
        return Err(GroupfitError::arg("--max-categories must be at least 1"));
    }
    if spec.min_rows == 0 {
        return Err(GroupfitError::arg("--min-rows must be at least 1"));
    }
    if spec.threads > MAX_THREADS {
        return Err(GroupfitError::arg(format!(
            "--threads must be at most {MAX_THREADS} (0: one per core), got {}",
            spec.threads
        )));
    }
    if spec.by.contains(&spec.target) {
        return Err(GroupfitError::arg(format!(
            "column '{}' cannot be both a key (--by) and the target",
            spec.target
        )));
    }
    // Without validation rows nothing can choose among configs or stop early:
    // say so before reading the data, not after training.
    if spec.valid.is_none() && spec.valid_fraction == 0.0 {
        if grid.len() > 1 {
            return Err(no_validation_rows(grid.len()));
        }
        if grid.iter().any(|config| {
            config
                .params
                .get("early_stopping_rounds")
                .is_some_and(|&rounds| rounds > 0.0)
        }) {
            return Err(GroupfitError::arg(
                "early_stopping_rounds needs validation rows; pass --valid or a --valid-fraction above 0",
            ));
        }
    }
    Ok(grid)
}
