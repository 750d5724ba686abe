//! Fitting: the family fits every (group, config) unit of a prepared job —
//! the groups with their own models and the global model — in one run.

use super::event::trace_stamp;
use super::prepare::Prepared;
use crate::error::Result;
use crate::exec::{OnProgress, Progress, RunReport, Stage};
use crate::family::{FamilyFit, UnitFit};
use crate::store::FittedModel;

/// Every fitted unit and how the fitting went.
pub(super) struct Fitted {
    /// Per group (`n_groups + 1`, the global model last): empty when the group
    /// is not fitted, otherwise one unit per config in grid order.
    pub units: Vec<Vec<UnitFit<FittedModel>>>,
    /// Per-feature values replacing NaN before prediction (empty: none).
    pub impute: Vec<f64>,
    /// What the pass driver did.
    pub report: RunReport,
    /// Units that stopped at their iteration limit.
    pub not_converged: usize,
}

impl Fitted {
    /// With `--hierarchy`: the units of `count` groups from `base` of the
    /// flat fit (moved out), with the root's (copied) as their global model:
    /// what one level's selection reads.
    pub fn take_level(&mut self, base: usize, count: usize, root: usize) -> Fitted {
        let mut units: Vec<_> = self.units[base..base + count]
            .iter_mut()
            .map(std::mem::take)
            .collect();
        units.push(self.units[root].clone());
        let mut report = self.report.clone();
        // Times in the level's group order, the root's last (none when not measured).
        if let Some(times) = self.report.group_s.get(base..base + count) {
            report.group_s = times.to_vec();
            report
                .group_s
                .push(self.report.group_s.get(root).copied().unwrap_or(0.0));
        }
        Fitted {
            units,
            impute: self.impute.clone(),
            report,
            not_converged: 0,
        }
    }
}

/// Fits every unit of `prepared` with its family, reporting progress to
/// `on`; returns the fit and the last progress (all the work done).
pub(super) fn fit(prepared: &Prepared, on: &mut OnProgress<'_>) -> Result<(Fitted, Progress)> {
    on(Progress::stage(Stage::Layout));
    let mut last = Progress::stage(Stage::Training);
    let FamilyFit {
        units,
        impute,
        report,
    } = prepared.family.fit(
        &prepared.train_data(),
        &prepared.grid,
        &mut |p: Progress| {
            // Training events only: a family's layout comes before them.
            if p.stage == Stage::Training {
                last = p;
            }
            on(p)
        },
    )?;
    // Every model is trained: the work done is the whole.
    let trained = Progress {
        total: last.done,
        models_done: last.models,
        ..last
    };
    on(trained);
    trace_stamp(prepared.started, "fit");
    let not_converged = units.iter().flatten().filter(|u| !u.converged).count();
    Ok((
        Fitted {
            units,
            impute,
            report,
            not_converged,
        },
        trained,
    ))
}
