//! The linear family: L2-regularised logistic regression (binary) and ridge
//! regression, with sklearn's objective
//!
//! ```text
//! C * sum_i loss_i + 0.5 * ||w||^2        (intercept fitted, not penalised)
//! ```
//!
//! so `C` means what it means in `LogisticRegression(C=...)` and `Ridge(alpha=1/C)`.
//!
//! Hyper-parameters go through the [`LinearParams`] builder and are validated
//! once into a [`LinearConfig`]; a fitted model is a [`LinearModel`]. The solver
//! ([`solver`]) is a damped Newton method written as a partial-step API, so that
//! any plan (whole groups per worker, row ranges, shards on remote workers)
//! computes the same models.

pub mod family;
pub mod grouped;
pub mod kernel;
pub mod model;
pub mod newton;
pub mod params;
pub mod remote;
mod slots;
pub mod solver;
mod tiles;

pub use family::{configs, Linear};
pub use model::{LinearModel, OneHotCoef};
pub use params::{LinearConfig, LinearParams, PARAM_NAMES};
