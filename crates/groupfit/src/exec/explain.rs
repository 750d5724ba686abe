//! `groupfit explain`: every strategy's plan priced with the calibrated
//! cost model, nothing trained.

use std::ops::Range;
use std::sync::RwLock;

use super::calibrate;
use super::step::{active_counts, group_loads, heavy_counts, steps_counts, PartialStep};
use crate::plan::{CostModel, Estimate, GroupLoad, Plan, Strategy};

/// One strategy's plan for the first pass, as `explain` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyPlan {
    /// The strategy.
    pub strategy: Strategy,
    /// Its estimated cost per pass.
    pub estimate: Estimate,
    /// Groups cut over several workers, `(group, pieces)`, largest first.
    pub cut: Vec<(usize, usize)>,
    /// Its [`Plan::jumps`] (how `auto` breaks ties between estimates).
    pub jumps: usize,
}

impl StrategyPlan {
    /// `plan` (of `strategy`) as `explain` shows it, priced under `cost`.
    pub fn of(strategy: Strategy, plan: &Plan, loads: &[GroupLoad], cost: &CostModel) -> Self {
        let pieces = plan.pieces(loads.len());
        let mut cut: Vec<(usize, usize)> = (0..loads.len())
            .filter(|&g| pieces[g] > 1)
            .map(|g| (g, pieces[g]))
            .collect();
        cut.sort_by_key(|&(g, _)| (std::cmp::Reverse(loads[g].rows.len()), g));
        StrategyPlan {
            strategy,
            estimate: plan.estimate(loads, cost),
            cut,
            jumps: plan.jumps(),
        }
    }
}

/// What the planner would do, without training: the calibrated cost model and
/// every fixed strategy's plan for the first pass (every unit active).
#[derive(Debug, Clone)]
pub struct Explain {
    /// The cost model's constants.
    pub cost: CostModel,
    /// Where the machine constants came from.
    pub machine: calibrate::MachineCosts,
    /// Every fixed strategy, in [`Strategy::FIXED`] order.
    pub strategies: Vec<StrategyPlan>,
    /// What `auto` picks (the cheapest estimate).
    pub auto: Strategy,
    /// Units (models) to train.
    pub units: usize,
    /// Whether the estimates cover the rest of the run rather than one
    /// pass: some group's units have more than one step left
    /// ([`PartialStep::steps_left`]).
    pub whole_run: bool,
}

/// Plans the first pass of `units` under every strategy and prices each; the
/// pilot run updates no unit.
pub fn explain<F: PartialStep>(
    family: &F,
    units: Vec<Vec<F::Unit>>,
    rows: &[Range<usize>],
    workers: usize,
) -> Explain {
    let workers = workers.max(1);
    let groups: Vec<RwLock<Vec<F::Unit>>> = units.into_iter().map(RwLock::new).collect();
    let (cost, machine) = calibrate::cost_model(family, &groups, rows, workers);
    let active = active_counts(family, &groups);
    let loads = group_loads(
        rows,
        &active,
        &heavy_counts(family, rows),
        &steps_counts(family, &groups),
    );
    let strategies: Vec<StrategyPlan> = Strategy::FIXED
        .iter()
        .map(|&s| {
            StrategyPlan::of(
                s,
                &Plan::build(s, &loads, workers, family.align(), &cost),
                &loads,
                &cost,
            )
        })
        .collect();
    let cands: Vec<(f64, usize)> = strategies
        .iter()
        .map(|p| (p.estimate.total_s, p.jumps))
        .collect();
    let auto = strategies
        .get(crate::plan::pick(&cands))
        .map_or(Strategy::Tp, |p| p.strategy);
    Explain {
        cost,
        machine,
        whole_run: loads.iter().any(|l| l.units > 0 && l.steps > 1),
        units: active.iter().sum(),
        strategies,
        auto,
    }
}
