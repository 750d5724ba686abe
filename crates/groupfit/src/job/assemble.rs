//! Assembly: the [`ModelBundle`] of a trained job — each group's chosen model
//! (or its route to the global model, or to none), the global model, the
//! grid, the imputation values and the summary.

use std::collections::BTreeMap;

use super::fit::Fitted;
use super::prepare::Prepared;
use super::select::Selection;
use super::summary::{summarise, Routes, ScoreMeans, Tally, TrainOutput};
use crate::family::UnitFit;
use crate::store::FittedModel;
use crate::store::{GlobalEntry, GroupEntry, ModelBundle, Route, FORMAT_VERSION};

/// Builds the bundle and its summary. Each group's chosen model (and the
/// global model) is moved out of `fitted`, not copied (20,000 networks are
/// hundreds of megabytes).
pub(super) fn assemble(
    prepared: &Prepared,
    mut fitted: Fitted,
    selection: Selection,
) -> TrainOutput {
    let (groups, tally) = group_entries(
        prepared,
        &mut fitted.units,
        &fitted.report.group_s,
        &selection,
    );
    let summary = summarise(prepared, &fitted, tally);
    let n_groups = prepared.n_groups();
    let spec = prepared.spec;
    let bundle = ModelBundle {
        format_version: FORMAT_VERSION,
        groupfit_version: env!("CARGO_PKG_VERSION").to_string(),
        family: prepared.family.name().to_string(),
        task: prepared.split.task,
        key_columns: spec.by.clone(),
        features: prepared.feature_names.clone(),
        categorical: prepared
            .features
            .iter()
            .filter_map(|f| f.dictionary.clone())
            .collect(),
        target: spec.target.clone(),
        impute: fitted.impute,
        configs: prepared.grid.clone(),
        global: selection.global_config.map(|k| GlobalEntry {
            config: k,
            model: fitted.units[n_groups].swap_remove(k).model,
            valid: selection.global_scores,
        }),
        groups,
        levels: Vec::new(),
        pooling: None,
        summary: serde_json::to_value(&summary).expect("summary serialises"),
    };
    TrainOutput { bundle, summary }
}

/// Every group's entry in the bundle, and what their routes and scores add up to.
pub(super) fn group_entries(
    prepared: &Prepared,
    units: &mut [Vec<UnitFit<FittedModel>>],
    group_s: &[f64],
    selection: &Selection,
) -> (Vec<GroupEntry>, Tally) {
    let task = prepared.split.task;
    let global = selection.global_config.is_some();
    // A group without validation rows takes this config.
    let default_config = selection.default_config(prepared.grid.len());
    let mut tally = Tally {
        routes: Routes {
            valid_rows_unseen: prepared
                .validation
                .groups
                .iter()
                .filter(|g| g.is_none())
                .count(),
            ..Routes::default()
        },
        chosen_configs: BTreeMap::new(),
        means: ScoreMeans::default(),
        global_config: selection.global_config,
    };
    let mut groups = Vec::with_capacity(prepared.n_groups());
    for (group, selected) in selection.groups.iter().enumerate() {
        let routes = &mut tally.routes;
        let (route, config, model, iterations) = if prepared.owners.fit[group] {
            let k = selected.chosen.unwrap_or(default_config);
            let unit = units[group].swap_remove(k);
            *tally
                .chosen_configs
                .entry(prepared.grid[k].name.clone())
                .or_default() += 1;
            routes.groups_own += 1;
            routes.valid_rows_own += selected.n_valid;
            (Route::Own, Some(k), Some(unit.model), unit.iterations)
        } else if global {
            routes.groups_global += 1;
            (Route::Global, None, None, 0)
        } else {
            routes.groups_none += 1;
            routes.valid_rows_none += selected.n_valid;
            (Route::None, None, None, 0)
        };
        if selected.n_valid > 0 && route != Route::None {
            tally.means.add(task, &selected.scores);
        }
        groups.push(GroupEntry {
            key: prepared.split.keys[group].clone(),
            n_train: prepared.owners.rows_per_group[group],
            n_valid: selected.n_valid,
            route,
            fallback: prepared.owners.fallback_reason[group].clone(),
            config,
            model,
            valid: selected.scores.clone(),
            valid_by_config: selected.by_config.clone(),
            iterations,
            valid_global: selected.global,
            train_s: (route == Route::Own)
                .then(|| group_s.get(group).copied())
                .flatten(),
        });
    }
    let routes = &mut tally.routes;
    if global {
        routes.valid_rows_global = prepared.validation.rows.len() - routes.valid_rows_own;
    } else {
        // Unseen groups' rows have no model either.
        routes.valid_rows_none += routes.valid_rows_unseen;
    }
    (groups, tally)
}
