//! Pricing the plans of remote workers: the family's pilot on a sample of
//! the training data, the network term, and every one-stage strategy's plan.
//!
//! The driver does not hold the features of a Parquet input, so it cannot
//! run the family's pilot on the whole job as `explain` does on one machine.
//! It reads the features of a sample instead: the groups the pilot times
//! (the largest, the median, one of at most 1/64 of the largest's rows, the
//! largest of at most 32 blocks), each cut to its first [`SAMPLE_ROWS`]
//! rows. The loads come from the group sizes and the family's
//! [`crate::family::Family::load_shapes`]. The network term
//! ([`Network`], measured by the driver once per run) turns the cost model
//! into that of remote workers ([`CostModel::over_network`]).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::place::{loads, plan};
use crate::data::layout::BLOCK;
use crate::data::{read_parquet_rows, Column, ColumnValues};
use crate::error::{GroupfitError, Result};
use crate::exec::{Explain, StrategyPlan};
use crate::family::{TrainData, ValidData};
use crate::plan::{pick, GroupLoad, Network, Plan, Strategy};
use crate::registry::AnyFamily;
use crate::tune::ConfigEntry;

/// Rows of a group the pilot's sample holds at most.
pub const SAMPLE_ROWS: usize = 32_768;

/// The plans of remote workers, priced: what `explain` shows for the Ray
/// runner and what its placement runs.
#[derive(Debug, Clone)]
pub struct RemotePricing {
    /// The cost model with the network term, and the plans of
    /// [`Strategy::ONE_STAGE`] (only `tp` with categorical features, whose
    /// groups are never cut).
    pub explain: Explain,
    /// The network it was priced with.
    pub network: Network,
    /// The loads of the groups (the global pseudo-group last).
    pub loads: Vec<GroupLoad>,
}

/// Prices the plans of `workers` remote workers for `data` and `configs`
/// over `network`.
pub fn price(
    family: &dyn AnyFamily,
    data: &TrainData<'_>,
    configs: &[ConfigEntry],
    workers: usize,
    network: Network,
) -> Result<RemotePricing> {
    let ng = data.n_groups;
    let mut group_rows = vec![0usize; ng + 1];
    for &g in data.group_of {
        group_rows[g as usize] += 1;
    }
    group_rows[ng] = data.rows.len();
    let shapes = family.load_shapes(data.task, configs, &group_rows);
    let loads = loads(&group_rows, data.fit, configs.len(), &shapes);
    let t = std::time::Instant::now();
    let pilot = Sample::new(data, &group_rows)?;
    let read = t.elapsed();
    let base = family.explain(&pilot.data(data), configs)?;
    if crate::util::trace::trace() {
        eprintln!(
            "[groupfit]   remote pricing: sample of {} rows read in {:.1} ms, pilot {:.1} ms (peak {} MiB)",
            pilot.rows.len(),
            read.as_secs_f64() * 1e3,
            (t.elapsed() - read).as_secs_f64() * 1e3,
            crate::util::trace::memory_mib().map_or(0, |m| m.1)
        );
    }
    // Every pass each worker snapshots its units: a worker's share of them.
    let units: usize = loads.iter().map(|l| l.units).sum();
    let state = units * base.cost.unit_bytes / workers.max(1);
    let cost = base.cost.over_network(&network, state);
    let categorical = data.kinds.iter().any(|k| k.levels().is_some());
    let among: &[Strategy] = if categorical {
        &[Strategy::Tp]
    } else {
        &Strategy::ONE_STAGE
    };
    let strategies: Vec<StrategyPlan> = among
        .iter()
        .map(|&s| {
            let p = plan(s, &loads, workers, &cost)?;
            Ok(StrategyPlan::of(s, &p, &loads, &cost))
        })
        .collect::<Result<_>>()?;
    let cands: Vec<(f64, usize)> = strategies
        .iter()
        .map(|p| (p.estimate.total_s, p.jumps))
        .collect();
    let auto = strategies[pick(&cands)].strategy;
    Ok(RemotePricing {
        explain: Explain {
            cost,
            machine: base.machine,
            whole_run: loads.iter().any(|l| l.units > 0 && l.steps > 1),
            units,
            strategies,
            auto,
        },
        network,
        loads,
    })
}

impl RemotePricing {
    /// The plan of `strategy` (`auto`: the cheapest).
    pub fn plan(&self, strategy: Strategy, workers: usize) -> Result<Plan> {
        let s = match strategy {
            Strategy::Auto => self.explain.auto,
            s => s,
        };
        plan(s, &self.loads, workers, &self.explain.cost)
    }
}

/// The pilot's sample: its groups' first rows, with their features.
struct Sample {
    columns: Vec<Column>,
    /// No validation rows, one empty column per feature.
    valid_columns: Vec<Column>,
    target: Vec<f64>,
    rows: Vec<u32>,
    group_of: Vec<u32>,
    keys: Vec<crate::data::keys::GroupKey>,
    fit: Vec<bool>,
}

impl Sample {
    /// The groups the pilot times, each cut to [`SAMPLE_ROWS`] rows, read
    /// from `data`'s columns or its training file.
    fn new(data: &TrainData<'_>, group_rows: &[usize]) -> Result<Sample> {
        let ng = data.n_groups;
        let fitted: Vec<usize> = (0..ng)
            .filter(|&g| data.fit[g] && group_rows[g] > 0)
            .collect();
        let mut pool = if fitted.is_empty() {
            (0..ng).filter(|&g| group_rows[g] > 0).collect()
        } else {
            fitted
        };
        pool.sort_by_key(|&g| (std::cmp::Reverse(group_rows[g]), g));
        let mut chosen: Vec<usize> = Vec::new();
        if let Some(&largest) = pool.first() {
            let cap = group_rows[largest].min(SAMPLE_ROWS);
            chosen.push(largest);
            chosen.push(pool[pool.len() / 2]);
            chosen.extend(pool.iter().find(|&&g| group_rows[g] <= cap / 64));
            chosen.extend(pool.iter().find(|&&g| group_rows[g] <= 32 * BLOCK));
        }
        chosen.sort_unstable();
        chosen.dedup();
        let mut local = vec![u32::MAX; ng];
        for (i, &g) in chosen.iter().enumerate() {
            local[g] = i as u32;
        }
        let mut taken = vec![0usize; chosen.len()];
        let (mut table_rows, mut group_of) = (Vec::new(), Vec::new());
        for (&r, &g) in data.rows.iter().zip(data.group_of) {
            let l = local[g as usize];
            if l != u32::MAX && taken[l as usize] < SAMPLE_ROWS {
                taken[l as usize] += 1;
                table_rows.push(r);
                group_of.push(l);
            }
        }
        let columns = match &data.source {
            // A column at a time: the reader holds a row group's chunks of
            // the columns it reads, so the driver holds one column's.
            Some(src) => src
                .features
                .iter()
                .map(|name| {
                    let batch =
                        read_parquet_rows(src.path, std::slice::from_ref(name), &table_rows, 1)?;
                    Column::from_array(batch.column(0), name, src.path, false)
                })
                .collect::<Result<Vec<_>>>()?,
            None => data
                .columns
                .iter()
                .map(|c| gather(c, &table_rows))
                .collect(),
        };
        let target = table_rows
            .iter()
            .map(|&r| data.target[r as usize])
            .collect();
        let mut fit = vec![true; chosen.len()];
        fit.push(false);
        Ok(Sample {
            valid_columns: (0..columns.len())
                .map(|_| Column::Owned(Vec::new()))
                .collect(),
            columns,
            target,
            rows: (0..table_rows.len() as u32).collect(),
            group_of,
            keys: chosen.iter().map(|&g| data.keys[g].clone()).collect(),
            fit,
        })
    }

    /// The sample as training data like `data`'s (no validation rows, one
    /// thread: an actor's pilot).
    fn data<'a>(&'a self, like: &TrainData<'a>) -> TrainData<'a> {
        TrainData {
            task: like.task,
            columns: &self.columns,
            source: None,
            kinds: like.kinds,
            impute: None,
            target: &self.target,
            rows: &self.rows,
            group_of: &self.group_of,
            n_groups: self.keys.len(),
            keys: &self.keys,
            fit: &self.fit,
            valid: ValidData {
                columns: &self.valid_columns,
                target: &[],
                rows: &[],
                groups: &[],
                file: None,
            },
            strategy: Strategy::Auto,
            threads: 1,
            seed: like.seed,
        }
    }
}

/// `col` at `rows`, owned.
fn gather(col: &Column, rows: &[u32]) -> Column {
    Column::Owned(match col.values() {
        ColumnValues::F32(v) => rows.iter().map(|&r| v[r as usize] as f64).collect(),
        ColumnValues::F64(v) => rows.iter().map(|&r| v[r as usize]).collect(),
    })
}

/// The last network measured by a Ray run, kept next to the calibration
/// cache (`network.json`): what `groupfit explain --runner ray` prices with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeasuredNetwork {
    /// The measurement.
    pub network: Network,
    /// Days since 1970-01-01 when it was measured.
    pub day: u64,
}

fn network_path() -> Option<PathBuf> {
    Some(crate::exec::calibrate::cache_path()?.with_file_name("network.json"))
}

/// Keeps `network` as the last measured one (best effort: a cache that
/// cannot be written is not an error).
pub fn remember(network: Network) {
    let Some(path) = network_path() else { return };
    let day = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let m = MeasuredNetwork { network, day };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let json = serde_json::to_vec_pretty(&m).expect("serialises");
    let _ = crate::util::fs::write_atomic(&path, |f| {
        std::io::Write::write_all(f, &json).map_err(|e| GroupfitError::io("write", &path, e))
    });
}

/// The last network a Ray run measured, with its file.
pub fn remembered() -> Result<(MeasuredNetwork, PathBuf)> {
    let path = network_path().ok_or_else(|| {
        GroupfitError::arg("no cache directory for the measured network (set GROUPFIT_CACHE_DIR)")
    })?;
    let text = std::fs::read(&path).map_err(|_| {
        GroupfitError::arg(format!(
            "no measured network in '{}': run a Ray job or RayRunner.explain once, or give --network RTT_US,MB_PER_S",
            path.display()
        ))
    })?;
    let m = serde_json::from_slice(&text)
        .map_err(|e| GroupfitError::arg(format!("cannot read '{}': {e}", path.display())))?;
    Ok((m, path))
}
