//! `--hierarchy`: the groups of every level above the finest, trained in the
//! same fit as the finest ones; each level's part of the fit is taken back
//! out for its own selection by `Fitted::take_level`.
//!
//! The fit sees one flat set of groups: the finest (their ids unchanged),
//! then each coarser level's (the next-finest first), then the root, which
//! holds every training row and is the global model. The family's own global
//! model is off: its rows would repeat once per level.

use super::arguments::TrainSpec;
use super::split::{choose_owners, Owners, Split, SplitInput};
use super::validation::Validation;
use crate::data::keys::GroupKey;
use crate::error::Result;

/// One level above the finest.
pub(super) struct LevelPart {
    /// Its depth: the number of key columns (1 to the finest's minus 1).
    pub level: usize,
    /// Its groups (keys of `level` parts) and each training row's group.
    pub split: Split,
    /// Which of its groups get models.
    pub owners: Owners,
    /// Each validation row's group at this level.
    pub valid_groups: Vec<Option<u32>>,
    /// Its first group's id in the [`Flat`] fit.
    pub base: usize,
}

/// The groups of every level as the family fits them.
pub(super) struct Flat {
    pub rows: Vec<u32>,
    pub group_of: Vec<u32>,
    pub keys: Vec<GroupKey>,
    /// `groups + 1` flags: the last (the family's global model) off.
    pub fit: Vec<bool>,
    pub valid_rows: Vec<u32>,
    pub valid_groups: Vec<Option<u32>>,
    /// The root's id (the last group).
    pub root: usize,
}

/// The levels above the finest (coarsest first) and the flat fit of all of
/// them; `None` without `--hierarchy`.
pub(super) fn levels(
    spec: &TrainSpec,
    finest: &Split,
    finest_owners: &Owners,
    validation: &Validation,
    input: SplitInput<'_>,
) -> Result<Option<(Vec<LevelPart>, Flat)>> {
    let Some(h) = finest.hierarchy.as_ref() else {
        return Ok(None);
    };
    let n_finest = finest.n_groups();
    let mut flat = Flat {
        rows: finest.train_rows.clone(),
        group_of: finest.train_groups.clone(),
        keys: finest.keys.clone(),
        fit: finest_owners.fit[..n_finest].to_vec(),
        valid_rows: validation.rows.clone(),
        valid_groups: validation.groups.clone(),
        root: 0,
    };
    let mut parts = Vec::new();
    for level in (1..h.depth()).rev() {
        let split = Split {
            task: finest.task,
            task_inferred: finest.task_inferred,
            train_rows: finest.train_rows.clone(),
            train_groups: finest
                .train_groups
                .iter()
                .map(|&g| h.at(level, g))
                .collect(),
            keys: h.keys(level).to_vec(),
            dropped: finest.dropped,
            hierarchy: None,
        };
        let owners = choose_owners(spec, &split, input)?;
        let base = flat.keys.len();
        flat.rows.extend_from_slice(&split.train_rows);
        flat.group_of
            .extend(split.train_groups.iter().map(|&g| base as u32 + g));
        flat.keys.extend_from_slice(&split.keys);
        flat.fit.extend_from_slice(&owners.fit[..split.n_groups()]);
        let valid_groups = validation.level_groups[level - 1].clone();
        flat.valid_rows.extend_from_slice(&validation.rows);
        flat.valid_groups
            .extend(valid_groups.iter().map(|g| g.map(|g| base as u32 + g)));
        parts.push(LevelPart {
            level,
            split,
            owners,
            valid_groups,
            base,
        });
    }
    // The root: every row, the global model.
    flat.root = flat.keys.len();
    flat.rows.extend_from_slice(&finest.train_rows);
    flat.group_of.extend(std::iter::repeat_n(
        flat.root as u32,
        finest.train_rows.len(),
    ));
    flat.keys.push(Vec::new());
    flat.fit.push(spec.global_model);
    flat.fit.push(false);
    flat.valid_rows.extend_from_slice(&validation.rows);
    flat.valid_groups.extend(std::iter::repeat_n(
        Some(flat.root as u32),
        validation.rows.len(),
    ));
    parts.reverse();
    Ok(Some((parts, flat)))
}
