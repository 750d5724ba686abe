//! A fitted booster: the initial score and the trees, with batched
//! branch-free prediction.

use serde::{Deserialize, Serialize};

use crate::data::Task;

use super::tree::Tree;

/// A fitted booster: `raw(x) = init + sum of trees`, the probability
/// `sigmoid(raw)` for binary, `raw` for regression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GbdtModel {
    /// The starting score (boost from average: log-odds of the mean label, or the mean).
    pub init: f64,
    /// The trees, shrinkage applied to their leaf values.
    pub trees: Vec<Tree>,
    /// Per feature, the total gain of the splits on it (LightGBM's `gain` importance).
    #[serde(with = "crate::codec::f64s")]
    pub importance: Vec<f64>,
    /// Per feature, the number of value bins its training rows were cut into
    /// (a categorical feature: the categories with a bin of their own).
    pub bins: Vec<u32>,
}

impl GbdtModel {
    /// Checks the shapes against `d` features (model files): every tree's
    /// arrays agree, features and leaves are in range, and children come
    /// after their parent (a walk always ends).
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        if !self.importance.is_empty() && self.importance.len() != d {
            return Err(format!(
                "{} importances for {d} features",
                self.importance.len()
            ));
        }
        for (i, t) in self.trees.iter().enumerate() {
            t.check(d).map_err(|e| format!("tree {i}: {e}"))?;
        }
        Ok(())
    }

    /// The raw score of one row (NaN is a missing value).
    pub fn raw(&self, x: &[f64]) -> f64 {
        self.init + self.trees.iter().map(|t| t.predict(x)).sum::<f64>()
    }

    /// The prediction: probability of class 1 (binary) or the value (regression).
    pub fn predict_row(&self, task: Task, x: &[f64]) -> f64 {
        task.link(self.raw(x))
    }

    /// Predictions for rows `range` of column-major features (`cols[j][i]`,
    /// NaN missing): [`GbdtModel::predict_row`] of each row, bit for bit
    /// (trees summed in order, then `init` added). Rows go in blocks of
    /// [`PREDICT_BLOCK`], copied row-major into a buffer that stays in cache
    /// while every tree walks the block.
    pub fn predict_columns(
        &self,
        task: Task,
        cols: &[Vec<f64>],
        range: std::ops::Range<usize>,
    ) -> Vec<f64> {
        // `Iterator::sum` of f64 starts from -0.0, as `raw` does.
        let mut out = vec![-0.0; range.len()];
        let d = cols.len();
        let mut x = vec![0.0; PREDICT_BLOCK * d];
        // The category sets of trees with categorical nodes, as bitsets.
        let bits: Vec<_> = self.trees.iter().map(Tree::cat_bits).collect();
        for (b, block) in out.chunks_mut(PREDICT_BLOCK).enumerate() {
            let lo = range.start + b * PREDICT_BLOCK;
            for (j, col) in cols.iter().enumerate() {
                for (r, &v) in col[lo..lo + block.len()].iter().enumerate() {
                    x[r * d + j] = v;
                }
            }
            for (t, bits) in self.trees.iter().zip(&bits) {
                t.add_rows(&x, d, block, bits.as_ref());
            }
        }
        for v in &mut out {
            *v = task.link(self.init + *v);
        }
        out
    }
}

/// Rows per block of [`GbdtModel::predict_columns`] (128 rows of 32
/// features are 32 KiB; 64 to 1,024 rows ran equally fast).
pub const PREDICT_BLOCK: usize = 128;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gbdt::tree::BinTree;

    #[test]
    fn predict_columns_is_predict_row_bit_for_bit() {
        // Random trees (1 to 40 leaves, some of one leaf) over 3 numeric
        // features and a categorical one (its nodes in every other tree; 200
        // bins of codes 3b, so sets span several 64-bit words), random rows
        // with NaNs, null and unseen codes; ranges that start and end off
        // the lane and block boundaries.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let d = 4;
        let trees: Vec<Tree> = (0..25)
            .map(|t| {
                let mut bt = BinTree::new();
                let leaves = if t % 7 == 0 {
                    1
                } else {
                    1 + (next() * 40.0) as usize
                };
                let features = if t % 2 == 0 { 4 } else { 3 };
                for _ in 1..leaves {
                    let leaf = (next() * bt.leaf_parent.len() as f64) as usize;
                    let f = (next() * features as f64) as usize;
                    if f == 3 {
                        let set: Vec<u32> = (0..1 + (next() * 12.0) as usize)
                            .map(|_| (next() * 200.0) as u32)
                            .collect();
                        bt.split_categorical(leaf, f, &set, 200);
                    } else {
                        bt.split(leaf, f, (next() * 10.0) as usize, 10, next() < 0.5);
                    }
                }
                let values = (0..leaves).map(|_| next() - 0.5).collect();
                bt.finish(
                    |_, b| b as f64 / 10.0 - 0.5 + 0.01,
                    |_, b| 3 * b as u32,
                    values,
                )
            })
            .collect();
        assert!(trees.iter().any(|t| !t.cat_left.is_empty()));
        let model = GbdtModel {
            init: 0.3,
            trees,
            importance: vec![0.0; d],
            bins: vec![10; d],
        };
        let n = 700;
        let cols: Vec<Vec<f64>> = (0..d)
            .map(|j| {
                (0..n)
                    .map(|_| {
                        let u = next();
                        match (j, u < 0.1) {
                            (3, true) => [-1.0, -2.0][(next() * 2.0) as usize],
                            (3, false) => (next() * 700.0).floor(),
                            (_, true) => f64::NAN,
                            (_, false) => u - 0.5,
                        }
                    })
                    .collect()
            })
            .collect();
        for task in [Task::Binary, Task::Regression] {
            for range in [0..n, 3..n - 5, 5..12, 9..9] {
                let got = model.predict_columns(task, &cols, range.clone());
                assert_eq!(got.len(), range.len());
                for (k, i) in range.enumerate() {
                    let row: Vec<f64> = cols.iter().map(|c| c[i]).collect();
                    assert_eq!(
                        got[k].to_bits(),
                        model.predict_row(task, &row).to_bits(),
                        "row {i}"
                    );
                }
            }
        }
    }
}
