//! Prediction with a bundle: routing each row of a table to the deepest
//! model on its group's path (its own, a level's or the global model), and
//! predicting each model's rows together.

use std::path::Path;

use arrow_array::ArrayRef;

use crate::data::categorical::Encoding;
use crate::data::keys::{display_key, GroupEncoder, GroupKey};
use crate::data::{Column, Task};
use crate::error::{GroupfitError, Result};

use super::{FittedModel, GroupEntry, KeyIndex, ModelBundle, Predictions, Route, RowRoute};

impl ModelBundle {
    /// The lookup of rows' groups at every depth, built once per bundle
    /// and used for every batch a prediction reads.
    pub fn key_index(&self) -> KeyIndex {
        KeyIndex {
            depths: (1..=self.depth())
                .map(|d| {
                    let known: Vec<GroupKey> =
                        self.entries(d).iter().map(|g| g.key.clone()).collect();
                    GroupEncoder::from_keys(&known)
                })
                .collect(),
        }
    }

    /// Each row's group at every depth (`out[d - 1][i]`; `None`: not seen
    /// in training), looked up in `index` by its first `d` key columns.
    pub fn row_nodes(&self, index: &KeyIndex, keys: &[ArrayRef]) -> Result<Vec<Vec<Option<u32>>>> {
        (1..=self.depth())
            .zip(&index.depths)
            .map(|(d, encoder)| {
                let n_keys = if d == self.depth() {
                    keys.len()
                } else {
                    self.levels[d - 1].key_columns.len()
                };
                encoder.lookup(&keys[..n_keys])
            })
            .collect()
    }

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

    /// The feature columns (in the bundle's order) as the models read them:
    /// categorical ones through their dictionaries.
    fn feature_columns(&self, features: &[ArrayRef], path: &Path) -> Result<Vec<Column>> {
        self.features
            .iter()
            .zip(features)
            .map(|(name, arr)| self.encoding(name).read(arr, name, path))
            .collect()
    }

    /// Predicts every row of a table given its key columns and feature columns
    /// (in the bundle's order), on up to `threads` threads. A row goes to
    /// the deepest model on its group's path (its own, a level's, the
    /// global one); with [`super::Pooling`] it blends every model on the
    /// path. The rows of each model are predicted together
    /// ([`super::FittedModel::predict_columns`]). `path` names the input in errors.
    pub fn predict(
        &self,
        keys: &[ArrayRef],
        features: &[ArrayRef],
        path: &Path,
        threads: usize,
    ) -> Result<Predictions> {
        self.predict_indexed(&self.key_index(), keys, features, path, threads)
    }

    /// [`ModelBundle::predict`] with the bundle's [`KeyIndex`] built by the
    /// caller (once for the batches of a file).
    pub fn predict_indexed(
        &self,
        index: &KeyIndex,
        keys: &[ArrayRef],
        features: &[ArrayRef],
        path: &Path,
        threads: usize,
    ) -> Result<Predictions> {
        let n = keys.first().map_or(0, |k| k.len());
        let cols = self.feature_columns(features, path)?;
        let nodes = self.row_nodes(index, keys)?;
        let depth = self.depth();
        // The deepest depth with a model on each row's path (0: the global model).
        let deepest: Vec<usize> = (0..n)
            .map(|i| {
                (1..=depth)
                    .rev()
                    .find(|&d| self.node_model(d, nodes[d - 1][i]).is_some())
                    .unwrap_or(0)
            })
            .collect();
        let routes: Vec<RowRoute> = deepest
            .iter()
            .enumerate()
            .map(|(i, &d)| match d {
                0 if nodes[depth - 1][i].is_some() => RowRoute::Fallback,
                0 => RowRoute::Unseen,
                d if d == depth => RowRoute::Own,
                d => RowRoute::Ancestor(d as u16 - 1),
            })
            .collect();
        let count = |r: RowRoute| routes.iter().filter(|&&x| x == r).count();
        let own = count(RowRoute::Own);
        let unseen = count(RowRoute::Unseen);
        let global = count(RowRoute::Fallback) + unseen;
        if global > 0 && self.global.is_none() {
            let first = deepest.iter().position(|&d| d == 0).unwrap_or(0);
            let (group, reason) = match nodes[depth - 1][first] {
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
        let rows: Vec<u32> = (0..n as u32).collect();
        let values = if self.pools() {
            let margins = self.depth_margins(&nodes, &cols, &rows, threads);
            self.blend(&margins, &nodes)
        } else {
            // Slots: each depth's groups (the finest first), then the global model.
            let mut models: Vec<Option<&FittedModel>> = Vec::new();
            let mut base = vec![0; depth + 1];
            for d in (1..=depth).rev() {
                base[d] = models.len();
                models.extend(self.entries(d).iter().map(own_model));
            }
            base[0] = models.len();
            models.push(self.global.as_ref().map(|g| &g.model));
            let slot: Vec<usize> = (0..n)
                .map(|i| match deepest[i] {
                    0 => base[0],
                    d => base[d] + nodes[d - 1][i].expect("a group with a model") as usize,
                })
                .collect();
            predict_slots(
                &models,
                &slot,
                SlotRows {
                    columns: &cols,
                    rows: &rows,
                    impute: &self.impute,
                },
                self.task,
                threads,
            )
        };
        Ok(Predictions {
            values,
            own,
            global,
            unseen,
            routes,
        })
    }
}

impl ModelBundle {
    /// Every row's prediction by the global model (`None` without one):
    /// what a group's rows would get from it, for comparisons such as
    /// `report`'s gain over the global model. `path` names the input in errors.
    pub fn predict_global(
        &self,
        features: &[ArrayRef],
        path: &Path,
        threads: usize,
    ) -> Result<Option<Vec<f64>>> {
        let Some(global) = &self.global else {
            return Ok(None);
        };
        let cols = self.feature_columns(features, path)?;
        let n = features.first().map_or(0, |c| c.len());
        let rows: Vec<u32> = (0..n as u32).collect();
        Ok(Some(predict_slots(
            &[Some(&global.model)],
            &vec![0; n],
            SlotRows {
                columns: &cols,
                rows: &rows,
                impute: &self.impute,
            },
            self.task,
            threads,
        )))
    }
}

/// A group's own model (none when it falls back).
pub(super) fn own_model(e: &GroupEntry) -> Option<&FittedModel> {
    match e {
        GroupEntry {
            route: Route::Own,
            model: Some(m),
            ..
        } => Some(m),
        _ => None,
    }
}

/// Where the rows [`predict_slots`] predicts are: `rows[i]` is row `i`'s
/// row in `columns`, whose missing values take `impute` (NaN without).
#[derive(Clone, Copy)]
pub(super) struct SlotRows<'a> {
    pub columns: &'a [Column],
    pub rows: &'a [u32],
    pub impute: &'a [f64],
}

/// Row `i`'s prediction by `models[slot[i]]` (`task`'s link applied; NaN
/// for a slot past `models` or without a model). The rows of each model
/// are gathered as imputed column-major features and predicted in one call.
pub(super) fn predict_slots(
    models: &[Option<&FittedModel>],
    slot: &[usize],
    at: SlotRows<'_>,
    task: Task,
    threads: usize,
) -> Vec<f64> {
    let k = models.len();
    let (order, start) = crate::data::bucket(slot.iter().map(|&s| s.min(k)), k + 1);
    let source: Vec<u32> = order[..start[k]]
        .iter()
        .map(|&i| at.rows[i as usize])
        .collect();
    let xc = crate::data::imputed_columns(at.columns, &source, at.impute, threads);
    let by_slot =
        crate::util::par::par_map(
            k,
            threads,
            &|s| start[s + 1] - start[s] + 1,
            &|s| match models[s] {
                Some(m) if start[s] < start[s + 1] => {
                    m.predict_columns(task, &xc, start[s]..start[s + 1])
                }
                _ => Vec::new(),
            },
        );
    let mut values = vec![f64::NAN; slot.len()];
    for (s, p) in by_slot.iter().enumerate() {
        for (&i, &v) in order[start[s]..start[s + 1]].iter().zip(p) {
            values[i as usize] = v;
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Float64Array, StringArray};

    use super::*;
    use crate::store::fixtures::{entry, linear};

    /// Group `a` has its own model (`2 x + 1`), group `b` falls back to the
    /// global model (`-x`); missing features are imputed with 10.
    fn bundle() -> ModelBundle {
        let mut b = crate::store::fixtures::bundle(
            &["g"],
            Some(linear(-1.0, 0.0)),
            vec![
                entry(&["a"], 10, Some(linear(2.0, 1.0))),
                entry(&["b"], 10, None),
            ],
        );
        b.impute = vec![10.0];
        b
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
        let g = bundle().predict_global(&f, Path::new("t"), 2).unwrap();
        assert_eq!(g, Some(vec![-1.0, -2.0, -3.0, -10.0]));
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
