//! The partial-step API a model family implements to run in the pass
//! driver: `accumulate` (partial statistics of units over a row range),
//! `combine` (statistics add up) and `apply` (the update from a unit's full
//! statistics), with the helpers that count a group's active units.

use std::ops::Range;
use std::sync::RwLock;

use super::progress::{Tally, UnitProgress};
use crate::plan::GroupLoad;

/// The partial-step API of a model family.
pub trait PartialStep: Sync {
    /// State of one (group, config) unit between passes.
    type Unit: Send + Sync;
    /// Per-worker buffers.
    type Scratch: Send;

    /// Row alignment of shard cuts inside a group (the layout's block size).
    fn align(&self) -> usize {
        1
    }
    /// Length of one unit's statistics buffer.
    fn stats_len(&self) -> usize;
    /// A fresh scratch buffer for one worker.
    fn scratch(&self) -> Self::Scratch;
    /// Whether the unit needs another pass.
    fn is_active(&self, unit: &Self::Unit) -> bool;
    /// Adds the partial statistics of the active `units` of `group` (each with
    /// its config index) over `rows` into `out`: one [`PartialStep::stats_len`]
    /// slice per unit, in order. A family reads the rows once for all units.
    fn accumulate(
        &self,
        group: usize,
        units: &[(usize, &Self::Unit)],
        rows: Range<usize>,
        out: &mut [f64],
        scratch: &mut Self::Scratch,
    );
    /// Adds `from` into `into`.
    fn combine(&self, into: &mut [f64], from: &[f64]) {
        add_stats(into, from);
    }
    /// Of the rows `rows` of `group`, how many cost more than the others to
    /// scan: the linear family sums the Hessian over a fixed sample of a
    /// large group's blocks (every block of a small group), the gradient over
    /// every row. The planner prices them with [`crate::plan::CostModel::heavy_unit_ns`].
    /// 0 (the default): every row costs the same.
    fn heavy_rows(&self, _group: usize, _rows: Range<usize>) -> usize {
        0
    }
    /// Bytes of state one unit keeps between passes (the planner's memory estimate).
    fn unit_bytes(&self) -> usize {
        std::mem::size_of::<Self::Unit>() + 8 * self.stats_len()
    }
    /// A copy of `unit` (config `k` of its group) for the planner's pilot
    /// run, in a state typical of a pass: the pilot times
    /// [`PartialStep::accumulate`] on these copies and updates one with
    /// [`PartialStep::apply`]. `None` (the default) times `accumulate` on the
    /// units themselves and prices updates from `stats_len`.
    fn pilot_unit(&self, _k: usize, _unit: &Self::Unit) -> Option<Self::Unit> {
        None
    }
    /// How many more updates `unit` (config `k` of `group`) needs, where the
    /// family knows it in advance (the MLP family: its mini-batch steps
    /// left); 1 (the default) where it does not (a unit that stops at a
    /// tolerance). The planner prices a group's remaining work with it.
    fn steps_left(&self, _group: usize, _k: usize, _unit: &Self::Unit) -> usize {
        1
    }
    /// Where `unit` (config `k` of `group`) stands, in its steps, for
    /// progress reports: steps taken and steps to come. The default knows
    /// no steps taken, and [`PartialStep::steps_left`] to come.
    fn progress(&self, group: usize, k: usize, unit: &Self::Unit) -> UnitProgress {
        if self.is_active(unit) {
            UnitProgress::known(0.0, self.steps_left(group, k, unit) as f64)
        } else {
            UnitProgress::finished(0.0)
        }
    }
    /// The family's estimate of the steps a unit takes in all, where
    /// [`PartialStep::progress`] leaves them to it
    /// ([`UnitProgress::estimated`]), before any unit is done; then the
    /// units done replace it (their mean steps, weighted by price).
    fn expected_steps(&self) -> f64 {
        1.0
    }
    /// How many updates a whole group's units may take, one after another,
    /// in one pass: its rows are in cache and no other worker's statistics
    /// are awaited, so the pass driver scans and updates them again at once
    /// (each unit takes the same steps as over several passes; cut groups
    /// take one step a pass). 1 (the default): one update per pass, so
    /// progress is reported after each.
    fn whole_steps(&self) -> usize {
        1
    }
    /// Where a whole group's pass costs per row what its group's size makes
    /// it (a gbdt booster's round: split searches and per-leaf work weigh
    /// on a small group's few rows), runs the next whole pass of the active
    /// units among `units` (all of `group`'s units; `rows` all of its rows)
    /// and returns its seconds. The planner times three groups of different
    /// sizes this way and prices rows by group size ([`crate::plan::CostModel::by_size`]). The pass is real progress, not repeated:
    /// the units end where the pass driver's next pass would take them.
    /// `None` (the default): a row costs the same in every group.
    fn time_whole_pass(
        &self,
        _group: usize,
        _units: &mut [Self::Unit],
        _rows: Range<usize>,
        _scratch: &mut Self::Scratch,
    ) -> Option<f64> {
        None
    }
    /// Updates `unit` from its statistics over all of the group's rows.
    fn apply(
        &self,
        group: usize,
        k: usize,
        unit: &mut Self::Unit,
        stats: &mut [f64],
        scratch: &mut Self::Scratch,
    );
    /// Updates the units `units[k]`, `k` in `ks`, of `group` from their
    /// statistics: consecutive [`PartialStep::stats_len`] slices of `stats`,
    /// in the order of `ks`. The default calls [`PartialStep::apply`] for
    /// each; a family may update them together, as long as each unit ends
    /// where `apply` alone would take it.
    fn apply_group(
        &self,
        group: usize,
        units: &mut [Self::Unit],
        ks: &[usize],
        stats: &mut [f64],
        scratch: &mut Self::Scratch,
    ) {
        let len = self.stats_len();
        for (&k, st) in ks.iter().zip(stats.chunks_mut(len)) {
            self.apply(group, k, &mut units[k], st, scratch);
        }
    }
}

/// The planner's view of each group: its rows, active units, heavy rows
/// and steps left.
pub(crate) fn group_loads(
    rows: &[Range<usize>],
    active: &[usize],
    heavy: &[usize],
    steps: &[usize],
) -> Vec<GroupLoad> {
    rows.iter()
        .zip(active)
        .zip(heavy)
        .zip(steps)
        .map(|(((r, &u), &h), &st)| GroupLoad {
            rows: r.clone(),
            units: u,
            heavy: h,
            steps: st,
            syncs: 1,
            scan: 1.0,
        })
        .collect()
}

/// Per group, the most steps any of its active units still needs
/// ([`PartialStep::steps_left`]; 1 for a group without active units).
pub(crate) fn steps_counts<F: PartialStep>(
    family: &F,
    groups: &[RwLock<Vec<F::Unit>>],
) -> Vec<usize> {
    groups
        .iter()
        .enumerate()
        .map(|(g, units)| {
            units
                .read()
                .unwrap()
                .iter()
                .enumerate()
                .filter(|(_, u)| family.is_active(u))
                .map(|(k, u)| family.steps_left(g, k, u))
                .max()
                .unwrap_or(1)
                .max(1)
        })
        .collect()
}

/// Heavy rows of each group ([`PartialStep::heavy_rows`]).
pub(crate) fn heavy_counts<F: PartialStep>(family: &F, rows: &[Range<usize>]) -> Vec<usize> {
    rows.iter()
        .enumerate()
        .map(|(g, r)| family.heavy_rows(g, r.clone()))
        .collect()
}

/// Active units per group.
pub(crate) fn active_counts<F: PartialStep>(
    family: &F,
    groups: &[RwLock<Vec<F::Unit>>],
) -> Vec<usize> {
    groups.iter().map(|g| count_active(family, g)).collect()
}

/// Active units of one group.
pub(crate) fn count_active<F: PartialStep>(family: &F, group: &RwLock<Vec<F::Unit>>) -> usize {
    group
        .read()
        .unwrap()
        .iter()
        .filter(|u| family.is_active(u))
        .count()
}

/// The active units of one group, with their config indices.
pub(crate) fn active_units<'u, F: PartialStep>(
    family: &F,
    units: &'u [F::Unit],
) -> Vec<(usize, &'u F::Unit)> {
    units
        .iter()
        .enumerate()
        .filter(|(_, u)| family.is_active(u))
        .collect()
}

/// Adds the partial statistics `from` into `into`, element by element (the
/// default [`PartialStep::combine`]).
pub fn add_stats(into: &mut [f64], from: &[f64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

/// The priced progress of a group's units (see [`PartialStep::progress`]),
/// added to `tally` with `sign` (-1 takes it away).
pub(crate) fn tally_group<F: PartialStep>(
    family: &F,
    group: usize,
    units: &[F::Unit],
    price: f64,
    sign: f64,
    tally: &mut Tally,
) {
    for (k, u) in units.iter().enumerate() {
        tally.add(
            family.progress(group, k, u),
            price,
            !family.is_active(u),
            sign,
        );
    }
}
