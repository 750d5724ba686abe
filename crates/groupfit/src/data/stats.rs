//! Per-group column statistics of the standardised layouts: each column's
//! mean and scale per (pseudo-)group and its imputation value, and how they
//! are laid out group-major.

/// Statistics of one column: per (pseudo-)group mean and scale, and the
/// imputation value.
pub(crate) struct ColumnStats {
    pub(crate) mean: Vec<f64>,
    pub(crate) scale: Vec<f64>,
    pub(crate) impute: f64,
}

/// The per-column statistics laid out group-major: `(mean, scale, impute)`,
/// the first two `g_total x d`.
pub(crate) fn group_major_stats(
    per_column: Vec<(usize, ColumnStats)>,
    g_total: usize,
    d: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut mean = vec![0.0; g_total * d];
    let mut scale = vec![1.0; g_total * d];
    let mut impute = vec![0.0; d];
    for (j, st) in per_column {
        for g in 0..g_total {
            mean[g * d + j] = st.mean[g];
            scale[g * d + j] = st.scale[g];
        }
        impute[j] = st.impute;
    }
    (mean, scale, impute)
}

/// Population standard deviation, or 1 when the column is (numerically) constant.
pub(crate) fn std_or_one(sq: f64, count: f64, mean: f64) -> f64 {
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
