//! The gradient-boosted trees family: histogram GBDT with LightGBM's
//! parameters and defaults, leaf-wise growth, native missing values and
//! categorical features.
//!
//! * [`binning`] — quantile bins per feature, computed on a group's training
//!   rows (at most `max_bin` value bins plus one bin for NaN).
//! * [`categorical`] — a categorical feature's bins (its categories, then a
//!   null bin) and its splits: one-vs-rest, or LightGBM's sorted search.
//! * [`histogram`] — `(gradient, hessian, count)` sums per bin per feature
//!   over a leaf's rows, and the subtraction trick for siblings.
//! * [`split`] — the best numeric split of a leaf from its histogram (both directions
//!   for NaN), LightGBM's gain `G_L²/(H_L+λ) + G_R²/(H_R+λ) − G²/(H+λ)`.
//! * [`objective`] — the starting score, each round's gradients (quantized
//!   with `use_quantized_grad`) and the early-stopping metric.
//! * [`tree`] — a fitted tree (real-valued thresholds, default direction for
//!   NaN; category sets of categorical nodes).
//! * [`booster`] — one (group, config) booster as a state machine that asks for
//!   one histogram at a time, so a round can run in one call (whole group) or
//!   one split step per pass (group cut over workers).
//! * [`grouped`] — every booster of every group fitted together through the
//!   pass driver ([`crate::exec::run_passes`]).
//!
//! Hyper-parameters go through [`GbdtParams`] into a checked [`GbdtConfig`];
//! a fitted model is a [`GbdtModel`].

pub mod binning;
pub mod booster;
pub mod categorical;
pub mod family;
pub mod grouped;
pub mod histogram;
pub mod model;
pub mod objective;
pub mod params;
pub mod remote;
pub mod run;
pub mod split;
pub mod tree;

pub use family::{configs, Gbdt};
pub use model::{GbdtModel, PREDICT_BLOCK};
pub use params::{GbdtConfig, GbdtParams, PARAM_NAMES};
pub use tree::Tree;
