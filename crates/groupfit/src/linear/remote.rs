//! The linear family's part of the remote protocol ([`Sharded`]): two
//! statistics rounds standardise every piece with its whole group's
//! statistics, so a worker's blocks are exactly the blocks the native
//! runner builds (same rows, same statistics, same block numbers, so the
//! same Hessian sample).
//!
//! The rounds are [`crate::shard::standardise`]'s, with the linear layout's
//! scale rule (`std_or_one`).

use super::grouped::LinearPass;
use super::model::LinearModel;
use super::params::LinearConfig;
use super::solver::{Scratch, Status, UnitState};
use crate::data::layout::{GivenStats, GroupedMatrix, LayoutInput, BLOCK};
use crate::data::stats::std_or_one;
use crate::data::Task;
use crate::error::Result;
use crate::family::UnitFit;
use crate::shard::standardise::{self, Standardisation};
use crate::shard::{protocol_error as protocol, ShardRows, ShardSpec, Sharded};

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

/// A worker's prepared shard: the standardised layout (piece `i` is its
/// group `i`) and the rows of each piece's whole group.
pub struct LinearShard {
    matrix: GroupedMatrix,
    whole_rows: Vec<usize>,
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
        standardise::statistics(spec, rows, round, agreed)
    }

    fn reduce(
        &self,
        specs: &[ShardSpec],
        round: usize,
        agreed: &[f64],
        parts: &[Vec<f64>],
    ) -> Result<Vec<f64>> {
        standardise::reduce(specs, round, agreed, parts, std_or_one)
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
            mean.extend_from_slice(st.mean(p.group));
            scale.extend_from_slice(st.scale(p.group));
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
                impute: None,
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
                let y_mean = [st.y_mean(p.group)];
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
