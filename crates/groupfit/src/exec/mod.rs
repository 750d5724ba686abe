//! Running plans: the pass driver every model family plugs into.
//!
//! A family implements [`PartialStep`], the partial-step API as a trait.
//! [`run_passes`] then runs passes under any [`crate::plan::Plan`] until no
//! unit is active, and [`explain`] prices every strategy's plan without
//! training. Families own no threads and no global state, so the same calls
//! run on remote workers.

mod barrier;
mod books;
pub mod calibrate;
mod driver;
mod explain;
pub mod progress;
mod step;

pub use driver::{run_passes, RunReport};
pub use explain::{explain, Explain, StrategyPlan};
pub use progress::{OnProgress, Progress, Sequence, Stage, UnitProgress};
pub use step::{add_stats, PartialStep};
