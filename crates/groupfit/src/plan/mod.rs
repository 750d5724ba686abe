//! Plans: which worker computes which rows of which group.
//!
//! A *work unit* is one (group, config) model. Every pass over the data asks,
//! for each group with active units, for the partial statistics of those units
//! over the group's rows. A [`Plan`] cuts those rows into [`Shard`]s and gives
//! each worker a list of shards; a group cut into several shards has its
//! partial statistics combined before its update. Strategies differ only in
//! how they cut and place, never in what is computed, so every plan gives the
//! same models (up to floating-point summation order).
//!
//! * [`Strategy::Tp`] — task parallel: whole groups, largest cost first, each to
//!   the least-loaded worker (LPT).
//! * [`Strategy::Fused`] — workers take equal-cost contiguous ranges of the
//!   group-sorted rows and advance every group in their range in one scan; at
//!   most `workers - 1` groups are cut.
//! * [`Strategy::Auto`] — the cheaper of the two under a simple cost model
//!   (rows times active units per group; a cut group costs one extra reduction).

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::{GroupfitError, Result};

/// How to spread the work of a pass over workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Let the planner choose.
    Auto,
    /// Task parallel: whole groups per worker.
    Tp,
    /// Row ranges of the group-sorted data per worker, every model in one scan.
    Fused,
}

impl Strategy {
    /// Parses `auto`, `tp`, `fused`.
    pub fn parse(s: &str) -> Result<Strategy> {
        match s {
            "auto" => Ok(Strategy::Auto),
            "tp" => Ok(Strategy::Tp),
            "fused" => Ok(Strategy::Fused),
            other => Err(GroupfitError::arg(format!(
                "unknown strategy '{other}' (expected auto, tp or fused)"
            ))),
        }
    }

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Auto => "auto",
            Strategy::Tp => "tp",
            Strategy::Fused => "fused",
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

/// Shards per worker, for one strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The strategy this plan implements (never `Auto`).
    pub strategy: Strategy,
    /// For each worker, its shards in scan order.
    pub workers: Vec<Vec<Shard>>,
}

/// What the planner knows about a group.
#[derive(Debug, Clone)]
pub struct GroupLoad {
    /// The group's rows in the layout.
    pub rows: Range<usize>,
    /// Units of the group still to be trained (0: the group takes no work).
    pub units: usize,
}

impl GroupLoad {
    fn cost(&self) -> f64 {
        (self.rows.len() * self.units) as f64
    }
}

impl Plan {
    /// Builds the plan for `strategy` over `workers` workers; a group is only
    /// cut at multiples of `align` rows from its first row.
    pub fn build(strategy: Strategy, loads: &[GroupLoad], workers: usize, align: usize) -> Plan {
        let workers = workers.max(1);
        let align = align.max(1);
        match strategy {
            Strategy::Tp => Plan::task_parallel(loads, workers),
            Strategy::Fused => Plan::fused(loads, workers, align),
            Strategy::Auto => {
                let tp = Plan::task_parallel(loads, workers);
                let fused = Plan::fused(loads, workers, align);
                let cut = fused.workers.iter().flatten().filter(|s| !s.whole).count();
                // Fused is balanced by construction; a cut group costs one extra
                // reduction, counted as a small fraction of the ideal makespan.
                let ideal = loads.iter().map(GroupLoad::cost).sum::<f64>() / workers as f64;
                let fused_cost = ideal * (1.0 + 0.01 * cut as f64);
                if tp.makespan(loads) <= fused_cost {
                    tp
                } else {
                    fused
                }
            }
        }
    }

    /// Task parallel: longest-processing-time-first onto the least-loaded worker.
    fn task_parallel(loads: &[GroupLoad], workers: usize) -> Plan {
        let mut order: Vec<usize> = (0..loads.len()).filter(|&g| loads[g].units > 0).collect();
        order.sort_by(|&a, &b| loads[b].cost().total_cmp(&loads[a].cost()).then(a.cmp(&b)));
        let mut load = vec![0.0f64; workers];
        let mut plan = vec![Vec::new(); workers];
        for g in order {
            let w = (0..workers)
                .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
                .unwrap();
            load[w] += loads[g].cost();
            plan[w].push(Shard {
                group: g,
                rows: loads[g].rows.clone(),
                whole: true,
            });
        }
        Plan {
            strategy: Strategy::Tp,
            workers: plan,
        }
    }

    /// Fused: equal-cost contiguous ranges of the group-sorted rows.
    fn fused(loads: &[GroupLoad], workers: usize, align: usize) -> Plan {
        let total: f64 = loads.iter().map(GroupLoad::cost).sum();
        let budget = total / workers as f64;
        let mut plan = vec![Vec::new(); workers];
        let mut w = 0;
        let mut used = 0.0;
        for (g, l) in loads.iter().enumerate() {
            if l.units == 0 || l.rows.is_empty() {
                continue;
            }
            let per_row = l.units as f64;
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
        // A shard is whole when no other shard has rows of its group.
        let mut pieces = vec![0usize; loads.len()];
        for s in plan.iter().flatten() {
            pieces[s.group] += 1;
        }
        for s in plan.iter_mut().flatten() {
            s.whole = pieces[s.group] == 1;
        }
        Plan {
            strategy: Strategy::Fused,
            workers: plan,
        }
    }

    /// The largest per-worker cost.
    pub fn makespan(&self, loads: &[GroupLoad]) -> f64 {
        self.workers
            .iter()
            .map(|ws| {
                ws.iter()
                    .map(|s| (s.rows.len() * loads[s.group].units) as f64)
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
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
                };
                start += n;
                l
            })
            .collect()
    }

    #[test]
    fn tp_is_lpt() {
        let p = Plan::build(Strategy::Tp, &loads(&[5, 3, 3, 2, 1]), 2, 1);
        let groups: Vec<Vec<usize>> = p
            .workers
            .iter()
            .map(|w| w.iter().map(|s| s.group).collect())
            .collect();
        // 5 -> w0; 3 -> w1; 3 -> w1 (3 < 5); 2 -> w0 (5 < 6); 1 -> w0 or w1 (7 vs 6) -> w1
        assert_eq!(groups, vec![vec![0, 3], vec![1, 2, 4]]);
        assert_eq!(p.makespan(&loads(&[5, 3, 3, 2, 1])), 7.0);
    }

    #[test]
    fn fused_cuts_evenly_and_marks_whole_shards() {
        let l = loads(&[90, 5, 5]);
        let p = Plan::build(Strategy::Fused, &l, 2, 1);
        assert_eq!(
            p.workers[0],
            vec![Shard {
                group: 0,
                rows: 0..50,
                whole: false
            }]
        );
        assert_eq!(
            p.workers[1][0],
            Shard {
                group: 0,
                rows: 50..90,
                whole: false
            }
        );
        assert!(p.workers[1][1].whole && p.workers[1][2].whole);
        let covered: usize = p.workers.iter().flatten().map(|s| s.rows.len()).sum();
        assert_eq!(covered, 100);
    }

    #[test]
    fn auto_avoids_tp_when_one_group_dominates() {
        let skewed = loads(&[90, 5, 5]);
        assert_eq!(
            Plan::build(Strategy::Auto, &skewed, 2, 1).strategy,
            Strategy::Fused
        );
        let even = loads(&[10; 20]);
        assert_eq!(
            Plan::build(Strategy::Auto, &even, 2, 1).strategy,
            Strategy::Tp
        );
    }

    #[test]
    fn fused_cuts_only_at_aligned_rows() {
        let l = loads(&[1000, 10]);
        let p = Plan::build(Strategy::Fused, &l, 3, 256);
        for s in p.workers.iter().flatten() {
            assert!(s.rows.start % 256 == 0 || s.group == 1, "{s:?}");
        }
        let covered: usize = p.workers.iter().flatten().map(|s| s.rows.len()).sum();
        assert_eq!(covered, 1010);
    }

    #[test]
    fn groups_without_units_take_no_work() {
        let mut l = loads(&[4, 4]);
        l[0].units = 0;
        for s in [Strategy::Tp, Strategy::Fused] {
            let p = Plan::build(s, &l, 3, 1);
            assert!(p.workers.iter().flatten().all(|s| s.group == 1));
        }
    }
}
