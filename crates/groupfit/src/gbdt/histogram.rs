//! Histograms: per feature and bin, the sums of gradient and hessian over a
//! leaf's rows, as one flat `f64` slice (two entries per bin, features one
//! after another at [`BinnedGroup::offsets`]). Row counts are not summed: as
//! in LightGBM, a side's count is estimated from its hessian when splits are
//! checked against `min_data_in_leaf` (see [`super::split`]).
//!
//! Bins are stored twice per group, one `u8` each: column-major
//! (`bins[j * rows + r]`) and row-major (`rbins[r * d + j]`). A contiguous
//! row range (a root) is scanned feature by feature over the columns
//! ([`build_range`]): the feature's part of the histogram (at most 256 bins,
//! 4 KiB) stays in L1 while its column streams in. A leaf's scattered rows
//! are scanned row by row over the row-major copy ([`build_rows`]): one cache
//! line brings every feature's bin of a row, where the columns would cost one
//! miss per feature and row (the histogram, at most `d * 256 * 16` bytes,
//! stays in L2). A parent's histogram minus its smaller child's is the larger
//! child's ([`subtract`]).
//!
//! Both scans add each row's terms to a bin in row order, so they give the
//! same sums.
//!
//! A categorical feature with more levels than a byte holds is *wide*: its
//! bins are `u16`, in matrices of their own (`wbins`, `wrbins`, wide
//! features only). Its `u8` bins are 0, and the row-major scan adds them to
//! a *sink* bin after the histogram's last feature ([`BinnedGroup::row_offsets`]),
//! so that loop stays as it is; a second loop adds the wide bins. A group
//! without wide features has no sink and no second loop.

/// Entries per bin: gradient, hessian.
pub const STRIDE: usize = 2;

/// The binned training rows of one group, as a booster reads them.
#[derive(Debug, Clone, Copy)]
pub struct BinnedGroup<'a> {
    /// Features.
    pub d: usize,
    /// Rows.
    pub n: usize,
    /// Column-major bins, `d * n`.
    pub bins: &'a [u8],
    /// The same bins row-major, `n * d`.
    pub rbins: &'a [u8],
    /// Start of each feature's bins in a histogram (in bins), `d + 1` entries.
    pub offsets: &'a [u32],
    /// Where [`build_rows`] adds each feature's `u8` bin 0: `offsets[j]`,
    /// or the sink for a wide feature; `d` entries.
    pub row_offsets: &'a [u32],
    /// The wide features, ascending (none: an empty slice).
    pub wide: &'a [u32],
    /// Column-major `u16` bins of the wide features, `wide.len() * n`.
    pub wbins: &'a [u16],
    /// The same, row-major, `n * wide.len()`.
    pub wrbins: &'a [u16],
}

impl<'a> BinnedGroup<'a> {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.n
    }
    /// Histogram length in `f64`s (the sink included).
    pub fn hist_len(&self) -> usize {
        STRIDE * (self.offsets[self.d] as usize + usize::from(!self.wide.is_empty()))
    }
    /// Bins of feature `j` (value bins + the NaN bin).
    pub fn n_bins(&self, j: usize) -> usize {
        (self.offsets[j + 1] - self.offsets[j]) as usize
    }
    /// The bin column of feature `j` (zeros for a wide feature).
    #[inline]
    pub fn col(&self, j: usize) -> &'a [u8] {
        &self.bins[j * self.n..(j + 1) * self.n]
    }
    /// The position of feature `j` among the wide features, if it is one.
    #[inline]
    pub fn wide_slot(&self, j: usize) -> Option<usize> {
        self.wide.binary_search(&(j as u32)).ok()
    }
    /// The `u16` bin column of the wide feature in `slot`.
    #[inline]
    pub fn wcol(&self, slot: usize) -> &'a [u16] {
        &self.wbins[slot * self.n..(slot + 1) * self.n]
    }
    /// Feature `j`'s bin of row `r` (group-local).
    #[inline]
    pub fn bin(&self, j: usize, r: usize) -> usize {
        match self.wide_slot(j) {
            Some(k) => self.wrbins[r * self.wide.len() + k] as usize,
            None => self.rbins[r * self.d + j] as usize,
        }
    }
}

/// How many rows ahead [`build_rows`] prefetches: a leaf's rows are
/// scattered over its group once the tree is a few levels deep, and without
/// prefetching every row costs a cache miss on its bins and one on its
/// gradient (the scan is bound by memory latency, not by the adds).
pub const PREFETCH_ROWS: usize = 16;

/// Asks the CPU to bring the cache line holding `p` into L1; never faults.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that does not dereference the address
    // (no fault for any value); SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Adds rows `rows` (group-local indices, ascending) into `hist` (which the
/// caller zeroed), reading the row-major bins. The bins and gradient of the
/// row [`PREFETCH_ROWS`] ahead are prefetched. Wide features are added in a
/// second loop.
pub fn build_rows(hist: &mut [f64], data: &BinnedGroup<'_>, rows: &[u32], gh: &[[f32; 2]]) {
    build_rows_narrow(hist, data, rows, gh);
    if !data.wide.is_empty() {
        build_rows_wide(hist, data, rows, gh);
    }
}

/// The `u8` bins of [`build_rows`] (a wide feature's go to the sink). Not
/// inlined: with the wide loop after it in one function, the row loop ran
/// short of registers.
#[inline(never)]
fn build_rows_narrow(hist: &mut [f64], data: &BinnedGroup<'_>, rows: &[u32], gh: &[[f32; 2]]) {
    let d = data.d;
    let offsets = &data.row_offsets[..d];
    let rbins = data.rbins;
    let (pairs, _) = hist.as_chunks_mut::<STRIDE>();
    for (i, &r) in rows.iter().enumerate() {
        if let Some(&ahead) = rows.get(i + PREFETCH_ROWS) {
            let a = ahead as usize;
            let row = rbins.as_ptr().wrapping_add(a * d);
            prefetch(row);
            prefetch(row.wrapping_add(d.saturating_sub(1)));
            prefetch(gh.as_ptr().wrapping_add(a));
        }
        let r = r as usize;
        let [g, hh] = gh[r];
        let (g, hh) = (g as f64, hh as f64);
        for (&o, &b) in offsets.iter().zip(&rbins[r * d..r * d + d]) {
            // One bounds check and one two-lane add per bin.
            let e = &mut pairs[o as usize + b as usize];
            *e = [e[0] + g, e[1] + hh];
        }
    }
}

/// The `u16` bins of the wide features of [`build_rows`].
#[inline(never)]
fn build_rows_wide(hist: &mut [f64], data: &BinnedGroup<'_>, rows: &[u32], gh: &[[f32; 2]]) {
    let dw = data.wide.len();
    let offsets: Vec<u32> = data
        .wide
        .iter()
        .map(|&j| data.offsets[j as usize])
        .collect();
    let (pairs, _) = hist.as_chunks_mut::<STRIDE>();
    for (i, &r) in rows.iter().enumerate() {
        if let Some(&ahead) = rows.get(i + PREFETCH_ROWS) {
            prefetch(data.wrbins.as_ptr().wrapping_add(ahead as usize * dw));
        }
        let r = r as usize;
        let [g, hh] = gh[r];
        let (g, hh) = (g as f64, hh as f64);
        for (&o, &b) in offsets.iter().zip(&data.wrbins[r * dw..r * dw + dw]) {
            let e = &mut pairs[o as usize + b as usize];
            *e = [e[0] + g, e[1] + hh];
        }
    }
}

/// Adds the contiguous rows `range` (group-local) into `hist`.
pub fn build_range(
    hist: &mut [f64],
    data: &BinnedGroup<'_>,
    range: std::ops::Range<usize>,
    gh: &[[f32; 2]],
) {
    let ghs = &gh[range.clone()];
    for j in 0..data.d {
        let off = STRIDE * data.offsets[j] as usize;
        let h = &mut hist[off..STRIDE * data.offsets[j + 1] as usize];
        match data.wide_slot(j) {
            None => add_column(h, &data.col(j)[range.clone()], ghs),
            Some(k) => add_column(h, &data.wcol(k)[range.clone()], ghs),
        }
    }
}

/// Adds each row's gradient and hessian to its bin of one feature's
/// histogram slice `h`.
#[inline(always)]
fn add_column<B: Copy + Into<usize>>(h: &mut [f64], col: &[B], ghs: &[[f32; 2]]) {
    let (pairs, _) = h.as_chunks_mut::<STRIDE>();
    for (&b, &[g, hh]) in col.iter().zip(ghs) {
        let e = &mut pairs[b.into()];
        *e = [e[0] + g as f64, e[1] + hh as f64];
    }
}

/// `parent -= child`: the parent's buffer becomes the sibling's histogram.
/// Element by element, so every copy gives the same values.
pub fn subtract(parent: &mut [f64], child: &[f64]) {
    #[cfg(target_arch = "x86_64")]
    if crate::math::simd::level() >= crate::math::simd::Level::Avx512 {
        // SAFETY: the CPU has the level the copy is compiled for.
        return unsafe { subtract_avx512(parent, child) };
    }
    subtract_impl(parent, child)
}

crate::math::simd::simd_copy!(
    [
        /// [`subtract_impl`] compiled for AVX-512 (eight lanes where the
        /// baseline target has two).
        Avx512 subtract_avx512 => subtract_impl(parent, child),
    ]
    fn(parent: &mut [f64], child: &[f64])
);

#[inline(always)]
fn subtract_impl(parent: &mut [f64], child: &[f64]) {
    for (p, c) in parent.iter_mut().zip(child) {
        *p -= c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_per_bin_and_subtraction() {
        // 2 features, 4 rows: f0 has 2 bins (+NaN), f1 has 1 bin (+NaN).
        // Column-major: f0 = [0, 1, 2, 1], f1 = [0, 1, 0, 0].
        let bins = [0u8, 1, 2, 1, 0, 1, 0, 0];
        let offsets = [0u32, 3, 5];
        let rbins = [0u8, 0, 1, 1, 2, 0, 1, 0];
        let data = BinnedGroup {
            d: 2,
            n: 4,
            bins: &bins,
            rbins: &rbins,
            offsets: &offsets,
            row_offsets: &offsets[..2],
            wide: &[],
            wbins: &[],
            wrbins: &[],
        };
        let gh = [[1.0f32, 0.5], [2.0, 0.25], [-1.0, 0.5], [4.0, 1.0]];
        let mut all = vec![0.0; data.hist_len()];
        build_range(&mut all, &data, 0..4, &gh);
        // f0: bin0 <- row 0; bin1 <- rows 1, 3; NaN bin <- row 2
        assert_eq!(&all[0..2], &[1.0, 0.5]);
        assert_eq!(&all[2..4], &[6.0, 1.25]);
        assert_eq!(&all[4..6], &[-1.0, 0.5]);
        // f1: bin0 <- rows 0, 2, 3; NaN bin <- row 1
        assert_eq!(&all[6..8], &[4.0, 2.0]);
        assert_eq!(&all[8..10], &[2.0, 0.25]);
        let mut small = vec![0.0; data.hist_len()];
        build_rows(&mut small, &data, &[1, 3], &gh);
        subtract(&mut all, &small);
        let mut other = vec![0.0; data.hist_len()];
        build_rows(&mut other, &data, &[0, 2], &gh);
        assert_eq!(all, other);
    }

    #[test]
    fn wide_features_sum_their_u16_bins_and_the_sink_takes_their_bytes() {
        // f0: numeric, 2 value bins + NaN; f1: wide, 300 category bins +
        // the null bin. The sink is bin 304, after both.
        let offsets = [0u32, 3, 304];
        let row_offsets = [0u32, 304];
        let bins = [0u8, 1, 2, 1, 0, 0, 0, 0];
        let rbins = [0u8, 0, 1, 0, 2, 0, 1, 0];
        let w = [299u16, 0, 300, 299];
        let data = BinnedGroup {
            d: 2,
            n: 4,
            bins: &bins,
            rbins: &rbins,
            offsets: &offsets,
            row_offsets: &row_offsets,
            wide: &[1],
            wbins: &w,
            wrbins: &w,
        };
        assert_eq!(data.hist_len(), 2 * 305);
        assert_eq!((data.wide_slot(1), data.wide_slot(0)), (Some(0), None));
        assert_eq!((data.bin(1, 2), data.bin(0, 2)), (300, 2));
        let gh = [[1.0f32, 0.5], [2.0, 0.25], [-1.0, 0.5], [4.0, 1.0]];
        let mut range = vec![0.0; data.hist_len()];
        build_range(&mut range, &data, 0..4, &gh);
        let mut rows = vec![0.0; data.hist_len()];
        build_rows(&mut rows, &data, &[0, 1, 2, 3], &gh);
        let f1 = |h: &[f64], b: usize| [h[2 * (3 + b)], h[2 * (3 + b) + 1]];
        for h in [&range, &rows] {
            assert_eq!(&h[0..6], &[1.0, 0.5, 6.0, 1.25, -1.0, 0.5]);
            assert_eq!(f1(h, 299), [5.0, 1.5]);
            assert_eq!(f1(h, 0), [2.0, 0.25]);
            assert_eq!(f1(h, 300), [-1.0, 0.5]);
        }
        // The row scan's sink holds every row (its bytes); the range scan
        // leaves it empty. Neither is read.
        assert_eq!(&rows[608..], &[6.0, 2.25]);
        assert_eq!(&range[608..], &[0.0, 0.0]);
        assert_eq!(&range[..608], &rows[..608]);
    }
}
