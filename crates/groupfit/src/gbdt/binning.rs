//! Quantile bins: each feature's training values of one group cut into at
//! most `max_bin` value bins of about equal row counts (every distinct value
//! its own bin when there are few), plus one bin for NaN after them.
//!
//! A value `v` falls into the first bin `b` with `v <= upper[b]`; the last
//! value bin's upper bound is `+inf`. Bounds are midpoints between adjacent
//! distinct training values, so a split "bin <= t" is the real-valued rule
//! "x <= upper[t]" that the fitted tree stores.
//!
//! A group of more than [`BIN_SAMPLE`] rows fits its bins on a sample of
//! them ([`in_bin_sample`]), as LightGBM does.
//!
//! A categorical feature is not cut into quantiles: its bins are its
//! categories ([`CatBins`], LightGBM's rule), and [`Mapper`] is either kind.

use serde::{Deserialize, Serialize};

use super::categorical::CatBins;
use super::params::GbdtConfig;

/// The bins of one feature of one group: quantiles of its values, or its
/// categories.
#[derive(Debug, Clone, PartialEq)]
pub enum Mapper {
    /// Quantile bins of numbers.
    Numeric(BinMapper),
    /// A bin per category kept, then the null bin.
    Categorical(CatBins),
}

impl Mapper {
    /// Bins before the last (NaN or null) bin.
    pub fn value_bins(&self) -> usize {
        match self {
            Mapper::Numeric(m) => m.value_bins(),
            Mapper::Categorical(c) => c.value_bins(),
        }
    }

    /// Bins including the last (NaN or null) bin.
    pub fn n_bins(&self) -> usize {
        self.value_bins() + 1
    }

    /// Whether the feature is categorical.
    pub fn is_categorical(&self) -> bool {
        matches!(self, Mapper::Categorical(_))
    }
}

/// The most rows a group's quantile bins are fitted on, about (LightGBM's
/// `bin_construct_sample_cnt`): a larger group's are fitted on a sample.
pub const BIN_SAMPLE: usize = 200_000;

/// Whether table row `row` of a group of `rows` rows is in the sample its
/// quantile bins are fitted on: every row of a group up to [`BIN_SAMPLE`]
/// rows; otherwise about `BIN_SAMPLE / rows` of them, chosen by the row
/// number alone, so every holder of a piece of the group chooses the same
/// rows, in whatever order it holds them.
pub fn in_bin_sample(row: u32, rows: usize) -> bool {
    if rows <= BIN_SAMPLE {
        return true;
    }
    let draw = (u128::from(crate::math::splitmix64(u64::from(row))) * rows as u128) >> 64;
    draw < BIN_SAMPLE as u128
}

/// How features are binned: the configs that agree on it share the bins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Binning {
    /// Most value bins per feature.
    pub max_bin: usize,
    /// Fewest rows per value bin.
    pub min_data_in_bin: usize,
}

impl Binning {
    /// The binning of a config.
    pub fn of(c: &GbdtConfig) -> Binning {
        Binning {
            max_bin: c.max_bin() as usize,
            min_data_in_bin: c.min_data_in_bin() as usize,
        }
    }

    /// The indices of the configs of `configs` with this binning.
    pub fn configs(&self, configs: &[GbdtConfig]) -> Vec<usize> {
        (0..configs.len())
            .filter(|&k| Binning::of(&configs[k]) == *self)
            .collect()
    }
}

/// Bins fixed from outside the layout (a remote worker's): per group, the
/// numeric features' mappers to use (`None`: fitted on the group's rows),
/// and the table row of each input row, which picks the rows a mapper is
/// fitted on ([`in_bin_sample`]).
#[derive(Debug, Clone, Copy)]
pub struct GivenBins<'a> {
    /// Per group, every feature's mapper, or `None`.
    pub mappers: &'a [Option<Vec<BinMapper>>],
    /// The table row of each row of the layout's input.
    pub ids: &'a [u32],
}

/// The bins of one feature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinMapper {
    /// Upper bound of each value bin; the last is `+inf`.
    pub upper: Vec<f64>,
}

/// Total order on `f64` as `u64` keys (no NaN or `-0.0` reaches it):
/// `2^63 + |v|` bits for `v >= 0`, `2^63 - |v|` bits below. A value read
/// from an `f32` keeps the low 29 bits of its key zero either way, which the
/// radix sort's skipped passes rely on.
#[inline]
fn key(v: f64) -> u64 {
    const TOP: u64 = 1 << 63;
    let b = v.to_bits();
    // Without a branch (signs are random): `TOP + |v|` or `TOP - |v|`.
    let neg = (b >> 63).wrapping_neg();
    TOP.wrapping_add(((b & !TOP) ^ neg).wrapping_sub(neg))
}

#[inline]
fn unkey(k: u64) -> f64 {
    const TOP: u64 = 1 << 63;
    f64::from_bits(if k >= TOP { k - TOP } else { TOP | (TOP - k) })
}

/// Keys from which [`sort_keys`] sorts by radix rather than by comparison.
const RADIX_MIN: usize = 4096;

/// Sorts `keys[..n]`, with `keys[n..2n]` as the radix sort's buffer.
fn sort_keys(keys: &mut [u64], n: usize) {
    let (a, buf) = keys.split_at_mut(n);
    if n < RADIX_MIN {
        a.sort_unstable();
        return;
    }
    // LSD radix sort on 11-bit digits; a digit every key shares is skipped
    // (the low bits of keys read from `f32`s).
    const BITS: usize = 11;
    const DIGITS: usize = 64usize.div_ceil(BITS);
    let mask = (1u64 << BITS) - 1;
    let mut counts = vec![[0usize; 1 << BITS]; DIGITS];
    for &k in a.iter() {
        for (p, c) in counts.iter_mut().enumerate() {
            c[((k >> (p * BITS)) & mask) as usize] += 1;
        }
    }
    let (mut src, mut dst) = (a, &mut buf[..n]);
    let mut in_buf = false;
    for (p, c) in counts.iter_mut().enumerate() {
        if c.contains(&n) {
            continue;
        }
        let mut at = 0;
        for x in c.iter_mut() {
            let count = *x;
            *x = at;
            at += count;
        }
        for &k in src.iter() {
            let digit = ((k >> (p * BITS)) & mask) as usize;
            dst[c[digit]] = k;
            c[digit] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
        in_buf = !in_buf;
    }
    if in_buf {
        dst.copy_from_slice(src);
    }
}

impl BinMapper {
    /// Bins for `values` (NaN = missing, ignored here), at most `max_bin`
    /// value bins, each holding at least `min_data_in_bin` values where the
    /// values allow (LightGBM's rule: at most `values / min_data_in_bin`
    /// bins; with few distinct values, adjacent ones merged until a bin holds
    /// that many). `keys` is scratch.
    pub fn fit(
        values: impl Iterator<Item = f64>,
        max_bin: usize,
        min_data_in_bin: usize,
        keys: &mut Vec<u64>,
    ) -> Self {
        keys.clear();
        keys.extend(values.filter(|v| !v.is_nan()).map(|v| key(v + 0.0)));
        let n = keys.len();
        keys.resize(if n < RADIX_MIN { n } else { 2 * n }, 0);
        sort_keys(keys, n);
        keys.truncate(n);
        // Distinct values with their counts.
        let mut distinct: Vec<(f64, usize)> = Vec::new();
        for &k in keys.iter() {
            match distinct.last_mut() {
                Some((v, c)) if key(*v) == k => *c += 1,
                _ => distinct.push((unkey(k), 1)),
            }
        }
        let min_data_in_bin = min_data_in_bin.max(1);
        let max_bin = max_bin.min(keys.len() / min_data_in_bin).max(1);
        let mid = |i: usize| {
            let (a, b) = (distinct[i].0, distinct[i + 1].0);
            let m = a + (b - a) / 2.0;
            // Keep a < m < = b strictly separating a from b.
            if m >= b || m < a {
                a
            } else {
                m
            }
        };
        let mut upper = Vec::new();
        if distinct.len() <= max_bin {
            let mut cur = 0usize;
            for i in 0..distinct.len().saturating_sub(1) {
                cur += distinct[i].1;
                if cur >= min_data_in_bin {
                    upper.push(mid(i));
                    cur = 0;
                }
            }
        } else {
            // Greedy equal-count bins: close a bin once it holds the mean
            // count of the rows and bins still left.
            let mut rows_left = keys.len();
            let mut bins_left = max_bin;
            let mut cur = 0usize;
            for i in 0..distinct.len() - 1 {
                cur += distinct[i].1;
                if bins_left <= 1 {
                    break;
                }
                let target = rows_left as f64 / bins_left as f64;
                // Also close early when the next value alone would overfill it.
                let next = distinct[i + 1].1 as f64;
                if cur as f64 >= target
                    || (cur as f64 + next > 1.5 * target && cur as f64 >= 0.5 * target)
                {
                    upper.push(mid(i));
                    rows_left -= cur;
                    bins_left -= 1;
                    cur = 0;
                }
            }
        }
        upper.push(f64::INFINITY);
        BinMapper { upper }
    }

    /// Number of value bins (the NaN bin is this index).
    pub fn value_bins(&self) -> usize {
        self.upper.len()
    }

    /// Bins including the NaN bin.
    pub fn n_bins(&self) -> usize {
        self.upper.len() + 1
    }

    /// The bin of `v`.
    #[inline]
    pub fn bin(&self, v: f64) -> usize {
        if v.is_nan() {
            self.upper.len()
        } else {
            self.upper.partition_point(|&u| u < v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_distinct_values_get_a_bin_each_with_midpoint_bounds() {
        let mut s = Vec::new();
        let m = BinMapper::fit([3.0, 1.0, f64::NAN, 2.0, 1.0].into_iter(), 255, 1, &mut s);
        assert_eq!(m.upper, vec![1.5, 2.5, f64::INFINITY]);
        assert_eq!(m.bin(1.0), 0);
        assert_eq!(m.bin(1.5), 0);
        assert_eq!(m.bin(1.6), 1);
        assert_eq!(m.bin(100.0), 2);
        assert_eq!(m.bin(-100.0), 0);
        assert_eq!(m.bin(f64::NAN), 3);
        assert_eq!(m.n_bins(), 4);
    }

    #[test]
    fn many_values_are_cut_into_equal_count_bins() {
        let mut s = Vec::new();
        let m = BinMapper::fit((0..1000).map(|i| i as f64), 4, 1, &mut s);
        assert_eq!(m.upper, vec![249.5, 499.5, 749.5, f64::INFINITY]);
        let m = BinMapper::fit((0..1000).map(|i| (i % 7) as f64), 255, 1, &mut s);
        assert_eq!(m.value_bins(), 7);
    }

    #[test]
    fn bins_hold_at_least_min_data_in_bin_values() {
        let mut s = Vec::new();
        // Values 1..=5 with counts 1, 1, 10, 2, 16: 1-3 fill the first bin,
        // 4 and 5 share the second.
        let v: Vec<f64> = [(1.0, 1), (2.0, 1), (3.0, 10), (4.0, 2), (5.0, 16)]
            .iter()
            .flat_map(|&(x, c)| std::iter::repeat_n(x, c))
            .collect();
        let m = BinMapper::fit(v.iter().copied(), 255, 3, &mut s);
        assert_eq!(m.upper, vec![3.5, f64::INFINITY]);
        let m = BinMapper::fit(v.iter().copied(), 255, 1, &mut s);
        assert_eq!(m.upper, vec![1.5, 2.5, 3.5, 4.5, f64::INFINITY]);
        // 30 distinct values: at most 30 / 3 = 10 bins of 3.
        let m = BinMapper::fit((0..30).map(|i| i as f64), 255, 3, &mut s);
        assert_eq!(m.value_bins(), 10);
        assert_eq!(m.upper[0], 2.5);
        // Fewer values than min_data_in_bin: one bin.
        let m = BinMapper::fit([1.0, 2.0].into_iter(), 255, 3, &mut s);
        assert_eq!(m.upper, vec![f64::INFINITY]);
    }

    #[test]
    fn keys_order_values_and_sort_like_a_comparison_sort() {
        let vals = [
            f64::NEG_INFINITY,
            -3.5,
            -1e-300,
            0.0,
            1e-300,
            2.0,
            2.5,
            f64::INFINITY,
        ];
        for w in vals.windows(2) {
            assert!(key(w[0]) < key(w[1]), "{} {}", w[0], w[1]);
        }
        for &v in &vals {
            assert_eq!(unkey(key(v)), v);
        }
        // f32 values (low key bits constant), f64 values, few distinct values.
        let mut x = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for kind in 0..3 {
            let n = RADIX_MIN + 1000;
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    let u = (next() >> 11) as f64 / (1u64 << 53) as f64 * 200.0 - 100.0;
                    match kind {
                        0 => u as f32 as f64,
                        1 => u,
                        _ => (u / 10.0).round(),
                    }
                })
                .collect();
            let mut keys: Vec<u64> = v.iter().map(|&v| key(v + 0.0)).collect();
            let mut want = keys.clone();
            want.sort_unstable();
            keys.resize(2 * n, 0);
            sort_keys(&mut keys, n);
            assert_eq!(&keys[..n], &want[..], "kind {kind}");
        }
    }

    #[test]
    fn all_missing_or_constant_is_one_value_bin() {
        let mut s = Vec::new();
        let m = BinMapper::fit([f64::NAN, f64::NAN].into_iter(), 255, 1, &mut s);
        assert_eq!(m.upper, vec![f64::INFINITY]);
        let m = BinMapper::fit([-0.0, 0.0].into_iter(), 255, 1, &mut s);
        assert_eq!(m.upper, vec![f64::INFINITY]);
    }
}
