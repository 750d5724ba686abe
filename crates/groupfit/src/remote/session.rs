//! One remote worker's side of the protocol: a [`WorkerSession`] holds the
//! worker's shard of the data and the states of its units, and answers the
//! coordinator's rounds (moments, deviations, prepare, step, apply,
//! snapshot, restore, models).

use crate::data::layout::{GivenStats, GroupedMatrix, LayoutInput, BLOCK};
use crate::data::Column;
use crate::error::Result;
use crate::linear::kernel::UnitRef;
use crate::linear::solver::{self, Scratch, Status, UnitState};
use crate::linear::LinearModel;

use super::message::{parse_partials, protocol, Standardisation};
use super::place::ShardSpec;

/// One worker: its shard of the data and the states of its units.
pub struct WorkerSession {
    spec: ShardSpec,
    /// Raw features and target, until [`WorkerSession::prepare`].
    raw: Option<(Vec<Column>, Vec<f64>)>,
    matrix: Option<GroupedMatrix>,
    /// Per piece, one unit per config (empty until prepared).
    units: Vec<Vec<UnitState>>,
    /// Per piece, `1 / scale^2` of each feature.
    penalty: Vec<f64>,
    scratch: Option<Scratch>,
    /// Received means (raw space), for the moments' second round.
    means: Option<Standardisation>,
}

impl WorkerSession {
    /// A session over the shard `spec` whose rows are `columns` (raw features,
    /// NaN for missing) and `target`, pieces concatenated in spec order.
    pub fn new(spec: ShardSpec, columns: Vec<Column>, target: Vec<f64>) -> Result<WorkerSession> {
        let n = spec.rows();
        if columns.len() != spec.d || columns.iter().any(|c| c.len() != n) || target.len() != n {
            return Err(protocol(&format!(
                "shard data does not match its spec ({} rows, {} features)",
                n, spec.d
            )));
        }
        for p in &spec.pieces {
            if p.group >= spec.groups || p.offset % BLOCK != 0 || p.offset + p.rows > p.group_rows {
                return Err(protocol("bad piece in the shard spec"));
            }
        }
        Ok(WorkerSession {
            raw: Some((columns, target)),
            matrix: None,
            units: Vec::new(),
            penalty: Vec::new(),
            scratch: None,
            means: None,
            spec,
        })
    }

    /// The shard spec.
    pub fn spec(&self) -> &ShardSpec {
        &self.spec
    }

    fn raw(&self) -> Result<&(Vec<Column>, Vec<f64>)> {
        self.raw
            .as_ref()
            .ok_or_else(|| protocol("the shard's raw data is gone (already prepared)"))
    }

    /// Row range of each piece in the shard.
    fn piece_rows(&self) -> Vec<std::ops::Range<usize>> {
        let mut at = 0;
        self.spec
            .pieces
            .iter()
            .map(|p| {
                at += p.rows;
                at - p.rows..at
            })
            .collect()
    }

    /// First round of statistics: per piece `[sum of y, (count, sum) of the
    /// present values of each feature]`.
    pub fn moments(&self) -> Result<Vec<f64>> {
        let (cols, y) = self.raw()?;
        let d = self.spec.d;
        let mut out = Vec::with_capacity(self.spec.pieces.len() * (1 + 2 * d));
        for r in self.piece_rows() {
            out.push(y[r.clone()].iter().sum());
            for c in cols {
                let (mut n, mut s) = (0.0, 0.0);
                crate::with_values!(c, |v| for &x in &v[r.clone()] {
                    let x: f64 = x.into();
                    if !x.is_nan() {
                        n += 1.0;
                        s += x;
                    }
                });
                out.push(n);
                out.push(s);
            }
        }
        Ok(out)
    }

    /// Second round: with the means from [`Coordinator::reduce_moments`](super::coordinator::Coordinator::reduce_moments), per
    /// piece the sum of squared deviations of each (imputed) feature.
    pub fn deviations(&mut self, means: &[f64]) -> Result<Vec<f64>> {
        let d = self.spec.d;
        let st = Standardisation::from_message(means, d, self.spec.groups)?;
        let (cols, _) = self.raw()?;
        let mut out = Vec::with_capacity(self.spec.pieces.len() * d);
        for (p, r) in self.spec.pieces.iter().zip(self.piece_rows()) {
            let gs = st.group(p.group, d);
            for (j, c) in cols.iter().enumerate() {
                let (m, fill) = (gs[1 + j], st.impute[j]);
                let mut sq = 0.0;
                crate::with_values!(c, |v| for &x in &v[r.clone()] {
                    let x: f64 = x.into();
                    let x = if x.is_nan() { fill } else { x };
                    sq += (x - m) * (x - m);
                });
                out.push(sq);
            }
        }
        self.means = Some(st);
        Ok(out)
    }

    /// Builds the standardised layout of the shard with the statistics from
    /// [`Coordinator::reduce_deviations`](super::coordinator::Coordinator::reduce_deviations) and the starting units; drops the raw data.
    pub fn prepare(&mut self, standardisation: &[f64]) -> Result<()> {
        let d = self.spec.d;
        let st = Standardisation::from_message(standardisation, d, self.spec.groups)?;
        let (cols, y) = self.raw.take().ok_or_else(|| protocol("prepared twice"))?;
        let np = self.spec.pieces.len();
        let mut mean = Vec::with_capacity(np * d);
        let mut scale = Vec::with_capacity(np * d);
        let mut block_base = Vec::with_capacity(np);
        let mut group_of = Vec::with_capacity(y.len());
        for (i, p) in self.spec.pieces.iter().enumerate() {
            let gs = st.group(p.group, d);
            mean.extend_from_slice(&gs[1..1 + d]);
            scale.extend_from_slice(&gs[1 + d..]);
            block_base.push(p.offset / BLOCK);
            group_of.extend(std::iter::repeat(i as u32).take(p.rows));
        }
        let rows: Vec<u32> = (0..y.len() as u32).collect();
        let matrix = GroupedMatrix::build_with_stats(
            LayoutInput {
                columns: &cols,
                target: &y,
                rows: &rows,
                group_of: &group_of,
                n_groups: np,
                with_global: false,
                threads: 1,
            },
            GivenStats {
                mean: &mean,
                scale: &scale,
                impute: &st.impute,
                block_base: &block_base,
            },
        )?;
        let task = self.spec.task;
        self.units = self
            .spec
            .pieces
            .iter()
            .map(|p| {
                // The group's target mean as a one-value slice: the starting
                // intercept of the whole group.
                let y_mean = [st.group(p.group, d)[0]];
                self.spec
                    .configs
                    .iter()
                    .map(|_| UnitState::new(task, &y_mean, d))
                    .collect()
            })
            .collect();
        self.penalty = scale.iter().map(|s| 1.0 / (s * s)).collect();
        self.scratch = Some(Scratch::new(d, matrix.dp()));
        self.matrix = Some(matrix);
        self.means = None;
        Ok(())
    }

    fn ready(&self) -> Result<()> {
        if self.matrix.is_none() {
            return Err(protocol("the session is not prepared"));
        }
        Ok(())
    }

    /// One pass over the shard: accumulates every active unit over its piece,
    /// updates the units of whole groups, and returns the partial statistics of
    /// shared groups: per piece with active units, `[group, n, k_1..k_n, stats
    /// of each unit]`.
    pub fn step(&mut self) -> Result<Vec<f64>> {
        self.ready()?;
        let d = self.spec.d;
        let len = solver::stats_len(d);
        let matrix = self.matrix.as_ref().unwrap();
        let scratch = self.scratch.as_mut().unwrap();
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for (i, p) in self.spec.pieces.iter().enumerate() {
            let ks: Vec<usize> = (0..self.units[i].len())
                .filter(|&k| self.units[i][k].status == Status::Active)
                .collect();
            if ks.is_empty() {
                continue;
            }
            let refs: Vec<UnitRef<'_>> = ks
                .iter()
                .map(|&k| UnitRef {
                    w: &self.units[i][k].w,
                    c: self.spec.configs[k].c(),
                    hessian: self.units[i][k].needs_hessian(),
                })
                .collect();
            buf.clear();
            buf.resize(ks.len() * len, 0.0);
            let stride = solver::hessian_stride(self.spec.task, p.group_rows.div_ceil(BLOCK));
            solver::accumulate(
                self.spec.task,
                stride,
                matrix.blocks(i, matrix.range(i)),
                &refs,
                &mut buf,
                scratch,
            );
            drop(refs);
            if p.shared {
                out.push(p.group as f64);
                out.push(ks.len() as f64);
                out.extend(ks.iter().map(|&k| k as f64));
                out.extend_from_slice(&buf);
            } else {
                solver::apply_batch(
                    &mut self.units[i],
                    &ks,
                    &mut buf,
                    &self.spec.configs,
                    &self.penalty[i * d..(i + 1) * d],
                    p.group_rows,
                    scratch,
                );
            }
        }
        Ok(out)
    }

    /// Applies the combined statistics of shared groups (from
    /// [`Coordinator::combine`](super::coordinator::Coordinator::combine)) to this worker's replicas; returns the number
    /// of units still active on this worker.
    pub fn apply(&mut self, combined: &[f64]) -> Result<usize> {
        self.ready()?;
        let d = self.spec.d;
        let len = solver::stats_len(d);
        let scratch = self.scratch.as_mut().unwrap();
        let mut stats = Vec::new();
        for (group, ks, all) in parse_partials(combined, len)? {
            let Some(i) = self.spec.pieces.iter().position(|p| p.group == group) else {
                continue;
            };
            for &k in &ks {
                let unit = self.units[i]
                    .get_mut(k)
                    .ok_or_else(|| protocol("unit index out of range"))?;
                if unit.status != Status::Active {
                    return Err(protocol("statistics for a unit that is not active"));
                }
            }
            stats.clear();
            stats.extend_from_slice(all);
            solver::apply_batch(
                &mut self.units[i],
                &ks,
                &mut stats,
                &self.spec.configs,
                &self.penalty[i * d..(i + 1) * d],
                self.spec.pieces[i].group_rows,
                scratch,
            );
        }
        Ok(self.active())
    }

    /// Units still active on this worker (replicas of shared units included).
    pub fn active(&self) -> usize {
        self.units
            .iter()
            .flatten()
            .filter(|u| u.status == Status::Active)
            .count()
    }

    /// The state of every unit, to resume from after a failure.
    pub fn snapshot(&self) -> Result<Vec<f64>> {
        self.ready()?;
        let mut out = Vec::new();
        for u in self.units.iter().flatten() {
            u.save(&mut out);
        }
        Ok(out)
    }

    /// Restores the unit states of a [`WorkerSession::snapshot`] (of a session
    /// over the same shard, prepared).
    pub fn restore(&mut self, snapshot: &[f64]) -> Result<()> {
        self.ready()?;
        let mut at = 0;
        for u in self.units.iter_mut().flatten() {
            at += u
                .load(&snapshot[at.min(snapshot.len())..])
                .ok_or_else(|| protocol("snapshot too short"))?;
        }
        if at != snapshot.len() {
            return Err(protocol("snapshot of another shard"));
        }
        Ok(())
    }

    /// The fitted models of the groups this worker reports (whole groups, and
    /// the first piece of each shared group): per unit `[group, k, iterations,
    /// converged, coef (d), intercept]`, in the raw feature space.
    pub fn models(&self) -> Result<Vec<f64>> {
        self.ready()?;
        let d = self.spec.d;
        let matrix = self.matrix.as_ref().unwrap();
        let mut out = Vec::new();
        for (i, p) in self.spec.pieces.iter().enumerate() {
            if p.shared && p.offset != 0 {
                continue;
            }
            for (k, u) in self.units[i].iter().enumerate() {
                let m = LinearModel::from_standardised(&u.w, matrix.mean(i), matrix.scale(i));
                out.push(p.group as f64);
                out.push(k as f64);
                out.push(u.iter as f64);
                out.push(f64::from(u8::from(u.status == Status::Converged)));
                out.extend_from_slice(&m.coef);
                out.push(m.intercept);
            }
        }
        debug_assert!(out.len() % (d + 5) == 0);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Task;
    use crate::linear::LinearParams;
    use crate::remote::coordinator::{run_local, Coordinator};
    use crate::remote::place::Piece;

    #[test]
    fn snapshots_restore_the_units() {
        let spec = ShardSpec {
            task: Task::Regression,
            d: 1,
            configs: vec![LinearParams::new().check().unwrap()],
            groups: 2,
            pieces: vec![Piece {
                group: 1,
                offset: 0,
                rows: 4,
                group_rows: 4,
                shared: false,
            }],
        };
        let mk = || {
            WorkerSession::new(
                spec.clone(),
                vec![Column::Owned(vec![1.0, 2.0, 3.0, 5.0])],
                vec![1.0, 2.0, 2.5, 4.0],
            )
            .unwrap()
        };
        let mut a = mk();
        let mut b = mk();
        let (mut res_a, _) = run_local(std::slice::from_mut(&mut a), 1).unwrap();
        let snap = a.snapshot().unwrap();
        run_local(std::slice::from_mut(&mut b), 0).unwrap();
        b.restore(&snap).unwrap();
        assert_eq!(b.snapshot().unwrap(), snap);
        assert!(b.restore(&snap[1..]).is_err());
        let m = Coordinator::new(vec![spec])
            .unwrap()
            .finish(&[b.models().unwrap()])
            .unwrap();
        assert_eq!(m[1][0].model, res_a.remove(1).remove(0).model);
    }
}
