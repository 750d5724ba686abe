//! The hot loop of the linear family: loss, gradient and Hessian of several
//! units (the configs of one group) over one block of rows of the layout,
//! read once for all of them.
//!
//! A block is feature-major (see [`crate::data::layout`]): per unit, margins
//! and gradients are accumulated in `f64`, the logistic terms use one
//! vectorisable `exp` and `log1p`, and the feature part of the Hessian,
//! `B B^T` with `B = x * sqrt(C h)`, is a register-tiled `f32` kernel over the
//! upper triangle, added into `f64`; the intercept row of the Hessian is a
//! plain `f64` dot product. For squared loss the Hessian does not depend on
//! the weights: it is computed once per block and scaled by each unit's `C`.
//!
//! One-hot columns come as slots ([`Block::slots`]): a row adds the weight
//! of its slot to its margin and its residual to that slot's gradient. Its
//! Hessian terms with the dense columns are summed per slot
//! ([`super::slots`]), and those with the intercept and other slots
//! are single adds, so a categorical feature costs about one dense column.
//!
//! The element-wise loops are plain loops that LLVM vectorises;
//! [`accumulate_blocks`] dispatches at run time to a copy compiled for AVX-512
//! or AVX2+FMA when the CPU has them, and the Hessian tiles use intrinsics.

use super::slots::{slot_hessian, SlotRows, SlotScratch};
use super::tiles::syrk_upper;
use crate::data::layout::{Block, BLOCK, LANES, NO_SLOT};
use crate::data::Task;
use crate::math::simd::{level, simd_copy, Level};
use crate::math::{exp_neg, log1p_unit};

/// Buffers of one worker for [`accumulate_blocks`].
#[derive(Debug, Clone)]
pub struct BlockScratch {
    bt: Vec<f32>,
    z: Vec<f64>,
    r: Vec<f64>,
    ch: Vec<f64>,
    sh: Vec<f32>,
    loss: Vec<f64>,
    hc: Vec<f32>,
    colsum: Vec<f64>,
    /// Per unit, 8-lane partial sums of the gradient and of the Hessian's
    /// intercept row, reduced once per call instead of once per block.
    lanes: Vec<f64>,
    /// Per unit, the first unit with the same weights (itself if none).
    same_as: Vec<usize>,
    /// The statistics of the units others copy, before this call added to them.
    before: Vec<f64>,
    /// The one-hot columns' sums with the dense columns.
    slot: SlotScratch,
    /// The block's dense rows transposed (`dense` values per row), for
    /// the one-hot columns' Hessian terms.
    xt: Vec<f32>,
}

impl BlockScratch {
    /// Buffers for a layout with `dp` (padded) feature rows per block.
    pub fn new(dp: usize) -> Self {
        BlockScratch {
            bt: vec![0.0; dp * BLOCK],
            z: vec![0.0; BLOCK],
            r: vec![0.0; BLOCK],
            ch: vec![0.0; BLOCK],
            sh: vec![0.0; BLOCK],
            loss: vec![0.0; BLOCK],
            hc: vec![0.0; dp * dp],
            colsum: vec![0.0; dp],
            lanes: Vec::new(),
            same_as: Vec::new(),
            before: Vec::new(),
            slot: SlotScratch::default(),
            xt: vec![0.0; dp * BLOCK],
        }
    }
}

/// One unit as the kernel sees it: weights (`d + 1`, intercept last), its
/// `C`, and whether it wants its Hessian.
pub struct UnitRef<'a> {
    /// Weights.
    pub w: &'a [f64],
    /// Loss multiplier.
    pub c: f64,
    /// Whether to sum the Hessian (false: only the loss and the gradient,
    /// the Hessian part of the unit's statistics and its row count stay as
    /// they are).
    pub hessian: bool,
}

/// Adds every unit's statistics over the blocks into `out` (one
/// `1 + p + p*p + 1` slice per unit, `p = d + 1`, in order: loss, gradient,
/// Hessian, rows the Hessian was summed over). Only the upper triangle of each
/// Hessian is written. The Hessian is summed over the blocks whose index in
/// their group is a multiple of `hessian_stride` (1: every block).
///
/// Units at the same weights (the configs of a group all start at the same
/// point) and the same [`UnitRef::hessian`] have the same statistics up to
/// their `C`, which every term is linear in: they are computed once and
/// scaled.
pub fn accumulate_blocks<'a>(
    task: Task,
    hessian_stride: usize,
    blocks: &mut dyn Iterator<Item = Block<'a>>,
    units: &[UnitRef<'_>],
    out: &mut [f64],
    s: &mut BlockScratch,
) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: the CPU has the level the copy was compiled for.
        Level::Avx512 | Level::Avx512Vbmi2 => {
            return unsafe { accumulate_avx512(task, hessian_stride, blocks, units, out, s) }
        }
        // SAFETY: as above.
        Level::Avx2 => {
            return unsafe { accumulate_avx2(task, hessian_stride, blocks, units, out, s) }
        }
        Level::Scalar => {}
    }
    accumulate_impl(task, hessian_stride, blocks, units, out, s, false)
}

simd_copy!(
    [
        Avx512 accumulate_avx512 => accumulate_impl(task, hessian_stride, blocks, units, out, s, true),
        Avx2 accumulate_avx2 => accumulate_impl(task, hessian_stride, blocks, units, out, s, false),
    ]
    fn<'a>(
        task: Task,
        hessian_stride: usize,
        blocks: &mut dyn Iterator<Item = Block<'a>>,
        units: &[UnitRef<'_>],
        out: &mut [f64],
        s: &mut BlockScratch,
    )
);

/// Sum of a slice whose length is a multiple of 8, in 8 lanes (vectorisable).
#[inline(always)]
fn sum8(v: &[f64]) -> f64 {
    let mut a = [0.0f64; 8];
    for c in v.chunks_exact(8) {
        for q in 0..8 {
            a[q] += c[q];
        }
    }
    ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

#[inline(always)]
fn accumulate_impl<'a>(
    task: Task,
    hessian_stride: usize,
    blocks: &mut dyn Iterator<Item = Block<'a>>,
    units: &[UnitRef<'_>],
    out: &mut [f64],
    s: &mut BlockScratch,
    avx512: bool,
) {
    if units.is_empty() {
        return;
    }
    let d = units[0].w.len() - 1;
    let p = d + 1;
    let len = 1 + p + p * p + 1;
    let binary = task == Task::Binary;
    let stride = hessian_stride.max(1);
    let lanes_per_unit = 2 * p * 8;
    // Squared loss: the Hessian's feature part is shared by every unit that wants it.
    let any_h = units.iter().any(|u| u.hessian);
    s.lanes.clear();
    s.lanes.resize(units.len() * lanes_per_unit, 0.0);
    s.same_as.clear();
    for (u, unit) in units.iter().enumerate() {
        let first = (0..u).find(|&v| {
            s.same_as[v] == v && units[v].hessian == unit.hessian && units[v].w == unit.w
        });
        s.same_as.push(first.unwrap_or(u));
    }
    // Units that others copy keep their statistics from before this call:
    // the copies take only this call's contribution.
    s.before.clear();
    for u in 0..units.len() {
        if is_copied(&s.same_as, u) {
            s.before.extend_from_slice(&out[u * len..(u + 1) * len]);
        }
    }
    // The dense columns (the same in every block of a layout).
    let mut dense = d;
    for blk in blocks {
        let m = blk.y.len();
        if m == 0 {
            continue;
        }
        let dp = blk.dp;
        let wd = blk.width;
        let x = blk.x;
        let dd = blk.dense;
        dense = dd;
        let k = blk.slots.len() / wd;
        assert!(
            x.len() >= dp * wd
                && wd <= BLOCK
                && wd % LANES == 0
                && dd <= d
                && dp >= dd
                && dp * dp <= s.hc.len()
                && s.xt.len() >= dd * wd
                && blk.slots.len() == k * wd
        );
        if k > 0 {
            let need = units.len() * (d - dd) * (dd + 1);
            if s.slot.xs.len() < need {
                s.slot.xs.resize(need, 0.0);
            }
            if s.slot.is_touched.len() < d - dd {
                s.slot.is_touched.resize(d - dd, false);
            }
        }
        let block_h = blk.index % stride == 0;
        if k > 0 && block_h && any_h {
            for j in 0..dd {
                for (i, &v) in x[j * wd..j * wd + m].iter().enumerate() {
                    s.xt[i * dd + j] = v;
                }
            }
        }
        if !binary && block_h && any_h {
            syrk_upper(x, wd, dp, &mut s.hc);
            for j in 0..dd {
                let row = &x[j * wd..j * wd + wd];
                let mut a = [0.0f64; 8];
                for c in row.chunks_exact(8) {
                    for q in 0..8 {
                        a[q] += c[q] as f64;
                    }
                }
                s.colsum[j] = a.iter().sum();
            }
        }
        for (u, unit) in units.iter().enumerate() {
            if s.same_as[u] != u {
                continue;
            }
            let o = &mut out[u * len..(u + 1) * len];
            let c = unit.c;
            let with_h = block_h && unit.hessian;
            margins(x, wd, &unit.w[..dd], unit.w[d], &mut s.z[..wd], avx512);
            for f in 0..k {
                for (zv, &sl) in s.z[..wd].iter_mut().zip(&blk.slots[f * wd..(f + 1) * wd]) {
                    if sl != NO_SLOT {
                        *zv += unit.w[sl as usize];
                    }
                }
            }
            let (loss, rsum, chsum) = if binary {
                logistic_terms(
                    &s.z,
                    blk.y,
                    wd,
                    c,
                    with_h,
                    &mut s.r,
                    &mut s.ch,
                    &mut s.sh,
                    &mut s.loss,
                )
            } else {
                squared_terms(&s.z, blk.y, wd, &mut s.r, &mut s.loss)
            };
            o[0] += c * loss;
            o[1 + d] += c * rsum;
            let lanes = &mut s.lanes[u * lanes_per_unit..(u + 1) * lanes_per_unit];
            dots(
                x,
                wd,
                dd,
                dp,
                &s.r,
                &s.ch,
                &s.sh,
                &mut s.bt,
                lanes,
                binary && with_h,
                avx512,
            );
            for f in 0..k {
                for (&sl, &ri) in blk.slots[f * wd..f * wd + m].iter().zip(&s.r[..m]) {
                    if sl != NO_SLOT {
                        o[1 + sl as usize] += c * ri;
                    }
                }
            }
            if !with_h {
                continue;
            }
            o[len - 1] += m as f64;
            let h = &mut o[1 + p..len - 1];
            if binary {
                h[d * p + d] += chsum;
                syrk_upper(&s.bt, wd, dp, &mut s.hc);
                // Row by row as slices: no bounds check per element, and
                // the conversion and add vectorise.
                for j in 0..dd {
                    let row = &mut h[j * p + j..j * p + dd];
                    for (a, &b) in row.iter_mut().zip(&s.hc[j * dp + j..j * dp + dd]) {
                        *a += b as f64;
                    }
                }
            } else {
                for j in 0..dd {
                    let row = &mut h[j * p + j..j * p + dd];
                    for (a, &b) in row.iter_mut().zip(&s.hc[j * dp + j..j * dp + dd]) {
                        *a += c * b as f64;
                    }
                    h[j * p + d] += c * s.colsum[j];
                }
                h[d * p + d] += c * m as f64;
            }
            if k > 0 {
                let hw = if binary { &s.ch[..m] } else { &[][..] };
                let rows = SlotRows {
                    xt: &s.xt[..m * dd],
                    wd,
                    dd,
                    slots: blk.slots,
                    k,
                    m,
                };
                let factor = if binary { 1.0 } else { c };
                slot_hessian(rows, hw, factor, h, p, &mut s.slot, u);
            }
        }
    }
    // The slots' sums with the dense columns, into the Hessians.
    let factors = units.iter().map(|u| if binary { 1.0 } else { u.c });
    s.slot.flush(out, p, dense, factors, &s.same_as);
    for (u, unit) in units.iter().enumerate() {
        if s.same_as[u] != u {
            continue;
        }
        let o = &mut out[u * len..(u + 1) * len];
        let lanes = &s.lanes[u * lanes_per_unit..(u + 1) * lanes_per_unit];
        // `dots` laid the lanes out for the dense columns only.
        let pl = dense + 1;
        for j in 0..dense {
            o[1 + j] += unit.c * lanes[j * 8..j * 8 + 8].iter().sum::<f64>();
            if binary {
                o[1 + p + j * p + d] += lanes[(pl + j) * 8..(pl + j) * 8 + 8].iter().sum::<f64>();
            }
        }
    }
    // Copies: this call's contribution of the unit copied, scaled by C (the
    // Hessian's row count, last, is not scaled).
    let sources = (0..units.len()).filter(|&u| is_copied(&s.same_as, u));
    for (slot, src) in sources.enumerate() {
        let before = &s.before[slot * len..(slot + 1) * len];
        for v in src + 1..units.len() {
            if s.same_as[v] != src {
                continue;
            }
            let k = units[v].c / units[src].c;
            let (head, tail) = out.split_at_mut(v * len);
            let from = &head[src * len..(src + 1) * len];
            let to = &mut tail[..len];
            for i in 0..len - 1 {
                to[i] += k * (from[i] - before[i]);
            }
            to[len - 1] += from[len - 1] - before[len - 1];
        }
    }
}

/// Whether a later unit copies unit `u`'s statistics (`same_as[v] == u`).
#[inline(always)]
fn is_copied(same_as: &[usize], u: usize) -> bool {
    same_as[u + 1..].contains(&u)
}

/// `z_i = w . x_i + b` in `f64` for the `wd` slots of a block, over the
/// first `w.len()` feature rows of `x`.
#[inline(always)]
fn margins(x: &[f32], wd: usize, w: &[f64], b: f64, z: &mut [f64], avx512: bool) {
    let d = w.len();
    #[cfg(target_arch = "x86_64")]
    if avx512 {
        // SAFETY: only reached when the CPU has AVX-512F; `x` holds at least
        // d * wd values and `z` wd values (asserted by the caller).
        return unsafe { margins_avx512(x.as_ptr(), wd, w, b, z.as_mut_ptr()) };
    }
    let _ = avx512;
    z.iter_mut().for_each(|v| *v = b);
    for j in 0..d {
        let wj = w[j];
        for (zv, &xv) in z.iter_mut().zip(&x[j * wd..j * wd + wd]) {
            *zv += wj * xv as f64;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn margins_avx512(x: *const f32, wd: usize, w: &[f64], b: f64, z: *mut f64) {
    use std::arch::x86_64::*;
    let b = _mm512_set1_pd(b);
    let mut i = 0;
    // 64 rows at a time: eight independent FMA chains hide the FMA latency.
    while i + 64 <= wd {
        let mut acc = [b; 8];
        for (j, &wj) in w.iter().enumerate() {
            let wv = _mm512_set1_pd(wj);
            let xr = x.add(j * wd + i);
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_pd(wv, _mm512_cvtps_pd(_mm256_loadu_ps(xr.add(8 * q))), *a);
            }
        }
        for (q, a) in acc.iter().enumerate() {
            _mm512_storeu_pd(z.add(i + 8 * q), *a);
        }
        i += 64;
    }
    while i < wd {
        let mut lo = b;
        let mut hi = b;
        for (j, &wj) in w.iter().enumerate() {
            let wv = _mm512_set1_pd(wj);
            let xr = x.add(j * wd + i);
            lo = _mm512_fmadd_pd(wv, _mm512_cvtps_pd(_mm256_loadu_ps(xr)), lo);
            hi = _mm512_fmadd_pd(wv, _mm512_cvtps_pd(_mm256_loadu_ps(xr.add(8))), hi);
        }
        _mm512_storeu_pd(z.add(i), lo);
        _mm512_storeu_pd(z.add(i + 8), hi);
        i += 16;
    }
}

/// Gradient lanes `lanes[j] += r . x_j`, (logistic) Hessian intercept-row lanes
/// `lanes[p + j] += ch . x_j`, and (logistic) `bt = x * sh` for all `dp` rows.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn dots(
    x: &[f32],
    wd: usize,
    d: usize,
    dp: usize,
    r: &[f64],
    ch: &[f64],
    sh: &[f32],
    bt: &mut [f32],
    lanes: &mut [f64],
    binary: bool,
    avx512: bool,
) {
    let p = d + 1;
    #[cfg(target_arch = "x86_64")]
    if avx512 {
        // SAFETY: only reached with AVX-512F; every pointer covers the
        // ranges read (x: dp*wd, r/ch/sh: wd, bt: dp*wd, lanes: 2*p*8).
        return unsafe {
            dots_avx512(
                x.as_ptr(),
                wd,
                d,
                dp,
                r.as_ptr(),
                ch.as_ptr(),
                sh.as_ptr(),
                bt.as_mut_ptr(),
                lanes.as_mut_ptr(),
                binary,
            )
        };
    }
    let _ = avx512;
    for j in 0..dp {
        let row = &x[j * wd..j * wd + wd];
        if binary {
            for ((b, &xv), &sv) in bt[j * wd..j * wd + wd].iter_mut().zip(row).zip(&sh[..wd]) {
                *b = xv * sv;
            }
        }
        if j >= d {
            continue;
        }
        for i in 0..wd {
            let xv = row[i] as f64;
            lanes[j * 8 + i % 8] += r[i] * xv;
            if binary {
                lanes[(p + j) * 8 + i % 8] += ch[i] * xv;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn dots_avx512(
    x: *const f32,
    wd: usize,
    d: usize,
    dp: usize,
    r: *const f64,
    ch: *const f64,
    sh: *const f32,
    bt: *mut f32,
    lanes: *mut f64,
    binary: bool,
) {
    use std::arch::x86_64::*;
    let p = d + 1;
    for j in 0..dp {
        let xr = x.add(j * wd);
        let br = bt.add(j * wd);
        if j >= d {
            if binary {
                let mut i = 0;
                while i < wd {
                    _mm512_storeu_ps(br.add(i), _mm512_setzero_ps());
                    i += 16;
                }
            }
            continue;
        }
        let (mut ar0, mut ar1) = (_mm512_setzero_pd(), _mm512_setzero_pd());
        let (mut ah0, mut ah1) = (_mm512_setzero_pd(), _mm512_setzero_pd());
        let (mut ar2, mut ar3) = (_mm512_setzero_pd(), _mm512_setzero_pd());
        let (mut ah2, mut ah3) = (_mm512_setzero_pd(), _mm512_setzero_pd());
        let mut i = 0;
        while i + 32 <= wd {
            let x0 = _mm512_cvtps_pd(_mm256_loadu_ps(xr.add(i)));
            let x1 = _mm512_cvtps_pd(_mm256_loadu_ps(xr.add(i + 8)));
            let x2 = _mm512_cvtps_pd(_mm256_loadu_ps(xr.add(i + 16)));
            let x3 = _mm512_cvtps_pd(_mm256_loadu_ps(xr.add(i + 24)));
            ar0 = _mm512_fmadd_pd(_mm512_loadu_pd(r.add(i)), x0, ar0);
            ar1 = _mm512_fmadd_pd(_mm512_loadu_pd(r.add(i + 8)), x1, ar1);
            ar2 = _mm512_fmadd_pd(_mm512_loadu_pd(r.add(i + 16)), x2, ar2);
            ar3 = _mm512_fmadd_pd(_mm512_loadu_pd(r.add(i + 24)), x3, ar3);
            if binary {
                ah0 = _mm512_fmadd_pd(_mm512_loadu_pd(ch.add(i)), x0, ah0);
                ah1 = _mm512_fmadd_pd(_mm512_loadu_pd(ch.add(i + 8)), x1, ah1);
                ah2 = _mm512_fmadd_pd(_mm512_loadu_pd(ch.add(i + 16)), x2, ah2);
                ah3 = _mm512_fmadd_pd(_mm512_loadu_pd(ch.add(i + 24)), x3, ah3);
                _mm512_storeu_ps(
                    br.add(i),
                    _mm512_mul_ps(_mm512_loadu_ps(xr.add(i)), _mm512_loadu_ps(sh.add(i))),
                );
                _mm512_storeu_ps(
                    br.add(i + 16),
                    _mm512_mul_ps(
                        _mm512_loadu_ps(xr.add(i + 16)),
                        _mm512_loadu_ps(sh.add(i + 16)),
                    ),
                );
            }
            i += 32;
        }
        ar0 = _mm512_add_pd(ar0, ar2);
        ar1 = _mm512_add_pd(ar1, ar3);
        ah0 = _mm512_add_pd(ah0, ah2);
        ah1 = _mm512_add_pd(ah1, ah3);
        while i < wd {
            let lo = _mm512_cvtps_pd(_mm256_loadu_ps(xr.add(i)));
            let hi = _mm512_cvtps_pd(_mm256_loadu_ps(xr.add(i + 8)));
            ar0 = _mm512_fmadd_pd(_mm512_loadu_pd(r.add(i)), lo, ar0);
            ar1 = _mm512_fmadd_pd(_mm512_loadu_pd(r.add(i + 8)), hi, ar1);
            if binary {
                ah0 = _mm512_fmadd_pd(_mm512_loadu_pd(ch.add(i)), lo, ah0);
                ah1 = _mm512_fmadd_pd(_mm512_loadu_pd(ch.add(i + 8)), hi, ah1);
                _mm512_storeu_ps(
                    br.add(i),
                    _mm512_mul_ps(_mm512_loadu_ps(xr.add(i)), _mm512_loadu_ps(sh.add(i))),
                );
            }
            i += 16;
        }
        let lg = lanes.add(j * 8);
        _mm512_storeu_pd(
            lg,
            _mm512_add_pd(_mm512_loadu_pd(lg), _mm512_add_pd(ar0, ar1)),
        );
        if binary {
            let lh = lanes.add((p + j) * 8);
            _mm512_storeu_pd(
                lh,
                _mm512_add_pd(_mm512_loadu_pd(lh), _mm512_add_pd(ah0, ah1)),
            );
        }
    }
}

/// Logistic loss terms over a block of `wd` slots of which the first
/// `y.len()` are rows: writes residuals `r = sigmoid(z) - y`, `ch = C h` and
/// `sh = sqrt(C h)` (`h = sigmoid'(z)`), zeros in padding slots; returns the
/// sums of the loss, of `r` and of `ch`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn logistic_terms(
    z: &[f64],
    y: &[f64],
    wd: usize,
    c: f64,
    with_h: bool,
    r: &mut [f64],
    ch: &mut [f64],
    sh: &mut [f32],
    loss: &mut [f64],
) -> (f64, f64, f64) {
    let m = y.len();
    if !with_h {
        for i in 0..wd {
            let zi = z[i];
            let yi = if i < m { y[i] } else { 0.0 };
            let e = exp_neg(zi.abs());
            let inv = 1.0 / (1.0 + e);
            let pz = if zi >= 0.0 { inv } else { e * inv };
            let live = if i < m { 1.0 } else { 0.0 };
            r[i] = live * (pz - yi);
            loss[i] = live * (zi.max(0.0) + log1p_unit(e) - yi * zi);
        }
        return (sum8(&loss[..wd]), sum8(&r[..wd]), 0.0);
    }
    for i in 0..wd {
        let zi = z[i];
        let yi = if i < m { y[i] } else { 0.0 };
        let e = exp_neg(zi.abs()); // e^{-|z|} in (0, 1]
        let inv = 1.0 / (1.0 + e);
        let pz = if zi >= 0.0 { inv } else { e * inv };
        let live = if i < m { 1.0 } else { 0.0 };
        r[i] = live * (pz - yi);
        let chi = live * c * e * inv * inv;
        ch[i] = chi;
        sh[i] = chi.sqrt() as f32;
        loss[i] = live * (zi.max(0.0) + log1p_unit(e) - yi * zi);
    }
    (sum8(&loss[..wd]), sum8(&r[..wd]), sum8(&ch[..wd]))
}

/// Squared-loss terms: `r = z - y`, loss `r^2 / 2`, zeros in padding slots;
/// returns the sums of the loss and of `r` (and 0).
#[inline(always)]
fn squared_terms(
    z: &[f64],
    y: &[f64],
    wd: usize,
    r: &mut [f64],
    loss: &mut [f64],
) -> (f64, f64, f64) {
    let m = y.len();
    for i in 0..wd {
        let yi = if i < m { y[i] } else { 0.0 };
        let live = if i < m { 1.0 } else { 0.0 };
        let ri = live * (z[i] - yi);
        r[i] = ri;
        loss[i] = 0.5 * ri * ri;
    }
    (sum8(&loss[..wd]), sum8(&r[..wd]), 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::tiles::tests::block_of;

    fn unit(w: &[f64], c: f64, hessian: bool) -> UnitRef<'_> {
        UnitRef { w, c, hessian }
    }

    /// Deterministic rows (`m` x `d`, row-major), 0/1 targets, and the block
    /// holding them.
    struct Sample {
        x: Vec<f32>,
        y: Vec<f64>,
        b: Vec<f32>,
        d: usize,
        dp: usize,
        wd: usize,
    }

    impl Sample {
        fn new(d: usize, m: usize) -> Self {
            let x: Vec<f32> = (0..m * d)
                .map(|i| ((i * 7919) % 23) as f32 / 11.0 - 1.0)
                .collect();
            let y = (0..m).map(|i| ((i * 13) % 5 < 2) as u8 as f64).collect();
            let (b, dp, wd) = block_of(&x, d, m);
            Sample { x, y, b, d, dp, wd }
        }

        fn block(&self) -> Block<'_> {
            Block {
                x: &self.b,
                width: self.wd,
                dp: self.dp,
                y: &self.y,
                index: 0,
                dense: self.d,
                slots: &[],
            }
        }
    }

    #[test]
    fn block_statistics_match_a_naive_f64_computation() {
        let (d, m) = (5, 70);
        let sample = Sample::new(d, m);
        let (x, y, dp, blk) = (&sample.x, &sample.y, sample.dp, sample.block());
        let w = [0.4, -0.3, 0.2, 0.0, 0.1, -0.2];
        let c = 0.7;
        let p = d + 1;
        for task in [Task::Binary, Task::Regression] {
            let mut out = vec![0.0; 1 + p + p * p + 1];
            let mut s = BlockScratch::new(dp);
            accumulate_blocks(
                task,
                1,
                &mut std::iter::once(blk),
                &[UnitRef {
                    w: &w,
                    c,
                    hessian: true,
                }],
                &mut out,
                &mut s,
            );
            assert_eq!(out[1 + p + p * p], m as f64);
            let (mut f, mut g, mut h) = (0.0, vec![0.0; p], vec![0.0; p * p]);
            for i in 0..m {
                let xi: Vec<f64> = (0..d).map(|j| x[i * d + j] as f64).chain([1.0]).collect();
                let z: f64 = xi.iter().zip(&w).map(|(a, b)| a * b).sum();
                let (l, r, hh) = match task {
                    Task::Binary => {
                        let q = 1.0 / (1.0 + (-z).exp());
                        ((1.0 + z.exp()).ln() - y[i] * z, q - y[i], q * (1.0 - q))
                    }
                    Task::Regression => (0.5 * (z - y[i]).powi(2), z - y[i], 1.0),
                };
                f += c * l;
                for j in 0..p {
                    g[j] += c * r * xi[j];
                    for k in 0..p {
                        h[j * p + k] += c * hh * xi[j] * xi[k];
                    }
                }
            }
            assert!((out[0] - f).abs() < 1e-10 * f.abs(), "{task:?} f");
            for j in 0..p {
                assert!(
                    (out[1 + j] - g[j]).abs() < 1e-10 * (1.0 + g[j].abs()),
                    "{task:?} g{j}"
                );
                for k in j..p {
                    let got = out[1 + p + j * p + k];
                    assert!(
                        (got - h[j * p + k]).abs() < 1e-5 * (1.0 + h[j * p + k].abs()),
                        "{task:?} h{j}{k}: {got} vs {}",
                        h[j * p + k]
                    );
                }
            }
        }
    }

    #[test]
    fn slots_equal_their_one_hot_columns_stored_dense() {
        // 3 numeric columns, then two categorical features of 3 and 2
        // columns (3..6 and 6..8); some rows have no slot in a feature.
        let (dd, d, m) = (3, 8, 70);
        let num = Sample::new(dd, m);
        let slot_of = |f: usize, i: usize| -> u32 {
            match (f, (i * 5 + f * 3) % 7) {
                (_, 6) => NO_SLOT,
                (0, r) => 3 + (r % 3) as u32,
                (_, r) => 6 + (r % 2) as u32,
            }
        };
        let wd = num.wd;
        let mut slots = vec![NO_SLOT; 2 * wd];
        let mut dense_x = vec![0.0f32; m * d];
        for i in 0..m {
            dense_x[i * d..i * d + dd].copy_from_slice(&num.x[i * dd..(i + 1) * dd]);
            for f in 0..2 {
                let s = slot_of(f, i);
                slots[f * wd + i] = s;
                if s != NO_SLOT {
                    dense_x[i * d + s as usize] = 1.0;
                }
            }
        }
        let (dense_b, dense_dp, _) = block_of(&dense_x, d, m);
        let dense_blk = Block {
            x: &dense_b,
            width: wd,
            dp: dense_dp,
            y: &num.y,
            index: 0,
            dense: d,
            slots: &[],
        };
        let slot_blk = Block {
            slots: &slots,
            ..num.block()
        };
        let w0 = [0.4, -0.3, 0.2, 0.5, -0.1, 0.3, 0.2, -0.4, 0.1];
        let w1 = [0.1, 0.2, -0.3, -0.2, 0.6, 0.0, -0.3, 0.2, -0.1];
        let units = [
            unit(&w0, 0.7, true),
            unit(&w1, 2.0, true),
            unit(&w0, 0.2, true),
        ];
        let len = 1 + (d + 1) * (d + 2) + 1;
        let p = d + 1;
        for task in [Task::Binary, Task::Regression] {
            let mut want = vec![0.0; units.len() * len];
            let mut s = BlockScratch::new(dense_dp);
            accumulate_blocks(
                task,
                1,
                &mut [dense_blk, dense_blk].into_iter(),
                &units,
                &mut want,
                &mut s,
            );
            let mut got = vec![0.0; units.len() * len];
            let mut s = BlockScratch::new(num.dp);
            accumulate_blocks(
                task,
                1,
                &mut [slot_blk, slot_blk].into_iter(),
                &units,
                &mut got,
                &mut s,
            );
            for u in 0..units.len() {
                for i in 0..len {
                    // Only the Hessian's upper triangle is written.
                    let hess = i > p && i < len - 1;
                    if hess && (i - 1 - p) / p > (i - 1 - p) % p {
                        continue;
                    }
                    let (a, b) = (want[u * len + i], got[u * len + i]);
                    assert!(
                        (a - b).abs() < 1e-5 * (1.0 + a.abs()),
                        "{task:?} unit {u} entry {i}: {a} vs {b}"
                    );
                }
            }
            // The scratch is left clean: a second call adds the same again.
            let mut again = got.clone();
            accumulate_blocks(
                task,
                1,
                &mut [slot_blk, slot_blk].into_iter(),
                &units,
                &mut again,
                &mut s,
            );
            for i in 0..got.len() {
                assert!(
                    (again[i] - 2.0 * got[i]).abs() < 1e-9 * (1.0 + got[i].abs()),
                    "{task:?} {i}"
                );
            }
        }
    }

    #[test]
    fn units_at_the_same_weights_equal_each_unit_alone() {
        let (d, m) = (5, 200);
        let sample = Sample::new(d, m);
        let (dp, blk) = (sample.dp, sample.block());
        let (w0, w1) = ([0.1, -0.3, 0.2, 0.0, 0.1, -0.2], [0.0; 6]);
        // Units 0, 2, 3 and 4 share weights, unit 1 differs, unit 4 wants no
        // Hessian; `out` starts non-zero.
        let units = [
            unit(&w0, 0.5, true),
            unit(&w1, 2.0, true),
            unit(&w0, 4.0, true),
            unit(&w0, 0.25, true),
            unit(&w0, 1.5, false),
        ];
        let len = 1 + (d + 1) * (d + 2) + 1;
        for task in [Task::Binary, Task::Regression] {
            let mut s = BlockScratch::new(dp);
            let start: Vec<f64> = (0..units.len() * len).map(|i| (i % 7) as f64).collect();
            let mut together = start.clone();
            accumulate_blocks(
                task,
                1,
                &mut std::iter::once(blk),
                &units,
                &mut together,
                &mut s,
            );
            for (u, unit) in units.iter().enumerate() {
                let mut alone = start[u * len..(u + 1) * len].to_vec();
                let one = [UnitRef {
                    w: unit.w,
                    c: unit.c,
                    hessian: unit.hessian,
                }];
                accumulate_blocks(task, 1, &mut std::iter::once(blk), &one, &mut alone, &mut s);
                for (i, (a, t)) in alone
                    .iter()
                    .zip(&together[u * len..(u + 1) * len])
                    .enumerate()
                {
                    // Loss and gradient are f64 sums; the Hessian's feature
                    // block is summed in f32 (scaling it is exact to f32).
                    let hessian = i > d + 1 && i < len - 1;
                    let tol = if hessian { 1e-6 } else { 1e-12 };
                    assert!(
                        (a - t).abs() <= tol * (1.0 + a.abs()),
                        "{task:?} unit {u} stat {i}: {t} vs alone {a}"
                    );
                    // Without its Hessian, a unit's Hessian and row count stay put.
                    if !unit.hessian && i > d + 1 {
                        assert_eq!(*t, start[u * len + i], "{task:?} unit {u} stat {i}");
                    }
                }
                // Its loss and gradient are the others' at the same weights.
                if !unit.hessian {
                    let k = unit.c / units[0].c;
                    for i in 0..=d + 1 {
                        let (t, o) = (
                            together[u * len + i] - start[u * len + i],
                            together[i] - start[i],
                        );
                        assert!(
                            (t - k * o).abs() <= 1e-12 * (1.0 + t.abs()),
                            "{task:?} stat {i}"
                        );
                    }
                }
            }
        }
    }
}
