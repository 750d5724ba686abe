//! Histograms: per feature and bin, the sums of gradient and hessian over a
//! leaf's rows, as one flat `f64` slice (two entries per bin, features one
//! after another at [`BinnedGroup::offsets`]). Row counts are not summed: as
//! in LightGBM, a side's count is estimated from its hessian when splits are
//! checked against `min_data_in_leaf` (see [`super::split`]).
//!
//! Bins are stored column-major per group (`bins[j * rows + r]`, one `u8`
//! each). A leaf's gradients are first gathered into a contiguous buffer
//! (LightGBM's "ordered gradients"), then each feature is scanned on its own,
//! so the feature's part of the histogram (at most 256 bins, 4 KiB) stays in
//! L1 while its bin column is read in ascending row order. A parent's
//! histogram minus its smaller child's is the larger child's ([`subtract`]).

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
    /// Start of each feature's bins in a histogram (in bins), `d + 1` entries.
    pub offsets: &'a [u32],
}

impl<'a> BinnedGroup<'a> {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.n
    }
    /// Histogram length in `f64`s.
    pub fn hist_len(&self) -> usize {
        STRIDE * self.offsets[self.d] as usize
    }
    /// Bins of feature `j` (value bins + the NaN bin).
    pub fn n_bins(&self, j: usize) -> usize {
        (self.offsets[j + 1] - self.offsets[j]) as usize
    }
    /// The bin column of feature `j`.
    #[inline]
    pub fn col(&self, j: usize) -> &'a [u8] {
        &self.bins[j * self.n..(j + 1) * self.n]
    }
}

/// Adds rows `rows` (group-local indices, ascending) into `hist` (which the
/// caller zeroed); `ordered` is scratch for the gathered gradients.
pub fn build_rows(
    hist: &mut [f64],
    data: &BinnedGroup<'_>,
    rows: &[u32],
    gh: &[[f32; 2]],
    ordered: &mut Vec<[f32; 2]>,
) {
    ordered.clear();
    ordered.extend(rows.iter().map(|&r| gh[r as usize]));
    for j in 0..data.d {
        let col = data.col(j);
        let off = STRIDE * data.offsets[j] as usize;
        let h = &mut hist[off..STRIDE * data.offsets[j + 1] as usize];
        for (&r, &[g, hh]) in rows.iter().zip(ordered.iter()) {
            let b = STRIDE * col[r as usize] as usize;
            h[b] += g as f64;
            h[b + 1] += hh as f64;
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
        let col = &data.col(j)[range.clone()];
        let off = STRIDE * data.offsets[j] as usize;
        let h = &mut hist[off..STRIDE * data.offsets[j + 1] as usize];
        for (&b, &[g, hh]) in col.iter().zip(ghs) {
            let b = STRIDE * b as usize;
            h[b] += g as f64;
            h[b + 1] += hh as f64;
        }
    }
}

/// `parent -= child`: the parent's buffer becomes the sibling's histogram.
pub fn subtract(parent: &mut [f64], child: &[f64]) {
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
        let data = BinnedGroup {
            d: 2,
            n: 4,
            bins: &bins,
            offsets: &offsets,
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
        let mut scratch = Vec::new();
        let mut small = vec![0.0; data.hist_len()];
        build_rows(&mut small, &data, &[1, 3], &gh, &mut scratch);
        subtract(&mut all, &small);
        let mut other = vec![0.0; data.hist_len()];
        build_rows(&mut other, &data, &[0, 2], &gh, &mut scratch);
        assert_eq!(all, other);
    }
}
