//! The best split of a leaf on its numeric features, read from its histogram
//! (categorical features: [`super::categorical`]).
//!
//! For a threshold bin `t` of feature `j`, rows with a value bin `<= t` go
//! left. Missing values (the NaN bin) are tried on both sides and the better
//! side becomes the split's default direction; when the leaf has no missing
//! value of `j`, missing values later follow the side with more rows. The gain
//! is LightGBM's (no L1, no `min_gain_to_split`):
//!
//! ```text
//! G_L² / (H_L + λ) + G_R² / (H_R + λ) − G² / (H + λ)      (must be > 0)
//! ```
//!
//! with both sides holding at least `min_data_in_leaf` rows and
//! `min_sum_hessian_in_leaf` hessian. As in LightGBM, the row count of a side
//! is estimated from its hessian for this check (each bin counts
//! `round(hessian * rows / hessian of the leaf)`), which is exact when every
//! hessian is equal (squared error) and LightGBM's rule otherwise. A leaf's value is `−G / (H + λ)`
//! (times the learning rate).

use serde::{Deserialize, Serialize};

use super::histogram::{BinnedGroup, STRIDE};
use crate::math::simd::{level, simd_copy, Level};

/// Gradient, hessian and row sums.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sums {
    /// Sum of gradients.
    pub g: f64,
    /// Sum of hessians.
    pub h: f64,
    /// Rows.
    pub n: f64,
}

impl Sums {
    fn add(self, o: Sums) -> Sums {
        Sums {
            g: self.g + o.g,
            h: self.h + o.h,
            n: self.n + o.n,
        }
    }
    fn sub(self, o: Sums) -> Sums {
        Sums {
            g: self.g - o.g,
            h: self.h - o.h,
            n: self.n - o.n,
        }
    }
    /// Gradient and hessian of one bin (no row count: see the module docs).
    #[inline]
    fn at(hist: &[f64], bin: usize) -> Sums {
        let i = STRIDE * bin;
        Sums {
            g: hist[i],
            h: hist[i + 1],
            n: 0.0,
        }
    }
}

/// The split constraints of one config.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Fewest rows per side.
    pub min_data: f64,
    /// Smallest hessian per side.
    pub min_hess: f64,
    /// L2 penalty.
    pub lambda: f64,
}

impl Rules {
    /// `G² / (H + λ)`.
    #[inline]
    pub fn gain(&self, s: Sums) -> f64 {
        s.g * s.g / (s.h + self.lambda)
    }
    /// `−G / (H + λ)`.
    pub fn value(&self, s: Sums) -> f64 {
        let v = -s.g / (s.h + self.lambda);
        if v.is_finite() {
            v
        } else {
            0.0
        }
    }
    /// Whether sides `l` and `r` may have `gain(l) + gain(r) > target`: the
    /// test without divisions, `G_L² h_R + G_R² h_L >= target h_L h_R` (with
    /// `h = H + λ`), relaxed by far more than its rounding error. It never
    /// rejects a split whose gain, computed with divisions, beats the target,
    /// so the split chosen is the same as without it; it spares the two
    /// divisions of most thresholds, which bound the scan's speed.
    #[inline]
    fn may_beat(&self, l: Sums, r: Sums, target: f64) -> bool {
        let (hl, hr) = (l.h + self.lambda, r.h + self.lambda);
        // NaN sums fail here, as their gain fails `gain > best`.
        l.g * l.g * hr + r.g * r.g * hl >= target * hl * hr * (1.0 - 1e-9)
    }
    /// Whether a side with sums `s` (`s.n` its estimated row count) may be a
    /// leaf. Both tests are evaluated (no branch), so loops over thresholds
    /// vectorise.
    #[inline]
    fn ok(&self, s: Sums) -> bool {
        (s.n >= self.min_data) & (s.h >= self.min_hess)
    }
}

/// Thresholds of a feature whose gains seed the filter before any split is found.
const SEED_THRESHOLDS: usize = 16;

/// A chosen split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Feature.
    pub feature: usize,
    /// Value bins `<= bin` go left (a numeric split).
    pub bin: usize,
    /// Where missing values go.
    pub default_left: bool,
    /// Gain (> 0).
    pub gain: f64,
    /// Sums of the left child.
    pub left: Sums,
    /// Sums of the right child.
    pub right: Sums,
    /// A categorical split: the category bins that go left, in the order
    /// the search added them (see [`super::categorical`]); empty for a
    /// numeric split.
    pub left_bins: Vec<u32>,
    /// Added to `lambda_l2` in the children's values (`cat_l2` for a
    /// sorted categorical split, else 0).
    pub extra_l2: f64,
}

/// The total sums of a leaf of `rows` rows, read off its histogram (feature 0's bins).
pub fn totals(hist: &[f64], data: &BinnedGroup<'_>, rows: usize) -> Sums {
    let mut s = Sums::default();
    for b in 0..data.n_bins(0) {
        s = s.add(Sums::at(hist, b));
    }
    s.n = rows as f64;
    s
}

/// Every value bin, in order: the thresholds a leaf with many rows tries.
const EVERY_BIN: [u8; 256] = {
    let mut a = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        a[i] = i as u8;
        i += 1;
    }
    a
};

/// The best split of a leaf with sums `total` (`total.n` its row count) over `features`, if any has
/// positive gain under `rules`. Ties keep the first (lowest feature, lowest
/// bin, missing right before left).
pub fn best_split(
    hist: &[f64],
    data: &BinnedGroup<'_>,
    features: &[usize],
    total: Sums,
    rules: &Rules,
) -> Option<Split> {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: the CPU has the level the copy is compiled for.
        Level::Avx512Vbmi2 => {
            return unsafe { best_split_avx512(hist, data, features, total, rules) }
        }
        // SAFETY: as above.
        Level::Avx2 | Level::Avx512 => {
            return unsafe { best_split_avx2(hist, data, features, total, rules) }
        }
        Level::Scalar => {}
    }
    best_split_impl(hist, data, features, total, rules, Listing::Scalar)
}

/// How [`nonzero_bins`] lists a small leaf's bins: one bin a step, eight
/// with AVX2, or sixteen with AVX-512 (compare masks, then a byte compress).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

simd_copy!(
    [
        /// [`best_split_impl`] for AVX2 (SSE4.1's rounding instruction for
        /// `floor`, which is a libm call on the baseline target, and wider
        /// registers).
        Avx2 best_split_avx2 => best_split_impl(hist, data, features, total, rules, Listing::Avx2),
        /// [`best_split_impl`] for AVX-512, with VBMI2's byte compress for
        /// [`nonzero_bins`].
        Avx512Vbmi2 best_split_avx512 =>
            best_split_impl(hist, data, features, total, rules, Listing::Avx512),
    ]
    fn(
        hist: &[f64],
        data: &BinnedGroup<'_>,
        features: &[usize],
        total: Sums,
        rules: &Rules,
    ) -> Option<Split>
);

/// Running sums of gradient, hessian and estimated rows of one feature's
/// thresholds, in the order they are tried.
struct Prefix {
    g: [f64; 256],
    h: [f64; 256],
    n: [f64; 256],
}

impl Prefix {
    const ZERO: Prefix = Prefix {
        g: [0.0; 256],
        h: [0.0; 256],
        n: [0.0; 256],
    };

    /// Sums over the bins listed in `at` (all below the feature's NaN bin,
    /// so inside `h`).
    #[inline(always)]
    fn sum_listed(&mut self, h: &[f64], at: &[u8], est: impl Fn(f64) -> f64) {
        let (mut g, mut hh, mut n) = (0.0, 0.0, 0.0);
        let out = self
            .g
            .iter_mut()
            .zip(self.h.iter_mut())
            .zip(self.n.iter_mut());
        for (&t, ((pg, ph), pn)) in at.iter().zip(out) {
            debug_assert!(STRIDE * (t as usize) + 1 < h.len());
            // SAFETY: listed bins are below the feature's NaN bin, the last
            // of `h` (no bounds check in this loop, among the scan's
            // slowest).
            let (bg, bh) = unsafe {
                (
                    *h.get_unchecked(STRIDE * t as usize),
                    *h.get_unchecked(STRIDE * t as usize + 1),
                )
            };
            g += bg;
            hh += bh;
            n += est(bh);
            (*pg, *ph, *pn) = (g, hh, n);
        }
    }

    /// Sums over every bin below `last`.
    #[inline(always)]
    fn sum_every(&mut self, h: &[f64], last: usize, est: impl Fn(f64) -> f64) {
        let (mut g, mut hh, mut n) = (0.0, 0.0, 0.0);
        let out = self
            .g
            .iter_mut()
            .zip(self.h.iter_mut())
            .zip(self.n.iter_mut());
        for (b, ((pg, ph), pn)) in h.chunks_exact(STRIDE).take(last).zip(out) {
            g += b[0];
            hh += b[1];
            n += est(b[1]);
            (*pg, *ph, *pn) = (g, hh, n);
        }
    }

    /// [`Prefix::sum_every`] of two features at once (`a` over `ha`, `b`
    /// over `hb`, both with `last` thresholds): the same sums, in one loop
    /// of twice the independent additions.
    #[inline(always)]
    fn sum_every_two(
        ha: &[f64],
        hb: &[f64],
        last: usize,
        est: impl Fn(f64) -> f64,
        a: &mut Prefix,
        b: &mut Prefix,
    ) {
        let (mut ga, mut sa, mut na) = (0.0, 0.0, 0.0);
        let (mut gb, mut sb, mut nb) = (0.0, 0.0, 0.0);
        let ins = ha
            .chunks_exact(STRIDE)
            .zip(hb.chunks_exact(STRIDE))
            .take(last);
        let outs_a = a.g.iter_mut().zip(a.h.iter_mut()).zip(a.n.iter_mut());
        let outs_b = b.g.iter_mut().zip(b.h.iter_mut()).zip(b.n.iter_mut());
        for ((x, y), (((pga, pha), pna), ((pgb, phb), pnb))) in ins.zip(outs_a.zip(outs_b)) {
            ga += x[0];
            gb += y[0];
            sa += x[1];
            sb += y[1];
            na += est(x[1]);
            nb += est(y[1]);
            (*pga, *pha, *pna) = (ga, sa, na);
            (*pgb, *phb, *pnb) = (gb, sb, nb);
        }
    }
}

/// [`best_split`], inlined into each copy.
///
/// Per feature, three loops: the running sums of gradient, hessian and
/// estimated rows over the value bins (the only loop-carried chain; a leaf
/// with fewer rows than the feature has bins sums only its first and
/// nonzero bins, which gives the same sums at those thresholds and skips
/// thresholds that cannot win); then,
/// without branches (it vectorises), which thresholds pass the side
/// constraints and [`Rules::may_beat`] against the best gain at the start of
/// the feature (before any split is found, the best gain of a few sampled
/// thresholds of the feature: a lower bound of the best split's gain); then,
/// in threshold order, the exact gain of those only. The
/// thresholds are tried in the same order, with the same sums and the same
/// strict comparison as a plain scan, so the split is the plain scan's.
/// `listing`: how to list the nonzero bins ([`nonzero_bins`]; the SIMD
/// ways only from the copies compiled for them).
#[inline(always)]
fn best_split_impl(
    hist: &[f64],
    data: &BinnedGroup<'_>,
    features: &[usize],
    total: Sums,
    rules: &Rules,
    listing: Listing,
) -> Option<Split> {
    if total.n < 2.0 * rules.min_data {
        return None;
    }
    let parent = rules.gain(total);
    let cnt_factor = total.n / total.h;
    let est = |h: f64| (h * cnt_factor + 0.5).floor();
    // Running sums per value bin of the feature in hand (bins are u8), and
    // per threshold whether it may win with missing values right (bit 0) or
    // left (bit 1).
    let mut pre = [Prefix::ZERO; 2];
    let mut pass = [0u8; 256];
    // 8 slots of slack: the AVX2 listing writes eight at a time.
    let mut nonzero = [0u8; 264];
    let mut best: Option<Split> = None;
    let mut best_gain = 0.0;
    // The value bins a feature's thresholds range over: its histogram
    // slice, its NaN bin's sums, and `last` (thresholds `0..last`).
    let view = |j: usize| {
        let off = data.offsets[j] as usize;
        let nb = data.n_bins(j) - 1; // value bins
        let h = &hist[STRIDE * off..STRIDE * (off + nb + 1)];
        let nan = Sums::at(h, nb);
        let has_nan = nan.h > 0.0 || nan.g != 0.0;
        let last = if has_nan { nb } else { nb - 1 };
        (h, nb, nan, has_nan, last)
    };
    // Whether `pre[1]` holds this feature's running sums, summed with the
    // feature before (two features' sums in one loop: two independent
    // chains of additions, the loop's bound, instead of one).
    let mut ready = false;
    for (fi, &j) in features.iter().enumerate() {
        let (h, nb, nan, has_nan, last) = view(j);
        let nan_est = est(nan.h);
        // An empty bin adds exact zeros: its threshold repeats the previous
        // one's sides and gain, which never beats it strictly. So a leaf
        // with fewer rows than bins (most bins empty) tries only the
        // thresholds at its first bin and its nonzero bins, listed in `at`;
        // the others try every threshold. (The first threshold has no
        // previous one: with missing values left, an empty first bin is the
        // split "missing against every value".)
        let sparse = total.n < last as f64;
        let at: &[u8] = if sparse {
            let k = nonzero_bins(h, last, &mut nonzero, listing);
            &nonzero[..k]
        } else {
            &EVERY_BIN[..last]
        };
        let cur = usize::from(ready);
        ready = false;
        if cur == 0 {
            let (this, next) = pre.split_at_mut(1);
            if sparse {
                this[0].sum_listed(h, at, est);
            } else {
                match features.get(fi + 1).map(|&j2| view(j2)) {
                    // Same thresholds: the next feature's sums too.
                    Some((h2, _, _, _, last2)) if last2 == last => {
                        Prefix::sum_every_two(h, h2, last, est, &mut this[0], &mut next[0]);
                        ready = true;
                    }
                    _ => this[0].sum_every(h, last, est),
                }
            }
        }
        let (pg, ph, pn) = (&pre[cur].g, &pre[cur].h, &pre[cur].n);
        let last = at.len();
        // Until a split is found, the filter below would pass every threshold
        // of positive gain (most of them). The gain of any valid threshold
        // is a lower bound of the best split's: take the largest at a few
        // evenly spaced thresholds as the filter's floor. The thresholds that
        // can win still pass it, so the split chosen is the same.
        let mut floor = best_gain;
        if best.is_none() && last > 0 {
            let step = (last / SEED_THRESHOLDS).max(1);
            let mut i = step / 2;
            while i < last {
                let l = Sums {
                    g: pg[i],
                    h: ph[i],
                    n: pn[i],
                };
                let r = total.sub(l);
                if rules.ok(l) & rules.ok(r) {
                    let gain = rules.gain(l) + rules.gain(r) - parent;
                    if gain > floor {
                        floor = gain;
                    }
                }
                i += step;
            }
        }
        let target = parent + floor;
        // The left side of the `i`-th threshold tried, with missing values
        // right or left.
        let left = |i: usize| Sums {
            g: pg[i],
            h: ph[i],
            n: pn[i],
        };
        let with_nan = |l: Sums| Sums {
            g: l.g + nan.g,
            h: l.h + nan.h,
            n: l.n + nan_est,
        };
        let ok = |l: Sums| {
            let r = total.sub(l);
            rules.ok(l) & rules.ok(r) & rules.may_beat(l, r, target)
        };
        if !has_nan {
            // Missing values right only (they follow the larger side later).
            for t in 0..last {
                pass[t] = u8::from(ok(left(t)));
            }
        } else {
            // Missing values left needs a value bin right of the threshold.
            for (i, &t) in at.iter().enumerate() {
                let l = left(i);
                pass[i] =
                    u8::from(ok(l)) | (u8::from((t as usize + 1 < nb) & ok(with_nan(l))) << 1);
            }
        }
        let mut t = 0;
        while t < last {
            // Eight thresholds at a time while none may win (most of them).
            if t + 8 <= last && pass[t..t + 8] == [0u8; 8] {
                t += 8;
                continue;
            }
            let (p, i, bin) = (pass[t], t, at[t] as usize);
            t += 1;
            if p == 0 {
                continue;
            }
            let acc = left(i);
            // Missing values right (bit 0), then left (bit 1).
            for (bit, l) in [(1u8, acc), (2, with_nan(acc))] {
                if p & bit == 0 {
                    continue;
                }
                let r = total.sub(l);
                let gain = rules.gain(l) + rules.gain(r) - parent;
                if gain > best_gain {
                    best_gain = gain;
                    best = Some(Split {
                        feature: j,
                        bin,
                        // Without missing values in the leaf, they follow
                        // the side with more rows later.
                        default_left: bit == 2 || (!has_nan && l.n >= r.n),
                        gain,
                        left: l,
                        right: r,
                        left_bins: Vec::new(),
                        extra_l2: 0.0,
                    });
                }
            }
        }
    }
    best
}

/// Writes into `out`, in order, the bins `t < last` of a feature's histogram
/// slice `h` whose gradient or hessian is nonzero (or NaN), and bin 0
/// always; returns how many. The SIMD listings (only where the CPU has
/// them) take eight or sixteen bins a step without a branch on which are
/// nonzero, instead of a step per bin (a small leaf has few nonzero bins
/// among up to 255).
#[inline(always)]
fn nonzero_bins(h: &[f64], last: usize, out: &mut [u8; 264], listing: Listing) -> usize {
    match listing {
        Listing::Scalar => nonzero_bins_from(h, 0, last, out, 0),
        // SAFETY: the SIMD listings are only chosen in the copies compiled
        // for them, which run only where the CPU has their features.
        #[cfg(target_arch = "x86_64")]
        Listing::Avx2 => unsafe { nonzero_bins_avx2(h, last, out) },
        #[cfg(target_arch = "x86_64")]
        Listing::Avx512 => unsafe { nonzero_bins_avx512(h, last, out) },
    }
}

/// [`nonzero_bins`] from bin `from` on, one bin a step, the first `k`
/// entries of `out` already written.
#[inline(always)]
fn nonzero_bins_from(
    h: &[f64],
    from: usize,
    last: usize,
    out: &mut [u8; 264],
    mut k: usize,
) -> usize {
    for t in from..last {
        out[k] = t as u8;
        k += usize::from((h[STRIDE * t] != 0.0) | (h[STRIDE * t + 1] != 0.0) | (t == 0));
    }
    k
}

/// For each 8-bit mask, the positions of its set bits in ascending order,
/// one per byte (little-endian), the rest zero.
const SET_BITS: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut m = 0;
    while m < 256 {
        let (mut v, mut k, mut b) = (0u64, 0, 0);
        while b < 8 {
            if m & (1 << b) != 0 {
                v |= (b as u64) << (8 * k);
                k += 1;
            }
            b += 1;
        }
        t[m] = v;
        m += 1;
    }
    t
};

/// [`nonzero_bins`] with AVX2: `h` holds (gradient, hessian) pairs, so four
/// `f64` lanes are two bins and a 16-bit compare mask eight bins.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn nonzero_bins_avx2(h: &[f64], last: usize, out: &mut [u8; 264]) -> usize {
    use std::arch::x86_64::*;
    const _: () = assert!(STRIDE == 2);
    assert!(h.len() >= STRIDE * last && last <= 256);
    let zero = _mm256_setzero_pd();
    let p = h.as_ptr();
    let mut k = 0;
    let mut base = 0;
    while base + 8 <= last {
        let mut m = 0u32;
        for q in 0..4 {
            // SAFETY: bins base..base + 8 are inside `h` (asserted above).
            let v = _mm256_loadu_pd(p.add(STRIDE * base + 4 * q));
            // Unordered or not equal, as `!=`: NaN counts as nonzero.
            let c = _mm256_cmp_pd::<_CMP_NEQ_UQ>(v, zero);
            m |= (_mm256_movemask_pd(c) as u32) << (4 * q);
        }
        // Bit 2i: bin base + i has a nonzero gradient or hessian; then
        // those eight bits side by side.
        let mut bins = (m | (m >> 1)) & 0x5555;
        bins = (bins | (bins >> 1)) & 0x3333;
        bins = (bins | (bins >> 2)) & 0x0f0f;
        bins = (bins | (bins >> 4)) & 0x00ff;
        if base == 0 {
            bins |= 1;
        }
        // All eight slots written, the first popcount kept: no branch on
        // the mask (it is unpredictable).
        let at = SET_BITS[bins as usize] + base as u64 * 0x0101_0101_0101_0101;
        out[k..k + 8].copy_from_slice(&at.to_le_bytes());
        k += bins.count_ones() as usize;
        base += 8;
    }
    nonzero_bins_from(h, base, last, out, k)
}

/// [`nonzero_bins`] with AVX-512: sixteen bins (32 `f64`) a step, four
/// compares into mask registers, the gradient and hessian bits of each bin
/// merged with two `pext`, then the bins' indices packed with a byte
/// compress. The last step's loads are masked, so no scalar tail.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi2,bmi2,popcnt")]
unsafe fn nonzero_bins_avx512(h: &[f64], last: usize, out: &mut [u8; 264]) -> usize {
    use std::arch::x86_64::*;
    const _: () = assert!(STRIDE == 2);
    assert!(h.len() >= STRIDE * last && last <= 256);
    let zero = _mm512_setzero_pd();
    let p = h.as_ptr();
    let first16 = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let mut k = 0;
    let mut base = 0;
    while base < last {
        // `f64`s of this step inside `h`: 2 per bin, up to 32.
        let live = 2 * (last - base).min(16);
        let mut m = 0u32;
        for q in 0..4 {
            let n = live.saturating_sub(8 * q).min(8);
            let lanes = ((1u32 << n) - 1) as __mmask8;
            // SAFETY: masked lanes are not read; the others are inside `h`.
            let v = _mm512_maskz_loadu_pd(lanes, p.add(STRIDE * base + 8 * q));
            // Unordered or not equal, as `!=`: NaN counts as nonzero.
            m |= u32::from(_mm512_cmp_pd_mask::<_CMP_NEQ_UQ>(v, zero)) << (8 * q);
        }
        // Bit i: bin base + i has a nonzero gradient (bit 2i of `m`) or
        // hessian (bit 2i + 1).
        let mut bins = _pext_u32(m, 0x5555_5555) | _pext_u32(m, 0xAAAA_AAAA);
        if base == 0 {
            bins |= 1;
        }
        let idx = _mm_add_epi8(first16, _mm_set1_epi8(base as u8 as i8));
        let packed = _mm_maskz_compress_epi8(bins as __mmask16, idx);
        // SAFETY: k <= base <= 240, so sixteen bytes from k fit in `out` (264).
        _mm_storeu_si128(out.as_mut_ptr().add(k).cast(), packed);
        k += bins.count_ones() as usize;
        base += 16;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(min_data: f64) -> Rules {
        Rules {
            min_data,
            min_hess: 1e-3,
            lambda: 0.0,
        }
    }

    /// The best split by definition: every threshold and both sides for
    /// missing values, sums and estimated counts recomputed from the bins.
    fn naive_best(
        hist: &[f64],
        data: &BinnedGroup<'_>,
        features: &[usize],
        total: Sums,
        rules: &Rules,
    ) -> Option<(usize, usize, bool, f64)> {
        let cf = total.n / total.h;
        let est = |b: Sums| (b.h * cf + 0.5).floor();
        let mut best = None;
        let mut best_gain = 0.0;
        for &j in features {
            let off = data.offsets[j] as usize;
            let nb = data.n_bins(j) - 1;
            let bin = |t: usize| Sums::at(&hist[STRIDE * off..], t);
            let nan = bin(nb);
            let has_nan = nan.h > 0.0 || nan.g != 0.0;
            for t in 0..nb {
                for nan_left in [false, true] {
                    if nan_left && !(has_nan && t + 1 < nb) || !nan_left && !has_nan && t + 1 == nb
                    {
                        continue;
                    }
                    let mut l = Sums::default();
                    let mut n = 0.0;
                    for b in (0..=t).chain(nan_left.then_some(nb)) {
                        l = l.add(bin(b));
                        n += est(bin(b));
                    }
                    let r = total.sub(l);
                    if n >= rules.min_data
                        && l.h >= rules.min_hess
                        && total.n - n >= rules.min_data
                        && r.h >= rules.min_hess
                    {
                        let gain = rules.gain(l) + rules.gain(r) - rules.gain(total);
                        if gain > best_gain {
                            best_gain = gain;
                            let left = if has_nan { nan_left } else { n >= total.n - n };
                            best = Some((j, t, left, gain));
                        }
                    }
                }
            }
        }
        best
    }

    /// A xorshift64 generator of test values.
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    #[test]
    fn best_split_equals_the_search_by_definition() {
        // Random leaves of 1 to 9 features (2 to 199 value bins, some missing
        // values, some empty bins; fewer rows than bins, where only the
        // first and nonzero bins are tried, or more; an empty first bin with
        // missing values), all features or every other one, binary-like
        // hessians, both copies of the search (baseline and the
        // one the CPU runs) against the definition.
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for case in 0..3000u64 {
            let d = 1 + (case % 9) as usize;
            let nbins: Vec<usize> = (0..d).map(|_| 3 + (next() % 198) as usize).collect();
            let mut offsets = vec![0u32];
            for &b in &nbins {
                offsets.push(offsets.last().unwrap() + b as u32);
            }
            let n = 5 + (next() % 120) as usize;
            let mut hist = vec![0.0; STRIDE * *offsets.last().unwrap() as usize];
            for _ in 0..n {
                let p = (next() % 1000) as f64 / 1000.0;
                let (g, h) = (p - (next() % 2) as f64, (p * (1.0 - p)).max(1e-3));
                for j in 0..d {
                    let nb = nbins[j];
                    // a narrow range of bins leaves the others empty
                    let b = if next() % 7 == 0 {
                        nb - 1
                    } else {
                        (next() % (nb as u64 - 1).min(6 + case % 150)) as usize
                    };
                    let i = STRIDE * (offsets[j] as usize + b);
                    hist[i] += g;
                    hist[i + 1] += h;
                }
            }
            let bins = [0u8; 0];
            let data = BinnedGroup {
                d,
                n,
                bins: &bins,
                rbins: &bins,
                offsets: &offsets,
                row_offsets: &offsets[..offsets.len() - 1],
                wide: &[],
                wbins: &[],
                wrbins: &[],
            };
            let total = totals(&hist, &data, n);
            let r = rules(1.0 + (case % 12) as f64);
            let features: Vec<usize> = (0..d).step_by(1 + (case as usize / 9) % 2).collect();
            let want = naive_best(&hist, &data, &features, total, &r);
            let mut copies = vec![
                best_split_impl(&hist, &data, &features, total, &r, Listing::Scalar),
                best_split(&hist, &data, &features, total, &r),
            ];
            #[cfg(target_arch = "x86_64")]
            if level() >= Level::Avx2 {
                // SAFETY: the CPU has the copy's level.
                copies.push(unsafe { best_split_avx2(&hist, &data, &features, total, &r) });
            }
            for got in copies {
                let got = got.map(|s| (s.feature, s.bin, s.default_left, s.gain));
                match (got, want) {
                    (Some(a), Some(b)) => {
                        assert_eq!(
                            (a.0, a.1, a.2),
                            (b.0, b.1, b.2),
                            "case {case} {a:?} {b:?} n={n} nb={:?}",
                            &nbins
                        );
                        // the same sums in the same order: the same gain
                        assert_eq!(a.3.to_bits(), b.3.to_bits(), "case {case}");
                    }
                    (a, b) => assert_eq!(a.is_some(), b.is_some(), "case {case}"),
                }
            }
        }
    }

    #[test]
    fn every_copy_lists_the_same_nonzero_bins() {
        // Random slices of up to 256 bins, mostly empty, with NaN, -0.0
        // (zero) and values in the gradient or the hessian only; every
        // `last`, including ones that end inside an eight-bin step.
        let mut next = xorshift(0x1234_5678_9abc_def1);
        for case in 0..2000 {
            let bins = 1 + (next() % 256) as usize;
            let mut h = vec![0.0f64; STRIDE * bins];
            for v in h.iter_mut() {
                *v = match next() % 16 {
                    0 => 1.5,
                    1 => f64::NAN,
                    2 => -0.0,
                    3 => -2.0e-300,
                    _ => 0.0,
                };
            }
            let last = (next() % (bins as u64 + 1)) as usize;
            let (mut a, mut b) = ([0u8; 264], [0u8; 264]);
            let ka = nonzero_bins(&h, last, &mut a, Listing::Scalar);
            let want: Vec<u8> = (0..last)
                .filter(|&t| t == 0 || h[2 * t] != 0.0 || h[2 * t + 1] != 0.0)
                .map(|t| t as u8)
                .collect();
            assert_eq!(&a[..ka], &want[..], "case {case}");
            #[cfg(target_arch = "x86_64")]
            if level() >= Level::Avx2 {
                // SAFETY: the CPU has AVX2.
                let kb = unsafe { nonzero_bins_avx2(&h, last, &mut b) };
                assert_eq!(&b[..kb], &want[..], "case {case}");
            }
            #[cfg(target_arch = "x86_64")]
            if level() >= Level::Avx512Vbmi2 {
                // SAFETY: the CPU has the copy's features.
                let kb = unsafe { nonzero_bins_avx512(&h, last, &mut b) };
                assert_eq!(&b[..kb], &want[..], "case {case} (avx-512)");
            }
            let _ = &mut b;
        }
    }

    #[test]
    fn the_division_free_test_passes_every_split_that_can_win() {
        // Sides with random sums: a target equal to (or just under) their
        // computed gain passes; one clearly above it is rejected.
        let mut bits = xorshift(0x2545_f491_4f6c_dd1d);
        let mut unit = move || (bits() >> 11) as f64 / (1u64 << 53) as f64;
        for lambda in [0.0, 1.0, 10.0] {
            let r = Rules {
                lambda,
                ..rules(1.0)
            };
            for _ in 0..10_000 {
                let side = |u: &mut dyn FnMut() -> f64| Sums {
                    g: (u() - 0.5) * 10f64.powf(u() * 8.0 - 3.0),
                    h: 1e-3 + u() * 10f64.powf(u() * 6.0 - 1.0),
                    n: 0.0,
                };
                let (a, b) = (side(&mut unit), side(&mut unit));
                let x = r.gain(a) + r.gain(b);
                assert!(r.may_beat(a, b, x), "{a:?} {b:?}");
                assert!(r.may_beat(a, b, x * (1.0 - 1e-12)));
                if x > 1e-300 {
                    assert!(!r.may_beat(a, b, x * (1.0 + 1e-6)), "{a:?} {b:?}");
                }
            }
        }
    }

    #[test]
    fn gain_and_values_by_hand() {
        // One feature, 3 value bins + NaN, 2 rows each. Bins: (g, h)
        // b0: (-4, 2)  b1: (-2, 2)  b2: (6, 2)  NaN: (0, 0)
        let offsets = [0u32, 4];
        let bins = [0u8; 0];
        let data = BinnedGroup {
            d: 1,
            n: 6,
            bins: &bins,
            rbins: &bins,
            offsets: &offsets,
            row_offsets: &offsets[..offsets.len() - 1],
            wide: &[],
            wbins: &[],
            wrbins: &[],
        };
        let hist = [-4.0, 2.0, -2.0, 2.0, 6.0, 2.0, 0.0, 0.0];
        let total = totals(&hist, &data, 6);
        assert_eq!(
            total,
            Sums {
                g: 0.0,
                h: 6.0,
                n: 6.0
            }
        );
        // t=0: L=(-4,2) R=(4,4): 16/2 + 16/4 - 0 = 12
        // t=1: L=(-6,4) R=(6,2): 36/4 + 36/2 = 27  <- best
        let s = best_split(&hist, &data, &[0], total, &rules(1.0)).unwrap();
        assert_eq!((s.bin, s.gain), (1, 27.0));
        assert!(s.default_left, "no missing values: the side with more rows");
        let r = rules(1.0);
        assert_eq!(r.value(s.left), 1.5);
        assert_eq!(r.value(s.right), -3.0);
        // lambda = 2: t=1: 36/6 + 36/4 - 0 = 15; t=0: 16/4 + 16/6 = 6.67
        let l2 = Rules { lambda: 2.0, ..r };
        let s = best_split(&hist, &data, &[0], total, &l2).unwrap();
        assert_eq!((s.bin, s.gain), (1, 15.0));
        assert_eq!(l2.value(s.right), -1.5); // -6 / (2 + 2)
                                             // min_data 3: t=0 leaves 2 | 4 rows, t=1 leaves 4 | 2: no split
        assert!(best_split(&hist, &data, &[0], total, &rules(3.0)).is_none());
    }

    #[test]
    fn missing_values_take_the_better_side() {
        // b0: (-3,1) b1: (3,1) NaN: (-3,1), one row each; total (-3,3), 3 rows
        let offsets = [0u32, 3];
        let data = BinnedGroup {
            d: 1,
            n: 3,
            bins: &[],
            rbins: &[],
            offsets: &offsets,
            row_offsets: &offsets[..offsets.len() - 1],
            wide: &[],
            wbins: &[],
            wrbins: &[],
        };
        let hist = [-3.0, 1.0, 3.0, 1.0, -3.0, 1.0];
        let total = totals(&hist, &data, 3);
        // t=0, NaN right: L=(-3,1) R=(0,2): 9 + 0 - 3 = 6
        // t=0, NaN left:  L=(-6,2) R=(3,1): 18 + 9 - 3 = 24  <- best
        // t=1 (values left, NaN right): L=(0,2) R=(-3,1): 0 + 9 - 3 = 6
        let s = best_split(&hist, &data, &[0], total, &rules(1.0)).unwrap();
        assert_eq!((s.bin, s.default_left, s.gain), (0, true, 24.0));
        assert_eq!(
            s.left,
            Sums {
                g: -6.0,
                h: 2.0,
                n: 2.0
            }
        );
    }
}
