//! Placement of the training groups on remote workers: which worker holds
//! which rows of which group ([`Piece`]s, one list per worker), and the
//! rows of each worker's shard in group-sorted order.

use crate::data::layout::BLOCK;
use crate::error::{GroupfitError, Result};
use crate::plan::{CostModel, GroupLoad, LoadShape, Plan, Strategy};
use crate::shard::Piece;

/// The planner's loads of the training groups for remote workers:
/// `group_rows[g]` rows (the last entry is the global pseudo-group) laid
/// out one group after another in group-sorted order, `units` units for
/// each group with `fit[g]`, each group's [`LoadShape`] from its family.
pub fn loads(
    group_rows: &[usize],
    fit: &[bool],
    units: usize,
    shapes: &[LoadShape],
) -> Vec<GroupLoad> {
    let mut start = 0;
    group_rows
        .iter()
        .zip(fit)
        .zip(shapes)
        .map(|((&rows, &f), &shape)| {
            let l = GroupLoad::shaped(start..start + rows, if f { units } else { 0 }, shape);
            start += rows;
            l
        })
        .collect()
}

/// The plan of remote workers for `strategy` over `loads` (of [`loads`]):
/// one stage a pass, so `auto` picks the cheapest of
/// [`Strategy::ONE_STAGE`] under `cost` (with its network term), and `dp`,
/// a stage per group, is an error. Groups are cut at multiples of
/// [`BLOCK`] rows.
pub fn plan(
    strategy: Strategy,
    loads: &[GroupLoad],
    workers: usize,
    cost: &CostModel,
) -> Result<Plan> {
    match strategy {
        Strategy::Dp => Err(GroupfitError::arg(
            "strategy 'dp' runs a stage per group: remote workers run one stage a pass (choose auto, tp, fused or hybrid)",
        )),
        Strategy::Auto => Ok(Plan::cheapest(&Strategy::ONE_STAGE, loads, workers, BLOCK, cost)),
        s => Ok(Plan::build(s, loads, workers, BLOCK, cost)),
    }
}

/// The pieces of a one-stage `plan` of [`loads`], one list per worker in
/// group order: a shard the whole group is a whole piece; a cut group's
/// pieces lie on ascending workers in row order (every strategy of
/// [`Strategy::ONE_STAGE`] places them so), so combining in worker order
/// is combining in row order.
pub fn pieces(plan: &Plan, loads: &[GroupLoad]) -> Vec<Vec<Piece>> {
    let stage = plan.stages.first().cloned().unwrap_or_default();
    stage
        .iter()
        .map(|shards| {
            let mut out: Vec<Piece> = shards
                .iter()
                .map(|s| {
                    let group = &loads[s.group].rows;
                    Piece {
                        group: s.group,
                        offset: s.rows.start - group.start,
                        rows: s.rows.len(),
                        group_rows: group.len(),
                        shared: !s.whole,
                        train: true,
                    }
                })
                .collect();
            out.sort_by_key(|p| p.group);
            out
        })
        .collect()
}

/// The pieces of `strategy`'s plan priced by rows alone (one unit a
/// group, the default shape, [`CostModel::uncalibrated`]): how whole
/// groups are placed by weight ([`super::whole::place_whole`], with `tp`).
pub fn by_rows(
    strategy: Strategy,
    group_rows: &[usize],
    fit: &[bool],
    workers: usize,
) -> Result<Vec<Vec<Piece>>> {
    let l = loads(
        group_rows,
        fit,
        1,
        &vec![LoadShape::default(); group_rows.len()],
    );
    Ok(pieces(
        &plan(strategy, &l, workers, &CostModel::uncalibrated(1, 1))?,
        &l,
    ))
}

/// Adds the groups without models (`fit[g]` unset, rows > 0; not the global
/// pseudo-group, the last) whole, as pieces that only count in the
/// statistics rounds, each to the worker with the fewest rows: with them,
/// every training row is on some worker once, which a family's imputation
/// values need when the global model's rows are not placed.
pub fn place_statistics_only(placement: &mut [Vec<Piece>], group_rows: &[usize], fit: &[bool]) {
    let mut load: Vec<usize> = placement
        .iter()
        .map(|ps| ps.iter().map(|p| p.rows).sum())
        .collect();
    let last = group_rows.len().saturating_sub(1);
    for (g, (&rows, &f)) in group_rows.iter().zip(fit).enumerate().take(last) {
        if f || rows == 0 {
            continue;
        }
        let Some(w) = (0..placement.len()).min_by_key(|&w| (load[w], w)) else {
            return;
        };
        load[w] += rows;
        placement[w].push(Piece {
            group: g,
            offset: 0,
            rows,
            group_rows: rows,
            shared: false,
            train: false,
        });
    }
    for pieces in placement.iter_mut() {
        pieces.sort_by_key(|p| p.group);
    }
}

/// Training rows in group-sorted order (a stable counting sort of `rows` by
/// `group_of`), with each group's start: `order[start[g]..start[g + 1]]` are
/// group `g`'s rows in input order, and the whole of `order` is the global
/// pseudo-group's row order, as in [`crate::data::layout::GroupedMatrix`].
pub fn group_sorted(rows: &[u32], group_of: &[u32], n_groups: usize) -> (Vec<u32>, Vec<usize>) {
    let (pos, start) = crate::data::bucket(group_of.iter().map(|&g| g as usize), n_groups);
    (pos.iter().map(|&i| rows[i as usize]).collect(), start)
}

/// The input rows of a worker's pieces, in its order: piece rows taken from
/// `order`/`start` of [`group_sorted`]; the global pseudo-group (`group ==
/// n_groups`) takes its rows from `global`, its row order (the whole of
/// `order`, or the table's, as the family lays it out).
pub fn shard_rows(pieces: &[Piece], order: &[u32], start: &[usize], global: &[u32]) -> Vec<u32> {
    let n_groups = start.len() - 1;
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.rows).sum());
    for p in pieces {
        let rows = if p.group == n_groups {
            global
        } else {
            &order[start[p.group]..start[p.group + 1]]
        };
        out.extend_from_slice(&rows[p.offset..p.offset + p.rows]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(rows: &[usize], fit: &[bool], units: usize) -> Vec<GroupLoad> {
        loads(rows, fit, units, &vec![LoadShape::default(); rows.len()])
    }

    #[test]
    fn pieces_follow_the_plan_on_ascending_workers() {
        // groups of 5000, 300, 200, 100 rows and the global pseudo-group (5600).
        let rows = [5000, 300, 200, 100, 5600];
        let fit = [true, true, true, false, true];
        let l = flat(&rows, &fit, 2);
        assert_eq!(l[1].rows, 5000..5300);
        assert_eq!(l[3].units, 0);
        let c = CostModel::uncalibrated(1, 1);
        let p = pieces(&plan(Strategy::Hybrid, &l, 2, &c).unwrap(), &l);
        // 11,100 rows: the global group (2 x 5600 / 11,100 -> 2 pieces) and
        // group 0 (2 x 5000 / 11,100 -> 1 piece... ceil(0.9) = 1) by size.
        let global: Vec<&Piece> = p.iter().flatten().filter(|x| x.group == 4).collect();
        assert_eq!(global.len(), 2);
        // block-aligned, in row order on ascending workers
        assert_eq!((global[0].offset, global[0].rows), (0, 2816));
        assert_eq!((global[1].offset, global[1].rows), (2816, 2784));
        assert!(p[0].iter().any(|x| x.group == 4) && p[1].iter().any(|x| x.group == 4));
        assert!(global.iter().all(|x| x.shared && x.group_rows == 5600));
        // the other groups are whole, and group 3 (no units) is not placed
        assert!(p
            .iter()
            .flatten()
            .filter(|x| x.group != 4)
            .all(|x| !x.shared));
        assert!(p.iter().flatten().all(|x| x.group != 3));
        // tp cuts nothing; dp is not a remote plan
        let tp = pieces(&plan(Strategy::Tp, &l, 2, &c).unwrap(), &l);
        assert!(tp.iter().flatten().all(|x| !x.shared));
        assert!(plan(Strategy::Dp, &l, 2, &c).is_err());
    }

    #[test]
    fn auto_cuts_only_when_the_network_is_cheap_enough() {
        // One group of 200,000 rows and a few small ones, 2 workers: cut,
        // the big group halves the makespan; with 50 ms round trips and
        // 100 meetings a step (a booster's leaves), it stays whole.
        let rows = [200_000, 1000, 1000, 1000, 203_000];
        let fit = [true, true, true, true, false];
        let c = CostModel {
            row_unit_ns: 100.0,
            ..CostModel::uncalibrated(1000, 8)
        };
        let fast = c.over_network(
            &crate::plan::Network {
                rtt_us: 100.0,
                bytes_per_s: 1e9,
            },
            0,
        );
        let l = flat(&rows, &fit, 4);
        let cut = plan(Strategy::Auto, &l, 2, &fast).unwrap();
        assert!(cut.pieces(rows.len())[0] == 2);
        let slow = c.over_network(
            &crate::plan::Network {
                rtt_us: 50_000.0,
                bytes_per_s: 1e8,
            },
            0,
        );
        let many = loads(
            &rows,
            &fit,
            4,
            &vec![
                LoadShape {
                    syncs: 100,
                    ..LoadShape::default()
                };
                rows.len()
            ],
        );
        let whole = plan(Strategy::Auto, &many, 2, &slow).unwrap();
        assert_eq!(whole.strategy, Strategy::Tp);
        assert!(whole.pieces(rows.len()).iter().all(|&n| n <= 1));
    }
}
