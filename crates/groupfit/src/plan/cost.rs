//! What the planner prices: a group's load ([`GroupLoad`]), the cost
//! model's constants ([`CostModel`], [`SizeCurve`]) and the network term
//! of remote workers ([`Network`]).

use std::ops::Range;

use serde::{Deserialize, Serialize};

/// What the planner knows about a group.
#[derive(Debug, Clone)]
pub struct GroupLoad {
    /// The group's rows in the layout.
    pub rows: Range<usize>,
    /// Units of the group still to be trained (0: the group takes no work).
    pub units: usize,
    /// Of its rows, those whose scan also sums second-order terms (the
    /// linear family's Hessian sample; see `PartialStep::heavy_rows`).
    pub heavy: usize,
    /// Updates its units still need, where the family knows (the MLP
    /// family's mini-batch steps; see `PartialStep::steps_left`), else 1.
    /// Every cost of the group is for all of them: a plan then places and
    /// prices the group's remaining work, so a group with thousands of
    /// steps left gets a worker of its own instead of one step a pass on
    /// every worker.
    pub steps: usize,
    /// Times a group cut over workers meets them per step: 1 on one
    /// machine; on remote workers, a booster's histogram reductions per
    /// round (about one per leaf). See [`LoadShape`].
    pub syncs: usize,
    /// The share of its rows one step scans: 1 for a pass over the group;
    /// an MLP's mini-batch over a group's rows is `batch / rows`. The
    /// rows of the pilot's layouts are already what a step scans, so 1 on
    /// one machine.
    pub scan: f64,
}

/// What a family says of a group's load before any of its units exist,
/// from its row count and the grid alone (the Ray runner's driver has no
/// features to build units from): the first pass's [`GroupLoad::heavy`],
/// [`GroupLoad::steps`] and [`GroupLoad::syncs`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadShape {
    /// Heavy rows of the whole group.
    pub heavy: usize,
    /// Steps its units take (the most of any config).
    pub steps: usize,
    /// Meetings per step when cut over remote workers.
    pub syncs: usize,
    /// The share of the group's rows one step scans (see [`GroupLoad::scan`]).
    pub scan: f64,
}

impl Default for LoadShape {
    fn default() -> LoadShape {
        LoadShape {
            heavy: 0,
            steps: 1,
            syncs: 1,
            scan: 1.0,
        }
    }
}

impl GroupLoad {
    /// The load of a group at `rows` with `units` units of this shape.
    pub fn shaped(rows: Range<usize>, units: usize, shape: LoadShape) -> GroupLoad {
        GroupLoad {
            rows,
            units,
            heavy: shape.heavy,
            steps: shape.steps,
            syncs: shape.syncs,
            scan: shape.scan,
        }
    }
}

impl GroupLoad {
    /// Nanoseconds per row of the group's pass under `c` (all its units):
    /// the heavy rows' extra spread over its rows, so that a shard of the
    /// group costs in proportion to its rows.
    pub(crate) fn per_row(&self, c: &CostModel) -> f64 {
        let heavy = if self.rows.is_empty() {
            0.0
        } else {
            self.heavy.min(self.rows.len()) as f64 / self.rows.len() as f64
        };
        let row = c
            .by_size
            .map_or(c.row_unit_ns, |curve| curve.at(self.rows.len()));
        self.steps.max(1) as f64 * self.scan * self.units as f64 * (row + heavy * c.heavy_unit_ns)
    }

    /// Times the group meets the other workers in its work when cut: its
    /// steps times its syncs per step.
    pub(crate) fn meets(&self) -> usize {
        self.steps.max(1) * self.syncs.max(1)
    }

    /// Nanoseconds of the group's pass that do not grow with its rows: one
    /// update per unit and one shard.
    pub(crate) fn fixed(&self, c: &CostModel) -> f64 {
        if self.units == 0 || self.rows.is_empty() {
            return 0.0;
        }
        self.steps.max(1) as f64 * (self.units as f64 * c.apply_unit_us + c.shard_us) * 1e3
    }

    /// Estimated nanoseconds of the group's work (one pass, or all of its
    /// [`GroupLoad::steps`]) under `c`. With [`CostModel::uncalibrated`]
    /// this is rows times units times steps.
    pub(crate) fn cost(&self, c: &CostModel) -> f64 {
        self.rows.len() as f64 * self.per_row(c) + self.fixed(c)
    }
}

/// The cost model's constants, calibrated on the machine (see
/// [`crate::exec::calibrate`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    /// Nanoseconds to accumulate one unit over one row.
    pub row_unit_ns: f64,
    /// Extra nanoseconds per unit and heavy row ([`GroupLoad::heavy`]); 0
    /// for a family without heavy rows.
    #[serde(default)]
    pub heavy_unit_ns: f64,
    /// Microseconds to apply one unit's update (the family's step).
    pub apply_unit_us: f64,
    /// Microseconds of fixed cost per shard scanned.
    pub shard_us: f64,
    /// Microseconds per stage: waking the workers and the barrier at its end.
    pub stage_us: f64,
    /// Nanoseconds to combine one statistic of a cut group.
    pub combine_ns: f64,
    /// Statistics per unit (the family's `stats_len`).
    pub stats_len: usize,
    /// Bytes of state per unit between passes.
    pub unit_bytes: usize,
    /// Where a whole group's pass costs per row what its group's size
    /// makes it (the gbdt family: a whole booster grows a tree per pass,
    /// and a small group's split searches and per-leaf work weigh on few
    /// rows), the cost per unit-row by group size, used instead of
    /// `row_unit_ns`; `None`: every row costs `row_unit_ns` (see
    /// `PartialStep::time_whole_pass`).
    #[serde(default)]
    pub by_size: Option<SizeCurve>,
}

/// Nanoseconds per unit-row of a whole group's pass, timed at three group
/// sizes (ascending; two may be the same) and interpolated in the logarithm
/// of the size between them (constant outside).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SizeCurve {
    /// (rows of the group timed, its nanoseconds per unit-row), by rows.
    pub points: [(usize, f64); 3],
}

impl SizeCurve {
    /// Nanoseconds per unit-row of a group of `rows` rows.
    pub fn at(&self, rows: usize) -> f64 {
        let p = &self.points;
        if rows <= p[0].0 {
            return p[0].1;
        }
        for w in p.windows(2) {
            let ((ra, a), (rb, b)) = (w[0], w[1]);
            if rows <= rb {
                if rb <= ra {
                    return b;
                }
                let f = (rows as f64 / ra as f64).ln() / (rb as f64 / ra as f64).ln();
                return a + f * (b - a);
            }
        }
        p[2].1
    }
}

impl CostModel {
    /// Placeholder constants for fixed strategies, which never price plans:
    /// one nanosecond per unit-row, nothing else.
    pub fn uncalibrated(stats_len: usize, unit_bytes: usize) -> CostModel {
        CostModel {
            row_unit_ns: 1.0,
            heavy_unit_ns: 0.0,
            apply_unit_us: 0.0,
            shard_us: 0.0,
            stage_us: 0.0,
            combine_ns: 0.0,
            stats_len,
            unit_bytes,
            by_size: None,
        }
    }
}

/// The network between a driver and its remote workers, measured once per
/// run (the Ray runner: `_Driver.network`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// Microseconds of a round trip: a call to a worker and its answer.
    pub rtt_us: f64,
    /// Bytes per second from the driver to a worker and back.
    pub bytes_per_s: f64,
}

impl CostModel {
    /// The cost model of remote workers: a stage is two round trips (the
    /// step's call and answer, the combined statistics' call and answer)
    /// and a snapshot of a worker's units, `state_bytes` (every pass, for
    /// fault tolerance); each combined statistic (8 bytes) travels up from
    /// its piece and back down.
    pub fn over_network(&self, net: &Network, state_bytes: usize) -> CostModel {
        let bytes_per_s = net.bytes_per_s.max(1.0);
        CostModel {
            stage_us: 2.0 * net.rtt_us + state_bytes as f64 * 1e6 / bytes_per_s,
            combine_ns: self.combine_ns + 16.0 * 1e9 / bytes_per_s,
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_term_prices_round_trips_and_bytes() {
        let c = CostModel::uncalibrated(10, 8);
        // 500 us round trips, 1 GB/s: a stage is 1 ms plus 2 ms for a
        // snapshot of 2 MB; a statistic 16 ns more.
        let net = Network {
            rtt_us: 500.0,
            bytes_per_s: 1e9,
        };
        let r = c.over_network(&net, 2_000_000);
        assert_eq!(r.stage_us, 3000.0);
        assert!((r.combine_ns - 16.0).abs() < 1e-12);
        assert_eq!(r.row_unit_ns, c.row_unit_ns);
    }
}
