//! The partial-step API for workers in other processes (the Ray runner's
//! actors): no threads, no global state, messages as flat `f64` vectors.
//!
//! A driver-side [`Coordinator`] and one [`WorkerSession`] per worker:
//!
//! 1. [`place`] cuts the training groups into [`Piece`]s: small groups whole on
//!    one worker (largest first to the least-loaded worker), large groups and
//!    the global pseudo-group cut into one block-aligned piece per worker.
//!    Each worker gets a [`ShardSpec`] and the rows of its pieces, in the
//!    group-sorted order of a single-machine layout.
//! 2. Standardisation uses every group's statistics over all workers:
//!    [`WorkerSession::moments`] → [`Coordinator::reduce_moments`] (counts and
//!    sums: imputation values, means) → [`WorkerSession::deviations`] →
//!    [`Coordinator::reduce_deviations`] (scales) → [`WorkerSession::prepare`].
//!    A worker's blocks are then exactly the blocks the native runner builds
//!    (same rows, same statistics, same block numbers, so the same Hessian
//!    sample).
//! 3. Each pass: [`WorkerSession::step`] accumulates every active unit over its
//!    pieces, updates whole groups on the spot and returns the partial
//!    statistics of shared groups; [`Coordinator::combine`] adds them in piece
//!    order; [`WorkerSession::apply`] applies the combined statistics to every
//!    replica of a shared group's units (replicas stay identical).
//! 4. [`WorkerSession::snapshot`] / [`WorkerSession::restore`]: the unit states
//!    after a pass, so a replaced worker resumes from the last completed pass.
//! 5. [`WorkerSession::models`] → [`Coordinator::finish`]: the fitted models.
//!
//! Every message is a `Vec<f64>` (group ids and counts are small integers,
//! exact in `f64`); the caller moves them as bytes.

pub mod whole;

use serde::{Deserialize, Serialize};

use crate::data::layout::{std_or_one, GivenStats, GroupedMatrix, LayoutInput, BLOCK};
use crate::data::{Column, Task};
use crate::error::{GroupfitError, Result};
use crate::linear::kernel::UnitRef;
use crate::linear::solver::{self, Scratch, Status, UnitState};
use crate::linear::{LinearConfig, LinearModel};

/// A run of rows of one group held by one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// The group (the global pseudo-group is `n_groups`).
    pub group: usize,
    /// First row of the piece inside its group (a multiple of [`BLOCK`]).
    pub offset: usize,
    /// Rows in the piece.
    pub rows: usize,
    /// Rows of the whole group.
    pub group_rows: usize,
    /// Whether other workers hold other pieces of the group.
    pub shared: bool,
}

/// What one worker trains: its pieces, in the order of its rows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardSpec {
    /// Binary or regression.
    pub task: Task,
    /// Number of features.
    pub d: usize,
    /// The grid.
    pub configs: Vec<LinearConfig>,
    /// Groups including the global pseudo-group (`n_groups + 1`).
    pub groups: usize,
    /// The pieces; the worker's rows are their rows, concatenated in this order.
    pub pieces: Vec<Piece>,
}

impl ShardSpec {
    /// Rows of the shard.
    pub fn rows(&self) -> usize {
        self.pieces.iter().map(|p| p.rows).sum()
    }
}

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
        });
    }
    for pieces in &mut out {
        pieces.sort_by_key(|p| p.group);
    }
    out
}

/// Training rows in group-sorted order (a stable counting sort of `rows` by
/// `group_of`), with each group's start: `order[start[g]..start[g + 1]]` are
/// group `g`'s rows in input order, and the whole of `order` is the global
/// pseudo-group's row order, as in [`GroupedMatrix`].
pub fn group_sorted(rows: &[u32], group_of: &[u32], n_groups: usize) -> (Vec<u32>, Vec<usize>) {
    let (pos, start) = crate::data::bucket(group_of.iter().map(|&g| g as usize), n_groups);
    (pos.iter().map(|&i| rows[i as usize]).collect(), start)
}

/// The input rows of a worker's pieces, in its order: piece rows taken from
/// `order`/`start` of [`group_sorted`] (the global pseudo-group, `group ==
/// n_groups`, takes its rows from the whole of `order`).
pub fn shard_rows(pieces: &[Piece], order: &[u32], start: &[usize]) -> Vec<u32> {
    let n_groups = start.len() - 1;
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.rows).sum());
    for p in pieces {
        let base = if p.group == n_groups {
            0
        } else {
            start[p.group]
        };
        out.extend_from_slice(&order[base + p.offset..base + p.offset + p.rows]);
    }
    out
}

/// Standardisation of every group: imputation values, per-group target mean,
/// feature means and scales.
#[derive(Debug, Clone)]
struct Standardisation {
    impute: Vec<f64>,
    /// Per group: `[y_mean, mean (d), scale (d)]`.
    per_group: Vec<f64>,
}

impl Standardisation {
    fn width(d: usize) -> usize {
        1 + 2 * d
    }
    fn to_message(&self) -> Vec<f64> {
        let mut m = self.impute.clone();
        m.extend_from_slice(&self.per_group);
        m
    }
    fn from_message(m: &[f64], d: usize, groups: usize) -> Result<Standardisation> {
        if m.len() != d + groups * Self::width(d) {
            return Err(protocol("standardisation message has the wrong length"));
        }
        Ok(Standardisation {
            impute: m[..d].to_vec(),
            per_group: m[d..].to_vec(),
        })
    }
    fn group(&self, g: usize, d: usize) -> &[f64] {
        let w = Self::width(d);
        &self.per_group[g * w..(g + 1) * w]
    }
}

fn protocol(what: &str) -> GroupfitError {
    GroupfitError::arg(format!("remote worker protocol: {what}"))
}

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

    /// Second round: with the means from [`Coordinator::reduce_moments`], per
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
    /// [`Coordinator::reduce_deviations`] and the starting units; drops the raw data.
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
    /// [`Coordinator::combine`]) to this worker's replicas; returns the number
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

/// Parses `[group, n, k_1..k_n, stats...]*`.
fn parse_partials(m: &[f64], len: usize) -> Result<Vec<(usize, Vec<usize>, &[f64])>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < m.len() {
        if at + 2 > m.len() {
            return Err(protocol("truncated statistics message"));
        }
        let group = m[at] as usize;
        let n = m[at + 1] as usize;
        at += 2;
        if at + n + n * len > m.len() {
            return Err(protocol("truncated statistics message"));
        }
        let ks = m[at..at + n].iter().map(|&k| k as usize).collect();
        at += n;
        out.push((group, ks, &m[at..at + n * len]));
        at += n * len;
    }
    Ok(out)
}

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
    use crate::linear::grouped::fit_grouped;
    use crate::linear::LinearParams;
    use crate::plan::Strategy;

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
                shared: true
            }
        );
        assert_eq!(
            p[1].iter().find(|x| x.group == 4).unwrap(),
            &Piece {
                group: 4,
                offset: 2816,
                rows: 2784,
                group_rows: 5600,
                shared: true
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
