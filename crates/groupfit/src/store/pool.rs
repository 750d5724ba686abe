//! A group's path through the bundle and the blend of its models: the
//! global model (depth 0), each level's group (depths 1 to the levels'
//! count) and the group's own (the deepest). Without `levels` the path is
//! the global model and the group's.

use std::collections::HashMap;

use crate::data::{Column, Task};
use crate::tune::shrinkage::Shrinkage;

use super::predict::{own_model, predict_slots, SlotRows};
use super::{FittedModel, GroupEntry, GroupPool, ModelBundle};

impl ModelBundle {
    /// The depth of the groups: 1 plus the levels above them.
    pub fn depth(&self) -> usize {
        self.levels.len() + 1
    }

    /// The groups at depth `d` (1 to [`ModelBundle::depth`]).
    pub fn entries(&self, d: usize) -> &[GroupEntry] {
        if d == self.depth() {
            &self.groups
        } else {
            &self.levels[d - 1].groups
        }
    }

    /// The own model of group `g` at depth `d`, if any.
    pub(super) fn node_model(&self, d: usize, g: Option<u32>) -> Option<&FittedModel> {
        own_model(self.entries(d).get(g? as usize)?)
    }

    /// Whether predictions blend several models (a pooling mode other than `none`).
    pub fn pools(&self) -> bool {
        self.pooling
            .as_ref()
            .is_some_and(|p| p.mode != Shrinkage::None)
    }

    /// The training rows of the root: every group's.
    fn root_rows(&self) -> u64 {
        self.groups.iter().map(|g| g.n_train as u64).sum()
    }

    /// The margin (prediction before the link: log-odds for a binary task)
    /// of each depth's model for each row: `out[d][i]`, NaN where the
    /// row's group at depth `d` has no model. Row `i`'s features are row
    /// `rows[i]` of `columns`; `nodes` is [`ModelBundle::row_nodes`].
    pub fn depth_margins(
        &self,
        nodes: &[Vec<Option<u32>>],
        columns: &[Column],
        rows: &[u32],
        threads: usize,
    ) -> Vec<Vec<f64>> {
        let at = SlotRows {
            columns,
            rows,
            impute: &self.impute,
        };
        let n = rows.len();
        let mut out = Vec::with_capacity(self.depth() + 1);
        let global = [self.global.as_ref().map(|g| &g.model)];
        out.push(predict_slots(
            &global,
            &vec![0; n],
            at,
            Task::Regression,
            threads,
        ));
        for d in 1..=self.depth() {
            let models: Vec<Option<&FittedModel>> = self.entries(d).iter().map(own_model).collect();
            let slot: Vec<usize> = nodes[d - 1]
                .iter()
                .map(|g| g.map_or(usize::MAX, |g| g as usize))
                .collect();
            out.push(predict_slots(&models, &slot, at, Task::Regression, threads));
        }
        out
    }

    /// Each row's prediction: the margins of the models on its path
    /// blended with the pooling mode's weights, then the task's link.
    pub fn blend(&self, margins: &[Vec<f64>], nodes: &[Vec<Option<u32>>]) -> Vec<f64> {
        let mode = self.pooling.as_ref().map_or(Shrinkage::None, |p| p.mode);
        let ks = self.pooling.as_ref().map_or(&[][..], |p| &p.k[..]);
        let root = self.root_rows();
        let n = margins.first().map_or(0, Vec::len);
        let (mut sizes, mut k, mut m, mut w) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        (0..n)
            .map(|i| {
                sizes.clear();
                k.clear();
                m.clear();
                for (d, md) in margins.iter().enumerate() {
                    if md[i].is_nan() {
                        continue;
                    }
                    m.push(md[i]);
                    if d == 0 {
                        sizes.push(root);
                        k.push(0.0);
                    } else {
                        let g = nodes[d - 1][i].expect("a model has a group") as usize;
                        sizes.push(self.entries(d)[g].n_train as u64);
                        k.push(ks.get(d - 1).copied().unwrap_or(0.0));
                    }
                }
                mode.weights(&sizes, &k, &mut w);
                self.task.link(w.iter().zip(&m).map(|(w, m)| w * m).sum())
            })
            .collect()
    }

    /// Every group's level, parent and own weight: `out[d - 1][g]` for
    /// group `g` at depth `d`.
    pub fn pool_info(&self) -> Vec<Vec<GroupPool>> {
        let mode = self.pooling.as_ref().map_or(Shrinkage::None, |p| p.mode);
        let ks = self.pooling.as_ref().map_or(&[][..], |p| &p.k[..]);
        let index: Vec<HashMap<&[Option<String>], usize>> = (1..=self.depth())
            .map(|d| {
                let e = self.entries(d);
                e.iter().enumerate().map(|(g, e)| (&e.key[..], g)).collect()
            })
            .collect();
        let root = self.root_rows();
        let (mut sizes, mut k, mut w) = (Vec::new(), Vec::new(), Vec::new());
        let mut weight = |d: usize, e: &GroupEntry| -> Option<f64> {
            own_model(e)?;
            sizes.clear();
            k.clear();
            if self.global.is_some() {
                sizes.push(root);
                k.push(0.0);
            }
            // The models on the path down to the group's own.
            for (a, index) in index.iter().enumerate().take(d) {
                let Some(&g) = index.get(&e.key[..a + 1]) else {
                    continue;
                };
                let node = &self.entries(a + 1)[g];
                if own_model(node).is_some() {
                    sizes.push(node.n_train as u64);
                    k.push(ks.get(a).copied().unwrap_or(0.0));
                }
            }
            mode.weights(&sizes, &k, &mut w);
            w.last().copied()
        };
        (1..=self.depth())
            .map(|d| {
                let level = self.key_columns[..d].join("/");
                self.entries(d)
                    .iter()
                    .map(|e| GroupPool {
                        level: level.clone(),
                        parent: (d > 1).then(|| e.key[..d - 1].to_vec()),
                        weight: weight(d, e),
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Float64Array, StringArray};

    use super::*;
    use crate::store::fixtures::{entry, linear};
    use crate::store::{LevelGroups, Pooling, RowRoute};

    /// Global `x` (30 rows), region r0 `2x` (30 rows), store r0/a `3x`
    /// (10 rows) and r0/b without a model (20 rows); `auto` with k 10 at
    /// the region level and 20 at the stores'.
    fn bundle() -> ModelBundle {
        let mut b = crate::store::fixtures::bundle(
            &["region", "store"],
            Some(linear(1.0, 0.0)),
            vec![
                entry(&["r0", "a"], 10, Some(linear(3.0, 0.0))),
                entry(&["r0", "b"], 20, None),
            ],
        );
        b.levels = vec![LevelGroups {
            key_columns: vec!["region".into()],
            groups: vec![entry(&["r0"], 30, Some(linear(2.0, 0.0)))],
        }];
        b.pooling = Some(Pooling {
            mode: Shrinkage::Auto,
            k: vec![10.0, 20.0],
        });
        b
    }

    #[test]
    fn auto_chains_the_path_from_the_global_model_down() {
        let b = bundle();
        let keys: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["r0", "r0", "r0", "r5"])),
            Arc::new(StringArray::from(vec!["a", "b", "new", "a"])),
        ];
        let x: Vec<ArrayRef> = vec![Arc::new(Float64Array::from(vec![1.0, 1.0, 1.0, 1.0]))];
        let p = b.predict(&keys, &x, Path::new("t"), 2).unwrap();
        // Region: w = 30 / 40 = 0.75, 0.75 x 2 + 0.25 x 1 = 1.75.
        // Store a: w = 10 / 30, 3 / 3 + 1.75 x 2 / 3 = 13 / 6.
        let want = [13.0 / 6.0, 1.75, 1.75, 1.0];
        for (got, want) in p.values.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{:?}", p.values);
        }
        assert_eq!(
            p.routes,
            [
                RowRoute::Own,
                RowRoute::Ancestor(0),
                RowRoute::Ancestor(0),
                RowRoute::Unseen
            ]
        );
    }

    #[test]
    fn pool_info_gives_each_groups_level_parent_and_weight() {
        let info = bundle().pool_info();
        // The region: 0.75 of the blend; store a: 1/3; b has no model.
        assert_eq!(info[0][0].level, "region");
        assert_eq!(info[0][0].parent, None);
        assert_eq!(info[0][0].weight, Some(0.75));
        assert_eq!(info[1][0].level, "region/store");
        assert_eq!(info[1][0].parent, Some(vec![Some("r0".to_string())]));
        assert!((info[1][0].weight.unwrap() - 1.0 / 3.0).abs() < 1e-15);
        assert_eq!(info[1][1].weight, None);
    }

    #[test]
    fn equal_weighs_every_model_on_the_path() {
        let mut b = bundle();
        b.pooling.as_mut().unwrap().mode = Shrinkage::Equal;
        let keys: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["r0", "r0"])),
            Arc::new(StringArray::from(vec!["a", "b"])),
        ];
        let x: Vec<ArrayRef> = vec![Arc::new(Float64Array::from(vec![2.0, 2.0]))];
        let p = b.predict(&keys, &x, Path::new("t"), 1).unwrap();
        // (2 + 4 + 6) / 3 on a's path; (2 + 4) / 2 on b's (no model of its own).
        assert_eq!(p.values, vec![4.0, 3.0]);
    }
}
