//! One-hot columns in the linear kernel: the Hessian terms of a block's
//! slots ([`crate::data::layout::Block::slots`]) with the dense columns, the
//! intercept and the other slots, summed per slot over a call and added to
//! the units' Hessians once.

use crate::data::layout::NO_SLOT;

/// What [`slot_hessian`] sums into between the blocks of one call.
#[derive(Debug, Clone, Default)]
pub(super) struct SlotScratch {
    /// Per unit and one-hot column `dense + t`, the sums of `x * C h` of
    /// the dense columns over the rows in that column, then the sum of `C h`
    /// (its diagonal and intercept entry): `dense + 1` values at
    /// `(unit * one-hot columns + t) * (dense + 1)`; zero between calls.
    pub(super) xs: Vec<f64>,
    /// The one-hot columns `xs` holds sums for (as `t`), each once.
    pub(super) touched: Vec<u32>,
    /// Per one-hot column, whether it is in `touched`.
    pub(super) is_touched: Vec<bool>,
}

impl SlotScratch {
    /// Adds every unit's sums (one `1 + p + p*p + 1` statistics slice per
    /// unit in `out`, the dense columns `0..dense`) into its Hessian's upper triangle, scaled by
    /// its factor (`C` for squared loss, else 1): column `dense + t` gets the
    /// dense rows' sums, its diagonal and intercept entries the sum of `C h`.
    /// Units copied from another (`same_as[u] != u`) are skipped. Leaves the
    /// sums zero.
    pub(super) fn flush(
        &mut self,
        out: &mut [f64],
        p: usize,
        dense: usize,
        factors: impl Iterator<Item = f64>,
        same_as: &[usize],
    ) {
        if self.touched.is_empty() {
            return;
        }
        let len = 1 + p + p * p + 1;
        let d = p - 1;
        let dd = dense;
        let w = dd + 1;
        let xs_len = (d - dd) * w;
        for (u, factor) in factors.enumerate() {
            if same_as[u] != u {
                continue;
            }
            let h = &mut out[u * len + 1 + p..(u + 1) * len - 1];
            let xs = &mut self.xs[u * xs_len..(u + 1) * xs_len];
            for &t in &self.touched {
                let (t, a) = (t as usize, dd + t as usize);
                let acc = &mut xs[t * w..(t + 1) * w];
                for (j, v) in acc[..dd].iter_mut().enumerate() {
                    h[j * p + a] += factor * *v;
                    *v = 0.0;
                }
                h[a * p + a] += factor * acc[dd];
                h[a * p + d] += factor * acc[dd];
                acc[dd] = 0.0;
            }
        }
        for &t in &self.touched {
            self.is_touched[t as usize] = false;
        }
        self.touched.clear();
    }
}

/// The rows of a block as [`slot_hessian`] reads them.
pub(super) struct SlotRows<'a> {
    /// The rows' dense values, row-major (`dd` per row).
    pub(super) xt: &'a [f32],
    pub(super) wd: usize,
    /// Dense feature rows in use.
    pub(super) dd: usize,
    /// `k x wd` slots (see [`Block::slots`]).
    pub(super) slots: &'a [u32],
    pub(super) k: usize,
    /// Rows (the rest of the `wd` slots are padding).
    pub(super) m: usize,
}

/// The one-hot columns' Hessian terms of unit `u` over one block, each row
/// weighted by `factor * hw[i]` (`hw` empty: 1): with the other features'
/// slots into `h` (`p x p`, upper triangle); with the dense columns, the
/// intercept and itself into the unit's part of `sc.xs` (unscaled by
/// `factor`), marking the columns touched. The caller adds `xs` to `h` and
/// clears it.
pub(super) fn slot_hessian(
    b: SlotRows<'_>,
    hw: &[f64],
    factor: f64,
    h: &mut [f64],
    p: usize,
    sc: &mut SlotScratch,
    u: usize,
) {
    let d = p - 1;
    let dd = b.dd;
    let w = dd + 1;
    let xs_len = (d - dd) * w;
    let xs = &mut sc.xs[u * xs_len..(u + 1) * xs_len];
    for i in 0..b.m {
        let wi = if hw.is_empty() { 1.0 } else { hw[i] };
        let row = &b.xt[i * dd..(i + 1) * dd];
        for f in 0..b.k {
            let a = b.slots[f * b.wd + i];
            if a == NO_SLOT {
                continue;
            }
            let a = a as usize;
            for f2 in f + 1..b.k {
                let c = b.slots[f2 * b.wd + i];
                if c != NO_SLOT {
                    h[a * p + c as usize] += factor * wi;
                }
            }
            let t = a - dd;
            if !sc.is_touched[t] {
                sc.is_touched[t] = true;
                sc.touched.push(t as u32);
            }
            let acc = &mut xs[t * w..(t + 1) * w];
            for (s, &v) in acc[..dd].iter_mut().zip(row) {
                *s += wi * v as f64;
            }
            acc[dd] += wi;
        }
    }
}
