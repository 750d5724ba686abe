//! `--shrinkage`: how the trained bundle blends the models on a group's
//! path (`store::Pooling`). For `auto`, each level's `k` is chosen on the
//! validation rows of that level's groups, from the top down: a level's
//! parent prediction is the level above's pooled one. The `k` chosen has
//! the lowest mean over the level's groups of their validation RMSE (or
//! log-loss): every group counts once, as in the summary's means. The summary says what
//! pooling saved against the deepest model alone.

use serde::{Deserialize, Serialize};

use super::prepare::Prepared;
use crate::data::Task;
use crate::metrics;
use crate::store::{ModelBundle, Pooling};
use crate::tune::shrinkage::{choose_k, own_weight, PoolRow, Shrinkage};

/// Pooling in the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolingSummary {
    /// The mode (`--shrinkage`).
    pub mode: String,
    /// `rmse` (regression) or `logloss` (binary).
    pub metric: String,
    /// Validation rows scored (those with a model on their path).
    pub rows: usize,
    /// The metric of the pooled predictions on those rows.
    pub loss: Option<f64>,
    /// The metric of the deepest model alone (`none`) on the same rows.
    pub loss_none: Option<f64>,
    /// Per level below the root (coarsest first, the groups' last).
    pub levels: Vec<PoolLevel>,
}

/// One level's pooling in the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolLevel {
    /// Its key columns, joined by `/`.
    pub key: String,
    /// `auto`'s `k` (0 for the other modes).
    pub k: f64,
    /// Validation rows whose group at this level has a model and a parent
    /// prediction to blend with (those `k` was chosen on).
    pub rows: usize,
    /// The mean over this level's groups of their validation RMSE (or
    /// log-loss) with `k`, and with `k = 0` (`auto` only).
    pub loss: Option<f64>,
    /// See `loss`.
    pub loss_none: Option<f64>,
}

/// The mode a job pools with: the spec's, or `auto` with `--hierarchy`;
/// `None` without pooling.
pub(super) fn mode(prepared: &Prepared) -> Option<Shrinkage> {
    match prepared.spec.shrinkage {
        Some(mode) => Some(mode),
        None if prepared.spec.hierarchy => Some(Shrinkage::Auto),
        None => None,
    }
}

/// Sets the bundle's pooling (choosing `auto`'s `k` per level) and
/// returns its summary; `None` without pooling (or with `none`: the
/// deepest model alone, as without the flag).
pub(super) fn pool(prepared: &Prepared, bundle: &mut ModelBundle) -> Option<PoolingSummary> {
    let mode = mode(prepared).filter(|&m| m != Shrinkage::None)?;
    let task = bundle.task;
    let valid = prepared.valid_data();
    let mut nodes = prepared.validation.level_groups.clone();
    nodes.push(prepared.validation.groups.clone());
    let margins = bundle.depth_margins(&nodes, valid.columns, valid.rows, prepared.threads);
    super::event::trace_stamp(prepared.started, "  pooling: margins");
    let y: Vec<f64> = valid
        .rows
        .iter()
        .map(|&r| valid.target[r as usize])
        .collect();
    let depth = bundle.depth();
    let mut ks = vec![0.0; depth];
    let mut levels = Vec::with_capacity(depth);
    // Each row's pooled margin so far (NaN: no model yet on its path).
    let mut pooled = margins[0].clone();
    let mut pool_rows = Vec::new();
    for d in 1..=depth {
        let entries = bundle.entries(d);
        let own = &margins[d];
        pool_rows.clear();
        for (i, (&m, &p)) in own.iter().zip(&pooled).enumerate() {
            if !m.is_nan() && !p.is_nan() {
                let g = nodes[d - 1][i].expect("a model has a group") as usize;
                pool_rows.push(PoolRow {
                    own: m,
                    parent: p,
                    rows: entries[g].n_train as u64,
                    y: y[i],
                    group: g as u32,
                });
            }
        }
        let chosen = (mode == Shrinkage::Auto)
            .then(|| choose_k(task, &pool_rows, prepared.threads))
            .flatten();
        let k = chosen.map_or(0.0, |c| c.k);
        ks[d - 1] = k;
        for (i, (&m, p)) in own.iter().zip(pooled.iter_mut()).enumerate() {
            if m.is_nan() {
                continue;
            }
            *p = if p.is_nan() {
                m
            } else {
                let g = nodes[d - 1][i].expect("a model has a group") as usize;
                let w = own_weight(entries[g].n_train as u64, k);
                w * m + (1.0 - w) * *p
            };
        }
        levels.push(PoolLevel {
            key: bundle.key_columns[..d].join("/"),
            k,
            rows: pool_rows.len(),
            loss: chosen.map(|c| c.loss),
            loss_none: chosen.map(|c| c.loss_none),
        });
    }
    bundle.pooling = Some(Pooling { mode, k: ks });
    super::event::trace_stamp(prepared.started, "  pooling: k chosen");
    // The blend against the deepest model alone, on rows with a model.
    let blended = bundle.blend(&margins, &nodes);
    let deepest: Vec<f64> = (0..y.len())
        .map(|i| {
            let z = margins.iter().rev().map(|m| m[i]).find(|z| !z.is_nan());
            task.link(z.unwrap_or(f64::NAN))
        })
        .collect();
    let scored: Vec<usize> = (0..y.len()).filter(|&i| !deepest[i].is_nan()).collect();
    let pick = |v: &[f64]| scored.iter().map(|&i| v[i]).collect::<Vec<f64>>();
    let (ys, pooled_p, none_p) = (pick(&y), pick(&blended), pick(&deepest));
    let metric = |p: &[f64]| {
        (!p.is_empty()).then(|| match task {
            Task::Regression => metrics::rmse(&ys, p),
            Task::Binary => metrics::logloss(&ys, p),
        })
    };
    Some(PoolingSummary {
        mode: mode.name(),
        metric: match task {
            Task::Regression => "rmse".into(),
            Task::Binary => "logloss".into(),
        },
        rows: scored.len(),
        loss: metric(&pooled_p),
        loss_none: metric(&none_p),
        levels,
    })
}
