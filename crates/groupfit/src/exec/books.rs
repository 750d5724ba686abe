//! What the pass driver's workers record as groups step: each group's
//! time ([`GroupClock`]) and the run's progress ([`Books`], over the
//! [`Meter`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;
use std::time::Instant;

use super::progress::{Meter, OnProgress, Tally};
use super::step::{tally_group, PartialStep};

/// Per group, the nanoseconds its scans and updates took, summed over the
/// workers: two clock reads per group and pass (per step on a worker
/// stepping while others work, and for cut groups).
pub(super) struct GroupClock(Vec<AtomicU64>);

impl GroupClock {
    pub fn new(groups: usize) -> Self {
        GroupClock((0..groups).map(|_| AtomicU64::new(0)).collect())
    }

    /// Adds the time from `since` to `now` to group `g`.
    pub fn add(&self, g: usize, since: Instant, now: Instant) {
        self.0[g].fetch_add((now - since).as_nanos() as u64, Ordering::Relaxed);
    }

    /// Per group, seconds.
    pub fn seconds(&self) -> Vec<f64> {
        self.0
            .iter()
            .map(|ns| ns.load(Ordering::Relaxed) as f64 * 1e-9)
            .collect()
    }
}

/// Rows of a whole group from which its every step reads the clock for
/// progress (a smaller group's steps read it every 8 steps).
pub(super) const LONG_STEP_ROWS: usize = 4096;

/// What the workers record as groups step: each group's time and the
/// run's progress.
pub(super) struct Books<'a, 'b> {
    pub clock: GroupClock,
    pub meter: Meter<'a, 'b>,
}

impl<'a, 'b> Books<'a, 'b> {
    pub fn new<F: PartialStep>(
        family: &F,
        groups: &[RwLock<Vec<F::Unit>>],
        prices: Vec<f64>,
        models: usize,
        on: &'a mut OnProgress<'b>,
    ) -> Self {
        let mut tally = Tally::default();
        for (g, units) in groups.iter().enumerate() {
            tally_group(
                family,
                g,
                &units.read().unwrap(),
                prices[g],
                1.0,
                &mut tally,
            );
        }
        Books {
            clock: GroupClock::new(groups.len()),
            meter: Meter::new(prices, tally, models, on),
        }
    }

    /// Group `g`'s units before a step: their tally, to be taken away.
    pub fn before<F: PartialStep>(&self, family: &F, g: usize, units: &[F::Unit]) -> Tally {
        let mut t = Tally::default();
        tally_group(family, g, units, self.meter.price(g), -1.0, &mut t);
        t
    }

    /// Group `g`'s units after a step: adds their change since `before`
    /// to `local`, the worker's own tally (see [`Books::stepped`]).
    pub fn after<F: PartialStep>(
        &self,
        family: &F,
        g: usize,
        units: &[F::Unit],
        mut before: Tally,
        local: &mut Local,
    ) {
        tally_group(family, g, units, self.meter.price(g), 1.0, &mut before);
        local.tally.merge(&before);
    }

    /// Records group `g`'s time since `since`, and sends progress when due.
    pub fn stepped<F: PartialStep>(&self, family: &F, g: usize, since: Instant, local: &mut Local) {
        let now = Instant::now();
        self.clock.add(g, since, now);
        self.tick(family, now, local);
    }

    /// Adds the worker's `local` tally to the meter every 50 ms of its
    /// steps; when an event is due at `now`, sends it.
    pub fn tick<F: PartialStep>(&self, family: &F, now: Instant, local: &mut Local) {
        let due = self.meter.due(now);
        if due || local.next.is_none_or(|next| now >= next) {
            self.flush(local);
            local.next = Some(now + FLUSH_EVERY);
        }
        if due {
            self.meter.tick(family.expected_steps());
        }
    }

    /// Adds the worker's `local` tally to the meter (also at the end of its
    /// part of a stage, so the driver's events see every step).
    pub fn flush(&self, local: &mut Local) {
        self.meter.add(&std::mem::take(&mut local.tally));
    }
}

/// How often a worker adds its steps to the meter: half the time between
/// two events, so each event sees every worker's steps but the last 50 ms.
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// A worker's own progress tally, added to the meter every
/// [`FLUSH_EVERY`] (one lock per 50 ms, not per step).
#[derive(Default)]
pub(super) struct Local {
    tally: Tally,
    /// When it is next added.
    next: Option<Instant>,
}
