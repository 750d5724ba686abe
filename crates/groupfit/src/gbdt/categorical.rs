//! Categorical features as LightGBM treats them: their bins, and the best
//! split of a leaf on one of them.
//!
//! A categorical feature reaches the family as codes (`0..levels`, negative
//! for null or unseen; see [`crate::data::categorical`]). Its bins on a
//! group's training rows are categories, not quantiles ([`CatBins`]): one
//! bin per category kept, most rows first, then one *null bin* holding
//! nulls, unseen values and the categories not kept.
//!
//! A split sends a set of category bins left and everything else right,
//! the null bin always right ([`best_cat_split`]):
//!
//! * *one-vs-rest* when the feature has at most `max_cat_to_onehot` bins
//!   (the null bin counted, as LightGBM counts it): each category alone
//!   against the rest, with the usual gain;
//! * otherwise *sorted*: the categories with at least `cat_smooth` rows
//!   (estimated from the hessian) are sorted by `G / (H + cat_smooth)`, and
//!   the first `1..=max_cat_threshold` of them, from either end, are tried
//!   as the left set. `cat_l2` is added to the L2 penalty of both children
//!   (in the gain and in their values, not in the parent's term). A
//!   threshold is tried only once `min_data_per_group` rows have been added
//!   since the last one tried, and the right side keeps at least
//!   `min_data_per_group` rows.
//!
//! Both follow LightGBM's `FindBestThresholdCategoricalInner`, with the
//! same checks in the same order; ties keep the first (lower bin order,
//! forward before backward).

use super::histogram::STRIDE;
use super::split::{Rules, Split, Sums};

/// The most category bins of one feature: bins of a categorical feature are
/// stored as `u16`, and the null bin comes after the categories.
pub const MAX_CAT_BINS: usize = u16::MAX as usize;

/// The category bins of one categorical feature of one group: bin `b <
/// codes.len()` holds the code `codes[b]`; the last bin, `codes.len()`,
/// holds nulls, unseen values and the categories not kept.
#[derive(Debug, Clone, PartialEq)]
pub struct CatBins {
    /// The code of each category bin, in bin order.
    pub codes: Vec<u32>,
}

impl CatBins {
    /// The bins of `values` (codes of a feature with `levels` levels; negative
    /// or NaN: null), by LightGBM's rule. Categories are ordered by their row
    /// count, most first (ties: lower code first), and kept in that order
    /// while either they cover less than 99% of the non-null rows or there
    /// are fewer than `max_bin` bins (the null bin counted); a category of
    /// fewer than `min_data_in_bin` rows ends the list, unless it is one of
    /// the first two. At most [`MAX_CAT_BINS`] categories are kept. `counts`
    /// is scratch.
    pub fn fit(
        values: &[f64],
        levels: usize,
        max_bin: usize,
        min_data_in_bin: usize,
        counts: &mut Vec<u32>,
    ) -> CatBins {
        counts.resize(levels, 0);
        let mut seen: Vec<u32> = Vec::new();
        let mut nulls = 0usize;
        for &v in values {
            match code(v, levels) {
                Some(c) => {
                    if counts[c] == 0 {
                        seen.push(c as u32);
                    }
                    counts[c] += 1;
                }
                None => nulls += 1,
            }
        }
        // (rows, code), most rows first, then the lower code.
        let mut cats: Vec<(u32, u32)> = seen.iter().map(|&c| (counts[c as usize], c)).collect();
        for &c in &seen {
            counts[c as usize] = 0;
        }
        cats.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let rest = values.len() - nulls;
        let mut codes = Vec::new();
        if rest > 0 {
            // LightGBM computes 99% of the rows in `float`, rounded half up.
            let cut = ((rest as f32 * 0.99f32) as f64 + 0.5) as usize;
            let max_bin = max_bin.min(cats.len() + usize::from(nulls > 0));
            let (mut used, mut bins) = (0usize, 1usize);
            for (i, &(count, c)) in cats.iter().enumerate() {
                if !(used < cut || bins < max_bin) || codes.len() == MAX_CAT_BINS {
                    break;
                }
                if (count as usize) < min_data_in_bin && i > 1 {
                    break;
                }
                codes.push(c);
                used += count as usize;
                bins += 1;
            }
        }
        CatBins { codes }
    }

    /// Category bins (the null bin is this index).
    pub fn value_bins(&self) -> usize {
        self.codes.len()
    }

    /// The bin of each code `0..levels` into `table` (the null bin for the
    /// categories not kept).
    pub fn table(&self, levels: usize, table: &mut Vec<u16>) {
        table.clear();
        table.resize(levels, self.codes.len() as u16);
        for (b, &c) in self.codes.iter().enumerate() {
            table[c as usize] = b as u16;
        }
    }

    /// The bin of value `v` under `table` (from [`CatBins::table`]).
    #[inline]
    pub fn bin(&self, table: &[u16], v: f64) -> u16 {
        code(v, table.len()).map_or(self.codes.len() as u16, |c| table[c])
    }
}

/// The code of a value: `None` for a null or unseen value (negative, NaN)
/// or a code past the levels.
#[inline]
fn code(v: f64, levels: usize) -> Option<usize> {
    (v >= 0.0 && v < levels as f64).then_some(v as usize)
}

/// The categorical split parameters of one config (LightGBM's names).
#[derive(Debug, Clone, Copy)]
pub struct CatRules {
    /// Most bins (null bin counted) of a feature split one-vs-rest.
    pub max_cat_to_onehot: usize,
    /// Added to each category's hessian in the sort; fewest rows of a
    /// category in the sort.
    pub cat_smooth: f64,
    /// Added to the children's L2 penalty of a sorted split.
    pub cat_l2: f64,
    /// Most categories on the left of a sorted split.
    pub max_cat_threshold: usize,
    /// Fewest rows between tried thresholds, and on the right side.
    pub min_data_per_group: f64,
}

/// The best split of a leaf with sums `total` (`total.n` its rows) on the
/// categorical `feature` whose histogram slice is `h` (its category bins,
/// then its null bin), if any has positive gain. See the module docs.
pub fn best_cat_split(
    h: &[f64],
    feature: usize,
    total: Sums,
    rules: &Rules,
    cat: &CatRules,
) -> Option<Split> {
    let nb = h.len() / STRIDE;
    let k = nb.saturating_sub(1); // category bins
    if k == 0 || total.n < 2.0 * rules.min_data {
        return None;
    }
    let at = |t: usize| (h[STRIDE * t], h[STRIDE * t + 1]);
    let cnt_factor = total.n / total.h;
    // LightGBM's `RoundInt(hessian * cnt_factor)`: a truncation (no libm
    // `floor` call; the same for the non-negative values it gets).
    let est = |hess: f64| (hess * cnt_factor + 0.5) as i64 as f64;
    // The parent's term uses `lambda_l2` alone, also for a sorted split.
    let parent = rules.gain(total);
    let mut best_gain = parent;
    // The left side and its bins.
    let mut best: Option<(Sums, Vec<u32>)> = None;
    let one_hot = nb <= cat.max_cat_to_onehot;
    let extra_l2 = if one_hot { 0.0 } else { cat.cat_l2 };
    if one_hot {
        for t in 0..k {
            let (g, hess) = at(t);
            let n = est(hess);
            if n < rules.min_data || hess < rules.min_hess {
                continue;
            }
            let other = Sums {
                g: total.g - g,
                h: total.h - hess,
                n: total.n - n,
            };
            if other.n < rules.min_data || other.h < rules.min_hess {
                continue;
            }
            let l = Sums { g, h: hess, n };
            let gain = rules.gain(other) + rules.gain(l);
            if gain > best_gain {
                best_gain = gain;
                best = Some((l, vec![t as u32]));
            }
        }
    } else {
        // (G / (H + cat_smooth), bin) of the categories with rows enough,
        // sorted by the ratio; a stable sort, so equal ratios keep the bin
        // order (`+ 0.0`: -0.0 sorts as 0.0, as `<` compares them).
        let mut keyed: Vec<(f64, u32)> = (0..k)
            .filter_map(|t| {
                let (g, hess) = at(t);
                (est(hess) >= cat.cat_smooth).then(|| (g / (hess + cat.cat_smooth) + 0.0, t as u32))
            })
            .collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let used: Vec<u32> = keyed.into_iter().map(|(_, t)| t).collect();
        let sorted = Rules {
            lambda: rules.lambda + cat.cat_l2,
            ..*rules
        };
        let max_num_cat = cat.max_cat_threshold.min(used.len().div_ceil(2));
        let u = used.len();
        let mut best_at: Option<(usize, bool)> = None;
        for forward in [true, false] {
            let mut l = Sums::default();
            let mut since_tried = 0.0;
            for i in 0..u.min(max_num_cat) {
                let t = used[if forward { i } else { u - 1 - i }] as usize;
                let (g, hess) = at(t);
                let n = est(hess);
                l.g += g;
                l.h += hess;
                l.n += n;
                since_tried += n;
                if l.n < rules.min_data || l.h < rules.min_hess {
                    continue;
                }
                let rn = total.n - l.n;
                if rn < rules.min_data || rn < cat.min_data_per_group {
                    break;
                }
                let rh = total.h - l.h;
                if rh < rules.min_hess {
                    break;
                }
                if since_tried < cat.min_data_per_group {
                    continue;
                }
                since_tried = 0.0;
                let r = Sums {
                    g: total.g - l.g,
                    h: rh,
                    n: rn,
                };
                let gain = sorted.gain(l) + sorted.gain(r);
                if gain > best_gain {
                    best_gain = gain;
                    best_at = Some((i, forward));
                    best = Some((l, Vec::new()));
                }
            }
        }
        if let (Some((i, forward)), Some((_, bins))) = (best_at, best.as_mut()) {
            *bins = if forward {
                used[..=i].to_vec()
            } else {
                used[u - 1 - i..].iter().rev().copied().collect()
            };
        }
    }
    let (left, left_bins) = best?;
    Some(Split {
        feature,
        bin: 0,
        default_left: false,
        gain: best_gain - parent,
        left,
        right: Sums {
            g: total.g - left.g,
            h: total.h - left.h,
            n: total.n - left.n,
        },
        left_bins,
        extra_l2,
    })
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

    fn cat(max_cat_to_onehot: usize, cat_smooth: f64, cat_l2: f64, per_group: f64) -> CatRules {
        CatRules {
            max_cat_to_onehot,
            cat_smooth,
            cat_l2,
            max_cat_threshold: 32,
            min_data_per_group: per_group,
        }
    }

    /// Sums of a histogram slice, `n` its rows (squared error: hessian 1 a row).
    fn total(h: &[f64]) -> Sums {
        let mut s = Sums::default();
        for b in h.chunks(2) {
            s.g += b[0];
            s.h += b[1];
        }
        s.n = s.h;
        s
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    // Five categories and the null bin, one row per unit of hessian:
    //   bin:  0       1      2       3      4      null
    //   G/H: -4/2    3/1   -1/1     2/2    0/2    6/2
    // Total (6, 10): parent term 36/10 = 3.6.
    const FIVE: [f64; 12] = [-4.0, 2.0, 3.0, 1.0, -1.0, 1.0, 2.0, 2.0, 0.0, 2.0, 6.0, 2.0];

    #[test]
    fn sorted_split_by_hand() {
        // cat_smooth 0: every bin is sorted, by G/H: 0 (-2), 2 (-1), 4 (0),
        // 3 (1), 1 (3); at most (5 + 1) / 2 = 3 on the left; L2 = 0 + 1.
        // Forward:  {0}: 16/3 + 100/9 = 16.44; {0,2}: 25/4 + 121/8 = 21.375;
        //           {0,2,4}: 25/6 + 121/6 = 24.33  <- best
        // Backward: {1}: 9/2 + 9/10 = 5.4; {1,3}: 25/4 + 1/8; {1,3,4}: 26/6.
        let t = total(&FIVE);
        let s = best_cat_split(&FIVE, 7, t, &rules(1.0), &cat(4, 0.0, 1.0, 1.0)).unwrap();
        assert_eq!(s.feature, 7);
        assert_eq!(s.left_bins, vec![0, 2, 4]);
        assert!(close(s.gain, 146.0 / 6.0 - 3.6), "{}", s.gain);
        assert_eq!((s.left.g, s.left.h, s.left.n), (-5.0, 5.0, 5.0));
        assert_eq!((s.right.g, s.right.h), (11.0, 5.0), "the null bin is right");
        assert!(!s.default_left);
        // The children's values use lambda_l2 + cat_l2: -(-5) / (5 + 1).
        assert_eq!(s.extra_l2, 1.0);

        // min_data_per_group 3: a threshold is tried once 3 rows were added
        // since the last one: forward {0,2} (21.375), backward {1,3} (6.375).
        let s = best_cat_split(&FIVE, 0, t, &rules(1.0), &cat(4, 0.0, 1.0, 3.0)).unwrap();
        assert_eq!(s.left_bins, vec![0, 2]);
        assert!(close(s.gain, 21.375 - 3.6));

        // max_cat_threshold 1: one category on the left: {0}.
        let one = CatRules {
            max_cat_threshold: 1,
            ..cat(4, 0.0, 1.0, 1.0)
        };
        let s = best_cat_split(&FIVE, 0, t, &rules(1.0), &one).unwrap();
        assert_eq!(s.left_bins, vec![0]);
        assert!(close(s.gain, 16.0 / 3.0 + 100.0 / 9.0 - 3.6));
    }

    #[test]
    fn cat_smooth_smooths_the_order_and_drops_small_categories() {
        // cat_smooth 2: only bins of >= 2 rows are sorted (0, 3, 4), by
        // G / (H + 2): 0 (-1), 4 (0), 3 (0.5); at most 2 on the left; no
        // cat_l2. Forward {0}: 16/2 + 100/8 = 20.5; {0,4}: 16/4 + 100/6 =
        // 20.67  <- best. Backward {3}: 4/2 + 16/8; {3,4}: 4/4 + 16/6.
        let t = total(&FIVE);
        let s = best_cat_split(&FIVE, 0, t, &rules(1.0), &cat(4, 2.0, 0.0, 1.0)).unwrap();
        assert_eq!(s.left_bins, vec![0, 4]);
        assert!(close(s.gain, 4.0 + 100.0 / 6.0 - 3.6));
        // The default cat_smooth (10) leaves no category of these few rows.
        assert!(best_cat_split(&FIVE, 0, t, &rules(1.0), &cat(4, 10.0, 0.0, 1.0)).is_none());
    }

    #[test]
    fn a_backward_set_lists_its_bins_from_the_end() {
        // Two categories that pull up (bins 1 and 3, G/H = +5) and three
        // that do not: the set from the top end of the order wins.
        let h = [
            0.0, 2.0, 10.0, 2.0, -1.0, 2.0, 10.0, 2.0, 0.0, 2.0, 0.0, 2.0,
        ];
        let t = total(&h);
        let s = best_cat_split(&h, 0, t, &rules(1.0), &cat(4, 0.0, 0.0, 1.0)).unwrap();
        // Sorted: 2 (-0.5), 0 (0), 4 (0), 1 (5), 3 (5); backward from 3.
        assert_eq!(s.left_bins, vec![3, 1]);
        assert_eq!((s.left.g, s.left.h), (20.0, 4.0));
    }

    #[test]
    fn one_vs_rest_for_few_categories() {
        // Three categories and the null bin (4 bins <= max_cat_to_onehot 4):
        //   b0 (-3, 3): 9/3 + 9/7 = 4.29; b1 (1, 2): 1/2 + 1/8 = 0.625;
        //   b2 (4, 4): 16/4 + 16/6 = 6.67  <- best. Parent term 0.
        let h = [-3.0, 3.0, 1.0, 2.0, 4.0, 4.0, -2.0, 1.0];
        let t = total(&h);
        let s = best_cat_split(&h, 0, t, &rules(1.0), &cat(4, 10.0, 10.0, 100.0)).unwrap();
        assert_eq!(s.left_bins, vec![2]);
        assert!(close(s.gain, 4.0 + 16.0 / 6.0));
        assert_eq!(s.extra_l2, 0.0, "one-vs-rest: no cat_l2");
        // min_data_in_leaf 4: b0 (3 rows) and b1 (2) may not be a side.
        let s = best_cat_split(&h, 0, t, &rules(4.0), &cat(4, 10.0, 10.0, 100.0)).unwrap();
        assert_eq!(s.left_bins, vec![2]);
        assert!(best_cat_split(&h, 0, t, &rules(5.0), &cat(4, 10.0, 10.0, 100.0)).is_none());
        // Four categories are five bins: sorted, as LightGBM counts them.
        let h5 = [-3.0, 3.0, 1.0, 2.0, 4.0, 4.0, 0.0, 1.0, -2.0, 1.0];
        let s = best_cat_split(&h5, 0, total(&h5), &rules(1.0), &cat(4, 0.0, 0.0, 1.0)).unwrap();
        assert_eq!(s.extra_l2, 0.0);
        assert!(
            s.left_bins.len() <= 2,
            "sorted: at most (4 + 1) / 2 on the left"
        );
    }

    #[test]
    fn the_null_bin_never_goes_left() {
        // The null bin alone would be the best side (G = -20), but it is
        // not a category: the split is among the categories, and its rows
        // stay on the right.
        let h = [1.0, 2.0, -1.0, 2.0, -20.0, 4.0];
        let t = total(&h);
        for c in [cat(4, 0.0, 0.0, 1.0), cat(2, 0.0, 0.0, 1.0)] {
            let s = best_cat_split(&h, 0, t, &rules(1.0), &c).unwrap();
            assert!(!s.left_bins.contains(&2), "{:?}", s.left_bins);
            assert!(s.right.g <= -20.0);
        }
    }

    #[test]
    fn bins_keep_categories_by_count_as_lightgbm() {
        let mut counts = Vec::new();
        // Codes with counts 0:5, 1:2, 2:5, 3:1, 4:9; two nulls and an unseen.
        let mut v: Vec<f64> = Vec::new();
        for (c, n) in [(0, 5), (1, 2), (2, 5), (3, 1), (4, 9)] {
            v.extend(std::iter::repeat_n(c as f64, n));
        }
        v.extend([-1.0, -1.0, -2.0, f64::NAN]);
        // Most rows first, ties by code: 4, 0, 2; then 1 (2 rows < 3) ends
        // the list (it is the fourth).
        let b = CatBins::fit(&v, 5, 255, 3, &mut counts);
        assert_eq!(b.codes, vec![4, 0, 2]);
        let mut table = Vec::new();
        b.table(5, &mut table);
        assert_eq!(table, vec![1, 3, 2, 3, 0]);
        assert_eq!(b.bin(&table, 4.0), 0);
        for null in [-1.0, -2.0, f64::NAN, 1.0, 3.0] {
            assert_eq!(b.bin(&table, null), 3, "{null}");
        }
        // min_data_in_bin 1: every category.
        let b = CatBins::fit(&v, 5, 255, 1, &mut counts);
        assert_eq!(b.codes, vec![4, 0, 2, 1, 3]);
        // The first two are kept however few their rows.
        let b = CatBins::fit(&[0.0, 1.0, 2.0], 3, 255, 3, &mut counts);
        assert_eq!(b.codes, vec![0, 1]);
        // 99% of 200 rows is 198. Three categories and no null: the bins
        // (the null bin counted) reach max_bin = min(255, 3) once two are
        // kept, and those cover 198 rows, so the third joins the null bin.
        let rows = |spec: &[(f64, usize)]| -> Vec<f64> {
            spec.iter()
                .flat_map(|&(c, n)| std::iter::repeat_n(c, n))
                .collect()
        };
        let w = rows(&[(0.0, 196), (1.0, 2), (2.0, 2)]);
        assert_eq!(CatBins::fit(&w, 3, 255, 1, &mut counts).codes, vec![0, 1]);
        // While the first two cover less than 99%, the third is kept too.
        let w = rows(&[(0.0, 190), (1.0, 5), (2.0, 5)]);
        assert_eq!(
            CatBins::fit(&w, 3, 255, 1, &mut counts).codes,
            vec![0, 1, 2]
        );
        // With a null, max_bin is 4: the third is kept.
        let w = rows(&[(0.0, 196), (1.0, 2), (2.0, 2), (-1.0, 1)]);
        assert_eq!(
            CatBins::fit(&w, 3, 255, 1, &mut counts).codes,
            vec![0, 1, 2]
        );
        // max_bin 2: one category, once it covers 99%.
        let w = rows(&[(0.0, 198), (1.0, 2)]);
        assert_eq!(CatBins::fit(&w, 2, 2, 1, &mut counts).codes, vec![0]);
        // Only nulls: no category.
        assert!(CatBins::fit(&[-1.0, -1.0], 3, 255, 3, &mut counts)
            .codes
            .is_empty());
        assert!(counts.iter().all(|&c| c == 0), "scratch left zeroed");
    }
}
