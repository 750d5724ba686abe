//! The MLP family's part of the remote protocol ([`Sharded`]).
//!
//! - The two rounds of [`crate::shard::standardise`] standardise each piece
//!   with its whole group's means and population standard deviations.
//! - A whole piece takes up to [`super::grouped::WHOLE_STEPS`] mini-batch
//!   steps a pass on its worker.
//! - A cut group's networks are replicated on its holders. Each step's
//!   batch is drawn over the whole group, from the group's seeded
//!   permutation, as the native runner draws it. Each holder sums the
//!   gradient over the batch members whose rows it holds; the coordinator
//!   adds the sums in row order, and every holder takes the same optimizer
//!   step.

use std::ops::Range;

use super::grouped::{MlpData, MlpInput, MlpPass, MlpScratch, MlpUnit};
use super::model::MlpModel;
use super::params::MlpConfig;
use crate::data::keys::group_stream;
use crate::data::Task;
use crate::error::Result;
use crate::family::UnitFit;
use crate::shard::standardise::{self, Standardisation};
use crate::shard::{protocol_error as protocol, ShardRows, ShardSpec, Sharded};

/// The MLP family on a remote worker or its coordinator.
pub struct MlpShards {
    task: Task,
    d: usize,
    seed: u64,
    configs: Vec<MlpConfig>,
}

impl MlpShards {
    /// The family for `spec`'s grid.
    pub fn new(spec: &ShardSpec) -> Result<MlpShards> {
        if spec.kinds.iter().any(|k| k.levels().is_some()) {
            return Err(protocol("categorical features are not cut over workers"));
        }
        Ok(MlpShards {
            task: spec.task,
            d: spec.d,
            seed: spec.seed,
            configs: super::configs(&spec.configs)?,
        })
    }
}

/// A worker's prepared shard: the standardised rows (piece `i` is its
/// group `i`), each piece's RNG stream, and where each piece lies in its
/// group.
pub struct MlpShard {
    data: MlpData,
    streams: Vec<u64>,
    pieces: Vec<(usize, usize)>,
}

impl MlpShards {
    /// The partial step over a prepared shard, its pieces taken as whole
    /// groups (slots, models).
    fn whole_pass<'a>(&'a self, prepared: &'a MlpShard) -> MlpPass<'a> {
        MlpPass::new(
            &prepared.data,
            self.task,
            &self.configs,
            &prepared.streams,
            self.seed,
        )
    }
}

/// The native rule: the population standard deviation, 1 where it is 0.
fn population_std(sq: f64, rows: f64, _mean: f64) -> f64 {
    let sd = if rows > 0.0 { (sq / rows).sqrt() } else { 0.0 };
    if sd > 0.0 {
        sd
    } else {
        1.0
    }
}

impl Sharded for MlpShards {
    type Unit = MlpUnit;
    type Model = MlpModel;
    type Prepared = MlpShard;
    type Scratch = MlpScratch;
    type Pass<'a> = MlpPass<'a>;

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
        standardise::reduce(specs, round, agreed, parts, population_std)
    }

    fn prepare(
        &self,
        spec: &ShardSpec,
        rows: ShardRows,
        agreed: &[f64],
    ) -> Result<(MlpShard, Vec<Vec<MlpUnit>>)> {
        let d = self.d;
        let st = Standardisation::parse(agreed, d, spec.groups)?;
        let np = spec.pieces.len();
        let order: Vec<u32> = (0..rows.target.len() as u32).collect();
        let group_of: Vec<u32> = spec
            .pieces
            .iter()
            .enumerate()
            .flat_map(|(i, p)| std::iter::repeat_n(i as u32, p.rows))
            .collect();
        let mut fit = vec![true; np];
        fit.push(false);
        // Per piece its group's statistics; the unfitted global slot last.
        let mut mean = Vec::with_capacity((np + 1) * d);
        let mut std = Vec::with_capacity((np + 1) * d);
        for p in &spec.pieces {
            mean.extend_from_slice(st.mean(p.group));
            std.extend_from_slice(st.scale(p.group));
        }
        mean.extend(std::iter::repeat_n(0.0, d));
        std.extend(std::iter::repeat_n(1.0, d));
        let data = MlpData::build_with_stats(
            MlpInput {
                columns: &rows.columns,
                target: &rows.target,
                rows: &order,
                group_of: &group_of,
                n_groups: np,
                fit: &fit,
                impute: st.impute,
                threads: 1,
            },
            mean,
            std,
        );
        let mut streams: Vec<u64> = spec.keys.iter().map(|k| group_stream(Some(k))).collect();
        streams.push(group_stream(None));
        let prepared = MlpShard {
            data,
            streams,
            pieces: spec
                .pieces
                .iter()
                .map(|p| (p.offset, p.group_rows))
                .collect(),
        };
        let pass = self.pass(spec, &prepared);
        let units = (0..np)
            .map(|i| {
                (0..self.configs.len())
                    .map(|k| pass.new_unit(i, k))
                    .collect()
            })
            .collect();
        Ok((prepared, units))
    }

    fn pass<'a>(&'a self, _spec: &'a ShardSpec, prepared: &'a MlpShard) -> MlpPass<'a> {
        self.whole_pass(prepared).pieces_of(prepared.pieces.clone())
    }

    fn piece_range(&self, prepared: &MlpShard, piece: usize) -> Range<usize> {
        self.whole_pass(prepared).slot_ranges()[piece].clone()
    }

    fn model(
        &self,
        prepared: &MlpShard,
        piece: usize,
        k: usize,
        unit: &MlpUnit,
    ) -> UnitFit<MlpModel> {
        let (model, epochs) = self.whole_pass(prepared).model_of(piece, k, unit);
        UnitFit {
            model,
            iterations: epochs,
            converged: true,
        }
    }

    fn impute(&self, agreed: &[f64]) -> Vec<f64> {
        agreed[..self.d.min(agreed.len())].to_vec()
    }
}
