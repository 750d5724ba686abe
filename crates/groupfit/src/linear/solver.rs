//! The linear family's partial-step API: a damped Newton method whose every
//! iteration is one pass over the data.
//!
//! * [`accumulate`] — the *partial step*: over any row range of a group (a whole
//!   group, a row shard, rows on a remote worker) add the loss, gradient and
//!   Hessian of one (group, config) unit at its current weights into a flat
//!   statistics buffer of [`stats_len`] values.
//! * [`combine`] — partial statistics of one unit add up.
//! * [`apply`] — the *update*: with the unit's statistics over all its rows,
//!   add the penalty, run the Armijo line-search test, test convergence, take
//!   the next Newton step, and decide whether the next pass needs the
//!   Hessian ([`UnitState::needs_hessian`]).
//!
//! The three functions hold no threads and no global state; callers own every
//! buffer (a [`Scratch`] per worker), so the hot loop does not allocate.

use super::kernel::{accumulate_blocks, BlockScratch, UnitRef};
use super::params::LinearConfig;
use crate::data::layout::Block;
use crate::data::Task;
use crate::math::simd::{level, simd_copy, Level};

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
    /// The line search's accepted point, then the Newton direction (`2 (d +
    /// 1)` values); empty before the first step and once the unit has
    /// stopped, so 80,000 units of tiny groups do not hold (and first touch)
    /// two more vectors each for the whole run.
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

    /// Appends the state to `out` as `f64` values (`3 (d + 1) + 10` of them):
    /// what a remote worker's snapshot holds.
    pub fn save(&self, out: &mut Vec<f64>) {
        out.extend_from_slice(&self.w);
        if self.line.is_empty() {
            // Before the first step: the accepted point is `w`, no direction.
            out.extend_from_slice(&self.w);
            out.extend(std::iter::repeat_n(0.0, self.w.len()));
        } else {
            out.extend_from_slice(&self.line);
        }
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
            self.grad_prev,
            f64::from(u8::from(self.hessian)),
        ]);
    }

    /// Reads a state written by [`UnitState::save`] (for the same number of
    /// features) from the start of `v`; returns the values read, or `None`
    /// when `v` is too short or malformed.
    pub fn load(&mut self, v: &[f64]) -> Option<usize> {
        let p = self.w.len();
        let n = 3 * p + 10;
        if v.len() < n {
            return None;
        }
        self.w.copy_from_slice(&v[..p]);
        self.line.clear();
        self.line.extend_from_slice(&v[p..3 * p]);
        let t = &v[3 * p..n];
        self.status = match t[5] {
            0.0 => Status::Active,
            1.0 => Status::Converged,
            2.0 => Status::MaxIter,
            _ => return None,
        };
        (self.f_base, self.slope, self.alpha) = (t[0], t[1], t[2]);
        (self.iter, self.passes) = (t[3] as u32, t[4] as u32);
        (self.objective, self.grad_max, self.grad_prev) = (t[6], t[7], t[8]);
        self.hessian = match t[9] {
            0.0 => false,
            1.0 => true,
            _ => return None,
        };
        if self.status != Status::Active {
            self.line = Vec::new();
        }
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
/// be for a pass to skip its Hessian. On the benchmark's 20,000 groups of
/// 40 rows (4 configs) it predicts 89% of the units' last points and is
/// wrong for 0.4% of units.
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

/// Units whose Newton systems are solved together (vector lanes of `f64`).
pub const BATCH: usize = 4;

/// One value of each unit of a batch.
type Lanes = [f64; BATCH];

/// Buffers of the batched Newton solve: the systems `h x = -g` of up to
/// [`BATCH`] units, interleaved (element `i` of every unit side by side).
#[derive(Debug, Clone)]
struct BatchScratch {
    p: usize,
    /// The Hessians (upper triangle, row-major `p x p`).
    h: Vec<Lanes>,
    /// The Cholesky factors.
    u: Vec<Lanes>,
    /// The inverses of the factors' diagonals (the AVX-512 solve multiplies
    /// by them).
    dinv: Vec<Lanes>,
    /// The gradients.
    g: Vec<Lanes>,
    /// The solution of the last factorisation tried.
    y: Vec<Lanes>,
    /// The directions.
    x: Vec<Lanes>,
}

impl BatchScratch {
    /// Buffers for systems of `p` unknowns (each solve loads its own,
    /// [`BatchScratch::load`]).
    fn new(p: usize) -> Self {
        BatchScratch {
            p,
            h: vec![[0.0; BATCH]; p * p],
            u: vec![[0.0; BATCH]; p * p],
            dinv: vec![[0.0; BATCH]; p],
            g: vec![[0.0; BATCH]; p],
            y: vec![[0.0; BATCH]; p],
            x: vec![[0.0; BATCH]; p],
        }
    }

    /// Copies each lane's gradient and Hessian (upper triangle) from the
    /// statistics `src[lane]`: one value of every lane at a time, so each
    /// entry is written whole (four scattered stores per entry were a third
    /// of the solve's time).
    #[inline(always)]
    fn load(&mut self, src: &[&[f64]; BATCH]) {
        let p = self.p;
        let g: [&[f64]; BATCH] = std::array::from_fn(|l| &src[l][1..1 + p]);
        for (j, gl) in self.g.iter_mut().enumerate() {
            *gl = std::array::from_fn(|l| g[l][j]);
        }
        for i in 0..p {
            let at = 1 + p + i * p;
            let rows: [&[f64]; BATCH] = std::array::from_fn(|l| &src[l][at + i..at + p]);
            for (q, h) in self.h[i * p + i..(i + 1) * p].iter_mut().enumerate() {
                *h = std::array::from_fn(|l| rows[l][q]);
            }
        }
    }

    /// Copies the direction of `lane` into `dir`.
    fn store(&self, lane: usize, dir: &mut [f64]) {
        for (d, x) in dir.iter_mut().zip(&self.x) {
            *d = x[lane];
        }
    }
}

/// Loads the systems of the statistics `src` (see [`BatchScratch::load`])
/// and solves `h x = -g` in every used lane of `b` by Cholesky, adding a
/// growing ridge in a lane whose `h` is not numerically positive definite.
/// Compiled for the widest vector unit present.
fn newton_batch(used: usize, src: &[&[f64]; BATCH], b: &mut BatchScratch) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: the CPU has the level the copy was compiled for.
        Level::Avx512 | Level::Avx512Vbmi2 => return unsafe { newton_batch_avx512(used, src, b) },
        // SAFETY: as above.
        Level::Avx2 => return unsafe { newton_batch_avx2(used, src, b) },
        Level::Scalar => {}
    }
    newton_batch_impl::<false>(used, src, b)
}

simd_copy!(Avx2 fn newton_batch_avx2(used: usize, src: &[&[f64]; BATCH], b: &mut BatchScratch)
    => newton_batch_impl::<false>(used, src, b));
simd_copy!(Avx512 fn newton_batch_avx512(used: usize, src: &[&[f64]; BATCH], b: &mut BatchScratch)
    => newton_batch_impl::<true>(used, src, b));

/// The solve of [`newton_batch`]; `WIDE`: the AVX-512 factorisation and
/// solve (see [`factor_and_solve`]).
#[inline(always)]
fn newton_batch_impl<const WIDE: bool>(used: usize, src: &[&[f64]; BATCH], b: &mut BatchScratch) {
    b.load(src);
    let p = b.p;
    let mut max_diag = [0.0f64; BATCH];
    for j in 0..p {
        for l in 0..BATCH {
            max_diag[l] = max_diag[l].max(b.h[j * p + j][l]);
        }
    }
    for m in &mut max_diag {
        *m = m.max(1e-300);
    }
    let mut ridge = [0.0f64; BATCH];
    let mut pending = [false; BATCH];
    pending[..used].fill(true);
    for _ in 0..12 {
        let ok = factor_and_solve::<WIDE>(b, &ridge);
        let mut left = false;
        for l in 0..used {
            if !pending[l] {
                continue;
            }
            if ok[l] {
                for (x, y) in b.x.iter_mut().zip(&b.y) {
                    x[l] = y[l];
                }
                pending[l] = false;
            } else {
                ridge[l] = if ridge[l] == 0.0 {
                    1e-10 * max_diag[l]
                } else {
                    ridge[l] * 100.0
                };
                left = true;
            }
        }
        if !left {
            return;
        }
    }
    for l in 0..used {
        if pending[l] {
            for (x, g) in b.x.iter_mut().zip(&b.g) {
                x[l] = -g[l] / max_diag[l];
            }
        }
    }
}

/// Factors every lane of `b` with `ridge` added and solves for the
/// direction into `b.y`; per lane, false if not positive definite. The
/// AVX-512 pair ([`cholesky_batch_avx512`], [`solve_batch_avx512`]) when
/// `WIDE` (which only a caller compiled for AVX-512 and FMA passes), else
/// [`cholesky_batch`] and [`solve_batch`].
#[inline(always)]
fn factor_and_solve<const WIDE: bool>(b: &mut BatchScratch, ridge: &Lanes) -> [bool; BATCH] {
    let p = b.p;
    #[cfg(target_arch = "x86_64")]
    {
        if WIDE {
            // SAFETY: `WIDE` is only set in `newton_batch_avx512`, which runs
            // on a CPU with AVX-512F and FMA.
            return unsafe {
                let ok = cholesky_batch_avx512(p, &b.h, ridge, &mut b.u, &mut b.dinv);
                solve_batch_avx512(p, &b.u, &b.dinv, &b.g, &mut b.y);
                ok
            };
        }
    }
    let ok = cholesky_batch(p, &b.h, ridge, &mut b.u);
    solve_batch(p, &b.u, &b.g, &mut b.y);
    ok
}

/// [`solve_batch`] with AVX-512 and FMA, from the factors and the inverses
/// of their diagonals that [`cholesky_batch_avx512`] wrote: forward by rows
/// of `U`, two entries of the four systems per register; backward by
/// columns of `U` (each `x[i]`, once known, is taken out of every `x[j]`,
/// `j < i`, independently), so neither half waits on a division or a dot
/// product per unknown.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn solve_batch_avx512(p: usize, u: &[Lanes], dinv: &[Lanes], g: &[Lanes], x: &mut [Lanes]) {
    use std::arch::x86_64::*;
    assert!(u.len() >= p * p && dinv.len() >= p && g.len() >= p && x.len() >= p);
    let (up, xp) = (u.as_ptr().cast::<f64>(), x.as_mut_ptr().cast::<f64>());
    let at = |i: usize| i * BATCH;
    for (xi, gi) in x.iter_mut().zip(g) {
        for l in 0..BATCH {
            xi[l] = -gi[l];
        }
    }
    // U^T y = -g.
    for k in 0..p {
        let yk = _mm256_mul_pd(
            _mm256_loadu_pd(xp.add(at(k))),
            _mm256_loadu_pd(dinv.as_ptr().add(k).cast()),
        );
        _mm256_storeu_pd(xp.add(at(k)), yk);
        let y2 = _mm512_broadcast_f64x4(yk);
        let row = up.add(at(k * p));
        let mut j = k + 1;
        while j + 2 <= p {
            let v = _mm512_fnmadd_pd(
                _mm512_loadu_pd(row.add(at(j))),
                y2,
                _mm512_loadu_pd(xp.add(at(j))),
            );
            _mm512_storeu_pd(xp.add(at(j)), v);
            j += 2;
        }
        if j < p {
            let v = _mm256_fnmadd_pd(
                _mm256_loadu_pd(row.add(at(j))),
                yk,
                _mm256_loadu_pd(xp.add(at(j))),
            );
            _mm256_storeu_pd(xp.add(at(j)), v);
        }
    }
    // U x = y.
    for i in (0..p).rev() {
        let xi = _mm256_mul_pd(
            _mm256_loadu_pd(xp.add(at(i))),
            _mm256_loadu_pd(dinv.as_ptr().add(i).cast()),
        );
        _mm256_storeu_pd(xp.add(at(i)), xi);
        for j in 0..i {
            let v = _mm256_fnmadd_pd(
                _mm256_loadu_pd(up.add(at(j * p + i))),
                xi,
                _mm256_loadu_pd(xp.add(at(j))),
            );
            _mm256_storeu_pd(xp.add(at(j)), v);
        }
    }
}

/// [`cholesky_batch`] with AVX-512 and fused multiply-adds: each 512-bit
/// register holds two neighbouring entries of a row of `U` in all four
/// lanes, and up to eight registers (sixteen entries) are updated per `k`,
/// so the factorisation runs at the FMA units' throughput rather than the
/// latency of one chain. Every lane still computes exactly what a lone
/// system computes (the same operations in the same order), only each
/// `a - c * v` is rounded once. Also writes `1 / U[i][i]` into `dinv` for
/// [`solve_batch_avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn cholesky_batch_avx512(
    p: usize,
    h: &[Lanes],
    ridge: &Lanes,
    u: &mut [Lanes],
    dinv: &mut [Lanes],
) -> [bool; BATCH] {
    use std::arch::x86_64::*;

    /// Row `i` of `U`, entries `j .. j + 2 N`: `(h[i][j..] - sum_k U[k][i]
    /// U[k][j..]) / U[i][i]`, `N` registers of two entries each.
    #[inline(always)]
    unsafe fn entries<const N: usize>(
        p: usize,
        i: usize,
        j: usize,
        h: *const f64,
        u: *mut f64,
        inv: __m512d,
    ) {
        let mut acc = [_mm512_setzero_pd(); N];
        for (q, a) in acc.iter_mut().enumerate() {
            *a = _mm512_loadu_pd(h.add((i * p + j + 2 * q) * BATCH));
        }
        for k in 0..i {
            let c = _mm512_broadcast_f64x4(_mm256_loadu_pd(u.add((k * p + i) * BATCH)));
            let row = u.add((k * p + j) * BATCH);
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fnmadd_pd(c, _mm512_loadu_pd(row.add(2 * q * BATCH)), *a);
            }
        }
        for (q, a) in acc.iter().enumerate() {
            _mm512_storeu_pd(u.add((i * p + j + 2 * q) * BATCH), _mm512_mul_pd(*a, inv));
        }
    }

    assert!(h.len() >= p * p && u.len() >= p * p && dinv.len() >= p);
    let (hp, up) = (h.as_ptr().cast::<f64>(), u.as_mut_ptr().cast::<f64>());
    let mut ok = [true; BATCH];
    let r = _mm256_loadu_pd(ridge.as_ptr());
    // `U[j][j]` holds `h[j][j] - sum_{k<i} U[k][j]^2` until row `j` is
    // reached: each row's entries update the diagonals below them at once,
    // in order of `k`, instead of one chain of `j` dependent steps each.
    for j in 0..p {
        let at = (j * p + j) * BATCH;
        _mm256_storeu_pd(up.add(at), _mm256_loadu_pd(hp.add(at)));
    }
    for i in 0..p {
        let d = _mm256_add_pd(_mm256_loadu_pd(up.add((i * p + i) * BATCH)), r);
        let mut dl = [0.0f64; BATCH];
        _mm256_storeu_pd(dl.as_mut_ptr(), d);
        for (o, v) in ok.iter_mut().zip(dl) {
            *o &= v > 0.0 && v.is_finite();
        }
        let root = _mm256_sqrt_pd(d);
        let inv = _mm256_div_pd(_mm256_set1_pd(1.0), root);
        _mm256_storeu_pd(up.add((i * p + i) * BATCH), root);
        _mm256_storeu_pd(dinv.as_mut_ptr().add(i).cast(), inv);
        let inv2 = _mm512_broadcast_f64x4(inv);
        let mut j = i + 1;
        while p - j >= 16 {
            entries::<8>(p, i, j, hp, up, inv2);
            j += 16;
        }
        // The rest in blocks of 8, 4 and 2 entries (`N` registers of two).
        macro_rules! block {
            ($n:literal) => {
                if p - j >= 2 * $n {
                    entries::<$n>(p, i, j, hp, up, inv2);
                    j += 2 * $n;
                }
            };
        }
        block!(4);
        block!(2);
        block!(1);
        if j < p {
            let mut a = _mm256_loadu_pd(hp.add((i * p + j) * BATCH));
            for k in 0..i {
                let c = _mm256_loadu_pd(up.add((k * p + i) * BATCH));
                a = _mm256_fnmadd_pd(c, _mm256_loadu_pd(up.add((k * p + j) * BATCH)), a);
            }
            _mm256_storeu_pd(up.add((i * p + j) * BATCH), _mm256_mul_pd(a, inv));
        }
        for j in i + 1..p {
            let c = _mm256_loadu_pd(up.add((i * p + j) * BATCH));
            let at = up.add((j * p + j) * BATCH);
            _mm256_storeu_pd(at, _mm256_fnmadd_pd(c, c, _mm256_loadu_pd(at)));
        }
    }
    ok
}

/// Upper Cholesky factors `U` (`U^T U = h + ridge I`) of every lane into `u`
/// (row-major `p x p`, upper triangle); per lane, false if not positive
/// definite. Left-looking: `U[i][j] = (h[i][j] - sum_{k<i} U[k][i] U[k][j]) /
/// U[i][i]`, the sum taken in order of `k` (the order a right-looking
/// update would subtract in), four `j` at a time held in registers; every
/// operation is one vector operation over the lanes.
#[inline(always)]
fn cholesky_batch(p: usize, h: &[Lanes], ridge: &Lanes, u: &mut [Lanes]) -> [bool; BATCH] {
    const J: usize = 4;
    let mut ok = [true; BATCH];
    for i in 0..p {
        let mut s = h[i * p + i];
        for k in 0..i {
            let c = u[k * p + i];
            for l in 0..BATCH {
                s[l] -= c[l] * c[l];
            }
        }
        let mut inv = [0.0f64; BATCH];
        for l in 0..BATCH {
            let d = s[l] + ridge[l];
            ok[l] &= d > 0.0 && d.is_finite();
            s[l] = d.sqrt();
            inv[l] = 1.0 / s[l];
        }
        u[i * p + i] = s;
        let mut j = i + 1;
        while j + J <= p {
            let mut acc: [Lanes; J] = h[i * p + j..i * p + j + J].try_into().unwrap();
            for k in 0..i {
                let c = u[k * p + i];
                let row: &[Lanes; J] = u[k * p + j..k * p + j + J].try_into().unwrap();
                for q in 0..J {
                    for l in 0..BATCH {
                        acc[q][l] -= c[l] * row[q][l];
                    }
                }
            }
            for (q, a) in acc.iter().enumerate() {
                for l in 0..BATCH {
                    u[i * p + j + q][l] = a[l] * inv[l];
                }
            }
            j += J;
        }
        for j in j..p {
            let mut a = h[i * p + j];
            for k in 0..i {
                let (c, v) = (u[k * p + i], u[k * p + j]);
                for l in 0..BATCH {
                    a[l] -= c[l] * v[l];
                }
            }
            for l in 0..BATCH {
                u[i * p + j][l] = a[l] * inv[l];
            }
        }
    }
    ok
}

/// `U^T U x = -g` in every lane: forward `U^T y = -g` column by column of
/// `U^T` (rows of `U`), then backward `U x = y`, a dot product over row `i`
/// of `U` in four partial sums.
#[inline(always)]
fn solve_batch(p: usize, u: &[Lanes], g: &[Lanes], x: &mut [Lanes]) {
    for (xi, gi) in x.iter_mut().zip(g) {
        for l in 0..BATCH {
            xi[l] = -gi[l];
        }
    }
    for k in 0..p {
        let row = &u[k * p..(k + 1) * p];
        let mut yk = [0.0f64; BATCH];
        for l in 0..BATCH {
            yk[l] = x[k][l] / row[k][l];
        }
        x[k] = yk;
        for (xj, ukj) in x[k + 1..].iter_mut().zip(&row[k + 1..]) {
            for l in 0..BATCH {
                xj[l] -= ukj[l] * yk[l];
            }
        }
    }
    for i in (0..p).rev() {
        let row = &u[i * p..(i + 1) * p];
        let dot = dot4_lanes(&row[i + 1..], &x[i + 1..]);
        for l in 0..BATCH {
            x[i][l] = (x[i][l] - dot[l]) / row[i][l];
        }
    }
}

/// Dot product in every lane, with four partial sums over chunks of four
/// and the remainder summed in order.
#[inline(always)]
fn dot4_lanes(a: &[Lanes], b: &[Lanes]) -> Lanes {
    let mut acc = [[0.0f64; BATCH]; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let mut tail = [-0.0f64; BATCH];
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        for l in 0..BATCH {
            tail[l] += x[l] * y[l];
        }
    }
    for (x, y) in ca.zip(cb) {
        for q in 0..4 {
            for l in 0..BATCH {
                acc[q][l] += x[q][l] * y[q][l];
            }
        }
    }
    let mut out = [0.0f64; BATCH];
    for l in 0..BATCH {
        out[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]) + tail[l];
    }
    out
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

    /// Statistics (`[loss, g, H, rows]`) of the system `H x = -g` with
    /// `H = A^T A + I`, `A` filled from `seed`.
    fn spd_stats(p: usize, seed: usize) -> Vec<f64> {
        let a: Vec<f64> = (0..p * p)
            .map(|i| (((i * 7919 + p + 13 * seed) % 31) as f64) / 15.0 - 1.0)
            .collect();
        let mut st = vec![0.0; stats_len(p - 1)];
        for j in 0..p {
            st[1 + j] = (j as f64 * 0.37 + seed as f64).sin();
            for k in 0..p {
                st[1 + p + j * p + k] = (0..p).map(|r| a[r * p + j] * a[r * p + k]).sum::<f64>()
                    + f64::from(u8::from(j == k));
            }
        }
        st
    }

    /// The directions of the systems in `stats`, solved as one batch.
    fn solve(p: usize, stats: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let mut b = BatchScratch::new(p);
        let src: [&[f64]; BATCH] = std::array::from_fn(|l| &stats[l.min(stats.len() - 1)][..]);
        newton_batch(stats.len(), &src, &mut b);
        (0..stats.len())
            .map(|lane| {
                let mut x = vec![0.0; p];
                b.store(lane, &mut x);
                x
            })
            .collect()
    }

    #[test]
    fn newton_batch_solves_spd_systems_in_every_lane_as_alone() {
        // H x = -g to rounding in every lane, for sizes from 1 to 33 and
        // batches of 1 to BATCH systems; each lane's solution is bit-equal
        // to the same system solved alone.
        for p in [1, 2, 7, 8, 9, 16, 17, 33] {
            for used in 1..=BATCH {
                let stats: Vec<Vec<f64>> = (0..used).map(|l| spd_stats(p, l)).collect();
                let xs = solve(p, &stats);
                for (l, (st, x)) in stats.iter().zip(&xs).enumerate() {
                    let (g, h) = (&st[1..1 + p], &st[1 + p..1 + p + p * p]);
                    for j in 0..p {
                        let hx: f64 = (0..p).map(|k| h[j * p + k] * x[k]).sum();
                        assert!(
                            (hx + g[j]).abs() < 1e-9 * (1.0 + g[j].abs()),
                            "p={p} lane {l} row {j}: {hx} vs {}",
                            -g[j]
                        );
                    }
                    assert_eq!(x, &solve(p, std::slice::from_ref(st))[0], "p={p} lane {l}");
                }
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx512_factors_match_the_portable_factors() {
        // Every entry path (16, 8, 4, 2 entries a register block, and the
        // last odd one) for sizes 1 to 40: the FMA factors agree with the
        // portable ones to rounding, lane by lane, and flag the same lanes.
        if crate::math::simd::level() < crate::math::simd::Level::Avx512 {
            return;
        }
        for p in 1..=40 {
            let mut b = BatchScratch::new(p);
            let stats: Vec<Vec<f64>> = (0..BATCH).map(|l| spd_stats(p, l + 1)).collect();
            b.load(&std::array::from_fn(|l| &stats[l][..]));
            let ridge = [0.0, 1e-3, 0.0, 2.0];
            let mut wide = vec![[0.0; BATCH]; p * p];
            let ok_portable = cholesky_batch(p, &b.h, &ridge, &mut b.u);
            // SAFETY: the CPU has AVX-512F and FMA (checked above).
            let mut dinv = vec![[0.0; BATCH]; p];
            let ok_wide = unsafe { cholesky_batch_avx512(p, &b.h, &ridge, &mut wide, &mut dinv) };
            assert_eq!(ok_portable, ok_wide, "p={p}");
            for i in 0..p {
                for j in i..p {
                    for l in 0..BATCH {
                        let (a, w) = (b.u[i * p + j][l], wide[i * p + j][l]);
                        assert!(
                            (a - w).abs() <= 1e-12 * (1.0 + a.abs()),
                            "p={p} U[{i}][{j}] lane {l}: {a} vs {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn an_indefinite_lane_gets_a_ridge_and_leaves_its_neighbour_alone() {
        // Lane 1: H = diag(2, -1e-3), g = (1, 1). Ridges 1e-10 * 2, then x100:
        // 2e-10, 2e-8, 2e-6, 2e-4 fail, 2e-2 makes -1e-3 + 0.02 = 0.019 > 0:
        // x = (-1 / 2.02, -1 / 0.019).
        let p = 2;
        let mut bad = vec![0.0; stats_len(1)];
        bad[1..3].copy_from_slice(&[1.0, 1.0]);
        bad[3..7].copy_from_slice(&[2.0, 0.0, 0.0, -1e-3]);
        let good = spd_stats(p, 3);
        let xs = solve(p, &[good.clone(), bad]);
        assert!((xs[1][0] + 1.0 / 2.02).abs() < 1e-12, "{:?}", xs[1]);
        assert!((xs[1][1] + 1.0 / 0.019).abs() < 1e-9, "{:?}", xs[1]);
        assert_eq!(xs[0], solve(p, &[good])[0]);
    }
}
