//! The linear family's partial-step API: a damped Newton method whose every
//! iteration is one pass over the data.
//!
//! * [`accumulate`] — the *partial step*: over any row range of a group (a whole
//!   group, a row shard, rows on a remote worker) add the loss, gradient and
//!   Hessian of one (group, config) unit at its current weights into a flat
//!   statistics buffer of [`stats_len`] values.
//! * [`crate::exec::add_stats`] — partial statistics of one unit add up.
//! * [`apply`] — the *update*: with the unit's statistics over all its rows,
//!   add the penalty, run the Armijo line-search test, test convergence, take
//!   the next Newton step, and decide whether the next pass needs the
//!   Hessian ([`UnitState::needs_hessian`]); the Newton systems of a
//!   group's units are solved together ([`super::newton`]).
//!
//! The three functions hold no threads and no global state; callers own every
//! buffer (a [`Scratch`] per worker), so the hot loop does not allocate.

use serde::{Deserialize, Serialize};

use super::kernel::{accumulate_blocks, BlockScratch, UnitRef};
use super::newton::{newton_batch, BatchScratch, BATCH};
use super::params::LinearConfig;
use crate::data::layout::Block;
use crate::data::Task;

/// Length of one unit's statistics: `[loss, gradient (d+1), Hessian ((d+1)^2),
/// rows in the Hessian]`. The Hessian is accumulated in its upper triangle
/// only (the lower triangle is never read); [`apply`] scales it up when it
/// was summed over a sample of the rows.
pub fn stats_len(d: usize) -> usize {
    let p = d + 1;
    1 + p + p * p + 1
}

/// Blocks whose Hessian a group of `blocks` blocks sums: every block up to
/// [`HESSIAN_BLOCKS`] blocks, then every `stride`-th block (a fixed sample,
/// the same under every plan). The gradient and loss always use every row, so
/// the solution is exact; only the Newton steps are approximate
/// ("sub-sampled Newton"), which converges linearly at a rate of about
/// `sqrt(d / sampled rows)`.
pub fn hessian_stride(task: Task, blocks: usize) -> usize {
    match task {
        // Squared loss: the Hessian is shared by every config of a block and
        // cheap; keep it exact so one Newton step solves the problem.
        Task::Regression => 1,
        Task::Binary => (blocks / HESSIAN_BLOCKS).max(1),
    }
}

/// Rows of a whole group of `rows` rows whose Hessian is summed: its
/// blocks at multiples of [`hessian_stride`] (the last block may be short).
pub fn hessian_rows(task: Task, rows: usize) -> usize {
    let block = crate::data::layout::BLOCK;
    let blocks = rows.div_ceil(block);
    let stride = hessian_stride(task, blocks);
    (0..blocks)
        .step_by(stride)
        .map(|b| block.min(rows - b * block))
        .sum()
}

/// Blocks (of [`crate::data::layout::BLOCK`] rows) that always get an exact Hessian.
pub const HESSIAN_BLOCKS: usize = 48;

/// Per-worker buffers for [`accumulate`] and [`apply`].
#[derive(Debug, Clone)]
pub struct Scratch {
    block: BlockScratch,
    batch: BatchScratch,
}

impl Scratch {
    /// Buffers for `d` features stored as `dp` feature rows per block.
    pub fn new(d: usize, dp: usize) -> Self {
        let p = d + 1;
        Scratch {
            block: BlockScratch::new(dp),
            batch: BatchScratch::new(p),
        }
    }

    /// [`Scratch::new`] for a layout whose columns `diag` are the one-hot
    /// columns of one categorical feature: their block of every Hessian is
    /// diagonal (a row is in one of them), so the Newton solve eliminates
    /// them first (see [`super::newton`]).
    pub fn with_diagonal(d: usize, dp: usize, diag: std::ops::Range<usize>) -> Self {
        Scratch {
            block: BlockScratch::new(dp),
            batch: BatchScratch::with_diagonal(d + 1, diag),
        }
    }
}

/// Where one unit is in its Newton iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// Still iterating: needs another pass.
    Active,
    /// Gradient below tolerance (or the line search could not improve further).
    Converged,
    /// Stopped at `max_iter` Newton iterations.
    MaxIter,
}

/// The state of one (group, config) unit between passes (serialised in a
/// remote worker's snapshots).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnitState {
    /// Current weights in standardised coordinates; the last entry is the intercept.
    pub w: Vec<f64>,
    /// The line search's accepted point, then the Newton direction (`2 (d +
    /// 1)` values); empty before the first step and once the unit has
    /// stopped, so the units of many tiny groups do not hold (and first
    /// touch) two more vectors each for the whole run.
    line: Vec<f64>,
    f_base: f64,
    slope: f64,
    alpha: f64,
    /// Newton iterations taken.
    pub iter: u32,
    /// Passes over the data this unit has consumed.
    pub passes: u32,
    /// Where the unit is.
    pub status: Status,
    /// Objective at the last accepted point.
    pub objective: f64,
    /// Largest gradient entry at the last accepted point.
    pub grad_max: f64,
    /// Largest gradient entry at the accepted point before it (`NaN`: none).
    grad_prev: f64,
    /// Whether the next pass must sum the Hessian (see [`UnitState::needs_hessian`]).
    hessian: bool,
}

impl UnitState {
    /// Starting point: zero weights and the intercept that is optimal for them
    /// (features are centred per group): the log-odds of the group's mean target
    /// for binary, its mean for regression.
    pub fn new(task: Task, y: &[f64], d: usize) -> Self {
        let mut w = vec![0.0; d + 1];
        if !y.is_empty() {
            let mean = y.iter().sum::<f64>() / y.len() as f64;
            w[d] = match task {
                Task::Binary => {
                    let m = mean.clamp(1e-6, 1.0 - 1e-6);
                    (m / (1.0 - m)).ln()
                }
                Task::Regression => mean,
            };
        }
        UnitState {
            line: Vec::new(),
            w,
            f_base: f64::INFINITY,
            slope: 0.0,
            alpha: 0.0,
            iter: 0,
            passes: 0,
            status: Status::Active,
            objective: f64::NAN,
            grad_max: f64::NAN,
            grad_prev: f64::NAN,
            hessian: true,
        }
    }

    /// Stops the unit with `status` and frees its line-search vectors.
    fn stop(&mut self, status: Status) {
        self.status = status;
        self.line = Vec::new();
    }

    /// The accepted point and the direction, allocated on the first step.
    fn line_mut(&mut self) -> (&mut [f64], &mut [f64]) {
        let p = self.w.len();
        if self.line.is_empty() {
            self.line.resize(2 * p, 0.0);
        }
        self.line.split_at_mut(p)
    }

    /// Whether the next pass must sum this unit's Hessian. A pass only
    /// needs it where the update takes a Newton step; the update predicts
    /// when the next point will be the last one (the iteration limit, or a
    /// gradient below the tolerance by Newton's quadratic convergence, see
    /// [`PREDICT_CONVERGED`]) and asks for the loss and gradient alone. A
    /// wrong guess costs the unit one more pass at the same point, with the
    /// Hessian: every unit takes the same steps either way.
    pub fn needs_hessian(&self) -> bool {
        self.hessian
    }
}

/// The partial step: adds, for each unit (the configs of one group), `C *
/// loss`, its gradient and Hessian (upper triangle) over the given blocks of
/// the group's standardised rows, into `out` (one [`stats_len`] slice per
/// unit). Each block is read once for all units. The penalty is added by
/// [`apply`], once.
pub fn accumulate<'a>(
    task: Task,
    hessian_stride: usize,
    blocks: impl Iterator<Item = Block<'a>>,
    units: &[UnitRef<'_>],
    out: &mut [f64],
    s: &mut Scratch,
) {
    let mut blocks = blocks;
    accumulate_blocks(task, hessian_stride, &mut blocks, units, out, &mut s.block);
}

/// The update: given the unit's statistics over all of its rows at `u.w`,
/// adds the penalty (`penalty[j]` on `w[j]`, none on the intercept), checks the
/// line search, checks convergence and sets `u.w` to the next point to evaluate.
/// `n_rows` is the unit's row count (for the tolerance). The same as
/// [`apply_batch`] with one unit.
pub fn apply(
    u: &mut UnitState,
    stats: &mut [f64],
    penalty: &[f64],
    cfg: &LinearConfig,
    n_rows: usize,
    s: &mut Scratch,
) {
    apply_batch(
        std::slice::from_mut(u),
        &[0],
        stats,
        std::slice::from_ref(cfg),
        penalty,
        n_rows,
        s,
    );
}

/// [`apply`] for the units `units[k]`, `k` in `ks`, of one group (config `k`
/// is `configs[k]`), whose statistics are consecutive [`stats_len`] slices of
/// `stats`. The Newton systems of up to [`BATCH`] units are solved together,
/// one unit per vector lane; every lane computes what a lone unit computes,
/// so the result does not depend on which units share a batch.
pub fn apply_batch(
    units: &mut [UnitState],
    ks: &[usize],
    stats: &mut [f64],
    configs: &[LinearConfig],
    penalty: &[f64],
    n_rows: usize,
    s: &mut Scratch,
) {
    let len = stats_len(s.batch.p - 1);
    for (kc, sc) in ks.chunks(BATCH).zip(stats.chunks_mut(BATCH * len)) {
        // `lanes[l]`: the index in the chunk of the unit solved in lane `l`.
        let mut lanes = [0usize; BATCH];
        let mut used = 0;
        for (i, (&k, st)) in kc.iter().zip(sc.chunks_mut(len)).enumerate() {
            if prepare(&mut units[k], st, penalty, &configs[k], n_rows) {
                lanes[used] = i;
                used += 1;
            }
        }
        if used == 0 {
            continue;
        }
        // Lanes past `used` solve a copy of the last system (and are not read).
        let src: [&[f64]; BATCH] = std::array::from_fn(|l| {
            let i = lanes[l.min(used - 1)];
            &sc[i * len..(i + 1) * len]
        });
        newton_batch(used, &src, &mut s.batch);
        for (lane, &i) in lanes[..used].iter().enumerate() {
            let u = &mut units[kc[i]];
            s.batch.store(lane, u.line_mut().1);
            step(u, &sc[i * len..(i + 1) * len]);
        }
    }
}

/// The first half of an update: scales the Hessian's upper triangle, adds the
/// penalty, runs the line-search test and the convergence test. True when
/// the unit needs a Newton direction (from the gradient and Hessian now in
/// `stats`).
fn prepare(
    u: &mut UnitState,
    stats: &mut [f64],
    penalty: &[f64],
    cfg: &LinearConfig,
    n_rows: usize,
) -> bool {
    let p = u.w.len();
    let d = p - 1;
    u.passes += 1;
    let (f_s, rest) = stats.split_at_mut(1);
    let (g, rest) = rest.split_at_mut(p);
    let (h, h_rows) = rest.split_at_mut(p * p);
    let scale = if h_rows[0] > 0.0 {
        n_rows as f64 / h_rows[0]
    } else {
        1.0
    };
    // Over every row, the Hessian is exact and Newton converges quadratically;
    // over a sample, only linearly (the prediction below does not hold).
    let exact = h_rows[0] == n_rows as f64;
    if scale != 1.0 {
        for j in 0..p {
            for v in &mut h[j * p + j..(j + 1) * p] {
                *v *= scale;
            }
        }
    }
    let mut f = f_s[0];
    for j in 0..d {
        f += 0.5 * penalty[j] * u.w[j] * u.w[j];
        g[j] += penalty[j] * u.w[j];
        h[j * p + j] += penalty[j];
    }
    if u.iter > 0 {
        let armijo = f <= u.f_base + 1e-4 * u.alpha * u.slope + 1e-12 * u.f_base.abs();
        if !armijo || !f.is_finite() {
            // The next point is a shorter step: no prediction for it.
            u.hessian = true;
            u.alpha *= 0.5;
            let (base, dir) = u.line.split_at(p);
            if u.alpha < 1e-10 {
                // No further decrease is possible in floating point: stay at the base.
                u.w.copy_from_slice(base);
                u.objective = u.f_base;
                u.stop(Status::Converged);
            } else {
                for j in 0..p {
                    u.w[j] = base[j] + u.alpha * dir[j];
                }
            }
            return false;
        }
    }
    u.objective = f;
    u.grad_max = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let tol = cfg.tol() * cfg.c() * n_rows.max(1) as f64;
    if u.grad_max <= tol {
        u.stop(Status::Converged);
        return false;
    }
    if u.iter >= cfg.max_iter() {
        u.stop(Status::MaxIter);
        return false;
    }
    if !u.hessian {
        // Predicted the last point, and it is not: the next pass evaluates
        // the same point again, with the Hessian (the line search accepts it
        // again: same loss).
        u.hessian = true;
        return false;
    }
    // A Newton step follows. The next point is the last one when the
    // iteration limit stops there, or when, after a full step with the exact
    // Hessian, the gradient shrinks as fast again as it did over the last
    // step: quadratic convergence, `g_next ~ g^2 / g_prev^2 * g`.
    let last = u.iter + 1 >= cfg.max_iter()
        || (exact
            && u.alpha == 1.0
            && u.grad_max.powi(3) <= PREDICT_CONVERGED * tol * u.grad_prev * u.grad_prev);
    u.grad_prev = u.grad_max;
    u.hessian = !last;
    true
}

/// How far below the tolerance the predicted gradient of the next point must
/// be for a pass to skip its Hessian.
pub const PREDICT_CONVERGED: f64 = 0.3;

/// The second half of an update: with the Newton direction in the unit's
/// line vectors, checks it is a descent direction and sets `u.w` to the
/// full step.
fn step(u: &mut UnitState, stats: &[f64]) {
    let p = u.w.len();
    let g = &stats[1..1 + p];
    let h = &stats[1 + p..1 + p + p * p];
    let (base, dir) = u.line.split_at_mut(p);
    let mut slope: f64 = g.iter().zip(&*dir).map(|(a, b)| a * b).sum();
    if !(slope < 0.0) {
        // Not a descent direction (numerically indefinite H): steepest descent,
        // scaled by the diagonal.
        for j in 0..p {
            dir[j] = -g[j] / h[j * p + j].max(1e-12);
        }
        slope = g.iter().zip(&*dir).map(|(a, b)| a * b).sum();
    }
    base.copy_from_slice(&u.w);
    for j in 0..p {
        u.w[j] = base[j] + dir[j];
    }
    u.slope = slope;
    u.f_base = u.objective;
    u.alpha = 1.0;
    u.iter += 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::layout::{GroupedMatrix, LayoutInput};
    use crate::data::Column;
    use crate::linear::{LinearModel, LinearParams};

    /// One group holding every row of `cols` (column-major).
    fn matrix(cols: &[Vec<f64>], y: &[f64]) -> GroupedMatrix {
        let n = y.len();
        let rows: Vec<u32> = (0..n as u32).collect();
        let cols: Vec<Column> = cols.iter().map(|c| Column::Owned(c.clone())).collect();
        GroupedMatrix::build(LayoutInput {
            columns: &cols,
            threads: 1,
            target: y,
            rows: &rows,
            group_of: &vec![0; n],
            n_groups: 1,
            with_global: false,
            impute: None,
        })
        .unwrap()
    }

    #[test]
    fn accumulate_hand_computed_binary() {
        // one feature (already standardised: mean 0, sd 1), two rows, w = 0, b = 0:
        // p = 0.5 for both. x = [1, -1], y = [1, 0], C = 2.
        // loss = 2 * (2 ln 2); grad_w = 2 * ((0.5-1)*1 + (0.5-0)*(-1)) = -2
        // grad_b = 0; H = 2 * 0.25 * [[2, 0], [0, 2]] = I
        let m = matrix(&[vec![1.0, -1.0]], &[1.0, 0.0]);
        let mut out = vec![0.0; stats_len(1)];
        let mut s = Scratch::new(1, m.dp());
        accumulate(
            Task::Binary,
            1,
            m.blocks(0, 0..2),
            &[UnitRef {
                w: &[0.0, 0.0],
                c: 2.0,
                hessian: true,
            }],
            &mut out,
            &mut s,
        );
        assert!((out[0] - 4.0 * 2f64.ln()).abs() < 1e-12);
        assert_eq!(&out[1..3], &[-2.0, 0.0]);
        assert!(
            (out[3] - 1.0).abs() < 1e-6 && out[4] == 0.0 && (out[6] - 1.0).abs() < 1e-12,
            "{out:?}"
        );
    }

    #[test]
    fn partial_steps_combine_to_the_whole() {
        let n = 600;
        let cols: Vec<Vec<f64>> = (0..3)
            .map(|j| {
                (0..n)
                    .map(|i| (((i * 7919 + j * 31) % 13) as f64) / 6.0 - 1.0)
                    .collect()
            })
            .collect();
        let y: Vec<f64> = (0..n).map(|i| (i % 3 == 0) as u8 as f64).collect();
        let m = matrix(&cols, &y);
        let w = [0.3, -0.2, 0.1, 0.05];
        let units = [
            UnitRef {
                w: &w,
                c: 0.7,
                hessian: true,
            },
            UnitRef {
                w: &[0.0; 4],
                c: 2.0,
                hessian: true,
            },
        ];
        let len = stats_len(3);
        let mut s = Scratch::new(3, m.dp());
        let mut whole = vec![0.0; 2 * len];
        accumulate(
            Task::Binary,
            1,
            m.blocks(0, 0..n),
            &units,
            &mut whole,
            &mut s,
        );
        let mut a = vec![0.0; 2 * len];
        let mut b = vec![0.0; 2 * len];
        accumulate(Task::Binary, 1, m.blocks(0, 0..256), &units, &mut a, &mut s);
        accumulate(Task::Binary, 1, m.blocks(0, 256..n), &units, &mut b, &mut s);
        crate::exec::add_stats(&mut a, &b);
        for (u, v) in a.iter().zip(&whole) {
            assert!((u - v).abs() <= 1e-9 * v.abs().max(1.0), "{u} vs {v}");
        }
    }

    /// Fits one binary unit to convergence; `force(pass, unit)` may override
    /// whether each pass sums the Hessian. Returns the unit, the passes and
    /// how many of them skipped the Hessian.
    fn fit_forcing(force: &dyn Fn(usize, &UnitState) -> Option<bool>) -> (UnitState, usize, usize) {
        let (n, d) = (400, 4);
        let cols: Vec<Vec<f64>> = (0..d)
            .map(|j| {
                (0..n)
                    .map(|i| ((i * 7919 + j * 104_729) % 1009) as f64 / 504.5 - 1.0)
                    .collect()
            })
            .collect();
        let y: Vec<f64> = (0..n)
            .map(|i| {
                let z: f64 = (0..d).map(|j| cols[j][i] * (j as f64 - 1.5)).sum();
                f64::from(u8::from(z + ((i * 31) % 7) as f64 / 3.5 - 1.0 > 0.0))
            })
            .collect();
        let m = matrix(&cols, &y);
        let cfg = LinearParams::new().c(10.0).tol(1e-8).check().unwrap();
        let penalty: Vec<f64> = m.scale(0).iter().map(|s| 1.0 / (s * s)).collect();
        let mut u = UnitState::new(Task::Binary, m.y(m.range(0)), d);
        let mut s = Scratch::new(d, m.dp());
        let (mut passes, mut skipped) = (0, 0);
        while u.status == Status::Active {
            if let Some(h) = force(passes, &u) {
                u.hessian = h;
            }
            skipped += usize::from(!u.needs_hessian());
            let mut st = vec![0.0; stats_len(d)];
            let unit = UnitRef {
                w: &u.w,
                c: cfg.c(),
                hessian: u.needs_hessian(),
            };
            accumulate(
                Task::Binary,
                1,
                m.blocks(0, m.range(0)),
                &[unit],
                &mut st,
                &mut s,
            );
            apply(&mut u, &mut st, &penalty, &cfg, n, &mut s);
            passes += 1;
        }
        (u, passes, skipped)
    }

    #[test]
    fn skipping_the_hessian_never_changes_a_step() {
        let (always, passes, skipped) = fit_forcing(&|_, _| Some(true));
        assert_eq!((always.status, skipped), (Status::Converged, 0));
        // Predicted: the last pass skips its Hessian, and nothing else changes.
        let (predicted, p2, s2) = fit_forcing(&|_, _| None);
        assert_eq!((p2, s2), (passes, 1), "passes {p2} vs {passes}");
        assert_eq!(
            (predicted.w, predicted.iter),
            (always.w.clone(), always.iter)
        );
        // Wrong guesses (no Hessian on every odd pass): each costs a pass at
        // the same point, and the steps are the same.
        let (wrong, p3, s3) = fit_forcing(&|pass, _| (pass % 2 == 1).then_some(false));
        assert!(
            s3 + 1 >= always.iter as usize && p3 == passes + s3 - 1,
            "{p3} passes, {s3} skipped, {} iterations",
            always.iter
        );
        assert_eq!(
            (wrong.w, wrong.iter, wrong.status),
            (always.w, always.iter, always.status)
        );
    }

    #[test]
    fn ridge_one_feature_matches_closed_form() {
        // raw problem: minimise C/2 sum (y - w x - b)^2 + w^2/2 with x centred:
        // w = C sxy / (C sxx + 1), b = mean(y).
        let x = vec![-1.0, 0.0, 1.0];
        let y = [1.0, 2.0, 4.0];
        let c = 0.5;
        let m = matrix(&[x], &y);
        let cfg = LinearParams::new().c(c).tol(1e-12).check().unwrap();
        let mut u = UnitState::new(Task::Regression, &y, 1);
        let mut s = Scratch::new(1, m.dp());
        let penalty = [1.0 / (m.scale(0)[0] * m.scale(0)[0])];
        while u.status == Status::Active {
            let mut st = vec![0.0; stats_len(1)];
            accumulate(
                Task::Regression,
                1,
                m.blocks(0, 0..3),
                &[UnitRef {
                    w: &u.w,
                    c,
                    hessian: u.needs_hessian(),
                }],
                &mut st,
                &mut s,
            );
            apply(&mut u, &mut st, &penalty, &cfg, 3, &mut s);
        }
        let raw = LinearModel::from_standardised(&u.w, m.mean(0), m.scale(0));
        let (sxy, sxx) = (3.0, 2.0);
        assert!(
            (raw.coef[0] - c * sxy / (c * sxx + 1.0)).abs() < 1e-7,
            "{raw:?}"
        );
        assert!((raw.intercept - 7.0 / 3.0).abs() < 1e-7);
        assert_eq!(u.status, Status::Converged);
    }
}
