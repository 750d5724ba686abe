//! The MLP family's hyper-parameters: the `MlpParams` builder, the checked
//! `MlpConfig`, and the word-valued `layers` and `optimizer`.

use serde::{Deserialize, Serialize};

use crate::data::onehot::Cap;
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
    "max_cat",
    "min_cat_rows",
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
    cap: Cap,
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
            cap: Cap::default(),
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
    /// Most categories of a categorical feature with a one-hot input of
    /// their own in a group (the most frequent); the others share one
    /// "other" input.
    pub fn max_cat(mut self, max_cat: usize) -> Self {
        self.cap.max_cat = max_cat;
        self
    }
    /// Fewest training rows of a category (in the group) with a one-hot
    /// input of its own; rarer ones share the "other" input.
    pub fn min_cat_rows(mut self, min_cat_rows: usize) -> Self {
        self.cap.min_cat_rows = min_cat_rows;
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
            "max_cat" | "min_cat_rows" => Self {
                cap: self.cap.set(name, value)?,
                ..self
            },
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
        let cap = self.cap.check()?;
        Ok(MlpConfig {
            layers,
            lr: self.lr,
            epochs: self.epochs,
            batch_size: self.batch_size,
            weight_decay: self.weight_decay,
            optimizer: self.optimizer,
            cap,
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
    #[serde(default)]
    cap: Cap,
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
    /// Which categories get one-hot inputs (`max_cat`, `min_cat_rows`).
    pub fn cap(&self) -> Cap {
        self.cap
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
        param_count(&self.widths(d))
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

/// Parameters (weights and biases) of a network of layer `widths`.
pub fn param_count(widths: &[usize]) -> usize {
    widths.windows(2).map(|p| p[0] * p[1] + p[1]).sum()
}

/// Offsets of each layer's weights and biases in the flat parameters.
pub fn layer_offsets(widths: &[usize]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut o = 0;
    widths.windows(2).map(move |p| {
        let w = o;
        o += p[0] * p[1] + p[1];
        (w, w + p[0] * p[1])
    })
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
        let c = MlpParams::new()
            .set("max_cat", 2.0)
            .unwrap()
            .check()
            .unwrap();
        assert_eq!(c.cap().max_cat, 2);
        assert!(MlpParams::new().set("min_cat_rows", 0.0).is_err());
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
}
