//! Histograms: per feature and bin, the sums of gradient, hessian and row
//! count over a leaf's rows, as one flat `f64` slice (three entries per bin,
//! features one after another at [`BinnedGroup::offsets`]).
//!
//! Bins are stored row-major (`bins[row * d + j]`, one `u8` each), so a leaf's
//! row list is read one short contiguous run per row. A parent's histogram
//! minus its smaller child's is the larger child's ([`subtract`]).

/// Entries per bin: gradient, hessian, count.
pub const STRIDE: usize = 3;

/// The binned training rows of one group, as a booster reads them.
#[derive(Debug, Clone, Copy)]
pub struct BinnedGroup<'a> {
    /// Features.
    pub d: usize,
    /// Row-major bins, `rows * d`.
    pub bins: &'a [u8],
    /// Start of each feature's bins in a histogram (in bins), `d + 1` entries.
    pub offsets: &'a [u32],
}

impl BinnedGroup<'_> {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.bins.len() / self.d.max(1)
    }
    /// Histogram length in `f64`s.
    pub fn hist_len(&self) -> usize {
        STRIDE * self.offsets[self.d] as usize
    }
    /// Bins of feature `j` (value bins + the NaN bin).
    pub fn n_bins(&self, j: usize) -> usize {
        (self.offsets[j + 1] - self.offsets[j]) as usize
    }
}

/// Adds rows `rows` (group-local indices) into `hist` (which the caller zeroed).
pub fn build_rows(hist: &mut [f64], data: &BinnedGroup<'_>, rows: &[u32], gh: &[[f32; 2]]) {
    let d = data.d;
    let off = data.offsets;
    for &r in rows {
        let r = r as usize;
        let [g, h] = gh[r];
        let (g, h) = (g as f64, h as f64);
        let b = &data.bins[r * d..r * d + d];
        for j in 0..d {
            let i = STRIDE * (off[j] as usize + b[j] as usize);
            let e = &mut hist[i..i + 3];
            e[0] += g;
            e[1] += h;
            e[2] += 1.0;
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
    let d = data.d;
    let off = data.offsets;
    for r in range {
        let [g, h] = gh[r];
        let (g, h) = (g as f64, h as f64);
        let b = &data.bins[r * d..r * d + d];
        for j in 0..d {
            let i = STRIDE * (off[j] as usize + b[j] as usize);
            let e = &mut hist[i..i + 3];
            e[0] += g;
            e[1] += h;
            e[2] += 1.0;
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
        // 2 features: f0 has 2 bins (+NaN), f1 has 1 bin (+NaN).
        let bins = [0u8, 0, 1, 1, 2, 0, 1, 0];
        let offsets = [0u32, 3, 5];
        let data = BinnedGroup {
            d: 2,
            bins: &bins,
            offsets: &offsets,
        };
        let gh = [[1.0f32, 0.5], [2.0, 0.25], [-1.0, 0.5], [4.0, 1.0]];
        let mut all = vec![0.0; data.hist_len()];
        build_range(&mut all, &data, 0..4, &gh);
        // f0: bin0 <- rows 0; bin1 <- rows 1, 3; NaN bin <- row 2
        assert_eq!(&all[0..3], &[1.0, 0.5, 1.0]);
        assert_eq!(&all[3..6], &[6.0, 1.25, 2.0]);
        assert_eq!(&all[6..9], &[-1.0, 0.5, 1.0]);
        // f1: bin0 <- rows 0, 2, 3; NaN bin <- row 1
        assert_eq!(&all[9..12], &[4.0, 2.0, 3.0]);
        assert_eq!(&all[12..15], &[2.0, 0.25, 1.0]);
        let mut small = vec![0.0; data.hist_len()];
        build_rows(&mut small, &data, &[1, 3], &gh);
        subtract(&mut all, &small);
        let mut other = vec![0.0; data.hist_len()];
        build_rows(&mut other, &data, &[0, 2], &gh);
        assert_eq!(all, other);
    }
}
