//! A fitted network: standardisation, dense layers, and batched prediction.

use serde::{Deserialize, Serialize};

use super::params::{layer_offsets, param_count};
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpModel {
    /// Per-feature training mean of the model's group.
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
        let mut n_in = d;
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
        }
    }

    /// The network output (logit for binary) for one row of raw, imputed features.
    pub fn margin(&self, x: &[f64]) -> f64 {
        let mut a: Vec<f64> = x
            .iter()
            .zip(self.mean.iter().zip(&self.std))
            .map(|(v, (m, s))| (v - m) / s)
            .collect();
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
        let d = self.mean.len();
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
            for (j, col) in cols.iter().enumerate().take(d) {
                let (mu, s) = (self.mean[j], self.std[j]);
                for (r, &v) in col[lo..hi].iter().enumerate() {
                    a[r * d + j] = (v - mu) / s;
                }
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
}
