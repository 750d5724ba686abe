//! A fitted network: standardisation, dense layers, and batched prediction.

use serde::{Deserialize, Serialize};

use super::params::{layer_offsets, param_count};
use crate::data::onehot::{lookup, OneHot};
use crate::data::Task;

/// One dense layer: `out = in · w + b`, `w` row-major `n_in × n_out`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dense {
    /// Inputs.
    pub n_in: usize,
    /// Outputs.
    pub n_out: usize,
    /// Weights, `w[i * n_out + o]` (the transpose of PyTorch's `weight`).
    /// In the model file: little-endian bytes in its binary section
    /// ([`crate::codec`]).
    #[serde(with = "crate::codec")]
    pub w: Vec<f32>,
    /// Biases (stored as `w` is).
    #[serde(with = "crate::codec")]
    pub b: Vec<f32>,
}

/// A fitted MLP: standardisation, then ReLU layers, then one linear output.
///
/// With categorical features (`onehot` not empty), the first layer's inputs
/// are the numeric features, standardised, in feature order, then each
/// `onehot` entry's columns: 1 for the row's category, 0 for the others
/// (all 0 for a category the group did not see).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpModel {
    /// Per-feature training mean of the model's group (0 for a categorical
    /// feature).
    #[serde(with = "crate::codec::f64s")]
    pub mean: Vec<f64>,
    /// Per-feature training standard deviation (population; 1 where it is 0).
    #[serde(with = "crate::codec::f64s")]
    pub std: Vec<f64>,
    /// Hidden layers then the output layer (one unit).
    pub layers: Vec<Dense>,
    /// Mean training loss over each epoch's mini-batches (loss of each batch
    /// before its step, weighted by its rows), one entry per epoch.
    #[serde(with = "crate::codec::f64s")]
    pub epoch_loss: Vec<f64>,
    /// The group's encoding of each categorical feature (format 6; older
    /// files have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub onehot: Vec<OneHot>,
}

impl MlpModel {
    /// Checks the shapes against `d` features (model files): the layers
    /// chain from `d` inputs to one output.
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        if self.mean.len() != d || self.std.len() != d {
            return Err(format!(
                "{} means and {} deviations for {d} features",
                self.mean.len(),
                self.std.len()
            ));
        }
        let mut seen = vec![false; d];
        for o in &self.onehot {
            o.check(d)?;
            if std::mem::replace(&mut seen[o.feature], true) {
                return Err(format!("feature {}: one-hot twice", o.feature));
            }
        }
        let mut n_in = self.n_inputs();
        for (i, l) in self.layers.iter().enumerate() {
            if l.n_in != n_in || l.w.len() != l.n_in * l.n_out || l.b.len() != l.n_out {
                return Err(format!(
                    "layer {i}: {}x{} with {} weights and {} biases after {n_in} inputs",
                    l.n_in,
                    l.n_out,
                    l.w.len(),
                    l.b.len()
                ));
            }
            n_in = l.n_out;
        }
        if self.layers.is_empty() || n_in != 1 {
            return Err("the last layer must have one output".into());
        }
        Ok(())
    }

    /// Builds the model from flat parameters (layer by layer, `w` then `b`),
    /// taking them over: the layers are split off the end, so the first
    /// layer's weights stay in `params`' own buffer and only the later
    /// layers (a small part of a one-hidden-layer network) are copied.
    pub fn from_flat(
        mut params: Vec<f32>,
        widths: &[usize],
        mean: Vec<f64>,
        std: Vec<f64>,
        epoch_loss: Vec<f64>,
    ) -> MlpModel {
        let offsets: Vec<(usize, usize)> = layer_offsets(widths).collect();
        params.truncate(param_count(widths));
        let mut layers = Vec::with_capacity(offsets.len());
        for (p, &(w_at, b_at)) in widths.windows(2).zip(&offsets).rev() {
            let b = params.split_off(b_at);
            let w = if w_at == 0 {
                std::mem::take(&mut params)
            } else {
                params.split_off(w_at)
            };
            layers.push(Dense {
                n_in: p[0],
                n_out: p[1],
                w,
                b,
            });
        }
        layers.reverse();
        MlpModel {
            mean,
            std,
            layers,
            epoch_loss,
            onehot: Vec::new(),
        }
    }

    /// Inputs of the first layer: the numeric features and every one-hot column.
    pub fn n_inputs(&self) -> usize {
        self.mean.len() - self.onehot.len() + self.onehot.iter().map(OneHot::width).sum::<usize>()
    }

    /// Whether feature `j` is one of the numeric inputs.
    fn numeric(&self) -> Vec<bool> {
        let mut v = vec![true; self.mean.len()];
        for o in &self.onehot {
            v[o.feature] = false;
        }
        v
    }

    /// The first layer's inputs of one row of raw, imputed features.
    fn inputs(&self, x: &[f64]) -> Vec<f64> {
        if self.onehot.is_empty() {
            return x
                .iter()
                .zip(self.mean.iter().zip(&self.std))
                .map(|(v, (m, s))| (v - m) / s)
                .collect();
        }
        let numeric = self.numeric();
        let mut a: Vec<f64> = (0..self.mean.len())
            .filter(|&j| numeric[j])
            .map(|j| (x[j] - self.mean[j]) / self.std[j])
            .collect();
        for o in &self.onehot {
            let at = a.len();
            a.resize(at + o.width(), 0.0);
            if let Some(c) = o.column(x[o.feature]) {
                a[at + c] = 1.0;
            }
        }
        a
    }

    /// The network output (logit for binary) for one row of raw, imputed features.
    pub fn margin(&self, x: &[f64]) -> f64 {
        let mut a = self.inputs(x);
        let last = self.layers.len() - 1;
        for (l, layer) in self.layers.iter().enumerate() {
            let mut z: Vec<f64> = layer.b.iter().map(|&b| b as f64).collect();
            for (i, &ai) in a.iter().enumerate() {
                let row = &layer.w[i * layer.n_out..(i + 1) * layer.n_out];
                for (zo, &w) in z.iter_mut().zip(row) {
                    *zo += ai * w as f64;
                }
            }
            if l < last {
                for v in z.iter_mut() {
                    *v = v.max(0.0);
                }
            }
            a = z;
        }
        a[0]
    }

    /// Predictions for rows `range` of column-major raw, imputed features
    /// (`cols[j][i]`): the same arithmetic as [`MlpModel::predict_row`] (f64),
    /// batched into matrix products.
    pub fn predict_columns(
        &self,
        task: Task,
        cols: &[Vec<f64>],
        range: std::ops::Range<usize>,
    ) -> Vec<f64> {
        const CHUNK: usize = 1024;
        let d = self.n_inputs();
        let numeric = self.numeric();
        let mut tables: Vec<Vec<u32>> = Vec::new();
        for o in &self.onehot {
            let mut t = Vec::new();
            o.fill(&mut t);
            tables.push(t);
        }
        let mut out = Vec::with_capacity(range.len());
        let layers: Vec<(Vec<f64>, Vec<f64>)> = self
            .layers
            .iter()
            .map(|l| {
                (
                    l.w.iter().map(|&v| v as f64).collect(),
                    l.b.iter().map(|&v| v as f64).collect(),
                )
            })
            .collect();
        let mut a = Vec::new();
        let mut z = Vec::new();
        let mut lo = range.start;
        while lo < range.end {
            let hi = (lo + CHUNK).min(range.end);
            let m = hi - lo;
            a.clear();
            a.resize(m * d, 0.0);
            let inputs = cols.iter().enumerate().take(self.mean.len());
            for (i, (j, col)) in inputs.filter(|(j, _)| numeric[*j]).enumerate() {
                let (mu, s) = (self.mean[j], self.std[j]);
                for (r, &v) in col[lo..hi].iter().enumerate() {
                    a[r * d + i] = (v - mu) / s;
                }
            }
            let mut at = self.mean.len() - self.onehot.len();
            for (o, t) in self.onehot.iter().zip(&tables) {
                for (r, &c) in cols[o.feature][lo..hi].iter().enumerate() {
                    let k = lookup(t, c);
                    if k != u32::MAX {
                        a[r * d + at + k as usize] = 1.0;
                    }
                }
                at += o.width();
            }
            let mut width = d;
            let last = self.layers.len() - 1;
            for (l, (layer, (w, b))) in self.layers.iter().zip(&layers).enumerate() {
                let n = layer.n_out;
                z.clear();
                z.resize(m * n, 0.0);
                for r in 0..m {
                    z[r * n..(r + 1) * n].copy_from_slice(b);
                }
                // SAFETY: a is m × width, w is width × n, z is m × n, all row-major.
                unsafe {
                    matrixmultiply::dgemm(
                        m,
                        width,
                        n,
                        1.0,
                        a.as_ptr(),
                        width as isize,
                        1,
                        w.as_ptr(),
                        n as isize,
                        1,
                        1.0,
                        z.as_mut_ptr(),
                        n as isize,
                        1,
                    );
                }
                if l < last {
                    z.iter_mut().for_each(|v| *v = v.max(0.0));
                }
                std::mem::swap(&mut a, &mut z);
                width = n;
            }
            out.extend(a[..m].iter().map(|&v| match task {
                Task::Binary => crate::math::sigmoid(v),
                Task::Regression => v,
            }));
            lo = hi;
        }
        out
    }

    /// The prediction: probability of class 1 (binary) or the value (regression).
    pub fn predict_row(&self, task: Task, x: &[f64]) -> f64 {
        let z = self.margin(x);
        match task {
            Task::Binary => crate::math::sigmoid(z),
            Task::Regression => z,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_forward_by_hand() {
        // x standardised: (3 - 1) / 2 = 1; hidden: relu(1*2 - 1) = 1, relu(1*-1 + 0) = 0
        // out = 1*3 + 0*5 + 0.5 = 3.5
        let m = MlpModel::from_flat(
            vec![2.0, -1.0, -1.0, 0.0, 3.0, 5.0, 0.5],
            &[1, 2, 1],
            vec![1.0],
            vec![2.0],
            vec![],
        );
        assert_eq!(m.margin(&[3.0]), 3.5);
        assert_eq!(m.layers[0].w, vec![2.0, -1.0]);
        assert_eq!(m.layers[0].b, vec![-1.0, 0.0]);
        assert_eq!(m.layers[1].w, vec![3.0, 5.0]);
        assert_eq!(m.layers[1].b, vec![0.5]);
        let p = m.predict_columns(Task::Binary, &[vec![0.0, 3.0, -2.0]], 1..3);
        assert_eq!(p[0], m.predict_row(Task::Binary, &[3.0]));
        assert!((p[1] - m.predict_row(Task::Binary, &[-2.0])).abs() < 1e-15);
        assert_eq!(m.predict_row(Task::Regression, &[3.0]), 3.5);
    }

    #[test]
    fn one_hot_inputs_follow_the_numeric_ones() {
        use crate::data::categorical::{NULL_CODE, UNSEEN_CODE};
        // Features: 0 categorical (null and code 2 kept, code 0 folded),
        // 1 numeric (mean 1, std 2). Inputs: x1', null, 2, other. One ReLU
        // unit: relu(x1' + 2 null + 3 [2] + 4 other - 1); out = 1 * it + 0.
        let mut m = MlpModel::from_flat(
            vec![1.0, 2.0, 3.0, 4.0, -1.0, 1.0, 0.0],
            &[4, 1, 1],
            vec![0.0, 1.0],
            vec![1.0, 2.0],
            vec![],
        );
        m.onehot = vec![OneHot {
            feature: 0,
            codes: vec![NULL_CODE, 2.0],
            other: vec![0.0],
        }];
        assert_eq!(m.check(2), Ok(()));
        let codes = [NULL_CODE, 0.0, 1.0, 2.0, UNSEEN_CODE];
        let x1 = [3.0, 3.0, 3.0, 3.0, 5.0];
        // x1' = 1 (3.0) or 2 (5.0); 1 (unseen in the group) and unseen: 0.
        let want = [2.0, 4.0, 0.0, 3.0, 1.0];
        for i in 0..5 {
            assert_eq!(m.margin(&[codes[i], x1[i]]), want[i], "row {i}");
        }
        let got = m.predict_columns(Task::Regression, &[codes.to_vec(), x1.to_vec()], 0..5);
        assert_eq!(got, want);
        let mut bad = m.clone();
        bad.onehot[0].other.clear();
        assert!(bad.check(2).is_err());
    }
}
