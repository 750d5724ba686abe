//! The driver's side of the protocol: a [`Coordinator`] reduces the
//! workers' statistics, combines their partial results in piece order and
//! assembles the fitted models; [`run_local`] runs the whole protocol in one
//! process.

use crate::data::stats::std_or_one;
use crate::error::Result;
use crate::linear::solver;
use crate::linear::LinearModel;

use super::message::{parse_partials, protocol, Standardisation};
use super::place::ShardSpec;
use super::session::WorkerSession;

/// One fitted unit as reported by the workers.
#[derive(Debug, Clone)]
pub struct RemoteUnit {
    /// The model in raw feature space.
    pub model: LinearModel,
    /// Newton iterations taken.
    pub iterations: u32,
    /// Whether it met the tolerance.
    pub converged: bool,
}

/// The driver's side: reduces the workers' statistics and combines their
/// partial results in piece order.
#[derive(Debug, Clone)]
pub struct Coordinator {
    specs: Vec<ShardSpec>,
    d: usize,
    groups: usize,
    n_configs: usize,
    /// Rows of each group (0 for groups without pieces).
    group_rows: Vec<usize>,
    means: Option<Standardisation>,
    /// Passes combined so far.
    pub passes: usize,
}

impl Coordinator {
    /// A coordinator for workers with these specs (one per worker, in worker order).
    pub fn new(specs: Vec<ShardSpec>) -> Result<Coordinator> {
        let first = specs.first().ok_or_else(|| protocol("no workers"))?.clone();
        let mut group_rows = vec![0; first.groups];
        for s in &specs {
            if s.d != first.d || s.groups != first.groups || s.configs != first.configs {
                return Err(protocol("workers disagree on the problem"));
            }
            for p in &s.pieces {
                group_rows[p.group] = p.group_rows;
            }
        }
        Ok(Coordinator {
            d: first.d,
            groups: first.groups,
            n_configs: first.configs.len(),
            group_rows,
            specs,
            means: None,
            passes: 0,
        })
    }

    /// The workers' specs.
    pub fn specs(&self) -> &[ShardSpec] {
        &self.specs
    }

    fn check_count(&self, n: usize) -> Result<()> {
        if n != self.specs.len() {
            return Err(protocol("one message per worker expected"));
        }
        Ok(())
    }

    /// Reduces the workers' [`WorkerSession::moments`] into the imputation
    /// values and group means (the message to pass to every worker's
    /// [`WorkerSession::deviations`]). The imputation value of a feature is
    /// its mean over all training rows (the global pseudo-group's rows); a
    /// group's mean counts its missing values as imputed; the global
    /// pseudo-group's mean is the imputation value.
    pub fn reduce_moments(&mut self, parts: &[Vec<f64>]) -> Result<Vec<f64>> {
        self.check_count(parts.len())?;
        let (d, ng) = (self.d, self.groups);
        let w = 1 + 2 * d;
        let mut acc = vec![0.0; ng * w];
        for (spec, part) in self.specs.iter().zip(parts) {
            if part.len() != spec.pieces.len() * w {
                return Err(protocol("moments message has the wrong length"));
            }
            for (p, m) in spec.pieces.iter().zip(part.chunks(w)) {
                for (a, b) in acc[p.group * w..(p.group + 1) * w].iter_mut().zip(m) {
                    *a += b;
                }
            }
        }
        let global = ng - 1;
        let impute: Vec<f64> = (0..d)
            .map(|j| {
                let (n, s) = (acc[global * w + 1 + 2 * j], acc[global * w + 2 + 2 * j]);
                if n > 0.0 {
                    s / n
                } else {
                    0.0
                }
            })
            .collect();
        let sw = Standardisation::width(d);
        let mut per_group = vec![0.0; ng * sw];
        for g in 0..ng {
            let rows = self.group_rows[g] as f64;
            let out = &mut per_group[g * sw..(g + 1) * sw];
            if rows == 0.0 {
                continue;
            }
            out[0] = acc[g * w] / rows;
            for j in 0..d {
                let (n, s) = (acc[g * w + 1 + 2 * j], acc[g * w + 2 + 2 * j]);
                out[1 + j] = if g == global {
                    impute[j]
                } else {
                    (s + (rows - n) * impute[j]) / rows
                };
                out[1 + d + j] = 1.0;
            }
        }
        let st = Standardisation { impute, per_group };
        let msg = st.to_message();
        self.means = Some(st);
        Ok(msg)
    }

    /// Reduces the workers' [`WorkerSession::deviations`] into the scales;
    /// returns the standardisation message for [`WorkerSession::prepare`].
    pub fn reduce_deviations(&mut self, parts: &[Vec<f64>]) -> Result<Vec<f64>> {
        self.check_count(parts.len())?;
        let (d, ng) = (self.d, self.groups);
        let mut st = self
            .means
            .clone()
            .ok_or_else(|| protocol("deviations before moments"))?;
        let mut sq = vec![0.0; ng * d];
        for (spec, part) in self.specs.iter().zip(parts) {
            if part.len() != spec.pieces.len() * d {
                return Err(protocol("deviations message has the wrong length"));
            }
            for (p, m) in spec.pieces.iter().zip(part.chunks(d.max(1))) {
                for (a, b) in sq[p.group * d..(p.group + 1) * d].iter_mut().zip(m) {
                    *a += b;
                }
            }
        }
        let sw = Standardisation::width(d);
        for g in 0..ng {
            let rows = self.group_rows[g] as f64;
            let out = &mut st.per_group[g * sw..(g + 1) * sw];
            for j in 0..d {
                out[1 + d + j] = std_or_one(sq[g * d + j], rows, out[1 + j]);
            }
        }
        let msg = st.to_message();
        self.means = Some(st);
        Ok(msg)
    }

    /// Combines the workers' [`WorkerSession::step`] results: the statistics of
    /// each shared group's units added up in worker (= row) order. The result
    /// goes to every worker's [`WorkerSession::apply`].
    pub fn combine(&mut self, parts: &[Vec<f64>]) -> Result<Vec<f64>> {
        self.check_count(parts.len())?;
        let len = solver::stats_len(self.d);
        let mut by_group: std::collections::BTreeMap<usize, (Vec<usize>, Vec<f64>)> =
            Default::default();
        for part in parts {
            for (group, ks, stats) in parse_partials(part, len)? {
                match by_group.get_mut(&group) {
                    None => {
                        by_group.insert(group, (ks, stats.to_vec()));
                    }
                    Some((known, acc)) => {
                        if *known != ks {
                            return Err(protocol("workers disagree on a group's active units"));
                        }
                        crate::exec::add_stats(acc, stats);
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (group, (ks, stats)) in by_group {
            out.push(group as f64);
            out.push(ks.len() as f64);
            out.extend(ks.iter().map(|&k| k as f64));
            out.extend_from_slice(&stats);
        }
        self.passes += 1;
        Ok(out)
    }

    /// Assembles the workers' [`WorkerSession::models`]: per group, one unit per
    /// config (empty for groups not trained).
    pub fn finish(&self, parts: &[Vec<f64>]) -> Result<Vec<Vec<RemoteUnit>>> {
        self.check_count(parts.len())?;
        let d = self.d;
        let w = d + 5;
        let mut slots: Vec<Vec<Option<RemoteUnit>>> = self
            .group_rows
            .iter()
            .map(|&r| {
                if r > 0 {
                    vec![None; self.n_configs]
                } else {
                    Vec::new()
                }
            })
            .collect();
        for part in parts {
            if part.len() % w != 0 {
                return Err(protocol("models message has the wrong length"));
            }
            for m in part.chunks(w) {
                let (g, k) = (m[0] as usize, m[1] as usize);
                let slot = slots
                    .get_mut(g)
                    .and_then(|s| s.get_mut(k))
                    .ok_or_else(|| protocol("model of an unknown unit"))?;
                *slot = Some(RemoteUnit {
                    iterations: m[2] as u32,
                    converged: m[3] != 0.0,
                    model: LinearModel {
                        coef: m[4..4 + d].to_vec(),
                        intercept: m[4 + d],
                        onehot: Vec::new(),
                    },
                });
            }
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

/// Runs the whole protocol in this process (one session per worker, called in
/// turn) — the reference the Ray runner is tested against, and a check that
/// the protocol computes what the pass driver computes.
pub fn run_local(
    sessions: &mut [WorkerSession],
    max_passes: usize,
) -> Result<(Vec<Vec<RemoteUnit>>, usize)> {
    let mut co = Coordinator::new(sessions.iter().map(|s| s.spec().clone()).collect())?;
    let m: Vec<Vec<f64>> = sessions
        .iter()
        .map(|s| s.moments())
        .collect::<Result<_>>()?;
    let means = co.reduce_moments(&m)?;
    let dev: Vec<Vec<f64>> = sessions
        .iter_mut()
        .map(|s| s.deviations(&means))
        .collect::<Result<_>>()?;
    let st = co.reduce_deviations(&dev)?;
    for s in sessions.iter_mut() {
        s.prepare(&st)?;
    }
    while co.passes < max_passes && sessions.iter().any(|s| s.active() > 0) {
        let parts: Vec<Vec<f64>> = sessions
            .iter_mut()
            .map(|s| s.step())
            .collect::<Result<_>>()?;
        let combined = co.combine(&parts)?;
        for s in sessions.iter_mut() {
            s.apply(&combined)?;
        }
    }
    let models: Vec<Vec<f64>> = sessions.iter().map(|s| s.models()).collect::<Result<_>>()?;
    Ok((co.finish(&models)?, co.passes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::layout::{GroupedMatrix, LayoutInput};
    use crate::data::{Column, Task};
    use crate::linear::grouped::fit_grouped;
    use crate::linear::LinearParams;
    use crate::plan::Strategy;
    use crate::remote::place::{group_sorted, place, shard_rows};

    /// Groups with NaNs and different sizes; the protocol on 1, 2 and 3
    /// workers gives the pass driver's models.
    #[test]
    fn remote_sessions_equal_the_pass_driver() {
        for task in [Task::Binary, Task::Regression] {
            let sizes = [3000usize, 700, 40, 9, 1300];
            let n: usize = sizes.iter().sum();
            let d = 3;
            let mut group_of_row = Vec::new();
            for (g, &s) in sizes.iter().enumerate() {
                group_of_row.extend(std::iter::repeat(g as u32).take(s));
            }
            // interleave the rows so groups are not contiguous in the input
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
            let y: Vec<f64> = (0..n)
                .map(|i| {
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
            // training rows: every row but each 5th
            let rows: Vec<u32> = (0..n as u32).filter(|r| r % 5 != 0).collect();
            let group_of: Vec<u32> = rows.iter().map(|&r| group_all[r as usize]).collect();
            let ng = sizes.len();
            let columns: Vec<Column> = cols.iter().map(|c| Column::Owned(c.clone())).collect();
            let configs = vec![
                LinearParams::new().c(0.1).tol(1e-10).check().unwrap(),
                LinearParams::new().c(10.0).tol(1e-10).check().unwrap(),
            ];
            let matrix = GroupedMatrix::build(LayoutInput {
                columns: &columns,
                target: &y,
                rows: &rows,
                group_of: &group_of,
                n_groups: ng,
                with_global: true,
                threads: 1,
            })
            .unwrap();
            let fit = vec![true, true, true, false, true, true];
            let (native, _) =
                fit_grouped(&matrix, task, &configs, &fit, Strategy::Tp, 1, &mut |_| {});
            let (order, start) = group_sorted(&rows, &group_of, ng);
            let mut group_rows: Vec<usize> = (0..ng).map(|g| start[g + 1] - start[g]).collect();
            group_rows.push(rows.len());
            for workers in [1, 2, 3] {
                let placement = place(&group_rows, &fit, workers, 256);
                let mut sessions: Vec<WorkerSession> = placement
                    .into_iter()
                    .map(|pieces| {
                        let spec = ShardSpec {
                            task,
                            d,
                            configs: configs.clone(),
                            groups: ng + 1,
                            pieces,
                        };
                        let r = shard_rows(&spec.pieces, &order, &start);
                        let cols = cols
                            .iter()
                            .map(|c| Column::Owned(r.iter().map(|&i| c[i as usize]).collect()))
                            .collect();
                        let t = r.iter().map(|&i| y[i as usize]).collect();
                        WorkerSession::new(spec, cols, t).unwrap()
                    })
                    .collect();
                if workers > 1 {
                    assert!(sessions
                        .iter()
                        .all(|s| s.spec().pieces.iter().any(|p| p.shared)));
                }
                let (remote, passes) = run_local(&mut sessions, 10_000).unwrap();
                assert!(passes > 2);
                for g in 0..=ng {
                    assert_eq!(remote[g].len(), native[g].len(), "group {g}");
                    for (a, b) in remote[g].iter().zip(&native[g]) {
                        let (ma, mb) = (&a.model, &b.model);
                        for (x, z) in ma
                            .coef
                            .iter()
                            .chain([&ma.intercept])
                            .zip(mb.coef.iter().chain([&mb.intercept]))
                        {
                            assert!(
                                (x - z).abs() <= 1e-6 * z.abs().max(1.0),
                                "{task:?} workers {workers} group {g}: {ma:?} vs {mb:?}"
                            );
                        }
                        assert_eq!(a.converged, b.converged);
                    }
                }
            }
        }
    }
}
