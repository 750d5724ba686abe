//! Plans: which worker computes which rows of which group, and what that costs.
//!
//! A *work unit* is one (group, config) model. Every pass over the data asks,
//! for each group with active units, for the partial statistics of those units
//! over the group's rows. A [`Plan`] cuts those rows into [`Shard`]s and gives
//! each worker a list of shards, in one or more *stages*; a group cut into
//! several shards has its partial statistics combined (in row order) at the end
//! of its stage, before its update. Strategies differ only in how they cut and
//! place, never in what is computed, so every plan gives the same models (up to
//! floating-point summation order).
//!
//! * [`Strategy::Tp`] — task parallel: whole groups, largest cost first, each to
//!   the least-loaded worker (LPT); each worker scans its groups in row order.
//!   One stage.
//! * [`Strategy::Dp`] — data parallel: each group in turn, its rows split over
//!   all workers; one stage per group, so a reduction per group per pass.
//! * [`Strategy::Fused`] — workers take equal-cost contiguous ranges of the
//!   group-sorted rows and advance every group in their range in one scan; at
//!   most `workers - 1` groups are cut. One stage.
//! * [`Strategy::Hybrid`] — wrap-around partitioning (Kingpin): groups by size,
//!   largest first, a group of `n_g` of `n` rows cut into `ceil(n_g * p / n)`
//!   shards on as many least-loaded workers; one stage.
//! * [`Strategy::Auto`] — every candidate plan priced by the [`CostModel`]
//!   ([`Plan::estimate`]), the cheapest wins.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::{GroupfitError, Result};

mod cost;
pub use cost::{CostModel, GroupLoad, LoadShape, Network, SizeCurve};

/// How to spread the work of a pass over workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Let the planner choose with its cost model.
    Auto,
    /// Task parallel: whole groups per worker.
    Tp,
    /// Data parallel: every group split over all workers, one group at a time.
    Dp,
    /// Row ranges of the group-sorted data per worker, every model in one scan.
    Fused,
    /// Small groups whole, large groups sharded (wrap-around), one scan per worker.
    Hybrid,
}

impl Strategy {
    /// The fixed strategies, in the order `explain` lists them.
    pub const FIXED: [Strategy; 4] = [
        Strategy::Tp,
        Strategy::Dp,
        Strategy::Fused,
        Strategy::Hybrid,
    ];

    /// The fixed strategies of one stage a pass: what remote workers run
    /// (each pass is one step on every worker, then one combine).
    pub const ONE_STAGE: [Strategy; 3] = [Strategy::Tp, Strategy::Fused, Strategy::Hybrid];

    /// Parses `auto`, `tp`, `dp`, `fused`, `hybrid`.
    pub fn parse(s: &str) -> Result<Strategy> {
        match s {
            "auto" => Ok(Strategy::Auto),
            "tp" => Ok(Strategy::Tp),
            "dp" => Ok(Strategy::Dp),
            "fused" => Ok(Strategy::Fused),
            "hybrid" => Ok(Strategy::Hybrid),
            other => Err(GroupfitError::arg(format!(
                "unknown strategy '{other}' (expected auto, tp, dp, fused or hybrid)"
            ))),
        }
    }

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Auto => "auto",
            Strategy::Tp => "tp",
            Strategy::Dp => "dp",
            Strategy::Fused => "fused",
            Strategy::Hybrid => "hybrid",
        }
    }
}

/// A range of rows of one group, computed by one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The group.
    pub group: usize,
    /// Rows, as indices into the group-sorted layout.
    pub rows: Range<usize>,
    /// Whether the shard is the whole group (so its worker also applies the update).
    pub whole: bool,
}

/// For each worker, its shards in scan order.
pub type Stage = Vec<Vec<Shard>>;

/// Shards per worker, in stages, for one strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The strategy this plan implements (never `Auto`).
    pub strategy: Strategy,
    /// Stages run one after another; cut groups are reduced and updated at the
    /// end of their stage. Every stage has one entry per worker.
    pub stages: Vec<Stage>,
}

/// A plan's estimated cost of one pass with every current unit active, or,
/// where the family knows how many updates its units still need
/// ([`GroupLoad::steps`]), of all of them: a cut group then meets the other
/// workers once a step, and a whole group steps on by itself.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Seconds of useful work per worker (work divided by workers).
    pub compute_s: f64,
    /// Seconds of synchronisation: stage barriers and the serial reduction and
    /// update of cut groups.
    pub sync_s: f64,
    /// Seconds workers wait for the slowest one (load imbalance).
    pub idle_s: f64,
    /// `compute_s + sync_s + idle_s`: the estimated wall time of a pass.
    pub total_s: f64,
    /// Bytes of model state (units) plus partial statistics of cut groups.
    pub state_bytes: usize,
    /// Groups computed whole by one worker.
    pub groups_whole: usize,
    /// Groups cut over several workers.
    pub groups_cut: usize,
    /// Stages (reductions) per pass.
    pub stages: usize,
}

impl Plan {
    /// Builds the plan for a fixed `strategy` over `workers` workers; a group
    /// is only cut at multiples of `align` rows from its first row. `Auto`
    /// prices every fixed strategy with `cost` and keeps the cheapest.
    pub fn build(
        strategy: Strategy,
        loads: &[GroupLoad],
        workers: usize,
        align: usize,
        cost: &CostModel,
    ) -> Plan {
        let workers = workers.max(1);
        let align = align.max(1);
        match strategy {
            Strategy::Tp => Plan::task_parallel(loads, workers, cost),
            Strategy::Dp => Plan::data_parallel(loads, workers, align),
            Strategy::Fused => Plan::fused(loads, workers, align, cost),
            Strategy::Hybrid => Plan::hybrid(loads, workers, align, cost),
            Strategy::Auto => Plan::cheapest(&Strategy::FIXED, loads, workers, align, cost),
        }
    }

    /// The plan `auto` picks among the fixed strategies `among` ([`pick`]).
    pub fn cheapest(
        among: &[Strategy],
        loads: &[GroupLoad],
        workers: usize,
        align: usize,
        cost: &CostModel,
    ) -> Plan {
        let mut plans: Vec<Plan> = among
            .iter()
            .map(|&s| Plan::build(s, loads, workers, align, cost))
            .collect();
        let cands: Vec<(f64, usize)> = plans
            .iter()
            .map(|p| (p.estimate(loads, cost).total_s, p.jumps()))
            .collect();
        plans.swap_remove(pick(&cands))
    }

    /// Task parallel: longest-processing-time-first onto the least-loaded worker.
    fn task_parallel(loads: &[GroupLoad], workers: usize, c: &CostModel) -> Plan {
        let order = largest_first((0..loads.len()).filter(|&g| loads[g].units > 0), loads, c);
        let mut load = vec![0.0f64; workers];
        let mut plan = vec![Vec::new(); workers];
        for g in order {
            let w = least_loaded(&load);
            load[w] += loads[g].cost(c);
            plan[w].push(Shard {
                group: g,
                rows: loads[g].rows.clone(),
                whole: true,
            });
        }
        in_row_order(&mut plan);
        Plan {
            strategy: Strategy::Tp,
            stages: vec![plan],
        }
    }

    /// Data parallel: one stage per group, its rows in `workers` aligned pieces.
    fn data_parallel(loads: &[GroupLoad], workers: usize, align: usize) -> Plan {
        let mut stages = Vec::new();
        for (g, l) in loads.iter().enumerate() {
            if l.units == 0 || l.rows.is_empty() {
                continue;
            }
            let mut stage = vec![Vec::new(); workers];
            let pieces = cut_even(l.rows.clone(), workers, align);
            // One group per stage: whole when it is not cut.
            let whole = pieces.len() == 1;
            for (w, rows) in pieces.into_iter().enumerate() {
                stage[w].push(Shard {
                    group: g,
                    rows,
                    whole,
                });
            }
            stages.push(stage);
        }
        Plan {
            strategy: Strategy::Dp,
            stages,
        }
    }

    /// Fused: equal-cost contiguous ranges of the group-sorted rows.
    fn fused(loads: &[GroupLoad], workers: usize, align: usize, c: &CostModel) -> Plan {
        let total: f64 = loads.iter().map(|l| l.cost(c)).sum();
        let budget = total / workers as f64;
        let mut plan = vec![Vec::new(); workers];
        let mut w = 0;
        let mut used = 0.0;
        for (g, l) in loads.iter().enumerate() {
            if l.units == 0 || l.rows.is_empty() {
                continue;
            }
            let per_row = l.per_row(c).max(f64::MIN_POSITIVE);
            // The worker that starts a group pays its fixed cost.
            used += l.fixed(c);
            let mut start = l.rows.start;
            while start < l.rows.end {
                let room = if w + 1 == workers {
                    f64::INFINITY
                } else {
                    (budget - used).max(0.0)
                };
                let fit = (room / per_row).floor();
                let take = if fit >= (l.rows.end - start) as f64 {
                    l.rows.end - start
                } else {
                    (fit as usize / align) * align
                };
                if take > 0 {
                    plan[w].push(Shard {
                        group: g,
                        rows: start..start + take,
                        whole: false,
                    });
                    used += take as f64 * per_row;
                    start += take;
                }
                if start < l.rows.end {
                    w += 1;
                    used = 0.0;
                }
            }
        }
        mark_whole(&mut plan, loads.len());
        Plan {
            strategy: Strategy::Fused,
            stages: vec![plan],
        }
    }

    /// Hybrid: wrap-around partitioning. Groups largest first; a group holding
    /// `n_g` of the `n` rows is cut into `ceil(n_g * p / n)` aligned shards,
    /// which go to as many least-loaded workers, in row order by worker.
    fn hybrid(loads: &[GroupLoad], workers: usize, align: usize, c: &CostModel) -> Plan {
        let total: f64 = loads.iter().map(|l| l.cost(c)).sum();
        let order = largest_first(
            (0..loads.len()).filter(|&g| loads[g].units > 0 && !loads[g].rows.is_empty()),
            loads,
            c,
        );
        let mut load = vec![0.0f64; workers];
        let mut plan = vec![Vec::new(); workers];
        for g in order {
            let l = &loads[g];
            let pieces = ((l.cost(c) * workers as f64 / total).ceil() as usize).clamp(1, workers);
            let cuts = cut_even(l.rows.clone(), pieces, align);
            let fixed = l.fixed(c) / cuts.len() as f64;
            // The least-loaded workers, one piece each, pieces in row
            // order on ascending workers (as remote workers combine them).
            let mut to: Vec<usize> = (0..workers).collect();
            to.sort_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)));
            to.truncate(cuts.len());
            to.sort_unstable();
            for (rows, w) in cuts.into_iter().zip(to) {
                load[w] += rows.len() as f64 * l.per_row(c) + fixed;
                plan[w].push(Shard {
                    group: g,
                    rows,
                    whole: false,
                });
            }
        }
        in_row_order(&mut plan);
        mark_whole(&mut plan, loads.len());
        Plan {
            strategy: Strategy::Hybrid,
            stages: vec![plan],
        }
    }

    /// Shards that a worker scans right after a shard they do not follow in
    /// the layout (another group's rows in between): each restarts the
    /// sequential reads the cost model assumes, at a price it does not
    /// model. Fused plans have none; task-parallel plans of many small
    /// groups have one per group.
    pub fn jumps(&self) -> usize {
        self.stages
            .iter()
            .flatten()
            .map(|shards| {
                shards
                    .windows(2)
                    .filter(|w| w[1].rows.start != w[0].rows.end)
                    .count()
            })
            .sum()
    }

    /// The largest per-worker cost (rows times units), summed over stages.
    pub fn makespan(&self, loads: &[GroupLoad]) -> f64 {
        self.stages
            .iter()
            .map(|stage| {
                stage
                    .iter()
                    .map(|ws| {
                        ws.iter()
                            .map(|s| (s.rows.len() * loads[s.group].units) as f64)
                            .sum::<f64>()
                    })
                    .fold(0.0, f64::max)
            })
            .sum()
    }

    /// Every shard of the plan.
    pub fn shards(&self) -> impl Iterator<Item = &Shard> {
        self.stages.iter().flatten().flatten()
    }

    /// How many shards each group is cut into (0: no work this pass).
    pub fn pieces(&self, n_groups: usize) -> Vec<usize> {
        let mut pieces = vec![0usize; n_groups];
        for s in self.shards() {
            pieces[s.group] += 1;
        }
        pieces
    }

    /// Whether no stage gives work to more than one worker (e.g. one group
    /// left, as in the last mini-batch steps of an MLP run): such a pass runs
    /// on the calling thread alone, with no barriers.
    pub fn single_worker(&self) -> bool {
        self.stages
            .iter()
            .all(|stage| stage.iter().filter(|w| !w.is_empty()).count() <= 1)
    }

    /// The estimated cost of one pass of this plan under `cost`.
    pub fn estimate(&self, loads: &[GroupLoad], cost: &CostModel) -> Estimate {
        let workers = self.stages.first().map_or(1, Vec::len).max(1);
        let pieces = self.pieces(loads.len());
        // Run on one thread, a plan has no barriers.
        let single = self.single_worker();
        let (mut compute, mut idle, mut sync) = (0.0, 0.0, 0.0);
        for stage in &self.stages {
            let per_worker: Vec<f64> = stage
                .iter()
                .map(|shards| {
                    shards
                        .iter()
                        .map(|s| {
                            let l = &loads[s.group];
                            let apply = if s.whole {
                                l.units as f64 * cost.apply_unit_us
                            } else {
                                0.0
                            };
                            s.rows.len() as f64 * l.per_row(cost) * 1e-9
                                + l.steps.max(1) as f64 * (cost.shard_us + apply) * 1e-6
                        })
                        .sum()
                })
                .collect();
            let max = per_worker.iter().copied().fold(0.0, f64::max);
            let mean = per_worker.iter().sum::<f64>() / workers as f64;
            compute += mean;
            idle += max - mean;
            // A stage meets once a pass; a cut group takes one step a pass,
            // so the stage meets once per step of its cut groups (and per
            // sync of each step, see `GroupLoad::syncs`).
            let meets = stage
                .iter()
                .flatten()
                .filter(|s| !s.whole)
                .map(|s| loads[s.group].meets())
                .max()
                .unwrap_or(1);
            if !single {
                sync += meets as f64 * cost.stage_us * 1e-6;
            }
            // The cut groups of this stage are reduced and updated serially.
            let mut seen = vec![false; loads.len()];
            for s in stage.iter().flatten().filter(|s| !s.whole) {
                if !std::mem::replace(&mut seen[s.group], true) {
                    let l = &loads[s.group];
                    let u = l.units as f64;
                    // Statistics are combined at every meeting, units
                    // updated once a step.
                    sync += l.meets() as f64
                        * (pieces[s.group] as f64 * u * cost.stats_len as f64 * cost.combine_ns)
                        * 1e-9
                        + l.steps.max(1) as f64 * u * cost.apply_unit_us * 1e-6;
                }
            }
        }
        let units: usize = loads.iter().map(|l| l.units).sum();
        let cut: Vec<usize> = (0..loads.len()).filter(|&g| pieces[g] > 1).collect();
        let partial_bytes: usize = cut
            .iter()
            .map(|&g| pieces[g] * loads[g].units * cost.stats_len * 8)
            .sum();
        Estimate {
            compute_s: compute,
            sync_s: sync,
            idle_s: idle,
            total_s: compute + sync + idle,
            state_bytes: units * cost.unit_bytes + partial_bytes,
            groups_whole: pieces.iter().filter(|&&p| p == 1).count(),
            groups_cut: cut.len(),
            stages: self.stages.len(),
        }
    }
}

/// Estimates within this fraction of the cheapest are ties for `auto`: the
/// cost model is not that precise, and a tie goes to the plan with the
/// fewest [`Plan::jumps`]: an in-order scan is faster at equal estimates
/// (see docs/benchmarks.md).
pub const TIE: f64 = 0.005;

/// The plan `auto` runs among candidates `(estimated seconds, jumps)`: the
/// cheapest estimate, where those within [`TIE`] of it count as equal and the
/// fewest jumps wins among them (then the cheaper estimate, then the first).
pub fn pick(cands: &[(f64, usize)]) -> usize {
    let best = cands.iter().map(|c| c.0).fold(f64::INFINITY, f64::min);
    (0..cands.len())
        .filter(|&i| cands[i].0 <= best * (1.0 + TIE))
        .min_by(|&a, &b| {
            cands[a]
                .1
                .cmp(&cands[b].1)
                .then(cands[a].0.total_cmp(&cands[b].0))
                .then(a.cmp(&b))
        })
        .unwrap_or(0)
}

/// `groups` by estimated cost under `c`, largest first (lower index first on
/// ties); each cost is computed once.
fn largest_first(
    groups: impl Iterator<Item = usize>,
    loads: &[GroupLoad],
    c: &CostModel,
) -> Vec<usize> {
    let mut keyed: Vec<(f64, usize)> = groups.map(|g| (loads[g].cost(c), g)).collect();
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    keyed.into_iter().map(|(_, g)| g).collect()
}

/// The worker with the least load (the first on ties).
fn least_loaded(load: &[f64]) -> usize {
    (0..load.len())
        .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
        .unwrap_or(0)
}

/// `rows` in at most `pieces` near-equal ranges cut at multiples of `align`
/// from its start (fewer when the range is short).
fn cut_even(rows: Range<usize>, pieces: usize, align: usize) -> Vec<Range<usize>> {
    let n = rows.len();
    let blocks = n.div_ceil(align);
    let pieces = pieces.clamp(1, blocks.max(1));
    let mut out = Vec::with_capacity(pieces);
    let mut start = rows.start;
    for i in 0..pieces {
        let end_block = blocks * (i + 1) / pieces;
        let end = (rows.start + end_block * align).min(rows.end);
        if end > start {
            out.push(start..end);
            start = end;
        }
    }
    out
}

/// Puts each worker's shards in row order: placement (largest first) decides
/// who scans what, and each worker then reads the layout front to back.
fn in_row_order(stage: &mut Stage) {
    for shards in stage.iter_mut() {
        shards.sort_by_key(|s| s.rows.start);
    }
}

/// Marks a shard whole when no other shard of the stage has rows of its group.
fn mark_whole(stage: &mut Stage, n_groups: usize) {
    let mut pieces = vec![0usize; n_groups];
    for s in stage.iter().flatten() {
        pieces[s.group] += 1;
    }
    for s in stage.iter_mut().flatten() {
        s.whole = pieces[s.group] == 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(sizes: &[usize]) -> Vec<GroupLoad> {
        let mut start = 0;
        sizes
            .iter()
            .map(|&n| {
                let l = GroupLoad {
                    rows: start..start + n,
                    units: 1,
                    heavy: 0,
                    steps: 1,
                    syncs: 1,
                    scan: 1.0,
                };
                start += n;
                l
            })
            .collect()
    }

    /// A group of `big` rows (one unit, one step), then `n` groups of
    /// `rows` rows with `units` units of `steps` steps each.
    fn one_big_then_small(
        big: usize,
        n: usize,
        rows: usize,
        units: usize,
        steps: usize,
    ) -> Vec<GroupLoad> {
        let mut l = loads(&[big]);
        for i in 0..n {
            let start = big + i * rows;
            l.push(GroupLoad {
                rows: start..start + rows,
                units,
                heavy: 0,
                steps,
                syncs: 1,
                scan: 1.0,
            });
        }
        l
    }

    #[test]
    fn size_curve_interpolates_in_the_log_of_the_size() {
        let c = SizeCurve {
            points: [(100, 500.0), (10_000, 100.0), (1_000_000, 60.0)],
        };
        // Constant outside the points, the points themselves, and half way
        // in the logarithm: 1,000 rows is half way from 100 to 10,000.
        assert_eq!(c.at(1), 500.0);
        assert_eq!(c.at(100), 500.0);
        assert!((c.at(1_000) - 300.0).abs() < 1e-9);
        assert_eq!(c.at(10_000), 100.0);
        assert!((c.at(100_000) - 80.0).abs() < 1e-9);
        assert_eq!(c.at(5_000_000), 60.0);
        // Two points at the same size (the median group is the small one).
        let d = SizeCurve {
            points: [(100, 500.0), (100, 500.0), (10_000, 100.0)],
        };
        assert_eq!(d.at(100), 500.0);
        assert!((d.at(1_000) - 300.0).abs() < 1e-9);
        // A group priced by the curve: rows times units times its rate.
        let cost = CostModel {
            by_size: Some(c),
            ..CostModel::uncalibrated(1, 8)
        };
        let load = GroupLoad {
            rows: 0..1_000,
            units: 2,
            heavy: 0,
            steps: 1,
            syncs: 1,
            scan: 1.0,
        };
        assert!((load.cost(&cost) - 1_000.0 * 2.0 * 300.0).abs() < 1e-6);
    }

    #[test]
    fn a_group_with_many_steps_left_gets_a_worker_of_its_own() {
        // One batch of 256 rows with 100 steps left beside 300 groups of
        // 40 rows with 2: per pass the batch is 2% of the rows, over the
        // run it is half the work.
        let mut l = one_big_then_small(256, 300, 40, 1, 2);
        l[0].steps = 100;
        let p = Plan::build(Strategy::Tp, &l, 2, 1, &ROWS);
        let with_0 = p.stages[0]
            .iter()
            .find(|w| w.iter().any(|s| s.group == 0))
            .unwrap();
        assert_eq!(with_0.len(), 1, "group 0 shares its worker");
        let e = p.estimate(&l, &ROWS);
        // 25,600 and 24,000 row-steps: the run's work, not one pass's.
        assert!((e.compute_s - 24_800e-9).abs() < 1e-12, "{e:?}");
        assert!((e.idle_s - 800e-9).abs() < 1e-12, "{e:?}");
        // A cut group meets the other workers once a step.
        let dp = Plan::build(Strategy::Dp, &l[..1], 2, 1, &ROWS);
        let cut = CostModel {
            stage_us: 1.0,
            ..ROWS
        };
        assert!((dp.estimate(&l[..1], &cut).sync_s - 100e-6).abs() < 1e-12);
    }

    #[test]
    fn tp_is_lpt() {
        let p = Plan::build(Strategy::Tp, &loads(&[5, 3, 3, 2, 1]), 2, 1, &ROWS);
        let groups: Vec<Vec<usize>> = p.stages[0]
            .iter()
            .map(|w| w.iter().map(|s| s.group).collect())
            .collect();
        // 5 -> w0; 3 -> w1; 3 -> w1 (3 < 5); 2 -> w0 (5 < 6); 1 -> w0 or w1 (7 vs 6) -> w1
        assert_eq!(groups, vec![vec![0, 3], vec![1, 2, 4]]);
        assert_eq!(p.makespan(&loads(&[5, 3, 3, 2, 1])), 7.0);
        // Placed largest first, scanned in row order: sizes 1, 2, 3, 3, 5 put
        // groups 4 and 1 on w0 and groups 2, 3 and 0 on w1.
        let p = Plan::build(Strategy::Tp, &loads(&[1, 2, 3, 3, 5]), 2, 1, &ROWS);
        let groups: Vec<Vec<usize>> = p.stages[0]
            .iter()
            .map(|w| w.iter().map(|s| s.group).collect())
            .collect();
        assert_eq!(groups, vec![vec![1, 4], vec![0, 2, 3]]);
    }

    #[test]
    fn fused_cuts_evenly_and_marks_whole_shards() {
        let l = loads(&[90, 5, 5]);
        let p = Plan::build(Strategy::Fused, &l, 2, 1, &ROWS);
        assert_eq!(
            p.stages[0][0],
            vec![Shard {
                group: 0,
                rows: 0..50,
                whole: false
            }]
        );
        assert_eq!(
            p.stages[0][1][0],
            Shard {
                group: 0,
                rows: 50..90,
                whole: false
            }
        );
        assert!(p.stages[0][1][1].whole && p.stages[0][1][2].whole);
        let covered: usize = p.shards().map(|s| s.rows.len()).sum();
        assert_eq!(covered, 100);
    }

    /// Costs of rows times units only.
    const ROWS: CostModel = CostModel {
        row_unit_ns: 1.0,
        heavy_unit_ns: 0.0,
        apply_unit_us: 0.0,
        shard_us: 0.0,
        stage_us: 0.0,
        combine_ns: 0.0,
        stats_len: 10,
        unit_bytes: 100,
        by_size: None,
    };

    #[test]
    fn uncalibrated_costs_are_rows_times_units() {
        assert_eq!(CostModel::uncalibrated(10, 100), ROWS);
    }

    #[test]
    fn updates_and_shards_count_in_placement() {
        // One big group (1,000 rows, 1 unit) and 100 one-row groups of 4 units:
        // by rows alone tp puts the big group alone on one worker and all 100
        // small ones (4,000 us of updates) on the other; with 10 us per update
        // the small groups (40 us each, placed first) alternate, and the big
        // one (1 us of rows + 10 us) joins worker 0 on the tie.
        let l = one_big_then_small(1000, 100, 1, 4, 1);
        let by_rows = Plan::build(Strategy::Tp, &l, 2, 1, &ROWS);
        assert_eq!(
            by_rows.stages[0][0].len(),
            1,
            "rows alone: the big group alone"
        );
        let c = CostModel {
            apply_unit_us: 10.0,
            ..ROWS
        };
        let p = Plan::build(Strategy::Tp, &l, 2, 1, &c);
        let counts: Vec<usize> = p.stages[0].iter().map(Vec::len).collect();
        assert_eq!(counts, vec![51, 50]);
        assert!(p.estimate(&l, &c).idle_s < by_rows.estimate(&l, &c).idle_s / 10.0);
    }

    #[test]
    fn heavy_rows_cost_their_extra() {
        // Two groups of 100 rows; every row of the first is heavy and costs
        // 1 + 3 ns, the second's 1 ns: 400 + 100 ns in all, so fused's
        // ranges of 250 ns cut the first group at row 62 (62 * 4 = 248 ns;
        // alignment 1), and the estimate counts the extra.
        let mut l = loads(&[100, 100]);
        l[0].heavy = 100;
        let c = CostModel {
            heavy_unit_ns: 3.0,
            ..ROWS
        };
        let p = Plan::build(Strategy::Fused, &l, 2, 1, &c);
        assert_eq!(p.stages[0][0][0].rows, 0..62);
        assert_eq!(p.stages[0][1][0].rows, 62..100);
        let e = p.estimate(&l, &c);
        assert!((e.compute_s - 250e-9).abs() < 1e-15, "{}", e.compute_s);
        // A quarter of the first group's rows heavy: 1.75 ns per row.
        l[0].heavy = 25;
        let e = Plan::build(Strategy::Tp, &l, 1, 1, &c).estimate(&l, &c);
        assert!((e.compute_s - 275e-9).abs() < 1e-15, "{}", e.compute_s);
    }

    /// Costs with a real price on stages and updates.
    const C: CostModel = CostModel {
        row_unit_ns: 1.0,
        heavy_unit_ns: 0.0,
        apply_unit_us: 1.0,
        shard_us: 0.1,
        stage_us: 5.0,
        combine_ns: 1.0,
        stats_len: 10,
        unit_bytes: 100,
        by_size: None,
    };

    #[test]
    fn auto_picks_the_cheapest_estimate() {
        // One dominant group: tp leaves a worker idle, a cut plan wins.
        let skewed = loads(&[90_000, 5_000, 5_000]);
        let p = Plan::build(Strategy::Auto, &skewed, 2, 1, &C);
        assert_ne!(p.strategy, Strategy::Tp);
        // Many equal groups: nothing to cut, dp pays a stage per group.
        let even = loads(&[1_000; 20]);
        let p = Plan::build(Strategy::Auto, &even, 2, 1, &C);
        assert_ne!(p.strategy, Strategy::Dp);
        for l in [&skewed, &even] {
            let best = Strategy::FIXED
                .iter()
                .map(|&s| Plan::build(s, l, 2, 1, &C).estimate(l, &C).total_s)
                .fold(f64::INFINITY, f64::min);
            let auto = Plan::build(Strategy::Auto, l, 2, 1, &C)
                .estimate(l, &C)
                .total_s;
            assert!(auto <= best * (1.0 + TIE), "{auto} vs {best}");
        }
    }

    #[test]
    fn ties_go_to_the_plan_with_fewest_jumps() {
        // Ten equal groups: tp deals them out alternately (each worker jumps
        // over the other's groups), fused gives each worker five in a row.
        let even = loads(&[1_000; 10]);
        let tp = Plan::build(Strategy::Tp, &even, 2, 1, &ROWS);
        let fused = Plan::build(Strategy::Fused, &even, 2, 1, &ROWS);
        assert_eq!((tp.jumps(), fused.jumps()), (8, 0));
        assert_eq!(
            Plan::build(Strategy::Auto, &even, 2, 1, &ROWS).strategy,
            Strategy::Fused
        );
        // Within the tie band the fewest jumps win; beyond it the estimate.
        assert_eq!(pick(&[(1.0, 8), (1.004, 0)]), 1);
        assert_eq!(pick(&[(1.0, 8), (1.006, 0)]), 0);
        assert_eq!(pick(&[(1.0, 3), (1.0, 3), (0.999, 3)]), 2);
        assert_eq!(pick(&[(2.0, 0), (2.0, 0)]), 0);
    }

    #[test]
    fn dp_cuts_every_group_over_all_workers_one_stage_each() {
        let l = loads(&[100, 40, 1]);
        let p = Plan::build(Strategy::Dp, &l, 2, 10, &C);
        assert_eq!(p.stages.len(), 3);
        assert_eq!(p.stages[0][0][0].rows, 0..50);
        assert_eq!(p.stages[0][1][0].rows, 50..100);
        assert_eq!(p.stages[1][0][0].rows, 100..120);
        assert_eq!(p.stages[1][1][0].rows, 120..140);
        // One row cannot be cut: whole, on worker 0.
        assert!(p.stages[2][0][0].whole && p.stages[2][1].is_empty());
        assert_eq!(p.pieces(3), vec![2, 2, 1]);
    }

    #[test]
    fn hybrid_is_wrap_around() {
        // 4 workers, 100 rows: 60 rows -> ceil(2.4) = 3 shards, 20 -> ceil(0.8) = 1, ...
        let l = loads(&[60, 20, 10, 10]);
        let p = Plan::build(Strategy::Hybrid, &l, 4, 1, &ROWS);
        assert_eq!(p.stages.len(), 1);
        assert_eq!(p.pieces(4), vec![3, 1, 1, 1]);
        // Shards of group 0 (20 rows each) land on three different workers;
        // group 1 then goes to the fourth; the two small ones fill the least loaded.
        let load: Vec<usize> = p.stages[0]
            .iter()
            .map(|w| w.iter().map(|s| s.rows.len()).sum())
            .collect();
        assert_eq!(load, vec![30, 30, 20, 20]);
        assert_eq!(p.shards().map(|s| s.rows.len()).sum::<usize>(), 100);
    }

    #[test]
    fn estimate_splits_compute_sync_and_idle() {
        let l = loads(&[1000, 1000]);
        // tp: one group per worker, perfectly balanced, no cut, one stage.
        let e = Plan::build(Strategy::Tp, &l, 2, 1, &C).estimate(&l, &C);
        // per worker: 1000 rows x 1 unit x 1 ns + 0.1 us shard + 1 us apply
        assert!((e.compute_s - (1000e-9 + 1.1e-6)).abs() < 1e-15);
        assert_eq!(e.idle_s, 0.0);
        assert!((e.sync_s - 5e-6).abs() < 1e-15);
        assert_eq!((e.groups_whole, e.groups_cut, e.stages), (2, 0, 1));
        assert_eq!(e.state_bytes, 2 * 100);
        // dp: two stages, each group cut in two: per stage 500 ns + 0.1 us per
        // worker, then 2 pieces x 10 stats x 1 ns + 1 us update, plus 5 us.
        let e = Plan::build(Strategy::Dp, &l, 2, 1, &C).estimate(&l, &C);
        assert!((e.compute_s - 2.0 * (500e-9 + 0.1e-6)).abs() < 1e-15);
        assert!((e.sync_s - 2.0 * (5e-6 + 20e-9 + 1e-6)).abs() < 1e-15);
        assert_eq!((e.groups_whole, e.groups_cut, e.stages), (0, 2, 2));
        assert_eq!(e.state_bytes, 2 * 100 + 2 * 2 * 10 * 8);
        // A lone group under tp: the other worker idles for the whole pass.
        let one = loads(&[1000]);
        let e = Plan::build(Strategy::Tp, &one, 2, 1, &C).estimate(&one, &C);
        assert!((e.idle_s - e.compute_s).abs() < 1e-15);
        // ... and it runs on the calling thread alone: no barrier to pay.
        assert_eq!(e.sync_s, 0.0);
        // dp cuts it in two: a barrier, 2 x 10 stats combined, 1 update.
        let f = Plan::build(Strategy::Dp, &one, 2, 1, &C).estimate(&one, &C);
        assert!((f.sync_s - (5e-6 + 20e-9 + 1e-6)).abs() < 1e-15, "{f:?}");
        // For 1000 rows a stage costs more than the half pass it saves.
        assert_eq!(
            Plan::build(Strategy::Auto, &one, 2, 1, &C).strategy,
            Strategy::Tp
        );
    }

    #[test]
    fn fused_cuts_only_at_aligned_rows() {
        let l = loads(&[1000, 10]);
        let p = Plan::build(Strategy::Fused, &l, 3, 256, &ROWS);
        for s in p.shards() {
            assert!(s.rows.start % 256 == 0 || s.group == 1, "{s:?}");
        }
        let covered: usize = p.shards().map(|s| s.rows.len()).sum();
        assert_eq!(covered, 1010);
    }

    #[test]
    fn groups_without_units_take_no_work() {
        let mut l = loads(&[4, 4]);
        l[0].units = 0;
        for s in Strategy::FIXED {
            let p = Plan::build(s, &l, 3, 1, &C);
            assert!(p.shards().all(|s| s.group == 1));
        }
    }
}
