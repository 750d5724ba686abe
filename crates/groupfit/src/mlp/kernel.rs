//! The MLP step kernel: forward and backward of several networks over one
//! mini-batch (or a part of it) read once, and the optimizer updates.
//!
//! The first layers of all networks are one wider matrix product: their
//! weights are laid side by side into a `d × S` matrix (`S` the sum of the
//! first-layer widths), so the batch `X` (`rows × d`) is multiplied once, and
//! the first-layer weight gradients are one product `Xᵀ · Δ₁`. Deeper layers
//! are per network. Every product is a GEMM (`matrixmultiply::sgemm`, which
//! uses AVX-512/AVX2+FMA kernels by runtime detection); buffers live in a
//! [`StepScratch`] that grows to the largest step and is then reused.

use crate::data::Task;
use crate::math::simd::{level, simd_copy, Level};
use crate::math::{exp_neg, log1p_unit};

use super::params::Optimizer;

/// One network's architecture and current parameters (flat: per layer,
/// weights row-major `n_in × n_out`, then biases).
#[derive(Debug, Clone, Copy)]
pub struct Net<'a> {
    /// Layer widths from input to the single output.
    pub widths: &'a [usize],
    /// Flat parameters.
    pub params: &'a [f32],
}

/// Reusable buffers of the step kernel (one per worker).
#[derive(Debug, Default)]
pub struct StepScratch {
    /// Gathered batch rows, `rows × d`.
    pub x: Vec<f32>,
    /// Gathered targets.
    pub y: Vec<f32>,
    w1: Vec<f32>,
    b1: Vec<f32>,
    a1: Vec<f32>,
    d1: Vec<f32>,
    g1: Vec<f32>,
    acts: Vec<f32>,
    deltas: Vec<f32>,
    z: Vec<f32>,
    loss: Vec<f64>,
    grad: Vec<f32>,
    off: Vec<usize>,
}

fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

/// `c = alpha · a · b + beta · c` for strided row-major views.
///
/// # Safety
/// Every view must stay inside its buffer: `a` spans `m × k` with strides
/// `(rsa, csa)`, `b` spans `k × n`, `c` spans `m × n`; `c` must not alias `a`
/// or `b`.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn gemm(
    m: usize,
    k: usize,
    n: usize,
    a: *const f32,
    rsa: usize,
    csa: usize,
    b: *const f32,
    rsb: usize,
    csb: usize,
    beta: f32,
    c: *mut f32,
    rsc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    matrixmultiply::sgemm(
        m,
        k,
        n,
        1.0,
        a,
        rsa as isize,
        csa as isize,
        b,
        rsb as isize,
        csb as isize,
        beta,
        c,
        rsc as isize,
        1,
    );
}

/// A dot product with 16 independent partial sums (vectorises).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let n = a.len().min(b.len());
    let chunks = n / 16;
    for c in 0..chunks {
        let (x, y) = (&a[c * 16..c * 16 + 16], &b[c * 16..c * 16 + 16]);
        for l in 0..16 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for i in chunks * 16..n {
        s += a[i] * b[i];
    }
    s
}

/// A sum with 8 independent partial sums (vectorises).
#[inline(always)]
fn sum_f64(v: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let chunks = v.len() / 8;
    for c in 0..chunks {
        for l in 0..8 {
            acc[l] += v[c * 8 + l];
        }
    }
    acc.iter().sum::<f64>() + v[chunks * 8..].iter().sum::<f64>()
}

/// Adds the bias row `b` to every row of the `rows × w` view at `c` (stride
/// `rs`) and applies ReLU.
#[inline(always)]
fn bias_relu(c: &mut [f32], rows: usize, w: usize, rs: usize, b: &[f32]) {
    for r in 0..rows {
        let row = &mut c[r * rs..r * rs + w];
        for (v, bb) in row.iter_mut().zip(b) {
            *v = (*v + bb).max(0.0);
        }
    }
}

/// Adds the column sums of the `rows × w` view (stride `rs`) into `out`.
#[inline(always)]
fn col_sums(src: &[f32], rows: usize, w: usize, rs: usize, out: &mut [f32]) {
    for r in 0..rows {
        for (o, v) in out[..w].iter_mut().zip(&src[r * rs..r * rs + w]) {
            *o += v;
        }
    }
}

/// Gradients of the batch-mean loss of every network in `nets` over the rows
/// gathered in `s.x` (`rows × d`) and `s.y`, for a batch of `total` rows in
/// all (so that the sum over parts of a batch is the batch's gradient).
///
/// `net(u)` gives network `u` of `n_nets` and its slot `k`: adds into
/// `out[k * stride ..]` its gradient (flat layout
/// of its parameters) then, at index `n_params`, the sum of the per-row
/// losses, and at `n_params + 1` the number of rows.
#[allow(clippy::too_many_arguments)]
pub fn batch_gradients<'n>(
    task: Task,
    d: usize,
    rows: usize,
    total: usize,
    n_nets: usize,
    net: &dyn Fn(usize) -> (Net<'n>, usize),
    out: &mut [f64],
    stride: usize,
    s: &mut StepScratch,
) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: the CPU has the level the copy was compiled for.
        Level::Avx512 | Level::Avx512Vbmi2 => {
            return unsafe { gradients_avx512(task, d, rows, total, n_nets, net, out, stride, s) }
        }
        // SAFETY: as above.
        Level::Avx2 => {
            return unsafe { gradients_avx2(task, d, rows, total, n_nets, net, out, stride, s) }
        }
        Level::Scalar => {}
    }
    gradients(task, d, rows, total, n_nets, net, out, stride, s)
}

simd_copy!(
    [
        Avx512 gradients_avx512 => gradients(task, d, rows, total, n_nets, net, out, stride, s),
        Avx2 gradients_avx2 => gradients(task, d, rows, total, n_nets, net, out, stride, s),
    ]
    fn<'n>(
        task: Task,
        d: usize,
        rows: usize,
        total: usize,
        n_nets: usize,
        net: &dyn Fn(usize) -> (Net<'n>, usize),
        out: &mut [f64],
        stride: usize,
        s: &mut StepScratch,
    )
);

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gradients<'n>(
    task: Task,
    d: usize,
    rows: usize,
    total: usize,
    n_nets: usize,
    net: &dyn Fn(usize) -> (Net<'n>, usize),
    out: &mut [f64],
    stride: usize,
    s: &mut StepScratch,
) {
    if rows == 0 || n_nets == 0 {
        return;
    }
    let inv = 1.0 / total as f32;
    // First layers side by side.
    s.off.clear();
    let mut sw = 0;
    for u in 0..n_nets {
        let n = net(u).0;
        s.off.push(sw);
        sw += n.widths[1];
    }
    grow(&mut s.w1, d * sw);
    grow(&mut s.b1, sw);
    for u in 0..n_nets {
        let (n, o) = (net(u).0, s.off[u]);
        let w1 = n.widths[1];
        for i in 0..d {
            s.w1[i * sw + o..i * sw + o + w1].copy_from_slice(&n.params[i * w1..(i + 1) * w1]);
        }
        s.b1[o..o + w1].copy_from_slice(&n.params[d * w1..d * w1 + w1]);
    }
    grow(&mut s.a1, rows * sw);
    grow(&mut s.d1, rows * sw);
    // SAFETY: x is rows × d, w1 is d × sw, a1 is rows × sw.
    unsafe {
        gemm(
            rows,
            d,
            sw,
            s.x.as_ptr(),
            d,
            1,
            s.w1.as_ptr(),
            sw,
            1,
            0.0,
            s.a1.as_mut_ptr(),
            sw,
        );
    }
    bias_relu(&mut s.a1, rows, sw, sw, &s.b1[..sw]);
    grow(&mut s.z, rows);
    for u in 0..n_nets {
        let (n, slot) = net(u);
        let o1 = s.off[u];
        let widths = n.widths;
        let depth = widths.len() - 1; // layers including the output
                                      // Deeper hidden layers: activations in `acts`, layer l (1-based among
                                      // hidden layers beyond the first) at offset sum of rows * width.
        let deep: usize = widths[2..depth].iter().sum();
        grow(&mut s.acts, rows * deep.max(1));
        grow(&mut s.deltas, rows * deep.max(1));
        let np = n.params.len();
        grow(&mut s.grad, np);
        s.grad[..np].fill(0.0);
        // Forward through hidden layers 2..
        let mut act_off = 0;
        let mut po = d * widths[1] + widths[1];
        for l in 1..depth - 1 {
            let (wi, wo) = (widths[l], widths[l + 1]);
            let (prev_ptr, prev_rs) = if l == 1 {
                (s.a1[o1..].as_ptr(), sw)
            } else {
                (s.acts[act_off - rows * wi..].as_ptr(), wi)
            };
            // SAFETY: prev is rows × wi (stride prev_rs), weights wi × wo, out rows × wo.
            unsafe {
                gemm(
                    rows,
                    wi,
                    wo,
                    prev_ptr,
                    prev_rs,
                    1,
                    n.params[po..].as_ptr(),
                    wo,
                    1,
                    0.0,
                    s.acts[act_off..].as_mut_ptr(),
                    wo,
                );
            }
            let b = &n.params[po + wi * wo..po + wi * wo + wo];
            bias_relu(&mut s.acts[act_off..], rows, wo, wo, b);
            act_off += rows * wo;
            po += wi * wo + wo;
        }
        // Output layer: z = a_L · w + b.
        let wl = widths[depth - 1];
        let (last, last_rs): (&[f32], usize) = if depth == 2 {
            (&s.a1[o1..], sw)
        } else {
            (&s.acts[act_off - rows * wl..], wl)
        };
        let wout = &n.params[po..po + wl];
        let bout = n.params[po + wl];
        for r in 0..rows {
            s.z[r] = dot(&last[r * last_rs..r * last_rs + wl], wout) + bout;
        }
        // Loss and its derivative, branch-free over rows (vectorises).
        if s.loss.len() < rows {
            s.loss.resize(rows, 0.0);
        }
        match task {
            Task::Binary => {
                for ((zr, &y), lr) in s.z[..rows].iter_mut().zip(&s.y[..rows]).zip(&mut s.loss) {
                    // log(1 + e^z) - y z, stably; gradient sigmoid(z) - y.
                    let z = *zr as f64;
                    let e = exp_neg(z.abs());
                    let l = z.max(0.0) - z * y as f64 + log1p_unit(e);
                    let p = if z >= 0.0 { 1.0 } else { e } / (1.0 + e);
                    *lr = l;
                    *zr = (p as f32 - y) * inv;
                }
            }
            Task::Regression => {
                for ((zr, &y), lr) in s.z[..rows].iter_mut().zip(&s.y[..rows]).zip(&mut s.loss) {
                    let e = *zr - y;
                    *lr = (e as f64) * (e as f64);
                    *zr = 2.0 * e * inv;
                }
            }
        }
        let loss = sum_f64(&s.loss[..rows]);
        // Output gradients and the delta of the last hidden layer.
        {
            let (gw, gb) = s.grad[po..po + wl + 1].split_at_mut(wl);
            for r in 0..rows {
                let dz = s.z[r];
                for (g, a) in gw.iter_mut().zip(&last[r * last_rs..r * last_rs + wl]) {
                    *g += a * dz;
                }
                gb[0] += dz;
            }
        }
        {
            let (dst, dst_rs, src, src_rs): (&mut [f32], usize, &[f32], usize) = if depth == 2 {
                (&mut s.d1[o1..], sw, &s.a1[o1..], sw)
            } else {
                (
                    &mut s.deltas[act_off - rows * wl..],
                    wl,
                    &s.acts[act_off - rows * wl..],
                    wl,
                )
            };
            for r in 0..rows {
                let dz = s.z[r];
                let drow = &mut dst[r * dst_rs..r * dst_rs + wl];
                let arow = &src[r * src_rs..r * src_rs + wl];
                for j in 0..wl {
                    let v = dz * wout[j];
                    drow[j] = if arow[j] > 0.0 { v } else { 0.0 };
                }
            }
        }
        // Backward through hidden layers depth-2 .. 1 (weights of layer l map
        // widths[l] -> widths[l+1]).
        for l in (1..depth - 1).rev() {
            let (wi, wo) = (widths[l], widths[l + 1]);
            po -= wi * wo + wo;
            let cur = act_off - rows * wo; // this layer's activations / deltas
            act_off = cur;
            let (prev_ptr, prev_rs) = if l == 1 {
                (s.a1[o1..].as_ptr(), sw)
            } else {
                (s.acts[cur - rows * wi..].as_ptr(), wi)
            };
            // gW = prevᵀ · delta  (wi × wo)
            // SAFETY: prev is rows × wi (stride prev_rs) read transposed; delta rows × wo.
            unsafe {
                gemm(
                    wi,
                    rows,
                    wo,
                    prev_ptr,
                    1,
                    prev_rs,
                    s.deltas[cur..].as_ptr(),
                    wo,
                    1,
                    0.0,
                    s.grad[po..].as_mut_ptr(),
                    wo,
                );
            }
            col_sums(
                &s.deltas[cur..],
                rows,
                wo,
                wo,
                &mut s.grad[po + wi * wo..po + wi * wo + wo],
            );
            // delta_prev = (delta · Wᵀ) ⊙ [prev > 0]
            let (dptr, drs) = if l == 1 {
                (s.d1[o1..].as_mut_ptr(), sw)
            } else {
                (s.deltas[cur - rows * wi..].as_mut_ptr(), wi)
            };
            // SAFETY: delta rows × wo; Wᵀ read from wi × wo weights; dst rows × wi (stride drs),
            // disjoint from delta.
            unsafe {
                gemm(
                    rows,
                    wo,
                    wi,
                    s.deltas[cur..].as_ptr(),
                    wo,
                    1,
                    n.params[po..].as_ptr(),
                    1,
                    wo,
                    0.0,
                    dptr,
                    drs,
                );
            }
            let (dst, src): (&mut [f32], &[f32]) = if l == 1 {
                (&mut s.d1[o1..], &s.a1[o1..])
            } else {
                (&mut s.deltas[cur - rows * wi..], &s.acts[cur - rows * wi..])
            };
            for r in 0..rows {
                let (drow, arow) = (&mut dst[r * drs..r * drs + wi], &src[r * drs..r * drs + wi]);
                for j in 0..wi {
                    let v = drow[j];
                    drow[j] = if arow[j] > 0.0 { v } else { 0.0 };
                }
            }
        }
        let o = &mut out[slot * stride..slot * stride + np + 2];
        let first = d * widths[1] + widths[1];
        for (acc, g) in o[first..np].iter_mut().zip(&s.grad[first..np]) {
            *acc += *g as f64;
        }
        o[np] += loss;
        o[np + 1] += rows as f64;
    }
    // First-layer gradients of every network in one product: Xᵀ · Δ₁.
    grow(&mut s.g1, d * sw + sw);
    // SAFETY: x is rows × d read transposed (d × rows); d1 rows × sw; g1 d × sw.
    unsafe {
        gemm(
            d,
            rows,
            sw,
            s.x.as_ptr(),
            1,
            d,
            s.d1.as_ptr(),
            sw,
            1,
            0.0,
            s.g1.as_mut_ptr(),
            sw,
        );
    }
    let (g1, gb1) = s.g1.split_at_mut(d * sw);
    gb1[..sw].fill(0.0);
    col_sums(&s.d1, rows, sw, sw, gb1);
    for u in 0..n_nets {
        let (n, slot) = net(u);
        let (o1, w1) = (s.off[u], n.widths[1]);
        let o = &mut out[slot * stride..];
        for i in 0..d {
            for (acc, g) in o[i * w1..(i + 1) * w1]
                .iter_mut()
                .zip(&g1[i * sw + o1..i * sw + o1 + w1])
            {
                *acc += *g as f64;
            }
        }
        for (acc, g) in o[d * w1..d * w1 + w1].iter_mut().zip(&gb1[o1..o1 + w1]) {
            *acc += *g as f64;
        }
    }
}

/// Optimizer state of one network: empty until its first step (Adam's
/// moments are allocated there, see [`optimizer_step`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OptState {
    /// First moments (Adam).
    pub m: Vec<f32>,
    /// Second moments (Adam).
    pub v: Vec<f32>,
    /// Steps taken.
    pub step: u64,
}

/// One optimizer step with gradient `grad` (the batch-mean loss's), adding
/// `weight_decay * p` to it first, exactly as `torch.optim.Adam` / `SGD` do.
pub fn optimizer_step(
    optimizer: Optimizer,
    lr: f64,
    weight_decay: f64,
    params: &mut [f32],
    grad: &[f64],
    st: &mut OptState,
) {
    #[cfg(target_arch = "x86_64")]
    if level() >= Level::Avx512 {
        // SAFETY: the CPU has the level the copy was compiled for.
        return unsafe { step_avx512(optimizer, lr, weight_decay, params, grad, st) };
    }
    step(optimizer, lr, weight_decay, params, grad, st)
}

simd_copy!(
    [Avx512 step_avx512 => step(optimizer, lr, weight_decay, params, grad, st)]
    fn(
        optimizer: Optimizer,
        lr: f64,
        weight_decay: f64,
        params: &mut [f32],
        grad: &[f64],
        st: &mut OptState,
    )
);

#[inline(always)]
fn step(
    optimizer: Optimizer,
    lr: f64,
    weight_decay: f64,
    params: &mut [f32],
    grad: &[f64],
    st: &mut OptState,
) {
    st.step += 1;
    let wd = weight_decay as f32;
    match optimizer {
        Optimizer::Sgd => {
            let lr = lr as f32;
            for (p, g) in params.iter_mut().zip(grad) {
                let g = *g as f32 + wd * *p;
                *p -= lr * g;
            }
        }
        Optimizer::Adam => {
            // Moments are allocated at the first step (a unit waiting for
            // its turn holds none).
            if st.m.len() < params.len() {
                st.m.resize(params.len(), 0.0);
                st.v.resize(params.len(), 0.0);
            }
            let (b1, b2, eps) = (0.9f32, 0.999f32, 1e-8f32);
            let bc1 = 1.0 - 0.9f64.powi(st.step as i32);
            let bc2 = 1.0 - 0.999f64.powi(st.step as i32);
            let step_size = (lr / bc1) as f32;
            let bc2_sqrt = bc2.sqrt() as f32;
            for (((p, g), m), v) in params
                .iter_mut()
                .zip(grad)
                .zip(st.m.iter_mut())
                .zip(st.v.iter_mut())
            {
                let g = *g as f32 + wd * *p;
                *m = b1 * *m + (1.0 - b1) * g;
                *v = b2 * *v + (1.0 - b2) * g * g;
                let denom = v.sqrt() / bc2_sqrt + eps;
                *p -= step_size * *m / denom;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlp::{init_params, Rng};

    /// The batch-mean loss of one network, in f64, for finite differences.
    fn loss(task: Task, widths: &[usize], p: &[f64], x: &[f32], y: &[f32]) -> f64 {
        let d = widths[0];
        let rows = y.len();
        let mut total = 0.0;
        for r in 0..rows {
            let mut a: Vec<f64> = x[r * d..(r + 1) * d].iter().map(|&v| v as f64).collect();
            let mut o = 0;
            for (l, win) in widths.windows(2).enumerate() {
                let (wi, wo) = (win[0], win[1]);
                let mut z = vec![0.0; wo];
                for j in 0..wo {
                    z[j] = p[o + wi * wo + j];
                    for i in 0..wi {
                        z[j] += a[i] * p[o + i * wo + j];
                    }
                }
                o += wi * wo + wo;
                if l + 2 < widths.len() {
                    z.iter_mut().for_each(|v| *v = v.max(0.0));
                }
                a = z;
            }
            let (z, t) = (a[0], y[r] as f64);
            total += match task {
                Task::Binary => z.max(0.0) - z * t + (-z.abs()).exp().ln_1p(),
                Task::Regression => (z - t) * (z - t),
            };
        }
        total / rows as f64
    }

    fn check_gradient(task: Task, widths: &[usize]) {
        let d = widths[0];
        let rows = 7;
        let mut rng = Rng::new(&[42]);
        let params = init_params(widths, 3, 5);
        let mut s = StepScratch::default();
        s.x = (0..rows * d)
            .map(|_| (rng.uniform() * 4.0 - 2.0) as f32)
            .collect();
        s.y = (0..rows)
            .map(|_| match task {
                Task::Binary => (rng.uniform() < 0.5) as u8 as f32,
                Task::Regression => (rng.uniform() * 3.0) as f32,
            })
            .collect();
        let np = params.len();
        let mut out = vec![0.0; np + 2];
        let net = Net {
            widths,
            params: &params,
        };
        batch_gradients(
            task,
            d,
            rows,
            rows,
            1,
            &|_| (net, 0),
            &mut out,
            np + 2,
            &mut s,
        );
        let p64: Vec<f64> = params.iter().map(|&v| v as f64).collect();
        let l0 = loss(task, widths, &p64, &s.x, &s.y);
        assert!(
            (out[np] / rows as f64 - l0).abs() < 1e-5,
            "loss {} vs {l0}",
            out[np]
        );
        assert_eq!(out[np + 1], rows as f64);
        let h = 1e-5;
        for i in 0..np {
            let mut pp = p64.clone();
            pp[i] += h;
            let lp = loss(task, widths, &pp, &s.x, &s.y);
            pp[i] -= 2.0 * h;
            let lm = loss(task, widths, &pp, &s.x, &s.y);
            let fd = (lp - lm) / (2.0 * h);
            assert!(
                (fd - out[i]).abs() < 2e-4 * (1.0 + fd.abs()),
                "{task:?} {widths:?} param {i}: analytic {} vs finite difference {fd}",
                out[i]
            );
        }
    }

    #[test]
    fn gradient_matches_finite_differences_logloss() {
        check_gradient(Task::Binary, &[3, 5, 1]);
        check_gradient(Task::Binary, &[3, 6, 4, 1]);
        check_gradient(Task::Binary, &[2, 4, 3, 5, 1]);
    }

    #[test]
    fn gradient_matches_finite_differences_squared_error() {
        check_gradient(Task::Regression, &[3, 5, 1]);
        check_gradient(Task::Regression, &[3, 6, 4, 1]);
    }

    #[test]
    fn fused_first_layers_equal_separate_networks() {
        // Two networks of different shapes in one call = each alone; and two
        // halves of a batch add up to the whole batch.
        let (d, rows) = (4, 9);
        let wa = [d, 5, 1];
        let wb = [d, 3, 2, 1];
        let pa = init_params(&wa, 1, 1);
        let pb = init_params(&wb, 1, 2);
        let mut rng = Rng::new(&[7]);
        let x: Vec<f32> = (0..rows * d).map(|_| rng.uniform() as f32 - 0.5).collect();
        let y: Vec<f32> = (0..rows).map(|r| (r % 2) as f32).collect();
        let stride = pa.len().max(pb.len()) + 2;
        let nets = [
            Net {
                widths: &wa,
                params: &pa,
            },
            Net {
                widths: &wb,
                params: &pb,
            },
        ];
        let mut s = StepScratch {
            x: x.clone(),
            y: y.clone(),
            ..Default::default()
        };
        let mut both = vec![0.0; 2 * stride];
        let all = |u: usize| (nets[u], u);
        batch_gradients(
            Task::Binary,
            d,
            rows,
            rows,
            2,
            &all,
            &mut both,
            stride,
            &mut s,
        );
        let mut alone = vec![0.0; 2 * stride];
        for (u, n) in nets.iter().enumerate() {
            let one = |_: usize| (*n, u);
            batch_gradients(
                Task::Binary,
                d,
                rows,
                rows,
                1,
                &one,
                &mut alone,
                stride,
                &mut s,
            );
        }
        let mut halves = vec![0.0; 2 * stride];
        for (lo, hi) in [(0, 4), (4, rows)] {
            s.x = x[lo * d..hi * d].to_vec();
            s.y = y[lo..hi].to_vec();
            batch_gradients(
                Task::Binary,
                d,
                hi - lo,
                rows,
                2,
                &all,
                &mut halves,
                stride,
                &mut s,
            );
        }
        for i in 0..2 * stride {
            assert!((both[i] - alone[i]).abs() < 1e-6, "{i}");
            assert!((both[i] - halves[i]).abs() < 1e-6, "{i}");
        }
    }

    #[test]
    fn adam_first_step_moves_each_parameter_by_lr() {
        // After one Adam step, m̂ = g and v̂ = g², so each parameter moves by
        // lr * g / (|g| + eps) ≈ lr * sign(g).
        let mut p = vec![1.0f32, -1.0, 0.5];
        let mut st = OptState::default();
        optimizer_step(
            Optimizer::Adam,
            0.1,
            0.0,
            &mut p,
            &[2.0, -0.5, 0.0],
            &mut st,
        );
        assert!((p[0] - 0.9).abs() < 1e-6 && (p[1] + 0.9).abs() < 1e-6 && p[2] == 0.5);
        // SGD with weight decay: p -= lr * (g + wd * p)
        let mut q = vec![2.0f32];
        let mut st = OptState::default();
        optimizer_step(Optimizer::Sgd, 0.5, 0.25, &mut q, &[1.0], &mut st);
        assert_eq!(q[0], 2.0 - 0.5 * (1.0 + 0.5));
    }
}
