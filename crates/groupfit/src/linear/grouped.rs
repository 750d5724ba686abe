//! The linear family plugged into the pass driver: every (group, config) unit
//! of a [`GroupedMatrix`] fitted together.

use std::ops::Range;

use super::kernel::UnitRef;
use super::model::LinearModel;
use super::params::LinearConfig;
use super::solver::{self, Scratch, Status, UnitState};
use crate::data::layout::GroupedMatrix;
use crate::data::Task;
use crate::exec::{explain, run_passes, Explain, OnProgress, PartialStep, RunReport, UnitProgress};
use crate::plan::Strategy;

/// One-hot columns of a feature below which the Newton solve keeps them in
/// the factorisation (eliminating a few saves less than it costs).
const MIN_ELIMINATED: usize = 8;

/// The passes a unit is expected to take before any has stopped (progress
/// only): Newton steps and their line searches on the benchmark data.
const EXPECTED_PASSES: f64 = 8.0;

/// The linear family over one layout and one grid.
pub struct LinearPass<'a> {
    matrix: &'a GroupedMatrix,
    task: Task,
    configs: &'a [LinearConfig],
    /// Per group, the L2 penalty of each standardised coefficient (`1 / scale^2`).
    penalty: Vec<f64>,
    /// Per group, the rows of the whole group, where a layout group is a
    /// piece of it (a remote worker's shard); `None`: the layout's groups.
    whole_rows: Option<Vec<usize>>,
}

impl<'a> LinearPass<'a> {
    /// The family for `matrix` and the grid `configs`.
    pub fn new(matrix: &'a GroupedMatrix, task: Task, configs: &'a [LinearConfig]) -> Self {
        let d = matrix.d();
        let mut penalty = Vec::with_capacity(matrix.n_groups() * d);
        for g in 0..matrix.n_groups() {
            penalty.extend(matrix.scale(g).iter().map(|s| 1.0 / (s * s)));
        }
        LinearPass {
            matrix,
            task,
            configs,
            penalty,
            whole_rows: None,
        }
    }

    /// The same family where layout group `g` is a piece of a group of
    /// `rows[g]` rows (its blocks numbered within the whole group): the
    /// Hessian sample and the objective's scale are the whole group's.
    pub fn pieces_of(mut self, rows: Vec<usize>) -> Self {
        self.whole_rows = Some(rows);
        self
    }
}

impl LinearPass<'_> {
    /// Rows of `group`'s whole group.
    fn rows_of(&self, group: usize) -> usize {
        match &self.whole_rows {
            Some(r) => r[group],
            None => self.matrix.rows_of(group),
        }
    }

    /// The Hessian sample of `group`: every `stride`-th block.
    fn stride(&self, group: usize) -> usize {
        solver::hessian_stride(
            self.task,
            self.rows_of(group).div_ceil(crate::data::layout::BLOCK),
        )
    }
}

impl PartialStep for LinearPass<'_> {
    type Unit = UnitState;
    type Scratch = Scratch;

    fn align(&self) -> usize {
        crate::data::layout::BLOCK
    }

    fn stats_len(&self) -> usize {
        solver::stats_len(self.matrix.d())
    }

    fn scratch(&self) -> Scratch {
        let (d, dp) = (self.matrix.d(), self.matrix.dp());
        // The widest categorical feature's one-hot columns, when eliminating
        // them first is worth it.
        let widest = self
            .matrix
            .onehot()
            .and_then(|plan| plan.blocks.iter().max_by_key(|b| b.width))
            .filter(|b| b.width >= MIN_ELIMINATED);
        match widest {
            Some(b) => Scratch::with_diagonal(d, dp, b.base..b.base + b.width),
            None => Scratch::new(d, dp),
        }
    }

    fn is_active(&self, unit: &UnitState) -> bool {
        unit.status == Status::Active
    }

    fn unit_bytes(&self) -> usize {
        // Weights, the accepted point and the direction: three (d + 1) vectors.
        std::mem::size_of::<UnitState>() + 3 * 8 * (self.matrix.d() + 1)
    }

    fn heavy_rows(&self, group: usize, rows: Range<usize>) -> usize {
        // The rows of the blocks whose Hessian `accumulate` sums.
        if rows.is_empty() {
            return 0;
        }
        let stride = self.stride(group);
        self.matrix
            .blocks(group, rows)
            .filter(|b| b.index % stride == 0)
            .map(|b| b.y.len())
            .sum()
    }

    /// Steps are passes; how many a unit takes is estimated until it stops.
    fn progress(&self, _group: usize, _k: usize, unit: &UnitState) -> UnitProgress {
        let done = unit.passes as f64;
        if unit.status == Status::Active {
            UnitProgress::estimated(done)
        } else {
            UnitProgress::finished(done)
        }
    }

    fn expected_steps(&self) -> f64 {
        EXPECTED_PASSES
    }

    fn whole_steps(&self) -> usize {
        // A unit stops by itself (tolerance, `max_iter`, or a line search
        // that cannot improve), and a pass reports nothing a user waits for.
        usize::MAX
    }

    fn pilot_unit(&self, k: usize, unit: &UnitState) -> Option<UnitState> {
        // Units of one group start at the same weights, where the kernel
        // computes their statistics once (see `kernel::accumulate_blocks`);
        // later passes see distinct weights, so the pilot copies get them.
        let mut copy = unit.clone();
        let d = copy.w.len() - 1;
        for w in &mut copy.w[..d] {
            *w += 1e-3 * (k + 1) as f64;
        }
        Some(copy)
    }

    fn accumulate(
        &self,
        group: usize,
        units: &[(usize, &UnitState)],
        rows: Range<usize>,
        out: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let refs: Vec<UnitRef<'_>> = units
            .iter()
            .map(|(k, u)| UnitRef {
                w: &u.w,
                c: self.configs[*k].c(),
                hessian: u.needs_hessian(),
            })
            .collect();
        solver::accumulate(
            self.task,
            self.stride(group),
            self.matrix.blocks(group, rows),
            &refs,
            out,
            scratch,
        );
    }

    fn apply(
        &self,
        group: usize,
        k: usize,
        unit: &mut UnitState,
        stats: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let d = self.matrix.d();
        let pen = &self.penalty[group * d..(group + 1) * d];
        solver::apply(
            unit,
            stats,
            pen,
            &self.configs[k],
            self.rows_of(group),
            scratch,
        );
    }

    fn apply_group(
        &self,
        group: usize,
        units: &mut [UnitState],
        ks: &[usize],
        stats: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let d = self.matrix.d();
        solver::apply_batch(
            units,
            ks,
            stats,
            self.configs,
            &self.penalty[group * d..(group + 1) * d],
            self.rows_of(group),
            scratch,
        );
    }
}

/// One fitted unit.
#[derive(Debug, Clone)]
pub struct FittedUnit {
    /// The model in raw feature space.
    pub model: LinearModel,
    /// Newton iterations taken.
    pub iterations: u32,
    /// Whether it met the tolerance.
    pub converged: bool,
}

/// The starting units of every group with `fit[g]` set, and every group's rows.
fn initial_units(
    matrix: &GroupedMatrix,
    task: Task,
    n_configs: usize,
    fit: &[bool],
) -> (Vec<Vec<UnitState>>, Vec<Range<usize>>) {
    let d = matrix.d();
    let units = (0..matrix.n_groups())
        .map(|g| {
            if fit[g] {
                let y = matrix.y(matrix.range(g));
                (0..n_configs).map(|_| UnitState::new(task, y, d)).collect()
            } else {
                Vec::new()
            }
        })
        .collect();
    let rows = (0..matrix.n_groups()).map(|g| matrix.range(g)).collect();
    (units, rows)
}

/// What the planner would do with these units (see [`crate::exec::explain`]).
pub fn explain_grouped(
    matrix: &GroupedMatrix,
    task: Task,
    configs: &[LinearConfig],
    fit: &[bool],
    workers: usize,
) -> Explain {
    let (units, rows) = initial_units(matrix, task, configs.len(), fit);
    explain(
        &LinearPass::new(matrix, task, configs),
        units,
        &rows,
        workers,
    )
}

/// Fits every config of every group with `fit[g]` set; returns, per group, one
/// [`FittedUnit`] per config (empty for groups not fitted).
pub fn fit_grouped(
    matrix: &GroupedMatrix,
    task: Task,
    configs: &[LinearConfig],
    fit: &[bool],
    strategy: Strategy,
    workers: usize,
    progress: &mut OnProgress<'_>,
) -> (Vec<Vec<FittedUnit>>, RunReport) {
    let (units, rows) = initial_units(matrix, task, configs.len(), fit);
    let family = LinearPass::new(matrix, task, configs);
    let max_iter = configs.iter().map(|c| c.max_iter()).max().unwrap_or(1) as usize;
    // Each Newton iteration takes one pass plus at most ~34 line-search halvings.
    let max_passes = (max_iter + 1) * 40;
    let (units, report) = run_passes(
        &family, units, &rows, strategy, workers, max_passes, progress,
    );
    let fitted = units
        .into_iter()
        .enumerate()
        .map(|(g, us)| {
            us.into_iter()
                .map(|u| FittedUnit {
                    model: match matrix.onehot() {
                        None => {
                            LinearModel::from_standardised(&u.w, matrix.mean(g), matrix.scale(g))
                        }
                        Some(plan) => LinearModel::from_onehot(
                            &u.w,
                            matrix.mean(g),
                            matrix.scale(g),
                            plan,
                            g,
                            matrix.impute().len(),
                        ),
                    },
                    iterations: u.iter,
                    converged: u.status == Status::Converged,
                })
                .collect()
        })
        .collect();
    (fitted, report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::layout::{LayoutInput, BLOCK};
    use crate::data::Column;

    #[test]
    fn heavy_rows_are_the_hessian_sample() {
        // Group 0: 100 full blocks (binary: Hessian stride 100 / 48 = 2, so
        // blocks 0, 2, ..., 98: 50 blocks); group 1: 3 blocks, the last of 10
        // rows (stride 1: every row).
        let (n0, n1) = (100 * BLOCK, 2 * BLOCK + 10);
        let n = n0 + n1;
        let cols = vec![Column::Owned((0..n).map(|i| (i % 7) as f64).collect())];
        let y: Vec<f64> = (0..n).map(|i| (i % 2) as f64).collect();
        let rows: Vec<u32> = (0..n as u32).collect();
        let group_of: Vec<u32> = (0..n).map(|i| u32::from(i >= n0)).collect();
        let m = GroupedMatrix::build(LayoutInput {
            columns: &cols,
            target: &y,
            rows: &rows,
            group_of: &group_of,
            n_groups: 2,
            with_global: false,
            impute: None,
            threads: 1,
        })
        .unwrap();
        let configs = [crate::linear::params::LinearParams::new().check().unwrap()];
        let binary = LinearPass::new(&m, Task::Binary, &configs);
        let (r0, r1) = (m.range(0), m.range(1));
        assert_eq!(binary.heavy_rows(0, r0.clone()), 50 * BLOCK);
        // Blocks 1..5 of group 0: blocks 2 and 4.
        let part = r0.start + BLOCK..r0.start + 5 * BLOCK;
        assert_eq!(binary.heavy_rows(0, part), 2 * BLOCK);
        assert_eq!(binary.heavy_rows(1, r1.clone()), n1);
        // Squared loss: every block's Hessian.
        let regression = LinearPass::new(&m, Task::Regression, &configs);
        assert_eq!(regression.heavy_rows(0, r0), n0);
        // What the Ray runner's placement counts from the row counts alone.
        use solver::hessian_rows;
        assert_eq!(hessian_rows(Task::Binary, n0), 50 * BLOCK);
        assert_eq!(hessian_rows(Task::Binary, n1), n1);
        assert_eq!(hessian_rows(Task::Regression, n0), n0);
        assert_eq!(hessian_rows(Task::Binary, 0), 0);
    }
}
