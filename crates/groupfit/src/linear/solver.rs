//! The linear family's partial-step API: a damped Newton method whose every
//! iteration is one pass over the data.
//!
//! * [`accumulate`] — the *partial step*: over any row range of a group (a whole
//!   group, a row shard, rows on a remote worker) add the loss, gradient and
//!   Hessian of one (group, config) unit at its current weights into a flat
//!   statistics buffer of [`stats_len`] values.
//! * [`combine`] — partial statistics of one unit add up.
//! * [`apply`] — the *update*: with the unit's statistics over all its rows,
//!   add the penalty, run the Armijo line-search test, test convergence and take
//!   the next Newton step.
//!
//! The three functions hold no threads and no global state; callers own every
//! buffer (a [`Scratch`] per worker), so the hot loop does not allocate.

use super::kernel::{accumulate_blocks, BlockScratch, UnitRef};
use super::LinearConfig;
use crate::data::layout::Block;
use crate::data::Task;

/// Length of one unit's statistics: `[loss, gradient (d+1), Hessian ((d+1)^2),
/// rows in the Hessian]`. The Hessian is accumulated in its upper triangle
/// only; [`apply`] mirrors it and scales it up when it was summed over a
/// sample of the rows.
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

/// Blocks (of [`crate::data::layout::BLOCK`] rows) that always get an exact Hessian.
pub const HESSIAN_BLOCKS: usize = 48;

/// Per-worker buffers for [`accumulate`] and [`apply`].
#[derive(Debug, Clone)]
pub struct Scratch {
    block: BlockScratch,
    chol: Vec<f64>,
}

impl Scratch {
    /// Buffers for `d` features stored as `dp` feature rows per block.
    pub fn new(d: usize, dp: usize) -> Self {
        let p = d + 1;
        Scratch {
            block: BlockScratch::new(dp),
            chol: vec![0.0; p * padded(p)],
        }
    }
}

/// Where one unit is in its Newton iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still iterating: needs another pass.
    Active,
    /// Gradient below tolerance (or the line search could not improve further).
    Converged,
    /// Stopped at `max_iter` Newton iterations.
    MaxIter,
}

/// The state of one (group, config) unit between passes.
#[derive(Debug, Clone)]
pub struct UnitState {
    /// Current weights in standardised coordinates; the last entry is the intercept.
    pub w: Vec<f64>,
    base: Vec<f64>,
    dir: Vec<f64>,
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
            base: w.clone(),
            dir: vec![0.0; d + 1],
            w,
            f_base: f64::INFINITY,
            slope: 0.0,
            alpha: 0.0,
            iter: 0,
            passes: 0,
            status: Status::Active,
            objective: f64::NAN,
            grad_max: f64::NAN,
        }
    }

    /// Appends the state to `out` as `f64` values (`3 (d + 1) + 8` of them):
    /// what a remote worker's snapshot holds.
    pub fn save(&self, out: &mut Vec<f64>) {
        out.extend_from_slice(&self.w);
        out.extend_from_slice(&self.base);
        out.extend_from_slice(&self.dir);
        let status = match self.status {
            Status::Active => 0.0,
            Status::Converged => 1.0,
            Status::MaxIter => 2.0,
        };
        out.extend_from_slice(&[
            self.f_base,
            self.slope,
            self.alpha,
            f64::from(self.iter),
            f64::from(self.passes),
            status,
            self.objective,
            self.grad_max,
        ]);
    }

    /// Reads a state written by [`UnitState::save`] (for the same number of
    /// features) from the start of `v`; returns the values read, or `None`
    /// when `v` is too short or malformed.
    pub fn load(&mut self, v: &[f64]) -> Option<usize> {
        let p = self.w.len();
        let n = 3 * p + 8;
        if v.len() < n {
            return None;
        }
        self.w.copy_from_slice(&v[..p]);
        self.base.copy_from_slice(&v[p..2 * p]);
        self.dir.copy_from_slice(&v[2 * p..3 * p]);
        let t = &v[3 * p..n];
        self.status = match t[5] {
            0.0 => Status::Active,
            1.0 => Status::Converged,
            2.0 => Status::MaxIter,
            _ => return None,
        };
        (self.f_base, self.slope, self.alpha) = (t[0], t[1], t[2]);
        (self.iter, self.passes) = (t[3] as u32, t[4] as u32);
        (self.objective, self.grad_max) = (t[6], t[7]);
        Some(n)
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

/// Adds the partial statistics `from` into `into`.
pub fn combine(into: &mut [f64], from: &[f64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

/// The update: given the unit's statistics over all of its rows at `u.w`,
/// adds the penalty (`penalty[j]` on `w[j]`, none on the intercept), checks the
/// line search, checks convergence and sets `u.w` to the next point to evaluate.
/// `n_rows` is the unit's row count (for the tolerance).
pub fn apply(
    u: &mut UnitState,
    stats: &mut [f64],
    penalty: &[f64],
    cfg: &LinearConfig,
    n_rows: usize,
    s: &mut Scratch,
) {
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
    for j in 0..p {
        h[j * p + j] *= scale;
        for k in j + 1..p {
            h[j * p + k] *= scale;
            h[k * p + j] = h[j * p + k];
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
            u.alpha *= 0.5;
            if u.alpha < 1e-10 {
                // No further decrease is possible in floating point: stay at the base.
                u.w.copy_from_slice(&u.base);
                u.objective = u.f_base;
                u.status = Status::Converged;
            } else {
                for j in 0..p {
                    u.w[j] = u.base[j] + u.alpha * u.dir[j];
                }
            }
            return;
        }
    }
    u.objective = f;
    u.grad_max = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if u.grad_max <= cfg.tol() * cfg.c() * n_rows.max(1) as f64 {
        u.status = Status::Converged;
        return;
    }
    if u.iter >= cfg.max_iter() {
        u.status = Status::MaxIter;
        return;
    }
    // Newton direction: H dir = -g.
    newton_direction(h, g, &mut u.dir, &mut s.chol);
    u.slope = g.iter().zip(&u.dir).map(|(a, b)| a * b).sum();
    if !(u.slope < 0.0) {
        // Not a descent direction (numerically indefinite H): steepest descent,
        // scaled by the diagonal.
        for j in 0..p {
            u.dir[j] = -g[j] / h[j * p + j].max(1e-12);
        }
        u.slope = g.iter().zip(&u.dir).map(|(a, b)| a * b).sum();
    }
    u.base.copy_from_slice(&u.w);
    u.f_base = f;
    u.alpha = 1.0;
    for j in 0..p {
        u.w[j] = u.base[j] + u.dir[j];
    }
    u.iter += 1;
}

/// Solves `h x = -g` by Cholesky, adding a growing ridge if `h` is not
/// numerically positive definite. Compiled for the widest vector unit present
/// (the short dot products of small factorisations gain most from it).
fn newton_direction(h: &[f64], g: &[f64], x: &mut [f64], l: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the features the copy was compiled for.
            return unsafe { newton_direction_avx512(h, g, x, l) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: as above.
            return unsafe { newton_direction_avx2(h, g, x, l) };
        }
    }
    newton_direction_impl(h, g, x, l)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn newton_direction_avx512(h: &[f64], g: &[f64], x: &mut [f64], l: &mut [f64]) {
    newton_direction_impl(h, g, x, l)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn newton_direction_avx2(h: &[f64], g: &[f64], x: &mut [f64], l: &mut [f64]) {
    newton_direction_impl(h, g, x, l)
}

#[inline(always)]
fn newton_direction_impl(h: &[f64], g: &[f64], x: &mut [f64], u: &mut [f64]) {
    let p = g.len();
    let max_diag = (0..p)
        .map(|j| h[j * p + j])
        .fold(0.0f64, f64::max)
        .max(1e-300);
    let pp = padded(p);
    let mut ridge = 0.0;
    for _ in 0..12 {
        if cholesky_upper(h, ridge, p, pp, u) {
            // H = U^T U. Forward, U^T y = -g, column by column of U^T (rows
            // of U, contiguous); y overwrites x.
            for (xi, gi) in x.iter_mut().zip(g) {
                *xi = -gi;
            }
            for k in 0..p {
                let row = &u[k * pp..k * pp + p];
                let yk = x[k] / row[k];
                x[k] = yk;
                for (xj, &ukj) in x[k + 1..].iter_mut().zip(&row[k + 1..]) {
                    *xj -= ukj * yk;
                }
            }
            // Backward, U x = y: a dot product over row i of U.
            for i in (0..p).rev() {
                let row = &u[i * pp..i * pp + p];
                let s = x[i] - dot4(&row[i + 1..], &x[i + 1..]);
                x[i] = s / row[i];
            }
            return;
        }
        ridge = if ridge == 0.0 {
            1e-10 * max_diag
        } else {
            ridge * 100.0
        };
    }
    for i in 0..p {
        x[i] = -g[i] / max_diag;
    }
}

/// Values per chunk of a Cholesky row (one AVX-512 register of `f64`).
const CHUNK: usize = 8;

/// Row length of the Cholesky factor of a `p x p` matrix: `p` padded to whole chunks.
fn padded(p: usize) -> usize {
    p.next_multiple_of(CHUNK)
}

/// Upper Cholesky factor `U` (`U^T U = h + ridge * I`) into `u`, row-major
/// with rows padded to `pp` (whole [`CHUNK`]s) values; false if not positive
/// definite. Right-looking: each step scales one row and updates the trailing
/// rows. Every update runs over whole chunks from the chunk holding
/// the diagonal: the values left of the diagonal (the lower triangle) are
/// scratch that nothing reads, and the padding stays zero, so the inner loop
/// has no remainder and vectorises fully even for small matrices.
#[inline(always)]
fn cholesky_upper(h: &[f64], ridge: f64, p: usize, pp: usize, u: &mut [f64]) -> bool {
    for i in 0..p {
        u[i * pp..i * pp + p].copy_from_slice(&h[i * p..(i + 1) * p]);
        u[i * pp + p..(i + 1) * pp].fill(0.0);
    }
    for k in 0..p {
        let (head, tail) = u.split_at_mut((k + 1) * pp);
        let row = &mut head[k * pp..];
        let d = row[k] + ridge;
        if !(d > 0.0) || !d.is_finite() {
            return false;
        }
        let r = d.sqrt();
        let inv = 1.0 / r;
        row[k] = r;
        for v in &mut row[k + 1..] {
            *v *= inv;
        }
        // Trailing update: A[i][j] -= U[k][i] * U[k][j] for k < i <= j.
        for i in k + 1..p {
            let f = row[i];
            let i0 = i / CHUNK * CHUNK;
            let target = &mut tail[(i - k - 1) * pp + i0..(i - k) * pp];
            for (t, &v) in target.iter_mut().zip(&row[i0..]) {
                *t -= f * v;
            }
        }
    }
    true
}

/// Dot product with four independent accumulators.
#[inline(always)]
fn dot4(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for q in 0..4 {
            acc[q] += x[q] * y[q];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
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
            UnitRef { w: &w, c: 0.7 },
            UnitRef {
                w: &[0.0; 4],
                c: 2.0,
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
        combine(&mut a, &b);
        for (u, v) in a.iter().zip(&whole) {
            assert!((u - v).abs() <= 1e-9 * v.abs().max(1.0), "{u} vs {v}");
        }
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
                &[UnitRef { w: &u.w, c }],
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

    #[test]
    fn newton_direction_solves_spd_systems_of_any_size() {
        // H = A^T A + I (symmetric positive definite), for sizes around the
        // 8-value chunks of the factorisation; H x = -g to rounding.
        for p in [1, 2, 7, 8, 9, 16, 17, 33] {
            let a: Vec<f64> = (0..p * p)
                .map(|i| (((i * 7919 + p) % 31) as f64) / 15.0 - 1.0)
                .collect();
            let mut h = vec![0.0; p * p];
            for j in 0..p {
                for k in 0..p {
                    h[j * p + k] = (0..p).map(|r| a[r * p + j] * a[r * p + k]).sum::<f64>()
                        + f64::from(u8::from(j == k));
                }
            }
            let g: Vec<f64> = (0..p).map(|j| (j as f64 * 0.37).sin()).collect();
            let mut x = vec![0.0; p];
            let mut l = vec![0.0; p * padded(p)];
            newton_direction(&h, &g, &mut x, &mut l);
            for j in 0..p {
                let hx: f64 = (0..p).map(|k| h[j * p + k] * x[k]).sum();
                assert!(
                    (hx + g[j]).abs() < 1e-9 * (1.0 + g[j].abs()),
                    "p={p} row {j}: {hx} vs {}",
                    -g[j]
                );
            }
        }
    }
}
