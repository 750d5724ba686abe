//! Prediction with a bundle: routing each row of a table to its group's own
//! model or the global model, and predicting each model's rows together.

use std::path::Path;

use arrow_array::ArrayRef;

use crate::data::keys::{display_key, GroupEncoder};
use crate::data::Column;
use crate::error::{GroupfitError, Result};

use super::{GroupEntry, ModelBundle, Predictions, Route, RowRoute};

impl ModelBundle {
    /// Predicts every row of a table given its key columns and feature columns
    /// (in the bundle's order), on up to `threads` threads: the rows of each
    /// model are gathered and predicted together
    /// ([`FittedModel::predict_columns`]). `path` names the input in errors.
    pub fn predict(
        &self,
        keys: &[ArrayRef],
        features: &[ArrayRef],
        path: &Path,
        threads: usize,
    ) -> Result<Predictions> {
        let n = keys.first().map_or(0, |k| k.len());
        let encoder = GroupEncoder::from_keys(
            &self
                .groups
                .iter()
                .map(|g| g.key.clone())
                .collect::<Vec<_>>(),
        );
        let gid = encoder.lookup(keys)?;
        let mut cols = Vec::with_capacity(features.len());
        for (name, arr) in self.features.iter().zip(features) {
            cols.push(Column::from_array(arr, name, path, true)?);
        }
        // The model of each row: its group's own (slot `g`) or the global
        // model (slot `n_groups`).
        let n_groups = self.groups.len();
        let mut routes = Vec::with_capacity(n);
        let mut slot = Vec::with_capacity(n);
        for g in &gid {
            let (route, s) = match g.map(|g| (g as usize, &self.groups[g as usize])) {
                Some((
                    g,
                    GroupEntry {
                        route: Route::Own,
                        model: Some(_),
                        ..
                    },
                )) => (RowRoute::Own, g),
                Some(_) => (RowRoute::Fallback, n_groups),
                None => (RowRoute::Unseen, n_groups),
            };
            routes.push(route);
            slot.push(s);
        }
        let count = |r: RowRoute| routes.iter().filter(|&&x| x == r).count();
        let own = count(RowRoute::Own);
        let unseen = count(RowRoute::Unseen);
        let global = n - own;
        if global > 0 && self.global.is_none() {
            let first = slot.iter().position(|&s| s == n_groups).unwrap_or(0);
            let (group, reason) = match gid[first] {
                Some(g) => {
                    let e = &self.groups[g as usize];
                    let why = e.fallback.as_deref().unwrap_or("no model of its own");
                    (
                        display_key(&e.key),
                        format!("it fell back in training ({why})"),
                    )
                }
                None => (
                    display_key(&crate::data::keys::key_at(keys, first)?),
                    "it was not seen in training".to_string(),
                ),
            };
            return Err(GroupfitError::NoModel {
                group,
                path: path.display().to_string(),
                reason,
                rows: global,
            });
        }
        // Rows in order of their model, as imputed column-major features,
        // so each model predicts its rows in one call.
        let (order, start) = crate::data::bucket(slot.iter().copied(), n_groups + 1);
        let xc = crate::data::imputed_columns(&cols, &order, &self.impute, threads);
        let model = |s: usize| match (self.groups.get(s), &self.global) {
            (Some(GroupEntry { model: Some(m), .. }), _) => m,
            (_, Some(g)) => &g.model,
            // A slot without rows (checked above): never called.
            (_, None) => unreachable!("rows without a model are an error above"),
        };
        let by_slot = crate::util::par::par_map(
            n_groups + 1,
            threads,
            &|s| start[s + 1] - start[s] + 1,
            &|s| {
                let range = start[s]..start[s + 1];
                if range.is_empty() {
                    Vec::new()
                } else {
                    model(s).predict_columns(self.task, &xc, range)
                }
            },
        );
        let mut values = vec![0.0; n];
        for (s, p) in by_slot.iter().enumerate() {
            for (&i, &v) in order[start[s]..start[s + 1]].iter().zip(p) {
                values[i as usize] = v;
            }
        }
        Ok(Predictions {
            values,
            own,
            global,
            unseen,
            routes,
        })
    }
}
