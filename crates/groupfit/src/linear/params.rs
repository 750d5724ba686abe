//! The linear family's hyper-parameters: the `LinearParams` builder and
//! the checked `LinearConfig`.

use serde::{Deserialize, Serialize};

use crate::data::onehot::Cap;
use crate::error::{GroupfitError, Result};

/// The names `--param` accepts for the linear family.
pub const PARAM_NAMES: &[&str] = &["C", "tol", "max_iter", "max_cat", "min_cat_rows"];

/// Builder for the linear family's hyper-parameters.
///
/// ```
/// use groupfit::linear::LinearParams;
/// let cfg = LinearParams::new().c(0.1).tol(1e-8).check().unwrap();
/// assert_eq!(cfg.c(), 0.1);
/// assert!(LinearParams::new().c(-1.0).check().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LinearParams {
    c: f64,
    tol: f64,
    max_iter: u32,
    cap: Cap,
}

impl Default for LinearParams {
    fn default() -> Self {
        LinearParams {
            c: 1.0,
            tol: 1e-4,
            max_iter: 100,
            cap: Cap::default(),
        }
    }
}

impl LinearParams {
    /// Defaults: `C = 1`, `tol = 1e-4` (sklearn's default), `max_iter = 100`,
    /// `max_cat = 64`, `min_cat_rows = 1`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inverse regularisation strength (sklearn's `C`), > 0.
    pub fn c(mut self, c: f64) -> Self {
        self.c = c;
        self
    }

    /// Convergence tolerance: stop when the largest gradient entry (standardised
    /// coordinates) is at most `tol * C * n_rows`, i.e. `tol` on the gradient of
    /// the objective divided by `C * n_rows` (mean loss plus scaled penalty), the
    /// quantity sklearn's lbfgs compares with its `tol`. Newton converges
    /// quadratically, so the default stops well inside it.
    pub fn tol(mut self, tol: f64) -> Self {
        self.tol = tol;
        self
    }

    /// Most Newton iterations per model.
    pub fn max_iter(mut self, max_iter: u32) -> Self {
        self.max_iter = max_iter;
        self
    }

    /// Most categories of a categorical feature with a one-hot column of
    /// their own in a group (the most frequent); the others share one
    /// "other" column.
    pub fn max_cat(mut self, max_cat: usize) -> Self {
        self.cap.max_cat = max_cat;
        self
    }

    /// Fewest training rows of a category (in the group) with a one-hot
    /// column of its own; rarer ones share the "other" column.
    pub fn min_cat_rows(mut self, min_cat_rows: usize) -> Self {
        self.cap.min_cat_rows = min_cat_rows;
        self
    }

    /// Sets a parameter by its `--param` name.
    pub fn set(self, name: &str, value: f64) -> Result<Self> {
        Ok(match name {
            "C" => self.c(value),
            "tol" => self.tol(value),
            "max_cat" | "min_cat_rows" => Self {
                cap: self.cap.set(name, value)?,
                ..self
            },
            "max_iter" => {
                if value.fract() != 0.0 || value < 1.0 || value > u32::MAX as f64 {
                    return Err(GroupfitError::param(
                        "max_iter",
                        format!("{value} is not a positive integer"),
                    ));
                }
                self.max_iter(value as u32)
            }
            other => {
                return Err(GroupfitError::param(
                    other,
                    format!(
                        "unknown for model linear (known: {})",
                        PARAM_NAMES.join(", ")
                    ),
                ))
            }
        })
    }

    /// Validates into a checked configuration.
    pub fn check(self) -> Result<LinearConfig> {
        if !(self.c.is_finite() && self.c > 0.0) {
            return Err(GroupfitError::param(
                "C",
                format!("{} must be a positive number", self.c),
            ));
        }
        if !(self.tol.is_finite() && self.tol > 0.0) {
            return Err(GroupfitError::param(
                "tol",
                format!("{} must be a positive number", self.tol),
            ));
        }
        if self.max_iter == 0 {
            return Err(GroupfitError::param("max_iter", "must be at least 1"));
        }
        let cap = self.cap.check()?;
        Ok(LinearConfig {
            c: self.c,
            tol: self.tol,
            max_iter: self.max_iter,
            cap,
        })
    }
}

/// Validated hyper-parameters of one linear model (one grid point).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinearConfig {
    c: f64,
    tol: f64,
    max_iter: u32,
    #[serde(default)]
    cap: Cap,
}

impl LinearConfig {
    /// Inverse regularisation strength.
    pub fn c(&self) -> f64 {
        self.c
    }
    /// Convergence tolerance.
    pub fn tol(&self) -> f64 {
        self.tol
    }
    /// Iteration limit.
    pub fn max_iter(&self) -> u32 {
        self.max_iter
    }
    /// Which categories get one-hot columns (`max_cat`, `min_cat_rows`).
    pub fn cap(&self) -> Cap {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_validate_once() {
        assert!(LinearParams::new().c(0.0).check().is_err());
        assert!(LinearParams::new().tol(f64::NAN).check().is_err());
        let e = LinearParams::new().set("alpha", 1.0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid parameter 'alpha': unknown for model linear (known: C, tol, max_iter, max_cat, min_cat_rows)"
        );
        let cfg = LinearParams::new()
            .set("max_iter", 7.0)
            .unwrap()
            .check()
            .unwrap();
        assert_eq!(cfg.max_iter(), 7);
        let cfg = LinearParams::new()
            .set("max_cat", 3.0)
            .unwrap()
            .set("min_cat_rows", 5.0)
            .unwrap()
            .check()
            .unwrap();
        assert_eq!((cfg.cap().max_cat, cfg.cap().min_cat_rows), (3, 5));
        assert_eq!(LinearParams::new().check().unwrap().cap(), Cap::default());
        assert!(LinearParams::new().set("max_cat", 0.0).is_err());
        assert!(LinearParams::new().set("min_cat_rows", 1.5).is_err());
    }
}
