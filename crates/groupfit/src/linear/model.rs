//! A fitted linear model in the raw feature space.

use serde::{Deserialize, Serialize};

use crate::data::onehot::{lookup, OneHot, OneHotPlan};
use crate::data::Task;
use crate::math::sigmoid;

/// A fitted linear model in the raw feature space: `margin = coef . x +
/// intercept`, plus, for each categorical feature, the coefficient of the
/// row's category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearModel {
    /// One coefficient per feature, in the bundle's feature order (0 for a
    /// categorical feature: its codes are not numbers).
    #[serde(with = "crate::codec::f64s")]
    pub coef: Vec<f64>,
    /// The intercept.
    pub intercept: f64,
    /// The one-hot coefficients of each categorical feature (format 6;
    /// older files have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub onehot: Vec<OneHotCoef>,
}

/// One categorical feature's coefficients in a linear model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneHotCoef {
    /// The group's encoding of the feature: which codes have a column.
    pub map: OneHot,
    /// One coefficient per column of `map` (the "other" column last).
    #[serde(with = "crate::codec::f64s")]
    pub coef: Vec<f64>,
}

impl OneHotCoef {
    /// The coefficient of a row with category `code` (0 for a category the
    /// group did not see).
    pub fn of(&self, code: f64) -> f64 {
        self.map.column(code).map_or(0.0, |c| self.coef[c])
    }
}

impl LinearModel {
    /// Checks the shapes against `d` features (model files).
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        if self.coef.len() != d {
            return Err(format!("{} coefficients for {d} features", self.coef.len()));
        }
        let mut seen = vec![false; d];
        for o in &self.onehot {
            o.map.check(d)?;
            if o.coef.len() != o.map.width() {
                return Err(format!(
                    "feature {}: {} one-hot coefficients for {} columns",
                    o.map.feature,
                    o.coef.len(),
                    o.map.width()
                ));
            }
            if std::mem::replace(&mut seen[o.map.feature], true) {
                return Err(format!("feature {}: one-hot twice", o.map.feature));
            }
        }
        Ok(())
    }

    /// The linear predictor for one row of raw (imputed) features.
    pub fn margin(&self, x: &[f64]) -> f64 {
        let cats: f64 = self.onehot.iter().map(|o| o.of(x[o.map.feature])).sum();
        self.coef.iter().zip(x).map(|(w, v)| w * v).sum::<f64>() + cats + self.intercept
    }

    /// The prediction: probability of class 1 (binary) or the value (regression).
    pub fn predict_row(&self, task: Task, x: &[f64]) -> f64 {
        task.link(self.margin(x))
    }

    /// Predictions for rows `range` of column-major features (`cols[j][i]`).
    pub fn predict_columns(
        &self,
        task: Task,
        cols: &[Vec<f64>],
        range: std::ops::Range<usize>,
    ) -> Vec<f64> {
        let mut z = vec![self.intercept; range.len()];
        for (w, col) in self.coef.iter().zip(cols) {
            if *w == 0.0 {
                // Categorical features (and exact zeros) add nothing.
                continue;
            }
            for (zv, &xv) in z.iter_mut().zip(&col[range.clone()]) {
                *zv += w * xv;
            }
        }
        let mut table = Vec::new();
        for o in &self.onehot {
            o.map.fill(&mut table);
            for (zv, &c) in z.iter_mut().zip(&cols[o.map.feature][range.clone()]) {
                let k = lookup(&table, c);
                if k != u32::MAX {
                    *zv += o.coef[k as usize];
                }
            }
            o.map.clear(&mut table);
        }
        if task == Task::Binary {
            z.iter_mut().for_each(|v| *v = sigmoid(*v));
        }
        z
    }

    /// Maps weights of the standardised space (`x' = (x - mean) / scale`, last
    /// entry the intercept) back to the raw feature space.
    pub fn from_standardised(w: &[f64], mean: &[f64], scale: &[f64]) -> LinearModel {
        let d = mean.len();
        let coef: Vec<f64> = (0..d).map(|j| w[j] / scale[j]).collect();
        let intercept = w[d] - coef.iter().zip(mean).map(|(c, m)| c * m).sum::<f64>();
        LinearModel {
            coef,
            intercept,
            onehot: Vec::new(),
        }
    }

    /// The model of group `g` whose weights `w` are over the columns of a
    /// one-hot layout (standardised numeric columns, then raw one-hot blocks;
    /// `mean` and `scale` per column, the intercept last): the numeric
    /// coefficients back in the raw space at their features' places, each
    /// categorical feature's coefficients over the group's own columns.
    /// `d` is the number of input features.
    pub fn from_onehot(
        w: &[f64],
        mean: &[f64],
        scale: &[f64],
        plan: &OneHotPlan,
        g: usize,
        d: usize,
    ) -> LinearModel {
        let layout = LinearModel::from_standardised(w, mean, scale);
        let mut coef = vec![0.0; d];
        for (i, &j) in plan.numeric.iter().enumerate() {
            coef[j] = layout.coef[i];
        }
        let onehot = plan
            .blocks
            .iter()
            .enumerate()
            .map(|(b, blk)| {
                let map = plan.map(b, g).clone();
                let coef = layout.coef[blk.base..blk.base + map.width()].to_vec();
                OneHotCoef { map, coef }
            })
            .collect();
        LinearModel {
            coef,
            intercept: layout.intercept,
            onehot,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::categorical::{NULL_CODE, UNSEEN_CODE};

    #[test]
    fn standardised_weights_map_back_exactly() {
        // z = 2 * (x - 3) / 4 + 1 = 0.5 x - 0.5
        let m = LinearModel::from_standardised(&[2.0, 1.0], &[3.0], &[4.0]);
        assert_eq!(m.coef, vec![0.5]);
        assert_eq!(m.intercept, -0.5);
        assert_eq!(m.margin(&[5.0]), 2.0);
    }

    #[test]
    fn categories_predict_from_their_codes() {
        // Feature 0 numeric (coef 2), feature 1 categorical: null 0.5,
        // code 1: -1, code 3: 0.25, codes 0 and 4 share "other": 3; code 2
        // and unseen values add nothing.
        let m = LinearModel {
            coef: vec![2.0, 0.0],
            intercept: 1.0,
            onehot: vec![OneHotCoef {
                map: OneHot {
                    feature: 1,
                    codes: vec![NULL_CODE, 1.0, 3.0],
                    other: vec![0.0, 4.0],
                },
                coef: vec![0.5, -1.0, 0.25, 3.0],
            }],
        };
        assert_eq!(m.check(2), Ok(()));
        let x = vec![1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let c = vec![NULL_CODE, 0.0, 1.0, 2.0, 3.0, 4.0, UNSEEN_CODE];
        let want = [3.5, 6.0, 2.0, 3.0, 3.25, 6.0, 3.0];
        let got = m.predict_columns(Task::Regression, &[x.clone(), c.clone()], 0..7);
        assert_eq!(got, want);
        for i in 0..7 {
            assert_eq!(m.margin(&[x[i], c[i]]), want[i]);
        }
        assert_eq!(
            m.predict_columns(Task::Regression, &[x, c], 2..4),
            [2.0, 3.0]
        );
        let mut bad = m.clone();
        bad.onehot[0].coef.pop();
        assert!(bad
            .check(2)
            .unwrap_err()
            .contains("3 one-hot coefficients for 4"));
    }

    #[test]
    fn onehot_weights_map_to_features_and_categories() {
        use crate::data::categorical::FeatureKind;
        use crate::data::onehot::{Cap, PlanInput};
        use crate::data::Column;
        // Feature 0 categorical (2 levels), feature 1 numeric; one group
        // whose rows have codes 1, 1, null: columns null, 1.
        let cols = vec![
            Column::Owned(vec![1.0, 1.0, NULL_CODE]),
            Column::Owned(vec![0.0; 3]),
        ];
        let plan = OneHotPlan::build(PlanInput {
            columns: &cols,
            kinds: &[FeatureKind::Categorical { levels: 2 }, FeatureKind::Numeric],
            rows: &[0, 1, 2],
            group_of: &[0, 0, 0],
            n_groups: 1,
            cap: Cap::default(),
            threads: 1,
        });
        // Layout columns: numeric f1 (mean 3, scale 2), null, code 1.
        let m = LinearModel::from_onehot(
            &[4.0, 0.5, -0.5, 1.0],
            &[3.0, 0.0, 0.0],
            &[2.0, 1.0, 1.0],
            &plan,
            0,
            2,
        );
        assert_eq!(m.coef, vec![0.0, 2.0]);
        assert_eq!(m.intercept, 1.0 - 6.0);
        assert_eq!(m.onehot.len(), 1);
        assert_eq!(m.onehot[0].map.codes, vec![NULL_CODE, 1.0]);
        assert_eq!(m.onehot[0].coef, vec![0.5, -0.5]);
        assert_eq!(m.onehot[0].of(0.0), 0.0);
        assert_eq!(m.margin(&[1.0, 3.0]), 1.0 - 0.5);
    }
}
