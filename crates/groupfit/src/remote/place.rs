//! Placement of the training groups on remote workers: which worker holds
//! which rows of which group ([`Piece`]s, one list per worker), and the
//! rows of each worker's shard in group-sorted order.

use crate::data::layout::BLOCK;
use crate::shard::Piece;

/// A group is cut only when every worker's piece would have at least this many
/// rows: the network term of the placement. Below it, shipping the piece's
/// statistics (`O(d^2)` values per unit and pass) and the extra round trip
/// cost more than computing the whole group on one worker.
pub const MIN_SHARD_ROWS: usize = 4 * BLOCK;

/// Places the groups with `fit[g]` (of `group_rows[g]` rows; the last entry
/// is the global pseudo-group) on `workers` workers. A group is cut into one
/// block-aligned piece per worker when it is larger than half a worker's fair
/// share and every piece keeps at least `min_shard_rows` rows; the other
/// groups go whole, largest first, to the least-loaded worker. Piece `w` of a
/// cut group goes to worker `w`, so combining in worker order is combining in
/// row order.
pub fn place(
    group_rows: &[usize],
    fit: &[bool],
    workers: usize,
    min_shard_rows: usize,
) -> Vec<Vec<Piece>> {
    let workers = workers.max(1);
    let total: usize = group_rows
        .iter()
        .zip(fit)
        .filter(|(_, &f)| f)
        .map(|(r, _)| r)
        .sum();
    let fair = total.div_ceil(workers);
    let mut out: Vec<Vec<Piece>> = vec![Vec::new(); workers];
    let mut load = vec![0usize; workers];
    let mut whole = Vec::new();
    for (g, (&rows, &f)) in group_rows.iter().zip(fit).enumerate() {
        if !f || rows == 0 {
            continue;
        }
        let chunk = rows.div_ceil(workers).div_ceil(BLOCK) * BLOCK;
        let cut = workers > 1 && 2 * rows > fair && rows.div_ceil(workers) >= min_shard_rows;
        if cut && chunk < rows {
            let mut offset = 0;
            let mut w = 0;
            while offset < rows {
                let n = chunk.min(rows - offset);
                out[w].push(Piece {
                    group: g,
                    offset,
                    rows: n,
                    group_rows: rows,
                    shared: true,
                    train: true,
                });
                load[w] += n;
                offset += n;
                w += 1;
            }
        } else {
            whole.push(g);
        }
    }
    whole.sort_by_key(|&g| (std::cmp::Reverse(group_rows[g]), g));
    for g in whole {
        let w = (0..workers).min_by_key(|&w| (load[w], w)).unwrap();
        load[w] += group_rows[g];
        out[w].push(Piece {
            group: g,
            offset: 0,
            rows: group_rows[g],
            group_rows: group_rows[g],
            shared: false,
            train: true,
        });
    }
    for pieces in &mut out {
        pieces.sort_by_key(|p| p.group);
    }
    out
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

    #[test]
    fn placement_cuts_large_groups_and_balances_the_rest() {
        // groups of 5000, 300, 200, 100 rows and the global pseudo-group (5600).
        let rows = [5000, 300, 200, 100, 5600];
        let fit = [true, true, true, false, true];
        let p = place(&rows, &fit, 2, 1024);
        // the big group and the global group are cut block-aligned into 2 pieces
        assert_eq!(
            p[0].iter().find(|x| x.group == 0).unwrap(),
            &Piece {
                group: 0,
                offset: 0,
                rows: 2560,
                group_rows: 5000,
                shared: true,
                train: true
            }
        );
        assert_eq!(
            p[1].iter().find(|x| x.group == 4).unwrap(),
            &Piece {
                group: 4,
                offset: 2816,
                rows: 2784,
                group_rows: 5600,
                shared: true,
                train: true
            }
        );
        // group 3 is not trained; 1 and 2 are whole, on different workers
        let whole: Vec<Vec<usize>> = p
            .iter()
            .map(|w| w.iter().filter(|x| !x.shared).map(|x| x.group).collect())
            .collect();
        assert_eq!(whole, vec![vec![2], vec![1]]);
        // one worker: nothing is cut
        assert!(place(&rows, &fit, 1, 1024)[0].iter().all(|x| !x.shared));
    }
}
