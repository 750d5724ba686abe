//! The data a job hands its family: [`Prepared`] gathers what the input,
//! split, fallback and validation stages produced, and lends it out as the
//! family's [`TrainData`].

use std::path::PathBuf;
use std::time::Instant;

use arrow_array::RecordBatch;

use super::arguments::TrainSpec;
use super::columns::ColumnAccount;
use super::event::trace_stamp;
use super::input::{load, Feature, Tables};
use super::levels::{levels, Flat, LevelPart};
use super::memory::MemoryEstimate;
use super::split::{choose_owners, split, Owners, Split, SplitInput};
use super::validation::{validation, ValidSource, Validation, ValidationInput};
use crate::data::categorical::FeatureKind;
use crate::data::Column;
use crate::error::Result;
use crate::family::{FeatureSource, TrainData, ValidData, ValidFile};
use crate::registry::AnyFamily;
use crate::tune::ConfigEntry;
use crate::util::par::resolve_threads;

/// A checked, read, split job, ready to fit or to plan.
pub(super) struct Prepared<'a> {
    pub spec: &'a TrainSpec,
    pub family: &'a dyn AnyFamily,
    /// The grid.
    pub grid: Vec<ConfigEntry>,
    /// The features, in model order (categorical ones with their dictionaries).
    pub features: Vec<Feature>,
    /// Feature names, in model order.
    pub feature_names: Vec<String>,
    /// How the family sees each feature.
    pub kinds: Vec<FeatureKind>,
    /// What was done with each column of the input.
    pub account: ColumnAccount,
    /// The training table's path (the family may read its features from it).
    pub train_path: PathBuf,
    /// Whether `columns` holds the training features.
    pub features_read: bool,
    /// Feature columns over every row of the training table (see `features_read`).
    pub columns: Vec<Column>,
    /// Target over every row of the training table.
    pub target: Vec<f64>,
    pub split: Split,
    pub owners: Owners,
    pub validation: Validation,
    /// With `--hierarchy`: the levels above the finest, coarsest first.
    pub levels: Vec<LevelPart>,
    /// With `--hierarchy`: every level's groups as the family fits them.
    pub flat: Option<Flat>,
    /// Worker threads (resolved, at least 1).
    pub threads: usize,
    /// When the job started.
    pub started: Instant,
    /// Seconds from the start to the end of preparation.
    pub load_s: f64,
    /// When preparation ended (and training starts).
    pub prepared_at: Instant,
    /// The job's estimated peak memory.
    pub memory: MemoryEstimate,
}

/// What a job is: the spec, the family that fits it, and when it started.
#[derive(Clone, Copy)]
pub(super) struct Job<'a> {
    pub spec: &'a TrainSpec,
    pub family: &'a dyn AnyFamily,
    /// When the job started.
    pub started: Instant,
}

/// Runs the stages from the tables to the validation rows.
pub(super) fn prepare<'a>(
    job: Job<'a>,
    grid: Vec<ConfigEntry>,
    tables: Tables,
) -> Result<Prepared<'a>> {
    let Job {
        spec,
        family,
        started,
    } = job;
    let mut tables = tables;
    let groups = tables
        .groups
        .take()
        .expect("the tables' keys are encoded once");
    let loaded = load(spec, &tables, groups, started)?;
    // The training table is numbers and groups now: its keys and target go
    // (the features stay where they were read into columns).
    tables.train.batch = RecordBatch::new_empty(tables.train.batch.schema());
    let split_input = SplitInput {
        target: &loaded.target,
        path: &tables.train.path,
        valid_table: tables.valid.is_some(),
    };
    let (split, held_out) = split(spec, split_input, loaded.groups, started)?;
    let owners = choose_owners(spec, &split, split_input)?;
    let validation_input = ValidationInput {
        tables: &tables,
        features: &loaded.features,
        training_target: &loaded.target,
        task: split.task,
        keys: &split.keys,
        hierarchy: split.hierarchy.as_ref(),
    };
    let validation = validation(spec, validation_input, held_out)?;
    // Likewise the validation table's keys and target.
    tables.valid = None;
    let (levels, flat) = match levels(spec, &split, &owners, &validation, split_input)? {
        Some((parts, flat)) => (parts, Some(flat)),
        None => (Vec::new(), None),
    };
    trace_stamp(started, "validation data");
    let load_s = started.elapsed().as_secs_f64();
    let prepared_at = Instant::now();
    Ok(Prepared {
        spec,
        family,
        grid,
        feature_names: loaded.features.iter().map(|f| f.name.clone()).collect(),
        kinds: loaded.features.iter().map(Feature::kind).collect(),
        features: loaded.features,
        account: loaded.account,
        train_path: tables.train.path,
        features_read: tables.features_read,
        columns: loaded.columns,
        target: loaded.target,
        split,
        owners,
        validation,
        levels,
        flat,
        threads: resolve_threads(spec.threads),
        started,
        load_s,
        prepared_at,
        memory: tables.memory,
    })
}

impl Prepared<'_> {
    /// Groups (dense ids `0..n_groups`; the global model is unit row `n_groups`).
    pub fn n_groups(&self) -> usize {
        self.split.n_groups()
    }

    /// The data the family fits (or plans).
    pub fn train_data(&self) -> TrainData<'_> {
        let mut valid = self.valid_data();
        let (rows, group_of, keys, fit) = match &self.flat {
            None => (
                &self.split.train_rows[..],
                &self.split.train_groups[..],
                &self.split.keys[..],
                &self.owners.fit[..],
            ),
            Some(flat) => {
                valid.rows = &flat.valid_rows;
                valid.groups = &flat.valid_groups;
                (
                    &flat.rows[..],
                    &flat.group_of[..],
                    &flat.keys[..],
                    &flat.fit[..],
                )
            }
        };
        TrainData {
            task: self.split.task,
            columns: &self.columns,
            source: (!self.features_read).then_some(FeatureSource {
                path: &self.train_path,
                target: &self.spec.target,
                features: &self.feature_names,
            }),
            kinds: &self.kinds,
            impute: None,
            target: &self.target,
            rows,
            group_of,
            n_groups: keys.len(),
            keys,
            fit,
            valid,
            strategy: self.spec.strategy,
            threads: self.threads,
            seed: self.spec.seed,
        }
    }

    /// The validation rows, their features and target.
    pub fn valid_data(&self) -> ValidData<'_> {
        let (columns, target) = match &self.validation.source {
            ValidSource::Training => (&self.columns[..], &self.target[..]),
            ValidSource::Own { columns, target } => (&columns[..], &target[..]),
        };
        ValidData {
            columns,
            target,
            rows: &self.validation.rows,
            groups: &self.validation.groups,
            file: self.validation.file.as_ref().map(|f| ValidFile {
                path: &f.path,
                file_rows: f.file_rows.as_deref(),
            }),
        }
    }
}
