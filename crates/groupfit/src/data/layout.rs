//! The group-sorted, per-group standardised feature matrix every solver scans.

use crate::error::{GroupfitError, Result};

/// Rows per block in the cache-friendly gather (column-major in, row-major out).
const GATHER_BLOCK: usize = 4096;

/// Features of the training rows as `f32`, row-major, rows of one group
/// contiguous (an O(n) counting sort on the group id), each group's columns
/// standardised by that group's own mean and standard deviation.
///
/// Standardising per group is an exact reparameterisation for the solvers
/// (the intercept absorbs the mean; the L2 penalty is rescaled by the scale), and
/// it makes a column that is constant inside a group exactly zero there, so a
/// per-route `distance` column does not make the route's problem ill-conditioned.
///
/// With `with_global`, one extra pseudo-group (index `n_groups`) holds every
/// training row again, standardised by the global statistics: the global model
/// is then one more work unit, planned and solved like any other.
#[derive(Debug, Clone)]
pub struct GroupedMatrix {
    d: usize,
    x: Vec<f32>,
    y: Vec<f64>,
    offsets: Vec<usize>,
    mean: Vec<f64>,
    scale: Vec<f64>,
}

/// What [`GroupedMatrix::build`] reads: raw feature columns (NaN for missing),
/// the target, and which rows are training rows in which group.
#[derive(Debug, Clone, Copy)]
pub struct LayoutInput<'a> {
    /// Raw feature columns, each as long as the input table.
    pub columns: &'a [Vec<f64>],
    /// Value that replaces NaN, per feature (the global training mean).
    pub impute: &'a [f64],
    /// The target column, as long as the input table.
    pub target: &'a [f64],
    /// Indices of the training rows, ascending.
    pub rows: &'a [u32],
    /// Group id of each training row (aligned with `rows`).
    pub group_of: &'a [u32],
    /// Number of groups (ids are `0..n_groups`).
    pub n_groups: usize,
    /// Whether to append the global pseudo-group.
    pub with_global: bool,
}

impl GroupedMatrix {
    /// Builds the layout. Cost: three sequential passes per column for the
    /// statistics, then one blocked gather.
    pub fn build(input: LayoutInput<'_>) -> Result<GroupedMatrix> {
        let d = input.columns.len();
        let n = input.rows.len();
        if input.group_of.len() != n {
            return Err(GroupfitError::arg("layout: rows and group ids differ in length"));
        }
        let g_total = input.n_groups + usize::from(input.with_global);
        // Counting sort: destination position of each training row.
        let mut counts = vec![0usize; input.n_groups];
        for &g in input.group_of {
            counts[g as usize] += 1;
        }
        let mut offsets = Vec::with_capacity(g_total + 1);
        offsets.push(0);
        for &c in &counts {
            offsets.push(offsets.last().unwrap() + c);
        }
        if input.with_global {
            offsets.push(offsets.last().unwrap() + n);
        }
        let mut cursor = offsets[..input.n_groups].to_vec();
        let mut pos = vec![0u32; n];
        for (k, &g) in input.group_of.iter().enumerate() {
            pos[k] = cursor[g as usize] as u32;
            cursor[g as usize] += 1;
        }
        let total = *offsets.last().unwrap();
        let mut y = vec![0.0; total];
        for (k, &r) in input.rows.iter().enumerate() {
            y[pos[k] as usize] = input.target[r as usize];
            if input.with_global {
                y[n + pos[k] as usize] = input.target[r as usize];
            }
        }

        // Per-group (and global) mean and scale of every column, after imputation.
        let mut mean = vec![0.0; g_total * d];
        let mut scale = vec![1.0; g_total * d];
        let mut sum = vec![0.0f64; g_total];
        let mut sq = vec![0.0f64; g_total];
        for j in 0..d {
            let col = &input.columns[j];
            let fill = input.impute[j];
            let value = |r: u32| {
                let v = col[r as usize];
                if v.is_nan() {
                    fill
                } else {
                    v
                }
            };
            sum.iter_mut().for_each(|s| *s = 0.0);
            sq.iter_mut().for_each(|s| *s = 0.0);
            for (k, &r) in input.rows.iter().enumerate() {
                sum[input.group_of[k] as usize] += value(r);
            }
            let mut global_sum = 0.0;
            for g in 0..input.n_groups {
                global_sum += sum[g];
                let cnt = (offsets[g + 1] - offsets[g]) as f64;
                mean[g * d + j] = if cnt > 0.0 { sum[g] / cnt } else { 0.0 };
            }
            let gm = if n > 0 { global_sum / n as f64 } else { 0.0 };
            if input.with_global {
                mean[input.n_groups * d + j] = gm;
            }
            let mut global_sq = 0.0;
            for (k, &r) in input.rows.iter().enumerate() {
                let g = input.group_of[k] as usize;
                let v = value(r);
                let dv = v - mean[g * d + j];
                sq[g] += dv * dv;
                let dg = v - gm;
                global_sq += dg * dg;
            }
            for g in 0..input.n_groups {
                let cnt = (offsets[g + 1] - offsets[g]) as f64;
                scale[g * d + j] = std_or_one(sq[g], cnt, mean[g * d + j]);
            }
            if input.with_global {
                scale[input.n_groups * d + j] = std_or_one(global_sq, n as f64, gm);
            }
        }

        // Blocked gather: column-major input, group-sorted row-major output.
        let mut x = vec![0.0f32; total * d];
        let gl = input.n_groups;
        for start in (0..n).step_by(GATHER_BLOCK) {
            let end = (start + GATHER_BLOCK).min(n);
            for j in 0..d {
                let col = &input.columns[j];
                let fill = input.impute[j];
                for k in start..end {
                    let r = input.rows[k] as usize;
                    let g = input.group_of[k] as usize;
                    let v = if col[r].is_nan() { fill } else { col[r] };
                    let p = pos[k] as usize;
                    x[p * d + j] = ((v - mean[g * d + j]) / scale[g * d + j]) as f32;
                    if input.with_global {
                        x[(n + p) * d + j] = ((v - mean[gl * d + j]) / scale[gl * d + j]) as f32;
                    }
                }
            }
        }
        Ok(GroupedMatrix {
            d,
            x,
            y,
            offsets,
            mean,
            scale,
        })
    }

    /// Number of features.
    pub fn d(&self) -> usize {
        self.d
    }

    /// Number of (pseudo-)groups.
    pub fn n_groups(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Total rows (the global pseudo-group counts its rows again).
    pub fn n_rows(&self) -> usize {
        *self.offsets.last().unwrap()
    }

    /// Row range of group `g`.
    pub fn range(&self, g: usize) -> std::ops::Range<usize> {
        self.offsets[g]..self.offsets[g + 1]
    }

    /// Number of rows of group `g`.
    pub fn rows_of(&self, g: usize) -> usize {
        self.offsets[g + 1] - self.offsets[g]
    }

    /// The standardised features of rows `r` (row-major, `r.len() * d` values).
    pub fn x(&self, r: std::ops::Range<usize>) -> &[f32] {
        &self.x[r.start * self.d..r.end * self.d]
    }

    /// The targets of rows `r`.
    pub fn y(&self, r: std::ops::Range<usize>) -> &[f64] {
        &self.y[r]
    }

    /// Mean of each feature in group `g` (after imputation).
    pub fn mean(&self, g: usize) -> &[f64] {
        &self.mean[g * self.d..(g + 1) * self.d]
    }

    /// Scale (standard deviation, or 1 for a constant column) of each feature in group `g`.
    pub fn scale(&self, g: usize) -> &[f64] {
        &self.scale[g * self.d..(g + 1) * self.d]
    }
}

/// Population standard deviation, or 1 when the column is (numerically) constant.
fn std_or_one(sq: f64, count: f64, mean: f64) -> f64 {
    if count <= 0.0 {
        return 1.0;
    }
    let sd = (sq / count).sqrt();
    if sd <= 1e-12 * mean.abs().max(1.0) {
        1.0
    } else {
        sd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_by_group_standardises_and_appends_global() {
        // rows 0..5, groups [1, 0, 1, 0, 1], one feature with a NaN imputed by 10.
        let col = vec![vec![1.0, 4.0, 3.0, f64::NAN, 5.0]];
        let y = vec![0.0, 1.0, 2.0, 3.0, 4.0];
        let rows = [0u32, 1, 2, 3, 4];
        let gid = [1u32, 0, 1, 0, 1];
        let m = GroupedMatrix::build(LayoutInput {
            columns: &col,
            impute: &[10.0],
            target: &y,
            rows: &rows,
            group_of: &gid,
            n_groups: 2,
            with_global: true,
        })
        .unwrap();
        assert_eq!(m.n_groups(), 3);
        assert_eq!(m.range(0), 0..2);
        assert_eq!(m.range(1), 2..5);
        assert_eq!(m.range(2), 5..10);
        assert_eq!(m.y(0..5), &[1.0, 3.0, 0.0, 2.0, 4.0]);
        // group 0: values 4, 10 -> mean 7, sd 3 -> -1, +1
        assert_eq!(m.mean(0), &[7.0]);
        assert_eq!(m.scale(0), &[3.0]);
        assert_eq!(m.x(0..2), &[-1.0, 1.0]);
        // group 1: values 1, 3, 5 -> mean 3, sd sqrt(8/3)
        let sd = (8.0f64 / 3.0).sqrt();
        assert!((m.x(2..3)[0] as f64 - (-2.0 / sd)).abs() < 1e-6);
        // global: 1,4,3,10,5 mean 4.6
        assert!((m.mean(2)[0] - 4.6).abs() < 1e-12);
    }

    #[test]
    fn constant_column_in_a_group_becomes_zero() {
        let col = vec![vec![7.0, 7.0, 7.0]];
        let m = GroupedMatrix::build(LayoutInput {
            columns: &col,
            impute: &[7.0],
            target: &[0.0, 1.0, 0.0],
            rows: &[0, 1, 2],
            group_of: &[0, 0, 0],
            n_groups: 1,
            with_global: false,
        })
        .unwrap();
        assert_eq!(m.scale(0), &[1.0]);
        assert_eq!(m.x(0..3), &[0.0, 0.0, 0.0]);
    }
}
