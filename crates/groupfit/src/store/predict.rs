//! Prediction with a bundle: routing each row of a table to its group's own
//! model or the global model, and predicting each model's rows together.

use std::path::Path;

use arrow_array::ArrayRef;

use crate::data::categorical::Encoding;
use crate::data::keys::{display_key, GroupEncoder};
use crate::error::{GroupfitError, Result};

use super::{FittedModel, GroupEntry, ModelBundle, Predictions, Route, RowRoute};

impl ModelBundle {
    /// How `--with-route` writes a row's route: [`RowRoute::name`], or for
    /// a level of the hierarchy `level:` and its key columns (`level:origin`).
    pub fn route_label(&self, route: RowRoute) -> String {
        match route {
            RowRoute::Ancestor(l) => match self.levels.get(l as usize) {
                Some(level) => format!("level:{}", level.key_columns.join("/")),
                None => route.name().to_string(),
            },
            r => r.name().to_string(),
        }
    }

    /// How feature `name`'s column is read: through its dictionary if it is
    /// categorical, as numbers otherwise.
    pub fn encoding(&self, name: &str) -> Encoding<'_> {
        match self.categorical.iter().find(|d| d.feature == name) {
            Some(d) => Encoding::Categorical(d),
            None => Encoding::Numeric,
        }
    }

    /// Predicts every row of a table given its key columns and feature columns
    /// (in the bundle's order), on up to `threads` threads: the rows of each
    /// model are gathered and predicted together
    /// ([`super::FittedModel::predict_columns`]). `path` names the input in errors.
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
            cols.push(self.encoding(name).read(arr, name, path)?);
        }
        // The model of each row: its group's own (slot `g`) or the global
        // model (slot `n_groups`).
        // Slots: the groups', then each level's groups', then the global model.
        fn own_model(e: &GroupEntry) -> Option<&FittedModel> {
            match e {
                GroupEntry {
                    route: Route::Own,
                    model: Some(m),
                    ..
                } => Some(m),
                _ => None,
            }
        }
        let mut slot_models: Vec<Option<&FittedModel>> =
            self.groups.iter().map(own_model).collect();
        let mut routes = Vec::with_capacity(n);
        let mut slot = Vec::with_capacity(n);
        for g in &gid {
            let (route, s) = match g.map(|g| (g as usize, &self.groups[g as usize])) {
                Some((g, e)) if own_model(e).is_some() => (RowRoute::Own, g),
                Some(_) => (RowRoute::Fallback, usize::MAX),
                None => (RowRoute::Unseen, usize::MAX),
            };
            routes.push(route);
            slot.push(s);
        }
        // Rows without a model of their own group's: the nearest level
        // above with one, the finest first.
        for (li, level) in self.levels.iter().enumerate().rev() {
            let base = slot_models.len();
            slot_models.extend(level.groups.iter().map(own_model));
            if !slot.contains(&usize::MAX) {
                continue;
            }
            let keys_of_level: Vec<_> = level.groups.iter().map(|g| g.key.clone()).collect();
            let found =
                GroupEncoder::from_keys(&keys_of_level).lookup(&keys[..level.key_columns.len()])?;
            for (i, f) in found.iter().enumerate() {
                if slot[i] != usize::MAX {
                    continue;
                }
                if let Some(g) = f.filter(|&g| slot_models[base + g as usize].is_some()) {
                    slot[i] = base + g as usize;
                    routes[i] = RowRoute::Ancestor(li as u16);
                }
            }
        }
        let n_groups = slot_models.len();
        for s in &mut slot {
            if *s == usize::MAX {
                *s = n_groups;
            }
        }
        let count = |r: RowRoute| routes.iter().filter(|&&x| x == r).count();
        let own = count(RowRoute::Own);
        let unseen = count(RowRoute::Unseen);
        let global = count(RowRoute::Fallback) + unseen;
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
        let model = |s: usize| match (slot_models.get(s), &self.global) {
            (Some(Some(m)), _) => *m,
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Float64Array, StringArray};

    use super::*;
    use crate::data::Task;
    use crate::linear::LinearModel;
    use crate::store::{FittedModel, GlobalEntry, Scores, FORMAT_VERSION};

    fn linear(coef: f64, intercept: f64) -> FittedModel {
        FittedModel::Linear(LinearModel {
            coef: vec![coef],
            intercept,
            onehot: Vec::new(),
        })
    }

    fn group(key: &str, route: Route, model: Option<FittedModel>) -> GroupEntry {
        GroupEntry {
            key: vec![Some(key.into())],
            n_train: 10,
            n_valid: 0,
            route,
            fallback: (route != Route::Own).then(|| "too few rows".into()),
            config: model.as_ref().map(|_| 0),
            model,
            valid: Scores::default(),
            valid_by_config: Vec::new(),
            iterations: 0,
        }
    }

    /// Group `a` has its own model (`2 x + 1`), group `b` falls back to the
    /// global model (`-x`); missing features are imputed with 10.
    fn bundle() -> ModelBundle {
        ModelBundle {
            format_version: FORMAT_VERSION,
            groupfit_version: "test".into(),
            family: "linear".into(),
            task: Task::Regression,
            key_columns: vec!["g".into()],
            features: vec!["x".into()],
            categorical: Vec::new(),
            target: "y".into(),
            impute: vec![10.0],
            configs: vec![crate::tune::ConfigEntry {
                name: "default".into(),
                params: Default::default(),
            }],
            global: Some(GlobalEntry {
                config: 0,
                model: linear(-1.0, 0.0),
                valid: Scores::default(),
            }),
            groups: vec![
                group("a", Route::Own, Some(linear(2.0, 1.0))),
                group("b", Route::Global, None),
            ],
            levels: Vec::new(),
            summary: serde_json::json!({}),
        }
    }

    fn table(keys: &[&str], x: &[Option<f64>]) -> (Vec<ArrayRef>, Vec<ArrayRef>) {
        (
            vec![Arc::new(StringArray::from(keys.to_vec())) as ArrayRef],
            vec![Arc::new(Float64Array::from(x.to_vec())) as ArrayRef],
        )
    }

    #[test]
    fn rows_go_to_their_groups_model_or_the_global_model() {
        let (k, f) = table(
            &["a", "b", "c", "a"],
            &[Some(1.0), Some(2.0), Some(3.0), None],
        );
        let p = bundle().predict(&k, &f, Path::new("t"), 2).unwrap();
        assert_eq!(p.values, vec![3.0, -2.0, -3.0, 21.0]);
        assert_eq!((p.own, p.global, p.unseen), (2, 2, 1));
        assert_eq!(
            p.routes,
            vec![
                RowRoute::Own,
                RowRoute::Fallback,
                RowRoute::Unseen,
                RowRoute::Own
            ]
        );
    }

    #[test]
    fn rows_without_a_model_are_an_error_naming_their_group() {
        let mut b = bundle();
        b.global = None;
        let (k, f) = table(&["a", "c"], &[Some(1.0), Some(2.0)]);
        match b.predict(&k, &f, Path::new("t"), 1) {
            Err(GroupfitError::NoModel { group, rows, .. }) => {
                assert_eq!((group.as_str(), rows), ("c", 1));
            }
            other => panic!("{other:?}"),
        }
        let (k, f) = table(&["a"], &[Some(1.0)]);
        assert_eq!(
            b.predict(&k, &f, Path::new("t"), 1).unwrap().values,
            vec![3.0]
        );
    }
}
