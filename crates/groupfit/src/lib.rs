//! # groupfit
//!
//! GROUP BY for machine-learning training: one model per group (and per
//! hyper-parameter config), all trained together in shared passes over a
//! group-sorted copy of the data, with predictions routed to each row's group.
//!
//! ## Quick start
//!
//! ```no_run
//! use groupfit::job::{train, Progress, TrainSpec};
//!
//! let spec = TrainSpec {
//!     params: vec!["C=0.01,0.1,1,10".into()],
//!     ..TrainSpec::new("train.parquet", vec!["group".into()], "label")
//! };
//! let out = train(&spec, &mut |p: Progress| {
//!     eprintln!("{} {:.0}%", p.stage.name(), 100.0 * p.fraction())
//! })
//! .unwrap();
//! println!("{} groups, mean validation log-loss {:?}", out.summary.groups, out.summary.valid_logloss);
//! out.bundle.save(std::path::Path::new("model.gfm")).unwrap();
//! ```
//!
//! ## Map of the crate
//!
//! A module imports only modules in its own layer or below.
//!
//! | layer | modules | holds |
//! |---|---|---|
//! | 0 | [`error`] | the one error type |
//! | 1 | [`util`] (`par`, `trace`, `fs`), [`math`], [`codec`] | threads, tracing, atomic files; vector math; float arrays of the model file |
//! | 2 | [`data`], [`metrics`], [`tune`], [`plan`] | ingest, keys, layouts; validation scores; grids; plans and the cost model |
//! | 3 | [`exec`] | the pass driver, calibration, the `PartialStep` trait |
//! | 4 | [`family`] | the `Family` trait and the data it fits |
//! | 5 | [`linear`], [`gbdt`], [`mlp`] | each family: params, kernels, fitted model, partial step |
//! | 6 | [`store`], [`registry`] | the model bundle and routed predict; the families by name |
//! | 7 | [`remote`], [`job`], [`report`] | the distributed protocol; `train`, `explain` and `predict` end to end; the HTML report |
//!
//! `docs/architecture.md` in the repository describes each module.

#![warn(missing_docs)]

pub mod codec;
pub mod data;
pub mod error;
pub mod exec;
pub mod family;
pub mod gbdt;
pub mod job;
pub mod linear;
pub mod math;
pub mod metrics;
pub mod mlp;
pub mod plan;
pub mod registry;
pub mod remote;
pub mod report;
pub mod shard;
pub mod store;
pub mod tune;
pub mod util;

pub use error::{GroupfitError, Result};
