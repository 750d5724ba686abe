//! The driver's side of the protocol: a [`Coordinator`] reduces the
//! workers' statistics rounds, combines their partial results in piece
//! order and assembles the fitted models; [`run_local`] runs the whole
//! protocol in one process.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::family::UnitFit;
use crate::shard::{ShardSpec, Sharded};

use super::message::{parse_partials, protocol, push_partial};
use super::session::{ReportedUnit, WorkerSession};

/// The driver's side, for any [`Sharded`] family.
pub struct Coordinator<S: Sharded> {
    family: S,
    specs: Vec<ShardSpec>,
    /// Configs of the grid.
    n_configs: usize,
    /// Whether each group is trained (has pieces).
    trained: Vec<bool>,
    /// The last reduced statistics message, and its round.
    agreed: Vec<f64>,
    round: usize,
    /// Passes combined so far.
    pub passes: usize,
}

impl<S: Sharded> Coordinator<S> {
    /// A coordinator of `family` for workers with these specs (one per
    /// worker, in worker order).
    pub fn new(family: S, specs: Vec<ShardSpec>) -> Result<Coordinator<S>> {
        let first = specs.first().ok_or_else(|| protocol("no workers"))?.clone();
        let mut trained = vec![false; first.groups];
        for s in &specs {
            let same = s.model == first.model
                && s.task == first.task
                && s.d == first.d
                && s.groups == first.groups
                && s.configs == first.configs
                && s.seed == first.seed;
            if !same {
                return Err(protocol("workers disagree on the problem"));
            }
            for p in &s.pieces {
                *trained
                    .get_mut(p.group)
                    .ok_or_else(|| protocol("bad piece in the shard spec"))? |= p.train;
            }
        }
        Ok(Coordinator {
            family,
            n_configs: first.configs.len(),
            trained,
            specs,
            agreed: Vec::new(),
            round: 0,
            passes: 0,
        })
    }

    /// The workers' specs.
    pub fn specs(&self) -> &[ShardSpec] {
        &self.specs
    }

    /// Statistics rounds before the passes.
    pub fn rounds(&self) -> usize {
        self.family.rounds()
    }

    fn check_count(&self, n: usize) -> Result<()> {
        if n != self.specs.len() {
            return Err(protocol("one message per worker expected"));
        }
        Ok(())
    }

    /// Reduces the workers' statistics of the next round; returns the
    /// message for every worker (the next round's `agreed`, or `prepare`'s).
    pub fn reduce(&mut self, parts: &[Vec<f64>]) -> Result<Vec<f64>> {
        self.check_count(parts.len())?;
        if self.round >= self.family.rounds() {
            return Err(protocol("no statistics round left"));
        }
        self.agreed = self
            .family
            .reduce(&self.specs, self.round, &self.agreed, parts)?;
        self.round += 1;
        Ok(self.agreed.clone())
    }

    /// The values replacing a missing feature (after the last round).
    pub fn impute(&self) -> Vec<f64> {
        self.family.impute(&self.agreed)
    }

    /// Combines the workers' [`WorkerSession::step`] results: the statistics
    /// of each shared group's units added up in worker (= row) order. The
    /// result goes to every worker's [`WorkerSession::apply`].
    pub fn combine(&mut self, parts: &[Vec<f64>]) -> Result<Vec<f64>> {
        self.check_count(parts.len())?;
        let mut by_group: BTreeMap<usize, (Vec<usize>, Vec<f64>)> = BTreeMap::new();
        for part in parts {
            for p in parse_partials(part)? {
                match by_group.get_mut(&p.group) {
                    None => {
                        by_group.insert(p.group, (p.ks, p.stats.to_vec()));
                    }
                    Some((known, acc)) => {
                        if *known != p.ks || acc.len() != p.stats.len() {
                            return Err(protocol("workers disagree on a group's active units"));
                        }
                        crate::exec::add_stats(acc, p.stats);
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (group, (ks, stats)) in by_group {
            push_partial(&mut out, group, &ks, &stats);
        }
        self.passes += 1;
        Ok(out)
    }

    /// Assembles the workers' [`WorkerSession::models`]: per group, one unit
    /// per config (empty for groups not trained).
    pub fn finish(
        &self,
        parts: Vec<Vec<ReportedUnit<S::Model>>>,
    ) -> Result<Vec<Vec<UnitFit<S::Model>>>> {
        self.check_count(parts.len())?;
        let mut slots: Vec<Vec<Option<UnitFit<S::Model>>>> = self
            .trained
            .iter()
            .map(|&t| {
                (0..if t { self.n_configs } else { 0 })
                    .map(|_| None)
                    .collect()
            })
            .collect();
        for (g, k, fit) in parts.into_iter().flatten() {
            let slot = slots
                .get_mut(g)
                .and_then(|s| s.get_mut(k))
                .ok_or_else(|| protocol("model of an unknown unit"))?;
            *slot = Some(fit);
        }
        slots
            .into_iter()
            .map(|s| {
                s.into_iter()
                    .map(|u| u.ok_or_else(|| protocol("a unit's model is missing")))
                    .collect()
            })
            .collect()
    }
}

/// What [`run_local`] returns: per group, one fitted unit per config; the
/// imputation values; the passes.
pub type LocalRun<M> = (Vec<Vec<UnitFit<M>>>, Vec<f64>, usize);

/// Runs the whole protocol in this process (one session per worker, called
/// in turn): the reference the Ray runner is tested against, and a check
/// that the protocol computes what the pass driver computes.
pub fn run_local<S: Sharded>(
    coordinator: &mut Coordinator<S>,
    sessions: &mut [WorkerSession<S>],
    max_passes: usize,
) -> Result<LocalRun<S::Model>> {
    let mut agreed = Vec::new();
    for round in 0..coordinator.rounds() {
        let parts: Vec<Vec<f64>> = sessions
            .iter()
            .map(|s| s.statistics(round, &agreed))
            .collect::<Result<_>>()?;
        agreed = coordinator.reduce(&parts)?;
    }
    for s in sessions.iter_mut() {
        s.prepare(&agreed)?;
    }
    while coordinator.passes < max_passes && sessions.iter().any(|s| s.active() > 0) {
        let parts: Vec<Vec<f64>> = sessions
            .iter_mut()
            .map(|s| s.step())
            .collect::<Result<_>>()?;
        let combined = coordinator.combine(&parts)?;
        for s in sessions.iter_mut() {
            s.apply(&combined)?;
        }
    }
    let models = sessions.iter().map(|s| s.models()).collect::<Result<_>>()?;
    Ok((
        coordinator.finish(models)?,
        coordinator.impute(),
        coordinator.passes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::layout::{GroupedMatrix, LayoutInput};
    use crate::data::{Column, Task};
    use crate::linear::grouped::fit_grouped;
    use crate::linear::remote::LinearShards;
    use crate::linear::{LinearModel, LinearParams};
    use crate::plan::Strategy;
    use crate::remote::place::{by_rows, group_sorted, place_statistics_only, shard_rows};

    /// The tests' placement: the planner's hybrid by rows.
    fn place(group_rows: &[usize], fit: &[bool], workers: usize) -> Vec<Vec<crate::shard::Piece>> {
        by_rows(Strategy::Hybrid, group_rows, fit, workers).unwrap()
    }
    use crate::shard::{ShardRows, ShardSpec};
    use crate::tune::{Grid, NoWords};

    /// Groups of different sizes, rows interleaved, NaNs: columns, target,
    /// each row's group.
    fn data(task: Task, sizes: &[usize], d: usize) -> (Vec<Vec<f64>>, Vec<f64>, Vec<u32>) {
        let n: usize = sizes.iter().sum();
        let mut group_of_row = Vec::new();
        for (g, &s) in sizes.iter().enumerate() {
            group_of_row.extend(std::iter::repeat_n(g as u32, s));
        }
        let perm: Vec<usize> = (0..n).map(|i| (i * 7919) % n).collect();
        let group_all: Vec<u32> = perm.iter().map(|&i| group_of_row[i]).collect();
        let cols: Vec<Vec<f64>> = (0..d)
            .map(|j| {
                (0..n)
                    .map(|i| {
                        if (i + j) % 97 == 0 {
                            f64::NAN
                        } else {
                            (((i * 31 + j * 17) % 101) as f64) / 25.0 - 2.0 + j as f64
                        }
                    })
                    .collect()
            })
            .collect();
        let y = (0..n)
            .map(|i| {
                // max/min, not clamp: a NaN feature gives -5, not a NaN target.
                #[allow(clippy::manual_clamp)]
                let z = cols[0][i].max(-5.0).min(5.0) * 0.7
                    - if cols[1][i].is_nan() { 0.0 } else { cols[1][i] } * 0.3
                    + group_all[i] as f64 * 0.2;
                match task {
                    Task::Binary => f64::from(u8::from(
                        (i * 13 % 7) as f64 / 7.0 < 1.0 / (1.0 + (-z).exp()),
                    )),
                    Task::Regression => z + ((i * 13) % 7) as f64 / 7.0,
                }
            })
            .collect();
        (cols, y, group_all)
    }

    /// The data a placement's sessions are cut from: feature columns,
    /// target, the training rows in group-sorted order with each group's
    /// start, and the validation rows with their groups.
    struct Source<'a> {
        cols: &'a [Vec<f64>],
        y: &'a [f64],
        sorted: (&'a [u32], &'a [usize]),
        /// The global pseudo-group's rows in the family's order.
        global: &'a [u32],
        /// Each group's key (none: empty keys).
        keys: &'a [Vec<Option<String>>],
        valid: (&'a [u32], &'a [u32]),
    }

    /// One session per worker of `placement`, its rows gathered from the
    /// data: its pieces' training rows, and their groups' validation rows.
    fn sessions<S: crate::shard::Sharded>(
        base: &ShardSpec,
        placement: Vec<Vec<crate::shard::Piece>>,
        src: &Source<'_>,
        family: impl Fn(&ShardSpec) -> S,
    ) -> Vec<WorkerSession<S>> {
        let global = base.groups - 1;
        placement
            .into_iter()
            .map(|pieces| {
                let spec = ShardSpec {
                    keys: pieces
                        .iter()
                        .map(|p| src.keys.get(p.group).cloned().unwrap_or_default())
                        .collect(),
                    pieces,
                    ..base.clone()
                };
                let r = shard_rows(&spec.pieces, src.sorted.0, src.sorted.1, src.global);
                let gather = |rows: &[u32]| -> Vec<Column> {
                    src.cols
                        .iter()
                        .map(|c| Column::Owned(rows.iter().map(|&i| c[i as usize]).collect()))
                        .collect()
                };
                let (mut vrows, mut vpiece) = (Vec::new(), Vec::new());
                for (i, p) in spec.pieces.iter().enumerate() {
                    for (&row, &g) in src.valid.0.iter().zip(src.valid.1) {
                        if p.group == global || g as usize == p.group {
                            vrows.push(row);
                            vpiece.push(i as u32);
                        }
                    }
                }
                let rows = ShardRows {
                    columns: gather(&r),
                    target: r.iter().map(|&i| src.y[i as usize]).collect(),
                    ids: r.clone(),
                    valid_columns: gather(&vrows),
                    valid_target: vrows.iter().map(|&i| src.y[i as usize]).collect(),
                    valid_piece: vpiece,
                };
                WorkerSession::new(family(&spec), spec, rows).unwrap()
            })
            .collect()
    }

    fn close(a: &LinearModel, b: &LinearModel) -> bool {
        a.coef
            .iter()
            .chain([&a.intercept])
            .zip(b.coef.iter().chain([&b.intercept]))
            .all(|(x, z)| (x - z).abs() <= 1e-6 * z.abs().max(1.0))
    }

    /// Groups with NaNs and different sizes; the protocol on 1, 2 and 3
    /// workers gives the pass driver's models.
    #[test]
    fn remote_sessions_equal_the_pass_driver() {
        for task in [Task::Binary, Task::Regression] {
            let sizes = [3000usize, 700, 40, 9, 1300];
            let d = 3;
            let (cols, y, group_all) = data(task, &sizes, d);
            // training rows: every row but each 5th
            let rows: Vec<u32> = (0..y.len() as u32).filter(|r| r % 5 != 0).collect();
            let group_of: Vec<u32> = rows.iter().map(|&r| group_all[r as usize]).collect();
            let ng = sizes.len();
            let columns: Vec<Column> = cols.iter().map(|c| Column::Owned(c.clone())).collect();
            let points = Grid::parse(&["C=0.1,10".into(), "tol=1e-10".into()], &NoWords)
                .unwrap()
                .points();
            let configs = crate::linear::configs(&points).unwrap();
            assert_eq!(
                configs[1],
                LinearParams::new().c(10.0).tol(1e-10).check().unwrap()
            );
            let matrix = GroupedMatrix::build(LayoutInput {
                columns: &columns,
                target: &y,
                rows: &rows,
                group_of: &group_of,
                n_groups: ng,
                with_global: true,
                impute: None,
                threads: 1,
            })
            .unwrap();
            let fit = vec![true, true, true, false, true, true];
            let (native, _) =
                fit_grouped(&matrix, task, &configs, &fit, Strategy::Tp, 1, &mut |_| {});
            let (order, start) = group_sorted(&rows, &group_of, ng);
            let mut group_rows: Vec<usize> = (0..ng).map(|g| start[g + 1] - start[g]).collect();
            group_rows.push(rows.len());
            let base = ShardSpec {
                model: "linear".into(),
                task,
                d,
                kinds: Vec::new(),
                configs: points.clone(),
                seed: 0,
                groups: ng + 1,
                pieces: Vec::new(),
                keys: Vec::new(),
            };
            let src = Source {
                cols: &cols,
                y: &y,
                sorted: (&order, &start),
                global: &order,
                keys: &[],
                valid: (&[], &[]),
            };
            // Without the global model, the groups without models count in
            // the statistics only: the imputation values are the same.
            let mut no_global = fit.clone();
            no_global[ng] = false;
            for (workers, global) in [(1, true), (2, true), (3, true), (2, false)] {
                let mut placement = if global {
                    place(&group_rows, &fit, workers)
                } else {
                    place(&group_rows, &no_global, workers)
                };
                if !global {
                    place_statistics_only(&mut placement, &group_rows, &no_global);
                    assert!(placement.iter().flatten().any(|p| !p.train && p.group == 3));
                }
                let mut ss = sessions(&base, placement, &src, |s| LinearShards::new(s).unwrap());
                if workers > 1 && global {
                    // the hybrid plan cuts the global pseudo-group over two workers or more
                    let holders = ss
                        .iter()
                        .filter(|s| s.spec().pieces.iter().any(|p| p.shared));
                    assert!(holders.count() >= 2);
                }
                let specs = ss.iter().map(|s| s.spec().clone()).collect();
                let mut co = Coordinator::new(LinearShards::new(&base).unwrap(), specs).unwrap();
                let (remote, impute, passes) = run_local(&mut co, &mut ss, 10_000).unwrap();
                assert!(passes > 2 || workers == 1);
                for (a, b) in impute.iter().zip(matrix.impute()) {
                    assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0));
                }
                assert_eq!(remote[ng].is_empty(), !global);
                for g in 0..if global { ng + 1 } else { ng } {
                    assert_eq!(remote[g].len(), native[g].len(), "group {g}");
                    for (a, b) in remote[g].iter().zip(&native[g]) {
                        assert!(
                            close(&a.model, &b.model),
                            "{task:?} workers {workers} group {g}: {:?} vs {:?}",
                            a.model,
                            b.model
                        );
                        assert_eq!(a.converged, b.converged);
                    }
                }
            }
        }
    }

    /// A session restored from another's snapshot after one pass ends where
    /// the first would; a snapshot of another shard is refused.
    #[test]
    fn snapshots_restore_the_units() {
        let (cols, y, _) = data(Task::Regression, &[600], 2);
        let points = Grid::parse(&["C=1".into()], &NoWords).unwrap().points();
        let base = ShardSpec {
            model: "linear".into(),
            task: Task::Regression,
            d: 2,
            kinds: Vec::new(),
            configs: points,
            seed: 0,
            groups: 2,
            pieces: Vec::new(),
            keys: Vec::new(),
        };
        let order: Vec<u32> = (0..600).collect();
        let start = [0, 600];
        let placement = place(&[600, 600], &[true, false], 1);
        let src = Source {
            cols: &cols,
            y: &y,
            sorted: (&order, &start),
            global: &order,
            keys: &[],
            valid: (&[], &[]),
        };
        let mk = || {
            sessions(&base, placement.clone(), &src, |s| {
                LinearShards::new(s).unwrap()
            })
        };
        let (mut a, mut b) = (mk(), mk());
        let coord = |s: &[WorkerSession<LinearShards>]| {
            Coordinator::new(
                LinearShards::new(&base).unwrap(),
                s.iter().map(|s| s.spec().clone()).collect(),
            )
            .unwrap()
        };
        let (whole, _, _) = run_local(&mut coord(&a), &mut a, 10_000).unwrap();
        let (mut ca, mut cb) = (coord(&a), coord(&b));
        let mut c = mk();
        run_local(&mut ca, &mut c, 1).unwrap();
        let snap = c[0].snapshot().unwrap();
        run_local(&mut cb, &mut b, 0).unwrap();
        b[0].restore(&snap).unwrap();
        assert_eq!(b[0].snapshot().unwrap(), snap);
        assert!(b[0].restore(&snap[1..]).is_err());
        while b[0].active() > 0 {
            b[0].step().unwrap();
        }
        let (_, _, fit) = b[0].models().unwrap().remove(0);
        assert!(
            close(&fit.model, &whole[0][0].model),
            "{:?} vs {:?}",
            fit,
            whole[0][0]
        );
    }

    /// gbdt: boosters of groups cut over 2 and 3 workers (and the global
    /// model) grow the native runner's trees, with early stopping on each
    /// group's validation rows and two binnings in the grid.
    #[test]
    fn cut_boosters_equal_the_native_ones() {
        use crate::family::{TrainData, ValidData};
        use crate::gbdt::remote::GbdtShards;
        for task in [Task::Binary, Task::Regression] {
            let sizes = [3000usize, 700, 40, 9, 1300];
            let d = 3;
            let (cols, y, group_all) = data(task, &sizes, d);
            let ng = sizes.len();
            let rows: Vec<u32> = (0..y.len() as u32).filter(|r| r % 5 != 0).collect();
            let group_of: Vec<u32> = rows.iter().map(|&r| group_all[r as usize]).collect();
            let vrows: Vec<u32> = (0..y.len() as u32).filter(|r| r % 5 == 0).collect();
            let vgroup: Vec<u32> = vrows.iter().map(|&r| group_all[r as usize]).collect();
            let vgroups: Vec<Option<u32>> = vgroup.iter().map(|&g| Some(g)).collect();
            let columns: Vec<Column> = cols.iter().map(|c| Column::Owned(c.clone())).collect();
            let specs: Vec<String> = [
                "rounds=12",
                "num_leaves=7",
                "min_data_in_leaf=5",
                "early_stopping_rounds=3",
                "feature_fraction=0.7",
                "max_bin=15,255",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let points = Grid::parse(&specs, &NoWords).unwrap().points();
            let configs = crate::gbdt::configs(&points).unwrap();
            let fit = vec![true, true, true, false, true, true];
            let keys = vec![Vec::new(); ng];
            let kinds = vec![crate::data::categorical::FeatureKind::Numeric; d];
            let input = TrainData {
                task,
                columns: &columns,
                source: None,
                kinds: &kinds,
                impute: None,
                target: &y,
                rows: &rows,
                group_of: &group_of,
                n_groups: ng,
                keys: &keys,
                fit: &fit,
                valid: ValidData {
                    columns: &columns,
                    target: &y,
                    rows: &vrows,
                    groups: &vgroups,
                    file: None,
                },
                strategy: Strategy::Tp,
                threads: 1,
                seed: 7,
            };
            let (native, _) = crate::gbdt::run::fit_grouped(&input, &configs, &mut |_| {});
            let (order, start) = group_sorted(&rows, &group_of, ng);
            let mut group_rows: Vec<usize> = (0..ng).map(|g| start[g + 1] - start[g]).collect();
            group_rows.push(rows.len());
            let base = ShardSpec {
                model: "gbdt".into(),
                task,
                d,
                kinds: Vec::new(),
                configs: points.clone(),
                seed: 7,
                groups: ng + 1,
                pieces: Vec::new(),
                keys: Vec::new(),
            };
            let src = Source {
                cols: &cols,
                y: &y,
                sorted: (&order, &start),
                global: &order,
                keys: &[],
                valid: (&vrows, &vgroup),
            };
            for workers in [1, 2, 3] {
                let placement = place(&group_rows, &fit, workers);
                let mut ss = sessions(&base, placement, &src, |s| GbdtShards::new(s).unwrap());
                let cut = ss
                    .iter()
                    .flat_map(|s| &s.spec().pieces)
                    .filter(|p| p.shared)
                    .count();
                assert_eq!(cut > 0, workers > 1);
                let specs: Vec<ShardSpec> = ss.iter().map(|s| s.spec().clone()).collect();
                let mut co =
                    Coordinator::new(GbdtShards::new(&base).unwrap(), specs.clone()).unwrap();
                // Three passes, then fresh sessions restored from the
                // snapshots finish the run, as after a lost worker.
                run_local(&mut co, &mut ss, 3).unwrap();
                let snaps: Vec<Vec<u8>> = ss.iter().map(|s| s.snapshot().unwrap()).collect();
                let placement = specs.iter().map(|s| s.pieces.clone()).collect();
                let mut ss = sessions(&base, placement, &src, |s| GbdtShards::new(s).unwrap());
                let mut co = Coordinator::new(GbdtShards::new(&base).unwrap(), specs).unwrap();
                run_local(&mut co, &mut ss, 0).unwrap();
                for (s, snap) in ss.iter_mut().zip(&snaps) {
                    s.restore(snap).unwrap();
                }
                while ss.iter().any(|s| s.active() > 0) {
                    let parts: Vec<Vec<f64>> = ss.iter_mut().map(|s| s.step().unwrap()).collect();
                    let combined = co.combine(&parts).unwrap();
                    for s in ss.iter_mut() {
                        s.apply(&combined).unwrap();
                    }
                }
                let models = ss.iter().map(|s| s.models().unwrap()).collect();
                let (remote, impute) = (co.finish(models).unwrap(), co.impute());
                assert!(impute.is_empty());
                for g in 0..=ng {
                    assert_eq!(remote[g].len(), native[g].len(), "group {g}");
                    for (k, (a, b)) in remote[g].iter().zip(&native[g]).enumerate() {
                        assert_eq!(
                            a.iterations as usize, b.rounds,
                            "{task:?} w{workers} g{g} k{k}"
                        );
                        let pa = a.model.predict_columns(task, &cols, 0..y.len());
                        let pb = b.model.predict_columns(task, &cols, 0..y.len());
                        for (x, z) in pa.iter().zip(&pb) {
                            assert!(
                                (x - z).abs() <= 1e-9 * z.abs().max(1.0),
                                "{task:?} workers {workers} group {g} config {k}: {x} vs {z}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// mlp: networks of groups cut over 2 and 3 workers (and the global
    /// model, whose rows are in table order) train on the native runner's
    /// batches: each holder sums the gradient over the members it holds.
    #[test]
    fn cut_networks_equal_the_native_ones() {
        use crate::family::{Family, TrainData, ValidData};
        use crate::mlp::remote::MlpShards;
        for task in [Task::Binary, Task::Regression] {
            let sizes = [3000usize, 700, 40, 9, 1300];
            let d = 3;
            let (cols, y, group_all) = data(task, &sizes, d);
            let ng = sizes.len();
            let rows: Vec<u32> = (0..y.len() as u32).filter(|r| r % 5 != 0).collect();
            let group_of: Vec<u32> = rows.iter().map(|&r| group_all[r as usize]).collect();
            let columns: Vec<Column> = cols.iter().map(|c| Column::Owned(c.clone())).collect();
            let specs: Vec<String> = ["hidden=6", "epochs=3", "batch_size=64", "lr=0.01,0.003"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let points = Grid::parse(&specs, &crate::mlp::MlpWords).unwrap().points();
            let fit = vec![true, true, true, false, true, true];
            let keys: Vec<Vec<Option<String>>> =
                (0..ng).map(|g| vec![Some(format!("k{g}"))]).collect();
            let kinds = vec![crate::data::categorical::FeatureKind::Numeric; d];
            let input = TrainData {
                task,
                columns: &columns,
                source: None,
                kinds: &kinds,
                impute: None,
                target: &y,
                rows: &rows,
                group_of: &group_of,
                n_groups: ng,
                keys: &keys,
                fit: &fit,
                valid: ValidData {
                    columns: &columns,
                    target: &y,
                    rows: &[],
                    groups: &[],
                    file: None,
                },
                strategy: Strategy::Tp,
                threads: 1,
                seed: 5,
            };
            let native = crate::mlp::Mlp.fit(&input, &points, &mut |_| {}).unwrap();
            let (order, start) = group_sorted(&rows, &group_of, ng);
            let mut group_rows: Vec<usize> = (0..ng).map(|g| start[g + 1] - start[g]).collect();
            group_rows.push(rows.len());
            let base = ShardSpec {
                model: "mlp".into(),
                task,
                d,
                kinds: Vec::new(),
                configs: points.clone(),
                seed: 5,
                groups: ng + 1,
                pieces: Vec::new(),
                keys: Vec::new(),
            };
            let src = Source {
                cols: &cols,
                y: &y,
                sorted: (&order, &start),
                global: &rows,
                keys: &keys,
                valid: (&[], &[]),
            };
            for workers in [1, 2, 3] {
                let placement = place(&group_rows, &fit, workers);
                let mut ss = sessions(&base, placement, &src, |s| MlpShards::new(s).unwrap());
                let cut = ss
                    .iter()
                    .flat_map(|s| &s.spec().pieces)
                    .filter(|p| p.shared)
                    .count();
                assert_eq!(cut > 0, workers > 1);
                let specs = ss.iter().map(|s| s.spec().clone()).collect();
                let mut co = Coordinator::new(MlpShards::new(&base).unwrap(), specs).unwrap();
                let (remote, impute, _) = run_local(&mut co, &mut ss, 100_000).unwrap();
                for (a, b) in impute.iter().zip(&native.impute) {
                    assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0));
                }
                for g in 0..=ng {
                    assert_eq!(remote[g].len(), native.units[g].len(), "group {g}");
                    for (k, (a, b)) in remote[g].iter().zip(&native.units[g]).enumerate() {
                        assert_eq!(a.iterations, b.iterations);
                        let pa = a.model.predict_columns(task, &cols, 0..y.len());
                        let pb = b.model.predict_columns(task, &cols, 0..y.len());
                        for (x, z) in pa.iter().zip(&pb) {
                            assert!(
                                (x - z).abs() <= 1e-4 * z.abs().max(1.0),
                                "{task:?} workers {workers} group {g} config {k}: {x} vs {z}"
                            );
                        }
                    }
                }
            }
        }
    }
}
