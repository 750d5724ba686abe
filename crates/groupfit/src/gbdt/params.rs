//! The gbdt family's hyper-parameters: the `GbdtParams` builder with
//! LightGBM's names and defaults, and the checked `GbdtConfig`.

use serde::{Deserialize, Serialize};

use crate::error::{GroupfitError, Result};

/// The names `--param` accepts for the gbdt family (`num_iterations` is an
/// alias of `rounds`, as in LightGBM).
pub const PARAM_NAMES: &[&str] = &[
    "rounds",
    "num_iterations",
    "num_leaves",
    "learning_rate",
    "min_data_in_leaf",
    "min_sum_hessian_in_leaf",
    "lambda_l2",
    "max_depth",
    "max_bin",
    "min_data_in_bin",
    "feature_fraction",
    "early_stopping_rounds",
    "max_cat_to_onehot",
    "cat_smooth",
    "cat_l2",
    "max_cat_threshold",
    "min_data_per_group",
    "use_quantized_grad",
    "num_grad_quant_bins",
    "quant_train_renew_leaf",
    "stochastic_rounding",
];

/// The parameters that take `true`/`false` (or `1`/`0`).
pub const BOOL_PARAMS: &[&str] = &[
    "use_quantized_grad",
    "quant_train_renew_leaf",
    "stochastic_rounding",
];

/// Builder for the gbdt family's hyper-parameters (LightGBM's names and defaults).
///
/// ```
/// use groupfit::gbdt::GbdtParams;
/// let cfg = GbdtParams::new().num_leaves(15).learning_rate(0.05).check().unwrap();
/// assert_eq!((cfg.num_leaves(), cfg.rounds()), (15, 100));
/// assert!(GbdtParams::new().num_leaves(1).check().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct GbdtParams {
    rounds: f64,
    num_leaves: f64,
    learning_rate: f64,
    min_data_in_leaf: f64,
    min_sum_hessian_in_leaf: f64,
    lambda_l2: f64,
    max_depth: f64,
    max_bin: f64,
    min_data_in_bin: f64,
    feature_fraction: f64,
    early_stopping_rounds: f64,
    max_cat_to_onehot: f64,
    cat_smooth: f64,
    cat_l2: f64,
    max_cat_threshold: f64,
    min_data_per_group: f64,
    use_quantized_grad: f64,
    num_grad_quant_bins: f64,
    quant_train_renew_leaf: f64,
    stochastic_rounding: f64,
}

impl Default for GbdtParams {
    fn default() -> Self {
        GbdtParams {
            rounds: 100.0,
            num_leaves: 31.0,
            learning_rate: 0.1,
            min_data_in_leaf: 20.0,
            min_sum_hessian_in_leaf: 1e-3,
            lambda_l2: 0.0,
            max_depth: -1.0,
            max_bin: 255.0,
            min_data_in_bin: 3.0,
            feature_fraction: 1.0,
            early_stopping_rounds: 0.0,
            max_cat_to_onehot: 4.0,
            cat_smooth: 10.0,
            cat_l2: 10.0,
            max_cat_threshold: 32.0,
            min_data_per_group: 100.0,
            use_quantized_grad: 0.0,
            num_grad_quant_bins: 4.0,
            quant_train_renew_leaf: 0.0,
            stochastic_rounding: 1.0,
        }
    }
}

impl GbdtParams {
    /// LightGBM's defaults: 100 rounds, 31 leaves, learning rate 0.1,
    /// `min_data_in_leaf` 20, `min_sum_hessian_in_leaf` 1e-3, `lambda_l2` 0,
    /// no depth limit, 255 bins, all features, no early stopping; for
    /// categorical features `max_cat_to_onehot` 4, `cat_smooth` 10,
    /// `cat_l2` 10, `max_cat_threshold` 32, `min_data_per_group` 100;
    /// quantized gradients off (`num_grad_quant_bins` 4, stochastic
    /// rounding, leaf values from the quantized sums).
    pub fn new() -> Self {
        Self::default()
    }
    /// Boosting rounds (LightGBM's `num_iterations`), >= 1.
    pub fn rounds(mut self, v: u32) -> Self {
        self.rounds = v as f64;
        self
    }
    /// Most leaves per tree, >= 2.
    pub fn num_leaves(mut self, v: u32) -> Self {
        self.num_leaves = v as f64;
        self
    }
    /// Shrinkage of every tree's leaf values, > 0.
    pub fn learning_rate(mut self, v: f64) -> Self {
        self.learning_rate = v;
        self
    }
    /// Fewest training rows in a leaf, >= 1.
    pub fn min_data_in_leaf(mut self, v: u32) -> Self {
        self.min_data_in_leaf = v as f64;
        self
    }
    /// Smallest hessian sum in a leaf, >= 0.
    pub fn min_sum_hessian_in_leaf(mut self, v: f64) -> Self {
        self.min_sum_hessian_in_leaf = v;
        self
    }
    /// L2 penalty on leaf values, >= 0.
    pub fn lambda_l2(mut self, v: f64) -> Self {
        self.lambda_l2 = v;
        self
    }
    /// Deepest leaf (root depth 0 splits into depth-1 leaves); <= 0: no limit.
    pub fn max_depth(mut self, v: i32) -> Self {
        self.max_depth = v as f64;
        self
    }
    /// Most value bins per feature (NaN has a bin of its own), 2..=255.
    pub fn max_bin(mut self, v: u32) -> Self {
        self.max_bin = v as f64;
        self
    }
    /// Fewest training rows per value bin (LightGBM's `min_data_in_bin`,
    /// default 3): adjacent values are merged until a bin holds this many,
    /// and a feature gets at most `rows / min_data_in_bin` bins.
    pub fn min_data_in_bin(mut self, v: u32) -> Self {
        self.min_data_in_bin = v as f64;
        self
    }
    /// Fraction of features each tree may split on, in (0, 1].
    pub fn feature_fraction(mut self, v: f64) -> Self {
        self.feature_fraction = v;
        self
    }
    /// Stop when the validation metric has not improved for this many rounds
    /// and keep the best round; 0: never stop early.
    pub fn early_stopping_rounds(mut self, v: u32) -> Self {
        self.early_stopping_rounds = v as f64;
        self
    }
    /// One-vs-rest splits for a categorical feature whose bins (its
    /// categories plus the null bin) are at most this many, >= 1.
    pub fn max_cat_to_onehot(mut self, v: u32) -> Self {
        self.max_cat_to_onehot = v as f64;
        self
    }
    /// Added to a category's hessian when categories are ordered by
    /// gradient / hessian; also the fewest rows a category needs to be
    /// tried, >= 0.
    pub fn cat_smooth(mut self, v: f64) -> Self {
        self.cat_smooth = v;
        self
    }
    /// Added to `lambda_l2` in a sorted categorical split's gain and
    /// children's values, >= 0.
    pub fn cat_l2(mut self, v: f64) -> Self {
        self.cat_l2 = v;
        self
    }
    /// Most categories on the left of a sorted categorical split, >= 1.
    pub fn max_cat_threshold(mut self, v: u32) -> Self {
        self.max_cat_threshold = v as f64;
        self
    }
    /// Fewest rows between two tried thresholds of a sorted categorical
    /// split, and on its right side, >= 1.
    pub fn min_data_per_group(mut self, v: u32) -> Self {
        self.min_data_per_group = v as f64;
        self
    }

    /// Trains on gradients quantized to `bins` integer levels a round
    /// (LightGBM's `use_quantized_grad` and `num_grad_quant_bins`).
    pub fn quantized_grad(mut self, bins: u32) -> Self {
        self.use_quantized_grad = 1.0;
        self.num_grad_quant_bins = bins as f64;
        self
    }
    /// With quantized gradients: leaf values from each leaf's true
    /// gradients (`quant_train_renew_leaf`).
    pub fn quant_train_renew_leaf(mut self, v: bool) -> Self {
        self.quant_train_renew_leaf = f64::from(u8::from(v));
        self
    }
    /// With quantized gradients: round stochastically (unbiased), else to
    /// the nearest level (`stochastic_rounding`).
    pub fn stochastic_rounding(mut self, v: bool) -> Self {
        self.stochastic_rounding = f64::from(u8::from(v));
        self
    }

    /// Sets a parameter by its `--param` name (values are checked by [`GbdtParams::check`]).
    pub fn set(mut self, name: &str, value: f64) -> Result<Self> {
        match name {
            "rounds" | "num_iterations" => self.rounds = value,
            "num_leaves" => self.num_leaves = value,
            "learning_rate" => self.learning_rate = value,
            "min_data_in_leaf" => self.min_data_in_leaf = value,
            "min_sum_hessian_in_leaf" => self.min_sum_hessian_in_leaf = value,
            "lambda_l2" => self.lambda_l2 = value,
            "max_depth" => self.max_depth = value,
            "max_bin" => self.max_bin = value,
            "min_data_in_bin" => self.min_data_in_bin = value,
            "feature_fraction" => self.feature_fraction = value,
            "early_stopping_rounds" => self.early_stopping_rounds = value,
            "max_cat_to_onehot" => self.max_cat_to_onehot = value,
            "cat_smooth" => self.cat_smooth = value,
            "cat_l2" => self.cat_l2 = value,
            "max_cat_threshold" => self.max_cat_threshold = value,
            "min_data_per_group" => self.min_data_per_group = value,
            "use_quantized_grad" => self.use_quantized_grad = value,
            "num_grad_quant_bins" => self.num_grad_quant_bins = value,
            "quant_train_renew_leaf" => self.quant_train_renew_leaf = value,
            "stochastic_rounding" => self.stochastic_rounding = value,
            other => {
                return Err(GroupfitError::param(
                    other,
                    format!("unknown for model gbdt (known: {})", PARAM_NAMES.join(", ")),
                ))
            }
        }
        Ok(self)
    }

    /// Validates into a checked configuration.
    pub fn check(self) -> Result<GbdtConfig> {
        fn int(name: &str, v: f64, lo: f64, hi: f64) -> Result<i64> {
            if v.fract() != 0.0 || !(lo..=hi).contains(&v) {
                return Err(GroupfitError::param(
                    name,
                    format!("{v} must be an integer in [{lo}, {hi}]"),
                ));
            }
            Ok(v as i64)
        }
        fn real(name: &str, v: f64, ok: bool, what: &str) -> Result<f64> {
            if !v.is_finite() || !ok {
                return Err(GroupfitError::param(name, format!("{v} must be {what}")));
            }
            Ok(v)
        }
        fn flag(name: &str, v: f64) -> Result<bool> {
            if v == 0.0 || v == 1.0 {
                return Ok(v == 1.0);
            }
            Err(GroupfitError::param(
                name,
                format!("{v} must be true or false (1 or 0)"),
            ))
        }
        let big = 1e9;
        Ok(GbdtConfig {
            rounds: int("rounds", self.rounds, 1.0, big)? as u32,
            num_leaves: int("num_leaves", self.num_leaves, 2.0, 131072.0)? as u32,
            learning_rate: real(
                "learning_rate",
                self.learning_rate,
                self.learning_rate > 0.0,
                "a positive number",
            )?,
            min_data_in_leaf: int("min_data_in_leaf", self.min_data_in_leaf, 1.0, big)? as u32,
            min_sum_hessian_in_leaf: real(
                "min_sum_hessian_in_leaf",
                self.min_sum_hessian_in_leaf,
                self.min_sum_hessian_in_leaf >= 0.0,
                "a number >= 0",
            )?,
            lambda_l2: real(
                "lambda_l2",
                self.lambda_l2,
                self.lambda_l2 >= 0.0,
                "a number >= 0",
            )?,
            max_depth: int("max_depth", self.max_depth, -1e6, 1e6)? as i32,
            max_bin: int("max_bin", self.max_bin, 2.0, 255.0)? as u32,
            min_data_in_bin: int("min_data_in_bin", self.min_data_in_bin, 1.0, big)? as u32,
            feature_fraction: real(
                "feature_fraction",
                self.feature_fraction,
                self.feature_fraction > 0.0 && self.feature_fraction <= 1.0,
                "in (0, 1]",
            )?,
            early_stopping_rounds: int(
                "early_stopping_rounds",
                self.early_stopping_rounds,
                0.0,
                big,
            )? as u32,
            max_cat_to_onehot: int("max_cat_to_onehot", self.max_cat_to_onehot, 1.0, big)? as u32,
            cat_smooth: real(
                "cat_smooth",
                self.cat_smooth,
                self.cat_smooth >= 0.0,
                "a number >= 0",
            )?,
            cat_l2: real("cat_l2", self.cat_l2, self.cat_l2 >= 0.0, "a number >= 0")?,
            max_cat_threshold: int("max_cat_threshold", self.max_cat_threshold, 1.0, big)? as u32,
            min_data_per_group: int("min_data_per_group", self.min_data_per_group, 1.0, big)?
                as u32,
            use_quantized_grad: flag("use_quantized_grad", self.use_quantized_grad)?,
            num_grad_quant_bins: int("num_grad_quant_bins", self.num_grad_quant_bins, 2.0, 126.0)?
                as u32,
            quant_train_renew_leaf: flag("quant_train_renew_leaf", self.quant_train_renew_leaf)?,
            stochastic_rounding: flag("stochastic_rounding", self.stochastic_rounding)?,
        })
    }
}

/// Validated hyper-parameters of one booster (one grid point).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GbdtConfig {
    rounds: u32,
    num_leaves: u32,
    learning_rate: f64,
    min_data_in_leaf: u32,
    min_sum_hessian_in_leaf: f64,
    lambda_l2: f64,
    max_depth: i32,
    max_bin: u32,
    #[serde(default = "default_min_data_in_bin")]
    min_data_in_bin: u32,
    feature_fraction: f64,
    early_stopping_rounds: u32,
    #[serde(default = "default_max_cat_to_onehot")]
    max_cat_to_onehot: u32,
    #[serde(default = "default_cat_smooth")]
    cat_smooth: f64,
    #[serde(default = "default_cat_smooth")]
    cat_l2: f64,
    #[serde(default = "default_max_cat_threshold")]
    max_cat_threshold: u32,
    #[serde(default = "default_min_data_per_group")]
    min_data_per_group: u32,
    #[serde(default)]
    use_quantized_grad: bool,
    #[serde(default = "default_num_grad_quant_bins")]
    num_grad_quant_bins: u32,
    #[serde(default)]
    quant_train_renew_leaf: bool,
    #[serde(default = "default_true")]
    stochastic_rounding: bool,
}

fn default_num_grad_quant_bins() -> u32 {
    4
}

fn default_true() -> bool {
    true
}

fn default_min_data_in_bin() -> u32 {
    3
}

fn default_max_cat_to_onehot() -> u32 {
    4
}

/// `cat_smooth` and `cat_l2` (both 10).
fn default_cat_smooth() -> f64 {
    10.0
}

fn default_max_cat_threshold() -> u32 {
    32
}

fn default_min_data_per_group() -> u32 {
    100
}

impl GbdtConfig {
    /// Boosting rounds.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }
    /// Most leaves per tree.
    pub fn num_leaves(&self) -> u32 {
        self.num_leaves
    }
    /// Shrinkage.
    pub fn learning_rate(&self) -> f64 {
        self.learning_rate
    }
    /// Fewest rows per leaf.
    pub fn min_data_in_leaf(&self) -> u32 {
        self.min_data_in_leaf
    }
    /// Smallest hessian sum per leaf.
    pub fn min_sum_hessian_in_leaf(&self) -> f64 {
        self.min_sum_hessian_in_leaf
    }
    /// L2 penalty on leaf values.
    pub fn lambda_l2(&self) -> f64 {
        self.lambda_l2
    }
    /// Depth limit (<= 0: none).
    pub fn max_depth(&self) -> i32 {
        self.max_depth
    }
    /// Most value bins per feature.
    pub fn max_bin(&self) -> u32 {
        self.max_bin
    }
    /// Fewest training rows per value bin.
    pub fn min_data_in_bin(&self) -> u32 {
        self.min_data_in_bin
    }
    /// Fraction of features per tree.
    pub fn feature_fraction(&self) -> f64 {
        self.feature_fraction
    }
    /// Early-stopping patience (0: off).
    pub fn early_stopping_rounds(&self) -> u32 {
        self.early_stopping_rounds
    }
    /// Most bins (categories plus the null bin) of a one-vs-rest categorical feature.
    pub fn max_cat_to_onehot(&self) -> u32 {
        self.max_cat_to_onehot
    }
    /// Smoothing of the category order, and fewest rows of a tried category.
    pub fn cat_smooth(&self) -> f64 {
        self.cat_smooth
    }
    /// Extra L2 penalty of sorted categorical splits.
    pub fn cat_l2(&self) -> f64 {
        self.cat_l2
    }
    /// Most categories on the left of a sorted categorical split.
    pub fn max_cat_threshold(&self) -> u32 {
        self.max_cat_threshold
    }
    /// Fewest rows between tried thresholds of a sorted categorical split.
    pub fn min_data_per_group(&self) -> u32 {
        self.min_data_per_group
    }
    /// How gradients are quantized each round; `None`: they are not.
    pub fn quantization(&self) -> Option<Quantization> {
        self.use_quantized_grad.then_some(Quantization {
            bins: self.num_grad_quant_bins,
            stochastic: self.stochastic_rounding,
            renew_leaf: self.quant_train_renew_leaf,
        })
    }
}

/// LightGBM's quantized training: each round, gradients and hessians are
/// rounded to a few integer levels of a per-round scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantization {
    /// Levels (`num_grad_quant_bins`): gradients take `-bins/2..=bins/2`
    /// (integer division), hessians `0..=bins`.
    pub bins: u32,
    /// Stochastic (unbiased) rounding, else to the nearest level.
    pub stochastic: bool,
    /// Leaf values from each leaf's true gradients, else from the
    /// quantized sums the splits used.
    pub renew_leaf: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_lightgbm_and_checked_once() {
        let c = GbdtParams::new().check().unwrap();
        assert_eq!(c.rounds(), 100);
        assert_eq!(c.num_leaves(), 31);
        assert_eq!(c.learning_rate(), 0.1);
        assert_eq!(c.min_data_in_leaf(), 20);
        assert_eq!(c.min_sum_hessian_in_leaf(), 1e-3);
        assert_eq!(c.lambda_l2(), 0.0);
        assert_eq!(c.max_depth(), -1);
        assert_eq!(c.max_bin(), 255);
        assert_eq!(c.feature_fraction(), 1.0);
        assert_eq!(c.early_stopping_rounds(), 0);
        assert_eq!(c.max_cat_to_onehot(), 4);
        assert_eq!(c.cat_smooth(), 10.0);
        assert_eq!(c.cat_l2(), 10.0);
        assert_eq!(c.max_cat_threshold(), 32);
        assert_eq!(c.min_data_per_group(), 100);
        let c = GbdtParams::new()
            .set("max_cat_threshold", 8.0)
            .unwrap()
            .set("cat_smooth", 0.0)
            .unwrap()
            .check()
            .unwrap();
        assert_eq!((c.max_cat_threshold(), c.cat_smooth()), (8, 0.0));
        for (name, bad) in [
            ("max_cat_to_onehot", 0.0),
            ("cat_smooth", -1.0),
            ("cat_l2", f64::NAN),
            ("max_cat_threshold", 0.5),
            ("min_data_per_group", 0.0),
        ] {
            let e = GbdtParams::new().set(name, bad).unwrap().check();
            assert!(e.unwrap_err().to_string().contains(name), "{name}");
        }
        assert_eq!(GbdtParams::new().check().unwrap().quantization(), None);
        let q = GbdtParams::new()
            .quantized_grad(8)
            .stochastic_rounding(false)
            .check()
            .unwrap()
            .quantization();
        let want = Quantization {
            bins: 8,
            stochastic: false,
            renew_leaf: false,
        };
        assert_eq!(q, Some(want));
        for (name, bad) in [
            ("use_quantized_grad", 2.0),
            ("stochastic_rounding", 0.5),
            ("num_grad_quant_bins", 1.0),
        ] {
            let e = GbdtParams::new().set(name, bad).unwrap().check();
            assert!(e.unwrap_err().to_string().contains(name), "{name}");
        }
        let c = GbdtParams::new().set("num_iterations", 7.0).unwrap();
        assert_eq!(c.check().unwrap().rounds(), 7);
        assert!(GbdtParams::new().max_bin(300).check().is_err());
        assert!(GbdtParams::new().feature_fraction(0.0).check().is_err());
        assert_eq!(
            GbdtParams::new()
                .set("num_leaves", 2.5)
                .unwrap()
                .check()
                .unwrap_err()
                .to_string(),
            "invalid parameter 'num_leaves': 2.5 must be an integer in [2, 131072]"
        );
        assert!(GbdtParams::new()
            .set("C", 1.0)
            .unwrap_err()
            .to_string()
            .contains("unknown for model gbdt"));
    }
}
