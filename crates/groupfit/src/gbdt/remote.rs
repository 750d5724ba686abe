//! The gbdt family's part of the remote protocol ([`Sharded`]), after
//! LightGBM's data-parallel learner: holders of a cut group agree on its
//! bins before the passes, then sync only at the histogram reduction.
//!
//! - One statistics round: each holder of a cut group's piece sends its
//!   label sum and the feature values of its rows in the group's bin
//!   sample ([`in_bin_sample`]); the coordinator fits the group's bins on
//!   them, as the native layout does on the whole group, for every
//!   [`Binning`] of the grid.
//! - A whole piece runs full boosting rounds on its worker.
//! - A cut group's booster is replicated on its holders
//!   ([`Booster::for_piece`]). Each pass, every holder builds the histogram
//!   of the leaf asked for over its rows, with its row count in the last
//!   slot; the coordinator adds them in row order; every holder applies the
//!   same split ([`Booster::step_counted`]) to its own rows. Rows, gradients
//!   and partitions never travel.

use std::ops::Range;

use super::binning::{in_bin_sample, BinMapper, Binning, GivenBins};
use super::booster::{Booster, StepScratch};
use super::grouped::GbdtLayout;
use super::model::GbdtModel;
use super::params::GbdtConfig;
use crate::data::categorical::FeatureKind;
use crate::data::Task;
use crate::error::Result;
use crate::exec::PartialStep;
use crate::family::{TrainData, UnitFit, ValidData};
use crate::plan::Strategy;
use crate::shard::{protocol_error as protocol, ShardRows, ShardSpec, Sharded};

/// The gbdt family on a remote worker or its coordinator.
pub struct GbdtShards {
    task: Task,
    d: usize,
    seed: u64,
    configs: Vec<GbdtConfig>,
    /// The grid's distinct binnings, and each config's.
    binnings: Vec<Binning>,
    binning_of: Vec<usize>,
}

impl GbdtShards {
    /// The family for `spec`'s grid.
    pub fn new(spec: &ShardSpec) -> Result<GbdtShards> {
        if spec.kinds.iter().any(|k| k.levels().is_some()) {
            return Err(protocol("categorical features are not cut over workers"));
        }
        let configs = super::configs(&spec.configs)?;
        let mut binnings: Vec<Binning> = configs.iter().map(Binning::of).collect();
        binnings.sort_unstable();
        binnings.dedup();
        let binning_of = configs
            .iter()
            .map(|c| binnings.binary_search(&Binning::of(c)).expect("listed"))
            .collect();
        Ok(GbdtShards {
            task: spec.task,
            d: spec.d,
            seed: spec.seed,
            configs,
            binnings,
            binning_of,
        })
    }
}

/// A cut group's agreed start: its mean label and, per binning, every
/// feature's bins.
struct GroupStart {
    mean: f64,
    mappers: Vec<Vec<BinMapper>>,
}

impl GbdtShards {
    /// Parses the reduced message: `[n, (group, mean, per binning and
    /// feature: len, upper...)*]`.
    fn parse(&self, m: &[f64], groups: usize) -> Result<Vec<Option<GroupStart>>> {
        let mut out: Vec<Option<GroupStart>> = (0..groups).map(|_| None).collect();
        let mut at = 1;
        let take = |at: &mut usize, n: usize| -> Result<Range<usize>> {
            let r = *at..*at + n;
            if r.end > m.len() {
                return Err(protocol("truncated bins message"));
            }
            *at = r.end;
            Ok(r)
        };
        let count = *m.first().ok_or_else(|| protocol("empty bins message"))? as usize;
        for _ in 0..count {
            let head = take(&mut at, 2)?;
            let (g, mean) = (m[head.start] as usize, m[head.start + 1]);
            let mut mappers = Vec::with_capacity(self.binnings.len());
            for _ in &self.binnings {
                let mut ms = Vec::with_capacity(self.d);
                for _ in 0..self.d {
                    let n = m[take(&mut at, 1)?.start] as usize;
                    ms.push(BinMapper {
                        upper: m[take(&mut at, n)?].to_vec(),
                    });
                }
                mappers.push(ms);
            }
            *out.get_mut(g)
                .ok_or_else(|| protocol("bins of an unknown group"))? =
                Some(GroupStart { mean, mappers });
        }
        Ok(out)
    }
}

/// A worker's prepared shard: one layout per binning (piece `i` is its
/// group `i`), and whether each piece is shared.
pub struct GbdtShard {
    layouts: Vec<GbdtLayout>,
    shared: Vec<bool>,
}

impl Sharded for GbdtShards {
    type Unit = Booster;
    type Model = GbdtModel;
    type Prepared = GbdtShard;
    type Scratch = StepScratch;
    type Pass<'a> = GbdtShardPass<'a>;

    fn rounds(&self) -> usize {
        1
    }

    /// Per shared piece: `[label sum, m, the m sampled rows' values of each
    /// feature in turn]`.
    fn statistics(
        &self,
        spec: &ShardSpec,
        rows: &ShardRows,
        _round: usize,
        _agreed: &[f64],
    ) -> Result<Vec<f64>> {
        if rows.ids.len() != rows.target.len() {
            return Err(protocol("a gbdt shard needs its rows' table numbers"));
        }
        let mut out = Vec::new();
        for (p, r) in spec.pieces.iter().zip(spec.piece_rows()) {
            if !p.shared {
                continue;
            }
            let sample: Vec<usize> = r
                .clone()
                .filter(|&i| in_bin_sample(rows.ids[i], p.group_rows))
                .collect();
            out.push(rows.target[r].iter().sum());
            out.push(sample.len() as f64);
            for c in &rows.columns {
                out.extend(sample.iter().map(|&i| c.get(i)));
            }
        }
        Ok(out)
    }

    fn reduce(
        &self,
        specs: &[ShardSpec],
        _round: usize,
        _agreed: &[f64],
        parts: &[Vec<f64>],
    ) -> Result<Vec<f64>> {
        // Per cut group: label sum, rows, each feature's sampled values.
        let mut by_group: std::collections::BTreeMap<usize, (f64, usize, Vec<Vec<f64>>)> =
            Default::default();
        for (spec, part) in specs.iter().zip(parts) {
            let mut at = 0;
            for p in spec.pieces.iter().filter(|p| p.shared) {
                if at + 2 > part.len() {
                    return Err(protocol("truncated sample message"));
                }
                let (sum, m) = (part[at], part[at + 1] as usize);
                at += 2;
                if at + m * self.d > part.len() {
                    return Err(protocol("truncated sample message"));
                }
                let e = by_group
                    .entry(p.group)
                    .or_insert_with(|| (0.0, p.group_rows, vec![Vec::new(); self.d]));
                e.0 += sum;
                for (j, col) in e.2.iter_mut().enumerate() {
                    col.extend_from_slice(&part[at + j * m..at + (j + 1) * m]);
                }
                at += m * self.d;
            }
            if at != part.len() {
                return Err(protocol("sample message has the wrong length"));
            }
        }
        let mut out = vec![by_group.len() as f64];
        let mut keys = Vec::new();
        for (g, (sum, rows, cols)) in by_group {
            out.push(g as f64);
            out.push(sum / rows.max(1) as f64);
            for b in &self.binnings {
                for col in &cols {
                    let m = BinMapper::fit(
                        col.iter().copied(),
                        b.max_bin,
                        b.min_data_in_bin,
                        &mut keys,
                    );
                    out.push(m.upper.len() as f64);
                    out.extend_from_slice(&m.upper);
                }
            }
        }
        Ok(out)
    }

    fn prepare(
        &self,
        spec: &ShardSpec,
        rows: ShardRows,
        agreed: &[f64],
    ) -> Result<(GbdtShard, Vec<Vec<Booster>>)> {
        let starts = self.parse(agreed, spec.groups)?;
        let np = spec.pieces.len();
        let n = rows.target.len();
        let order: Vec<u32> = (0..n as u32).collect();
        let group_of: Vec<u32> = spec
            .pieces
            .iter()
            .enumerate()
            .flat_map(|(i, p)| std::iter::repeat_n(i as u32, p.rows))
            .collect();
        let valid_rows: Vec<u32> = (0..rows.valid_target.len() as u32).collect();
        let valid_groups: Vec<Option<u32>> = rows.valid_piece.iter().map(|&p| Some(p)).collect();
        let mut fit = vec![true; np];
        fit.push(false);
        let kinds = vec![FeatureKind::Numeric; self.d];
        let input = TrainData {
            task: self.task,
            columns: &rows.columns,
            source: None,
            kinds: &kinds,
            impute: None,
            target: &rows.target,
            rows: &order,
            group_of: &group_of,
            n_groups: np,
            keys: &spec.keys,
            fit: &fit,
            valid: ValidData {
                columns: &rows.valid_columns,
                target: &rows.valid_target,
                rows: &valid_rows,
                groups: &valid_groups,
                file: None,
            },
            strategy: Strategy::Auto,
            threads: 1,
            seed: self.seed,
        };
        let shared: Vec<bool> = spec.pieces.iter().map(|p| p.shared).collect();
        let mut layouts = Vec::with_capacity(self.binnings.len());
        for (b, &binning) in self.binnings.iter().enumerate() {
            let mut given: Vec<Option<Vec<BinMapper>>> = Vec::with_capacity(np);
            for p in &spec.pieces {
                given.push(match (&starts[p.group], p.shared) {
                    (Some(s), true) => Some(s.mappers[b].clone()),
                    (None, true) => return Err(protocol("no bins for a cut group")),
                    _ => None,
                });
            }
            let given = GivenBins {
                mappers: &given,
                ids: &rows.ids,
            };
            layouts.push(GbdtLayout::build_with(&input, binning, Some(&given)));
        }
        let units = spec
            .pieces
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (0..self.configs.len())
                    .map(|k| {
                        let view = layouts[self.binning_of[k]].view(i);
                        let cfg = self.configs[k];
                        match &starts[p.group] {
                            Some(s) if p.shared => Booster::for_piece(
                                self.task,
                                cfg,
                                self.seed,
                                &view,
                                (p.group_rows, s.mean),
                            ),
                            _ => Booster::new(self.task, cfg, self.seed, &view),
                        }
                    })
                    .collect()
            })
            .collect();
        Ok((GbdtShard { layouts, shared }, units))
    }

    fn pass<'a>(&'a self, _spec: &'a ShardSpec, prepared: &'a GbdtShard) -> GbdtShardPass<'a> {
        let hist = prepared
            .layouts
            .iter()
            .flat_map(|l| (0..prepared.shared.len()).map(|i| l.hist_len(i)))
            .max()
            .unwrap_or(0);
        GbdtShardPass {
            family: self,
            shard: prepared,
            // The histogram, then the holder's rows of the leaf.
            stats_len: hist + 1,
        }
    }

    fn piece_range(&self, prepared: &GbdtShard, piece: usize) -> Range<usize> {
        prepared.layouts[0].range(piece)
    }

    fn model(
        &self,
        prepared: &GbdtShard,
        piece: usize,
        k: usize,
        unit: &Booster,
    ) -> UnitFit<GbdtModel> {
        let view = prepared.layouts[self.binning_of[k]].view(piece);
        UnitFit {
            model: unit.model(&view),
            iterations: unit.rounds() as u32,
            converged: true,
        }
    }

    fn impute(&self, _agreed: &[f64]) -> Vec<f64> {
        Vec::new()
    }
}

/// The boosters of a worker's pieces in the session's passes: a whole
/// piece's booster runs a full round in `apply`; a shared piece's builds its
/// part of the asked-for histogram in `accumulate` and splits in `apply`.
pub struct GbdtShardPass<'a> {
    family: &'a GbdtShards,
    shard: &'a GbdtShard,
    stats_len: usize,
}

impl PartialStep for GbdtShardPass<'_> {
    type Unit = Booster;
    type Scratch = StepScratch;

    fn stats_len(&self) -> usize {
        self.stats_len
    }

    fn scratch(&self) -> StepScratch {
        StepScratch::default()
    }

    fn is_active(&self, unit: &Booster) -> bool {
        !unit.is_done()
    }

    fn whole_steps(&self) -> usize {
        // A whole piece's boosters run to the end in one pass.
        usize::MAX
    }

    fn accumulate(
        &self,
        group: usize,
        units: &[(usize, &Booster)],
        _rows: Range<usize>,
        out: &mut [f64],
        _scratch: &mut StepScratch,
    ) {
        if !self.shard.shared[group] {
            return;
        }
        let len = self.stats_len;
        for (i, &(k, b)) in units.iter().enumerate() {
            let view = self.shard.layouts[self.family.binning_of[k]].view(group);
            let slot = &mut out[i * len..(i + 1) * len];
            b.build(
                &view,
                0..view.data.rows(),
                &mut slot[..view.data.hist_len()],
            );
            slot[len - 1] = b.pending_rows() as f64;
        }
    }

    fn apply(
        &self,
        group: usize,
        k: usize,
        unit: &mut Booster,
        stats: &mut [f64],
        scratch: &mut StepScratch,
    ) {
        let view = self.shard.layouts[self.family.binning_of[k]].view(group);
        if self.shard.shared[group] {
            let mut hist = scratch.pool.get(0);
            hist.extend_from_slice(&stats[..view.data.hist_len()]);
            unit.step_counted(&view, hist, stats[self.stats_len - 1], scratch);
        } else {
            unit.run_round(&view, scratch, None);
        }
    }
}
