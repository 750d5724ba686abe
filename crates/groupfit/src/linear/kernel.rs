//! The hot loop of the linear family: loss, gradient and Hessian of several
//! units (the configs of one group) over a block of rows, with the block read
//! and transposed once for all of them.
//!
//! Per block of [`CHUNK`] rows: the rows are transposed into `xt` (feature-major,
//! a row of ones for the intercept, zero padding); per unit, margins and
//! gradients are accumulated in `f64`, the logistic terms use one vectorisable
//! `exp` and `log1p`, and the Hessian `B B^T` (`B = xt * sqrt(C h)`) is a
//! register-tiled `f32` kernel over the upper triangle, added into `f64`.
//! For squared loss the Hessian does not depend on the weights: it is computed
//! once per block and scaled by each unit's `C`.
//!
//! Everything is written as plain loops over fixed-width arrays that LLVM
//! vectorises; [`accumulate_block`] dispatches at run time to a copy compiled
//! for AVX-512 or AVX2+FMA when the CPU has them.

use crate::data::Task;

/// Rows per block.
pub const CHUNK: usize = 256;
/// SIMD lanes of the `f32` Hessian kernel (and the padding unit of a block).
const LANES: usize = 16;
/// Tile edge of the Hessian kernel (4 x 4 outputs per tile).
const TILE: usize = 4;

/// Feature count padded for the tiles: `d + 1` (intercept) rounded up to [`TILE`].
pub fn padded(d: usize) -> usize {
    (d + 1).div_ceil(TILE) * TILE
}

/// Buffers of one worker for [`accumulate_block`].
#[derive(Debug, Clone)]
pub struct BlockScratch {
    pp: usize,
    xt: Vec<f32>,
    bt: Vec<f32>,
    z: Vec<f64>,
    yv: Vec<f64>,
    r: Vec<f64>,
    sh: Vec<f32>,
    loss: Vec<f64>,
    hc: Vec<f32>,
}

impl BlockScratch {
    /// Buffers for `d` features.
    pub fn new(d: usize) -> Self {
        let pp = padded(d);
        BlockScratch {
            pp,
            xt: vec![0.0; pp * CHUNK],
            bt: vec![0.0; pp * CHUNK],
            z: vec![0.0; CHUNK],
            yv: vec![0.0; CHUNK],
            r: vec![0.0; CHUNK],
            sh: vec![0.0; CHUNK],
            loss: vec![0.0; CHUNK],
            hc: vec![0.0; pp * pp],
        }
    }
}

/// One unit as the kernel sees it: weights (`d + 1`, intercept last), its `C`,
/// and where its statistics go (`[f, g (d+1), H ((d+1)^2, upper triangle)]`).
pub struct UnitRef<'a> {
    /// Weights.
    pub w: &'a [f64],
    /// Loss multiplier.
    pub c: f64,
}

/// Adds every unit's statistics over the rows `x` (row-major, `y.len()` rows)
/// into `out` (one `stats_len(d)` slice per unit, in order). Only the upper
/// triangle of each Hessian is written.
pub fn accumulate_block(task: Task, x: &[f32], y: &[f64], units: &[UnitRef<'_>], out: &mut [f64], s: &mut BlockScratch) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports the features the copy was compiled for.
            return unsafe { accumulate_avx512(task, x, y, units, out, s) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: as above.
            return unsafe { accumulate_avx2(task, x, y, units, out, s) };
        }
    }
    accumulate_generic(task, x, y, units, out, s)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma")]
unsafe fn accumulate_avx512(task: Task, x: &[f32], y: &[f64], units: &[UnitRef<'_>], out: &mut [f64], s: &mut BlockScratch) {
    accumulate_generic(task, x, y, units, out, s)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_avx2(task: Task, x: &[f32], y: &[f64], units: &[UnitRef<'_>], out: &mut [f64], s: &mut BlockScratch) {
    accumulate_generic(task, x, y, units, out, s)
}

#[inline(always)]
fn accumulate_generic(task: Task, x: &[f32], y: &[f64], units: &[UnitRef<'_>], out: &mut [f64], s: &mut BlockScratch) {
    let n = y.len();
    if n == 0 || units.is_empty() {
        return;
    }
    let d = units[0].w.len() - 1;
    let p = d + 1;
    let pp = s.pp;
    let len = 1 + p + p * p;
    let mut start = 0;
    while start < n {
        let end = (start + CHUNK).min(n);
        let m = end - start;
        let mp = m.div_ceil(LANES) * LANES;
        transpose(&x[start * d..end * d], d, m, mp, &mut s.xt);
        s.yv[..m].copy_from_slice(&y[start..end]);
        s.yv[m..mp].iter_mut().for_each(|v| *v = 0.0);
        if task == Task::Regression {
            syrk_upper(&s.xt, pp, mp, &mut s.hc);
        }
        for (u, unit) in units.iter().enumerate() {
            let o = &mut out[u * len..(u + 1) * len];
            margins(&s.xt, unit.w, d, mp, &mut s.z);
            let c = unit.c;
            let loss = match task {
                Task::Binary => logistic_terms(&s.z, &s.yv, m, mp, c, &mut s.r, &mut s.sh, &mut s.loss),
                Task::Regression => squared_terms(&s.z, &s.yv, m, mp, &mut s.r, &mut s.loss),
            };
            o[0] += c * loss;
            // Gradient: g_j += C * sum_i r_i x_ij.
            for j in 0..p {
                let row = &s.xt[j * CHUNK..j * CHUNK + mp];
                let mut acc = [0.0f64; 8];
                for (rc, xc) in s.r[..mp].chunks_exact(8).zip(row.chunks_exact(8)) {
                    for q in 0..8 {
                        acc[q] += rc[q] * xc[q] as f64;
                    }
                }
                o[1 + j] += c * acc.iter().sum::<f64>();
            }
            let h = &mut o[1 + p..];
            match task {
                Task::Binary => {
                    for j in 0..p {
                        let src = &s.xt[j * CHUNK..j * CHUNK + mp];
                        let dst = &mut s.bt[j * CHUNK..j * CHUNK + mp];
                        for ((b, &xv), &sv) in dst.iter_mut().zip(src).zip(&s.sh[..mp]) {
                            *b = xv * sv;
                        }
                    }
                    for j in p..pp {
                        s.bt[j * CHUNK..j * CHUNK + mp].iter_mut().for_each(|v| *v = 0.0);
                    }
                    syrk_upper(&s.bt, pp, mp, &mut s.hc);
                    for j in 0..p {
                        for k in j..p {
                            h[j * p + k] += s.hc[j * pp + k] as f64;
                        }
                    }
                }
                Task::Regression => {
                    for j in 0..p {
                        for k in j..p {
                            h[j * p + k] += c * s.hc[j * pp + k] as f64;
                        }
                    }
                }
            }
        }
        start = end;
    }
}

/// `xt[j][i] = x[i][j]` for the block, a row of ones (intercept) at `j = d`,
/// zeros for padded rows `i >= m` and padded features `j > d`.
#[inline(always)]
fn transpose(x: &[f32], d: usize, m: usize, mp: usize, xt: &mut [f32]) {
    let pp = xt.len() / CHUNK;
    for i in 0..m {
        let row = &x[i * d..(i + 1) * d];
        for (j, &v) in row.iter().enumerate() {
            xt[j * CHUNK + i] = v;
        }
    }
    for j in 0..d {
        xt[j * CHUNK + m..j * CHUNK + mp].iter_mut().for_each(|v| *v = 0.0);
    }
    let ones = &mut xt[d * CHUNK..d * CHUNK + mp];
    ones[..m].iter_mut().for_each(|v| *v = 1.0);
    ones[m..].iter_mut().for_each(|v| *v = 0.0);
    for j in d + 1..pp {
        xt[j * CHUNK..j * CHUNK + mp].iter_mut().for_each(|v| *v = 0.0);
    }
}

/// `z_i = w . x_i + b` in `f64` (the ones row carries the intercept).
#[inline(always)]
fn margins(xt: &[f32], w: &[f64], d: usize, mp: usize, z: &mut [f64]) {
    let z = &mut z[..mp];
    z.iter_mut().for_each(|v| *v = 0.0);
    for (j, &wj) in w.iter().enumerate().take(d + 1) {
        let row = &xt[j * CHUNK..j * CHUNK + mp];
        for (zv, &xv) in z.iter_mut().zip(row) {
            *zv += wj * xv as f64;
        }
    }
}

/// Logistic loss terms: returns the block's loss sum; writes residuals
/// `r = sigmoid(z) - y` and `sh = sqrt(C h)` with `h = sigmoid'(z)`; padded rows
/// get zeros.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn logistic_terms(z: &[f64], y: &[f64], m: usize, mp: usize, c: f64, r: &mut [f64], sh: &mut [f32], loss: &mut [f64]) -> f64 {
    for i in 0..mp {
        let zi = z[i];
        let e = exp_neg(zi.abs()); // e^{-|z|} in (0, 1]
        let inv = 1.0 / (1.0 + e);
        let pz = if zi >= 0.0 { inv } else { e * inv };
        let live = if i < m { 1.0 } else { 0.0 };
        r[i] = live * (pz - y[i]);
        let h = e * inv * inv;
        sh[i] = (live * c * h).sqrt() as f32;
        loss[i] = live * (zi.max(0.0) + log1p_unit(e) - y[i] * zi);
    }
    loss[..mp].iter().sum()
}

/// Squared-loss terms: `r = z - y`, loss `r^2 / 2`.
#[inline(always)]
fn squared_terms(z: &[f64], y: &[f64], m: usize, mp: usize, r: &mut [f64], loss: &mut [f64]) -> f64 {
    for i in 0..mp {
        let live = if i < m { 1.0 } else { 0.0 };
        let ri = live * (z[i] - y[i]);
        r[i] = ri;
        loss[i] = 0.5 * ri * ri;
    }
    loss[..mp].iter().sum()
}

/// `e^{-a}` for `a >= 0`, to about 1 ulp, branch-free (vectorisable).
#[inline(always)]
pub fn exp_neg(a: f64) -> f64 {
    const LOG2E: f64 = std::f64::consts::LOG2_E;
    const LN2_HI: f64 = 6.931_471_803_691_238_2e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const SHIFTER: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52: rounds to integer
    let x = (-a).max(-700.0);
    let kf = (x * LOG2E + SHIFTER) - SHIFTER;
    let r = (x - kf * LN2_HI) - kf * LN2_LO;
    // Taylor polynomial of e^r on |r| <= ln2/2, degree 12.
    let mut pz = 1.0 / 479_001_600.0;
    pz = pz * r + 1.0 / 39_916_800.0;
    pz = pz * r + 1.0 / 3_628_800.0;
    pz = pz * r + 1.0 / 362_880.0;
    pz = pz * r + 1.0 / 40_320.0;
    pz = pz * r + 1.0 / 5_040.0;
    pz = pz * r + 1.0 / 720.0;
    pz = pz * r + 1.0 / 120.0;
    pz = pz * r + 1.0 / 24.0;
    pz = pz * r + 1.0 / 6.0;
    pz = pz * r + 0.5;
    pz = pz * r + 1.0;
    pz = pz * r + 1.0;
    let k = kf as i64;
    let scale = f64::from_bits(((k + 1023) as u64) << 52);
    pz * scale
}

/// `ln(1 + e)` for `e` in `[0, 1]`: `2 atanh(s)`, `s = e / (2 + e) <= 1/3`, series to `s^33`.
#[inline(always)]
pub fn log1p_unit(e: f64) -> f64 {
    let s = e / (2.0 + e);
    let s2 = s * s;
    let mut acc = 1.0 / 33.0;
    let mut k = 31.0;
    while k >= 1.0 {
        acc = acc * s2 + 1.0 / k;
        k -= 2.0;
    }
    2.0 * s * acc
}

/// Upper-triangle tiles of `B B^T` for `B` = the first `pp` rows of `bt`
/// (row stride [`CHUNK`], `mp` columns, a multiple of [`LANES`]), in `f32`,
/// written into `hc` (`pp x pp`, row-major). Diagonal tiles are written whole.
#[inline(always)]
fn syrk_upper(bt: &[f32], pp: usize, mp: usize, hc: &mut [f32]) {
    debug_assert!(bt.len() >= pp * CHUNK && hc.len() >= pp * pp && mp <= CHUNK && mp % LANES == 0);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: feature checked; indices stay within `bt` and `hc` (asserted above).
            return unsafe { syrk_avx512(bt, pp, mp, hc) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: as above.
            return unsafe { syrk_avx2(bt, pp, mp, hc) };
        }
    }
    syrk_scalar(bt, pp, mp, hc)
}

fn syrk_scalar(bt: &[f32], pp: usize, mp: usize, hc: &mut [f32]) {
    for j in (0..pp).step_by(TILE) {
        for k in (j..pp).step_by(TILE) {
            for u in 0..TILE {
                for v in 0..TILE {
                    let a = &bt[(j + u) * CHUNK..(j + u) * CHUNK + mp];
                    let b = &bt[(k + v) * CHUNK..(k + v) * CHUNK + mp];
                    hc[(j + u) * pp + k + v] = a.iter().zip(b).map(|(x, y)| x * y).sum();
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn syrk_avx512(bt: &[f32], pp: usize, mp: usize, hc: &mut [f32]) {
    use std::arch::x86_64::*;
    let base = bt.as_ptr();
    for jt in (0..pp).step_by(TILE) {
        for kt in (jt..pp).step_by(TILE) {
            let mut acc = [_mm512_setzero_ps(); TILE * TILE];
            let mut l = 0;
            while l < mp {
                let a = [
                    _mm512_loadu_ps(base.add(jt * CHUNK + l)),
                    _mm512_loadu_ps(base.add((jt + 1) * CHUNK + l)),
                    _mm512_loadu_ps(base.add((jt + 2) * CHUNK + l)),
                    _mm512_loadu_ps(base.add((jt + 3) * CHUNK + l)),
                ];
                let b = [
                    _mm512_loadu_ps(base.add(kt * CHUNK + l)),
                    _mm512_loadu_ps(base.add((kt + 1) * CHUNK + l)),
                    _mm512_loadu_ps(base.add((kt + 2) * CHUNK + l)),
                    _mm512_loadu_ps(base.add((kt + 3) * CHUNK + l)),
                ];
                for u in 0..TILE {
                    for v in 0..TILE {
                        acc[u * TILE + v] = _mm512_fmadd_ps(a[u], b[v], acc[u * TILE + v]);
                    }
                }
                l += 16;
            }
            for u in 0..TILE {
                for v in 0..TILE {
                    hc[(jt + u) * pp + kt + v] = _mm512_reduce_add_ps(acc[u * TILE + v]);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn syrk_avx2(bt: &[f32], pp: usize, mp: usize, hc: &mut [f32]) {
    use std::arch::x86_64::*;
    let base = bt.as_ptr();
    for jt in (0..pp).step_by(TILE) {
        for kt in (jt..pp).step_by(TILE) {
            let mut acc = [_mm256_setzero_ps(); TILE * TILE];
            let mut l = 0;
            while l < mp {
                for u in 0..TILE {
                    let a = _mm256_loadu_ps(base.add((jt + u) * CHUNK + l));
                    for v in 0..TILE {
                        let b = _mm256_loadu_ps(base.add((kt + v) * CHUNK + l));
                        acc[u * TILE + v] = _mm256_fmadd_ps(a, b, acc[u * TILE + v]);
                    }
                }
                l += 8;
            }
            for u in 0..TILE {
                for v in 0..TILE {
                    let mut lanes = [0.0f32; 8];
                    _mm256_storeu_ps(lanes.as_mut_ptr(), acc[u * TILE + v]);
                    hc[(jt + u) * pp + kt + v] = lanes.iter().sum();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_log1p_match_libm() {
        for i in 0..1890 {
            let a = i as f64 * 0.37;
            let e = exp_neg(a);
            let want = (-a).exp();
            assert!((e - want).abs() <= 4.0 * f64::EPSILON * want, "exp(-{a}): {e} vs {want}");
        }
        assert!(exp_neg(1e6) < 1e-300);
        for i in 0..=1000 {
            let e = i as f64 / 1000.0;
            let v = log1p_unit(e);
            assert!((v - e.ln_1p()).abs() <= 4.0 * f64::EPSILON * e.ln_1p().max(1e-300), "{e}");
        }
    }

    #[test]
    fn hessian_tiles_match_naive_product() {
        let d = 6;
        let pp = padded(d);
        let mut s = BlockScratch::new(d);
        let m = 37;
        let x: Vec<f32> = (0..m * d).map(|i| ((i * 31) % 17) as f32 / 8.0 - 1.0).collect();
        let mp = m.div_ceil(LANES) * LANES;
        transpose(&x, d, m, mp, &mut s.xt);
        syrk_upper(&s.xt, pp, mp, &mut s.hc);
        for j in 0..=d {
            for k in j..=d {
                let xi = |i: usize, j: usize| if j == d { 1.0 } else { x[i * d + j] as f64 };
                let want: f64 = (0..m).map(|i| xi(i, j) * xi(i, k)).sum();
                assert!((s.hc[j * pp + k] as f64 - want).abs() < 1e-4, "{j},{k}");
            }
        }
    }
}
