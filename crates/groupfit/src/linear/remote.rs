//! The linear family's part of the remote protocol ([`Sharded`]): two
//! statistics rounds standardise every piece with its whole group's
//! statistics, so a worker's blocks are exactly the blocks the native
//! runner builds (same rows, same statistics, same block numbers, so the
//! same Hessian sample).
//!
//! 1. Per piece `[sum of y, (count, sum) of the present values of each
//!    feature]`; reduced into the imputation values (the global
//!    pseudo-group's means) and each group's target mean and feature means.
//! 2. Per piece, the squared deviations of each imputed feature from its
//!    group's mean; reduced into the scales.

use super::grouped::LinearPass;
use super::model::LinearModel;
use super::params::LinearConfig;
use super::solver::{Scratch, Status, UnitState};
use crate::data::layout::{GivenStats, GroupedMatrix, LayoutInput, BLOCK};
use crate::data::stats::std_or_one;
use crate::data::Task;
use crate::error::{GroupfitError, Result};
use crate::family::UnitFit;
use crate::shard::{ShardRows, ShardSpec, Sharded};

/// The linear family on a remote worker or its coordinator.
pub struct LinearShards {
    task: Task,
    d: usize,
    configs: Vec<LinearConfig>,
}

impl LinearShards {
    /// The family for `spec`'s grid.
    pub fn new(spec: &ShardSpec) -> Result<LinearShards> {
        if spec.kinds.iter().any(|k| k.levels().is_some()) {
            return Err(protocol("categorical features are not cut over workers"));
        }
        if spec.pieces.iter().any(|p| p.offset % BLOCK != 0) {
            return Err(protocol("a piece does not start at a block"));
        }
        Ok(LinearShards {
            task: spec.task,
            d: spec.d,
            configs: super::configs(&spec.configs)?,
        })
    }
}

fn protocol(what: &str) -> GroupfitError {
    GroupfitError::arg(format!("remote worker protocol: {what}"))
}

/// A worker's prepared shard: the standardised layout (piece `i` is its
/// group `i`) and the rows of each piece's whole group.
pub struct LinearShard {
    matrix: GroupedMatrix,
    whole_rows: Vec<usize>,
}

/// Standardisation of every group: imputation values, then per group
/// `[y_mean, mean (d), scale (d)]`.
struct Standardisation<'m> {
    impute: &'m [f64],
    per_group: &'m [f64],
    d: usize,
}

impl<'m> Standardisation<'m> {
    fn width(d: usize) -> usize {
        1 + 2 * d
    }
    fn parse(m: &'m [f64], d: usize, groups: usize) -> Result<Standardisation<'m>> {
        if m.len() != d + groups * Self::width(d) {
            return Err(protocol("standardisation message has the wrong length"));
        }
        Ok(Standardisation {
            impute: &m[..d],
            per_group: &m[d..],
            d,
        })
    }
    fn group(&self, g: usize) -> &'m [f64] {
        let w = Self::width(self.d);
        &self.per_group[g * w..(g + 1) * w]
    }
}

/// Adds each piece's `width` values of `part` into its group's slot of `acc`.
fn add_by_group(acc: &mut [f64], spec: &ShardSpec, part: &[f64], width: usize) -> Result<()> {
    if part.len() != spec.pieces.len() * width {
        return Err(protocol("statistics message has the wrong length"));
    }
    for (p, m) in spec.pieces.iter().zip(part.chunks(width.max(1))) {
        for (a, b) in acc[p.group * width..(p.group + 1) * width].iter_mut().zip(m) {
            *a += b;
        }
    }
    Ok(())
}

impl LinearShards {
    /// Round 0 on a worker: per piece `[sum y, (n, sum) per feature]`.
    fn moments(&self, spec: &ShardSpec, rows: &ShardRows) -> Vec<f64> {
        let mut out = Vec::with_capacity(spec.pieces.len() * (1 + 2 * self.d));
        for r in spec.piece_rows() {
            out.push(rows.target[r.clone()].iter().sum());
            for c in &rows.columns {
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
        out
    }

    /// Round 1 on a worker: per piece, the squared deviations of each
    /// imputed feature from its group's mean.
    fn deviations(&self, spec: &ShardSpec, rows: &ShardRows, means: &[f64]) -> Result<Vec<f64>> {
        let st = Standardisation::parse(means, self.d, spec.groups)?;
        let mut out = Vec::with_capacity(spec.pieces.len() * self.d);
        for (p, r) in spec.pieces.iter().zip(spec.piece_rows()) {
            let gs = st.group(p.group);
            for (j, c) in rows.columns.iter().enumerate() {
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
        Ok(out)
    }

    /// Round 0 reduced: the imputation value of a feature is its mean over
    /// all training rows (the global pseudo-group's); a group's mean counts
    /// its missing values as imputed. Scales are 1 until round 1.
    fn reduce_moments(&self, specs: &[ShardSpec], parts: &[Vec<f64>]) -> Result<Vec<f64>> {
        let (d, ng) = (self.d, specs[0].groups);
        let w = 1 + 2 * d;
        let mut acc = vec![0.0; ng * w];
        let mut rows = vec![0usize; ng];
        for (spec, part) in specs.iter().zip(parts) {
            add_by_group(&mut acc, spec, part, w)?;
            for p in &spec.pieces {
                rows[p.group] = p.group_rows;
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
        let mut out = impute.clone();
        out.resize(d + ng * sw, 0.0);
        for g in 0..ng {
            let n_rows = rows[g] as f64;
            if n_rows == 0.0 {
                continue;
            }
            let o = &mut out[d + g * sw..d + (g + 1) * sw];
            o[0] = acc[g * w] / n_rows;
            for j in 0..d {
                let (n, s) = (acc[g * w + 1 + 2 * j], acc[g * w + 2 + 2 * j]);
                o[1 + j] = if g == global {
                    impute[j]
                } else {
                    (s + (n_rows - n) * impute[j]) / n_rows
                };
                o[1 + d + j] = 1.0;
            }
        }
        Ok(out)
    }

    /// Round 1 reduced: the scales.
    fn reduce_deviations(
        &self,
        specs: &[ShardSpec],
        means: &[f64],
        parts: &[Vec<f64>],
    ) -> Result<Vec<f64>> {
        let (d, ng) = (self.d, specs[0].groups);
        Standardisation::parse(means, d, ng)?;
        let mut sq = vec![0.0; ng * d];
        let mut rows = vec![0usize; ng];
        for (spec, part) in specs.iter().zip(parts) {
            add_by_group(&mut sq, spec, part, d)?;
            for p in &spec.pieces {
                rows[p.group] = p.group_rows;
            }
        }
        let sw = Standardisation::width(d);
        let mut out = means.to_vec();
        for g in 0..ng {
            let o = &mut out[d + g * sw..d + (g + 1) * sw];
            for j in 0..d {
                o[1 + d + j] = std_or_one(sq[g * d + j], rows[g] as f64, o[1 + j]);
            }
        }
        Ok(out)
    }
}

impl Sharded for LinearShards {
    type Unit = UnitState;
    type Model = LinearModel;
    type Prepared = LinearShard;
    type Scratch = Scratch;
    type Pass<'a> = LinearPass<'a>;

    fn rounds(&self) -> usize {
        2
    }

    fn statistics(
        &self,
        spec: &ShardSpec,
        rows: &ShardRows,
        round: usize,
        agreed: &[f64],
    ) -> Result<Vec<f64>> {
        match round {
            0 => Ok(self.moments(spec, rows)),
            _ => self.deviations(spec, rows, agreed),
        }
    }

    fn reduce(
        &self,
        specs: &[ShardSpec],
        round: usize,
        agreed: &[f64],
        parts: &[Vec<f64>],
    ) -> Result<Vec<f64>> {
        match round {
            0 => self.reduce_moments(specs, parts),
            _ => self.reduce_deviations(specs, agreed, parts),
        }
    }

    fn prepare(
        &self,
        spec: &ShardSpec,
        rows: ShardRows,
        agreed: &[f64],
    ) -> Result<(LinearShard, Vec<Vec<UnitState>>)> {
        let d = self.d;
        let st = Standardisation::parse(agreed, d, spec.groups)?;
        let np = spec.pieces.len();
        let mut mean = Vec::with_capacity(np * d);
        let mut scale = Vec::with_capacity(np * d);
        let mut block_base = Vec::with_capacity(np);
        let mut group_of = Vec::with_capacity(rows.target.len());
        for (i, p) in spec.pieces.iter().enumerate() {
            let gs = st.group(p.group);
            mean.extend_from_slice(&gs[1..1 + d]);
            scale.extend_from_slice(&gs[1 + d..]);
            block_base.push(p.offset / BLOCK);
            group_of.extend(std::iter::repeat_n(i as u32, p.rows));
        }
        let order: Vec<u32> = (0..rows.target.len() as u32).collect();
        let matrix = GroupedMatrix::build_with_stats(
            LayoutInput {
                columns: &rows.columns,
                target: &rows.target,
                rows: &order,
                group_of: &group_of,
                n_groups: np,
                with_global: false,
                threads: 1,
            },
            GivenStats {
                mean: &mean,
                scale: &scale,
                impute: st.impute,
                block_base: &block_base,
            },
        )?;
        // Each unit starts at its whole group's target mean.
        let units = spec
            .pieces
            .iter()
            .map(|p| {
                let y_mean = [st.group(p.group)[0]];
                (0..self.configs.len())
                    .map(|_| UnitState::new(self.task, &y_mean, d))
                    .collect()
            })
            .collect();
        let whole_rows = spec.pieces.iter().map(|p| p.group_rows).collect();
        Ok((LinearShard { matrix, whole_rows }, units))
    }

    fn pass<'a>(&'a self, _spec: &'a ShardSpec, prepared: &'a LinearShard) -> LinearPass<'a> {
        LinearPass::new(&prepared.matrix, self.task, &self.configs)
            .pieces_of(prepared.whole_rows.clone())
    }

    fn piece_range(&self, prepared: &LinearShard, piece: usize) -> std::ops::Range<usize> {
        prepared.matrix.range(piece)
    }

    fn model(
        &self,
        prepared: &LinearShard,
        piece: usize,
        _k: usize,
        unit: &UnitState,
    ) -> UnitFit<LinearModel> {
        let m = &prepared.matrix;
        UnitFit {
            model: LinearModel::from_standardised(&unit.w, m.mean(piece), m.scale(piece)),
            iterations: unit.iter,
            converged: unit.status == Status::Converged,
        }
    }

    fn impute(&self, agreed: &[f64]) -> Vec<f64> {
        agreed[..self.d.min(agreed.len())].to_vec()
    }
}
