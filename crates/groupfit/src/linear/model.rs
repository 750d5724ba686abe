//! A fitted linear model in the raw feature space.

use serde::{Deserialize, Serialize};

use crate::data::Task;
use crate::math::sigmoid;

/// A fitted linear model in the raw feature space: `margin = coef . x + intercept`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearModel {
    /// One coefficient per feature, in the bundle's feature order.
    #[serde(with = "crate::codec::f64s")]
    pub coef: Vec<f64>,
    /// The intercept.
    pub intercept: f64,
}

impl LinearModel {
    /// Checks the shapes against `d` features (model files).
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        if self.coef.len() != d {
            return Err(format!("{} coefficients for {d} features", self.coef.len()));
        }
        Ok(())
    }

    /// The linear predictor for one row of raw (imputed) features.
    pub fn margin(&self, x: &[f64]) -> f64 {
        self.coef.iter().zip(x).map(|(w, v)| w * v).sum::<f64>() + self.intercept
    }

    /// The prediction: probability of class 1 (binary) or the value (regression).
    pub fn predict_row(&self, task: Task, x: &[f64]) -> f64 {
        let z = self.margin(x);
        match task {
            Task::Binary => sigmoid(z),
            Task::Regression => z,
        }
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
            for (zv, &xv) in z.iter_mut().zip(&col[range.clone()]) {
                *zv += w * xv;
            }
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
        LinearModel { coef, intercept }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standardised_weights_map_back_exactly() {
        // z = 2 * (x - 3) / 4 + 1 = 0.5 x - 0.5
        let m = LinearModel::from_standardised(&[2.0, 1.0], &[3.0], &[4.0]);
        assert_eq!(m.coef, vec![0.5]);
        assert_eq!(m.intercept, -0.5);
        assert_eq!(m.margin(&[5.0]), 2.0);
    }
}
