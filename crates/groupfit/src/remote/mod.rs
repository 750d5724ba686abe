//! The partial-step API for workers in other processes (the Ray runner's
//! actors): no threads, no global state, messages as flat `f64` vectors.
//!
//! A driver-side [`Coordinator`] and one [`WorkerSession`] per worker:
//!
//! 1. [`place()`] cuts the training groups into [`Piece`]s: small groups whole on
//!    one worker (largest first to the least-loaded worker), large groups and
//!    the global pseudo-group cut into one block-aligned piece per worker.
//!    Each worker gets a [`ShardSpec`] and the rows of its pieces, in the
//!    group-sorted order of a single-machine layout.
//! 2. Standardisation uses every group's statistics over all workers:
//!    [`WorkerSession::moments`] → [`Coordinator::reduce_moments`] (counts and
//!    sums: imputation values, means) → [`WorkerSession::deviations`] →
//!    [`Coordinator::reduce_deviations`] (scales) → [`WorkerSession::prepare`].
//!    A worker's blocks are then exactly the blocks the native runner builds
//!    (same rows, same statistics, same block numbers, so the same Hessian
//!    sample).
//! 3. Each pass: [`WorkerSession::step`] accumulates every active unit over its
//!    pieces, updates whole groups on the spot and returns the partial
//!    statistics of shared groups; [`Coordinator::combine`] adds them in piece
//!    order; [`WorkerSession::apply`] applies the combined statistics to every
//!    replica of a shared group's units (replicas stay identical).
//! 4. [`WorkerSession::snapshot`] / [`WorkerSession::restore`]: the unit states
//!    after a pass, so a replaced worker resumes from the last completed pass.
//! 5. [`WorkerSession::models`] → [`Coordinator::finish`]: the fitted models.
//!
//! Every message is a `Vec<f64>` (group ids and counts are small integers,
//! exact in `f64`); the caller moves them as bytes.

pub mod coordinator;
mod message;
pub mod place;
pub mod session;
pub mod whole;

pub use coordinator::{run_local, Coordinator, RemoteUnit};
pub use place::{group_sorted, place, shard_rows, Piece, ShardSpec, MIN_SHARD_ROWS};
pub use session::WorkerSession;
