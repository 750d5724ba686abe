//! The MLP family: one fully connected network per (group, config).
//!
//! Each model standardises its inputs with its group's training mean and
//! standard deviation (stored in the model), has one or more ReLU hidden
//! layers and one output: sigmoid + log-loss (PyTorch's
//! `BCEWithLogitsLoss`) for binary tasks, identity + squared error
//! (`MSELoss`) for regression, both averaged over the mini-batch. Training is
//! PyTorch-style: default initialisation (every weight and bias uniform in
//! `±1/sqrt(fan_in)`, which is what `nn.Linear`'s Kaiming-uniform with
//! `a = sqrt(5)` gives), mini-batches of `batch_size` rows drawn from a fresh
//! seeded permutation of the group's rows each epoch, and Adam (betas 0.9 /
//! 0.999, eps 1e-8, `weight_decay` added to the gradient as
//! `torch.optim.Adam` does) or plain SGD.
//!
//! Hyper-parameters go through the [`MlpParams`] builder and are checked once
//! into an [`MlpConfig`]; a fitted model is an [`MlpModel`]. The step kernel
//! is in [`kernel`], the pass-driver plug-in in [`grouped`].
//!
//! `--param` values are numbers; two parameters also take words, which the
//! grid encodes as numbers (see [`encode_param`]):
//! * `layers=64x32` (hidden widths, first to last) is encoded with four decimal
//!   digits per layer, `64x32` = `640032`; at most 3 layers of at most 9,999
//!   units. `layers=64` is the same as `hidden=64`.
//! * `optimizer=adam` is `0`, `optimizer=sgd` is `1`.

pub mod family;
pub mod grouped;
pub mod kernel;

use serde::{Deserialize, Serialize};

pub use family::{configs, Mlp, MlpWords};

use crate::data::Task;
use crate::error::{GroupfitError, Result};

/// The names `--param` accepts for the MLP family.
pub const PARAM_NAMES: &[&str] = &[
    "hidden",
    "layers",
    "lr",
    "epochs",
    "batch_size",
    "weight_decay",
    "optimizer",
];

/// Most hidden layers `layers` can encode.
pub const MAX_LAYERS: usize = 3;
const LAYER_BASE: f64 = 10_000.0;

/// The optimizer of a [`MlpConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    /// `torch.optim.Adam` with its default betas (0.9, 0.999) and eps (1e-8).
    Adam,
    /// Plain `torch.optim.SGD` (no momentum).
    Sgd,
}

/// Encodes a word-valued `--param` (`layers=64x32`, `optimizer=sgd`) as the
/// number the grid stores; `None` when `name` takes no words or `text` is not
/// one of them (then the grid parses `text` as a number).
///
/// ```
/// use groupfit::mlp::{encode_param, decode_layers};
/// assert_eq!(encode_param("layers", "64x32"), Some(640032.0));
/// assert_eq!(decode_layers(640032.0).unwrap(), vec![64, 32]);
/// assert_eq!(encode_param("optimizer", "sgd"), Some(1.0));
/// ```
pub fn encode_param(name: &str, text: &str) -> Option<f64> {
    match name {
        "layers" if text.contains('x') => {
            let mut v = 0.0;
            let parts: Vec<&str> = text.split('x').collect();
            if parts.len() > MAX_LAYERS {
                return None;
            }
            for p in parts {
                let w: u32 = p.trim().parse().ok()?;
                if w == 0 || w as f64 >= LAYER_BASE {
                    return None;
                }
                v = v * LAYER_BASE + w as f64;
            }
            Some(v)
        }
        "optimizer" => match text {
            "adam" => Some(0.0),
            "sgd" => Some(1.0),
            _ => None,
        },
        _ => None,
    }
}

/// What a word-valued `--param` takes, for the message on a value that is
/// neither one of its words nor a number; `None` for numeric parameters.
///
/// ```
/// assert_eq!(groupfit::mlp::word_form("optimizer"), Some("adam or sgd".to_string()));
/// assert_eq!(groupfit::mlp::word_form("C"), None);
/// ```
pub fn word_form(name: &str) -> Option<String> {
    match name {
        "layers" => Some(format!(
            "hidden-layer widths joined by 'x' (e.g. 64x32): 1 to {MAX_LAYERS} layers, each 1 to {}",
            LAYER_BASE as u32 - 1
        )),
        "optimizer" => Some("adam or sgd".to_string()),
        _ => None,
    }
}

/// How a grid value of a word-valued parameter is written back
/// (`640032` → `64x32`, `1` → `sgd`); `None` for plain numbers.
pub fn display_param(name: &str, value: f64) -> Option<String> {
    match name {
        "layers" => decode_layers(value).ok().map(|l| {
            l.iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
                .join("x")
        }),
        "optimizer" => match value {
            v if v == 0.0 => Some("adam".into()),
            v if v == 1.0 => Some("sgd".into()),
            _ => None,
        },
        _ => None,
    }
}

/// Decodes `layers` (four decimal digits per hidden layer, first layer
/// leftmost) into widths.
pub fn decode_layers(value: f64) -> Result<Vec<usize>> {
    let bad = || {
        GroupfitError::param(
            "layers",
            format!("{value} is not a list of widths like 64x32 (at most {MAX_LAYERS} layers of 1 to 9999 units)"),
        )
    };
    if !(value.is_finite()
        && value >= 1.0
        && value.fract() == 0.0
        && value < LAYER_BASE.powi(MAX_LAYERS as i32))
    {
        return Err(bad());
    }
    let mut v = value as u64;
    let mut out = Vec::new();
    while v > 0 {
        let w = (v % LAYER_BASE as u64) as usize;
        if w == 0 {
            return Err(bad());
        }
        out.push(w);
        v /= LAYER_BASE as u64;
    }
    out.reverse();
    Ok(out)
}

/// Builder for the MLP family's hyper-parameters.
///
/// ```
/// use groupfit::mlp::MlpParams;
/// let cfg = MlpParams::new().layers(vec![64, 32]).lr(0.01).check().unwrap();
/// assert_eq!(cfg.layers(), &[64, 32]);
/// assert!(MlpParams::new().lr(0.0).check().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct MlpParams {
    hidden: Option<usize>,
    layers: Option<Vec<usize>>,
    lr: f64,
    epochs: u32,
    batch_size: u32,
    weight_decay: f64,
    optimizer: Optimizer,
}

impl Default for MlpParams {
    fn default() -> Self {
        MlpParams {
            hidden: None,
            layers: None,
            lr: 1e-3,
            epochs: 5,
            batch_size: 256,
            weight_decay: 0.0,
            optimizer: Optimizer::Adam,
        }
    }
}

fn positive_int(name: &str, value: f64, max: f64) -> Result<f64> {
    if value.fract() != 0.0 || value < 1.0 || value > max {
        return Err(GroupfitError::param(
            name,
            format!("{value} is not a positive integer (at most {max})"),
        ));
    }
    Ok(value)
}

impl MlpParams {
    /// Defaults: one hidden layer of 64, `lr = 0.001` (Adam's default),
    /// 5 epochs, batches of 256, no weight decay, Adam.
    pub fn new() -> Self {
        Self::default()
    }
    /// One hidden layer of `width` units.
    pub fn hidden(mut self, width: usize) -> Self {
        self.hidden = Some(width);
        self
    }
    /// Hidden layer widths, first to last.
    pub fn layers(mut self, widths: Vec<usize>) -> Self {
        self.layers = Some(widths);
        self
    }
    /// Learning rate, > 0.
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = lr;
        self
    }
    /// Passes over the group's rows.
    pub fn epochs(mut self, epochs: u32) -> Self {
        self.epochs = epochs;
        self
    }
    /// Rows per mini-batch (the last batch of an epoch may be smaller).
    pub fn batch_size(mut self, batch_size: u32) -> Self {
        self.batch_size = batch_size;
        self
    }
    /// L2 penalty added to the gradient (`weight_decay * param`, every
    /// parameter, as in `torch.optim`), >= 0.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }
    /// Adam or SGD.
    pub fn optimizer(mut self, optimizer: Optimizer) -> Self {
        self.optimizer = optimizer;
        self
    }

    /// Sets a parameter by its `--param` name (word values encoded by [`encode_param`]).
    pub fn set(self, name: &str, value: f64) -> Result<Self> {
        Ok(match name {
            "hidden" => self.hidden(positive_int(name, value, 9999.0)? as usize),
            "layers" => self.layers(decode_layers(value)?),
            "lr" => self.lr(value),
            "epochs" => self.epochs(positive_int(name, value, 1e6)? as u32),
            "batch_size" => self.batch_size(positive_int(name, value, 1e8)? as u32),
            "weight_decay" => self.weight_decay(value),
            "optimizer" => self.optimizer(match value {
                v if v == 0.0 => Optimizer::Adam,
                v if v == 1.0 => Optimizer::Sgd,
                _ => {
                    return Err(GroupfitError::param(
                        "optimizer",
                        format!("{value} is neither adam (0) nor sgd (1)"),
                    ))
                }
            }),
            other => {
                return Err(GroupfitError::param(
                    other,
                    format!("unknown for model mlp (known: {})", PARAM_NAMES.join(", ")),
                ))
            }
        })
    }

    /// Validates into a checked configuration.
    pub fn check(self) -> Result<MlpConfig> {
        let layers = match (self.hidden, self.layers) {
            (Some(_), Some(_)) => {
                return Err(GroupfitError::param(
                    "layers",
                    "give either hidden or layers, not both",
                ))
            }
            (Some(h), None) => vec![h],
            (None, Some(l)) => l,
            (None, None) => vec![64],
        };
        if layers.is_empty() || layers.len() > MAX_LAYERS || layers.iter().any(|&w| w == 0) {
            return Err(GroupfitError::param(
                "layers",
                format!("{layers:?}: need 1 to {MAX_LAYERS} layers of at least one unit"),
            ));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(GroupfitError::param(
                "lr",
                format!("{} must be a positive number", self.lr),
            ));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(GroupfitError::param(
                "weight_decay",
                format!("{} must be a number >= 0", self.weight_decay),
            ));
        }
        if self.epochs == 0 {
            return Err(GroupfitError::param("epochs", "must be at least 1"));
        }
        if self.batch_size == 0 {
            return Err(GroupfitError::param("batch_size", "must be at least 1"));
        }
        Ok(MlpConfig {
            layers,
            lr: self.lr,
            epochs: self.epochs,
            batch_size: self.batch_size,
            weight_decay: self.weight_decay,
            optimizer: self.optimizer,
        })
    }
}

/// Validated hyper-parameters of one MLP (one grid point).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpConfig {
    layers: Vec<usize>,
    lr: f64,
    epochs: u32,
    batch_size: u32,
    weight_decay: f64,
    optimizer: Optimizer,
}

impl MlpConfig {
    /// Hidden layer widths, first to last.
    pub fn layers(&self) -> &[usize] {
        &self.layers
    }
    /// Learning rate.
    pub fn lr(&self) -> f64 {
        self.lr
    }
    /// Epochs.
    pub fn epochs(&self) -> u32 {
        self.epochs
    }
    /// Mini-batch rows.
    pub fn batch_size(&self) -> usize {
        self.batch_size as usize
    }
    /// L2 term added to the gradient.
    pub fn weight_decay(&self) -> f64 {
        self.weight_decay
    }
    /// The optimizer.
    pub fn optimizer(&self) -> Optimizer {
        self.optimizer
    }
    /// Widths of every layer including input `d` and the single output.
    pub fn widths(&self, d: usize) -> Vec<usize> {
        let mut w = Vec::with_capacity(self.layers.len() + 2);
        w.push(d);
        w.extend_from_slice(&self.layers);
        w.push(1);
        w
    }
    /// Number of parameters (weights and biases) for `d` inputs.
    pub fn n_params(&self, d: usize) -> usize {
        kernel::param_count(&self.widths(d))
    }
    /// Floating-point operations of one training step per row: forward,
    /// weight gradients, and input gradients of every layer but the first
    /// (multiply-add = 2).
    pub fn flops_per_row(&self, d: usize) -> f64 {
        let w = self.widths(d);
        let mut f = 0.0;
        for (l, p) in w.windows(2).enumerate() {
            let mac = (p[0] * p[1]) as f64;
            f += 2.0 * mac * if l == 0 { 2.0 } else { 3.0 };
        }
        f
    }
}

/// One dense layer: `out = in · w + b`, `w` row-major `n_in × n_out`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dense {
    /// Inputs.
    pub n_in: usize,
    /// Outputs.
    pub n_out: usize,
    /// Weights, `w[i * n_out + o]` (the transpose of PyTorch's `weight`).
    /// In the model file: little-endian bytes in its binary section
    /// ([`crate::store::floats`]).
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
        let offsets: Vec<(usize, usize)> = kernel::layer_offsets(widths).collect();
        params.truncate(kernel::param_count(widths));
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

/// SplitMix64: the seeded generator behind initial weights and batch order.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for a stream identified by `parts` (mixed in order).
    pub fn new(parts: &[u64]) -> Rng {
        let mut r = Rng(0x6a09_e667_f3bc_c908);
        for &p in parts {
            r.0 ^= p;
            r.0 = r.next_u64();
        }
        r
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)` with 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform integer in `0..n` (n > 0), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let v = self.next_u64();
            if v < zone {
                return v % n;
            }
        }
    }
}

/// A 64-bit FNV-1a hash (stable across builds): group keys and architectures
/// become RNG stream ids with it.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// PyTorch's default initialisation of every layer: weights and biases
/// uniform in `±1/sqrt(fan_in)`, drawn layer by layer (weights row-major
/// `n_in × n_out`, then biases) from the stream `(seed, group_stream,
/// architecture)`. Configs that differ only in optimizer settings start from
/// the same weights.
pub fn init_params(widths: &[usize], seed: u64, group_stream: u64) -> Vec<f32> {
    let arch: Vec<u8> = widths
        .iter()
        .flat_map(|w| (*w as u64).to_le_bytes())
        .collect();
    let mut rng = Rng::new(&[seed, group_stream, stable_hash(&arch), 1]);
    let mut p = Vec::with_capacity(kernel::param_count(widths));
    for win in widths.windows(2) {
        let bound = 1.0 / (win[0] as f64).sqrt();
        for _ in 0..win[0] * win[1] + win[1] {
            p.push(((rng.uniform() * 2.0 - 1.0) * bound) as f32);
        }
    }
    p
}

/// The permutation of a group's `n` rows for `epoch` (Fisher-Yates from the
/// stream `(seed, group_stream, epoch)`), written into `out`.
pub fn epoch_permutation(n: usize, seed: u64, group_stream: u64, epoch: u32, out: &mut Vec<u32>) {
    out.clear();
    out.extend(0..n as u32);
    let mut rng = Rng::new(&[seed, group_stream, epoch as u64, 2]);
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        out.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_validate_once() {
        assert!(MlpParams::new().epochs(0).check().is_err());
        assert!(MlpParams::new().weight_decay(-1.0).check().is_err());
        assert!(MlpParams::new().hidden(8).layers(vec![4]).check().is_err());
        let e = MlpParams::new().set("C", 1.0).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("invalid parameter 'C': unknown for model mlp"));
        let c = MlpParams::new()
            .set("layers", 640032.0)
            .unwrap()
            .set("optimizer", 1.0)
            .unwrap()
            .check()
            .unwrap();
        assert_eq!(c.layers(), &[64, 32]);
        assert_eq!(c.optimizer(), Optimizer::Sgd);
        // d=3: (3*64+64) + (64*32+32) + (32+1)
        assert_eq!(c.n_params(3), 256 + 2080 + 33);
        assert!(MlpParams::new().set("layers", 64.5).is_err());
        assert!(MlpParams::new().set("epochs", 1.5).is_err());
    }

    #[test]
    fn words_encode_and_display() {
        assert_eq!(encode_param("layers", "8x4x2"), Some(800040002.0));
        assert_eq!(display_param("layers", 800040002.0).unwrap(), "8x4x2");
        assert_eq!(encode_param("layers", "8x0"), None);
        assert_eq!(encode_param("layers", "1x2x3x4"), None);
        assert_eq!(display_param("optimizer", 0.0).unwrap(), "adam");
        assert_eq!(display_param("lr", 0.1), None);
    }

    #[test]
    fn init_is_bounded_and_seeded() {
        let w = [4, 3, 1];
        let a = init_params(&w, 0, 7);
        assert_eq!(a.len(), 4 * 3 + 3 + 3 + 1);
        assert!(a[..15].iter().all(|v| v.abs() <= 0.5));
        assert!(a[15..].iter().all(|v| v.abs() <= 1.0 / 3f32.sqrt()));
        assert_eq!(a, init_params(&w, 0, 7));
        assert_ne!(a, init_params(&w, 1, 7));
        assert_ne!(a, init_params(&w, 0, 8));
        let mut p = Vec::new();
        epoch_permutation(10, 0, 7, 0, &mut p);
        let mut s = p.clone();
        s.sort();
        assert_eq!(s, (0..10).collect::<Vec<u32>>());
        let mut q = Vec::new();
        epoch_permutation(10, 0, 7, 1, &mut q);
        assert_ne!(p, q);
    }

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
