//! # groupfit
//!
//! GROUP BY for machine-learning training: one model per group (and per
//! hyper-parameter config), all trained together in shared passes over a
//! group-sorted copy of the data, with predictions routed to each row's group.
//!
//! ## Quick start
//!
//! ```no_run
//! use groupfit::job::{train, TrainSpec, Event};
//!
//! let spec = TrainSpec {
//!     params: vec!["C=0.01,0.1,1,10".into()],
//!     ..TrainSpec::new("train.parquet", vec!["group".into()], "label")
//! };
//! let out = train(&spec, &mut |_e: Event| {}).unwrap();
//! println!("{} groups, mean validation log-loss {:?}", out.summary.groups, out.summary.valid_logloss);
//! out.bundle.save(std::path::Path::new("model.gfm")).unwrap();
//! ```
//!
//! ## Map of the crate
//!
//! * [`data`] — Parquet ingest, group encoding, the group-sorted layout.
//! * [`family`] — the interface every model family implements.
//! * [`linear`] — the linear family: params, fitted model, Newton partial steps.
//! * [`mlp`] — the MLP family: params, fitted model, mini-batch partial steps.
//! * [`plan`] — work units, shards and the strategies that place them.
//! * [`exec`] — the pass driver and the partial-step trait families implement.
//! * [`tune`] — hyper-parameter grids.
//! * [`metrics`] — validation metrics.
//! * [`store`] — the model bundle file and prediction routing.
//! * [`job`] — `train` and `predict` end to end.
//! * [`error`] — the one error type.

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
pub mod store;
pub mod tune;
pub mod util;

pub use error::{GroupfitError, Result};
