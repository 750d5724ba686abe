//! The partial-step API for workers in other processes (the Ray runner's
//! actors): no threads, no global state, messages as flat `f64` vectors.
//!
//! A driver-side [`Coordinator`] and one [`WorkerSession`] per worker, for
//! any family that implements [`crate::shard::Sharded`]:
//!
//! 1. [`price`] prices the one-stage plans (`tp`, `fused`, `hybrid`) with
//!    the family's pilot on a sample and the network term; [`plan()`] and
//!    [`pieces`] turn the chosen plan into pieces: whole groups, and cut
//!    groups in block-aligned pieces on ascending workers. Each worker gets
//!    a [`crate::shard::ShardSpec`] and the rows of its pieces, in the
//!    group-sorted order of a single-machine layout.
//! 2. The family's statistics rounds: [`WorkerSession::statistics`] on every
//!    worker, [`Coordinator::reduce`] into one message for all, as many
//!    rounds as the family declares; then [`WorkerSession::prepare`] builds
//!    each worker's layout with its groups' whole statistics.
//! 3. Each pass: [`WorkerSession::step`] runs the family's partial step on
//!    every piece, updates whole groups on the spot and returns the partial
//!    statistics of shared groups; [`Coordinator::combine`] adds them in
//!    piece order; [`WorkerSession::apply`] applies them to every replica of
//!    a shared group's units (replicas stay identical).
//! 4. [`WorkerSession::snapshot`] / [`WorkerSession::restore`]: the unit
//!    states (serde) after a pass, so a replaced worker resumes from the last
//!    completed pass.
//! 5. [`WorkerSession::models`] → [`Coordinator::finish`]: the fitted models.
//!
//! [`session`] and [`coordinator`] choose the family a spec names at run
//! time. Families that are not sharded run whole groups per worker
//! ([`whole`]), placed by the planner's `tp`.

pub mod any;
pub mod coordinator;
mod message;
pub mod place;
pub mod price;
pub mod session;
pub mod whole;

pub use any::{coordinator, session, AnyCoordinator, AnySession};
pub use coordinator::{run_local, Coordinator};
pub use place::{group_sorted, pieces, place_statistics_only, plan, shard_rows};
pub use session::WorkerSession;
