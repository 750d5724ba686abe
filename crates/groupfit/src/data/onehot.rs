//! One-hot encoding of categorical features, per group (the linear and MLP
//! families).
//!
//! Each (pseudo-)group encodes the categories seen in its own training rows
//! ([`OneHot`]): the `max_cat` most frequent ones with at least
//! `min_cat_rows` rows get a column each, in code order (null, code
//! [`NULL_CODE`], is a category and comes first); the other categories seen
//! in the group share one "other" column, after them. A code the group did
//! not see (an unseen value, or a level only other groups have) gets no
//! column: all zeros. Frequency ties are broken by code, so the encoding is
//! deterministic and depends on the group's rows only.
//!
//! A [`OneHotPlan`] holds every group's encoding of every categorical
//! feature and the columns of a layout: the numeric features first, then
//! one block per categorical feature, as wide as the widest group's
//! encoding. A group's unused columns in a block are zero.

use serde::{Deserialize, Serialize};

use super::categorical::{FeatureKind, NULL_CODE};
use super::Column;
use crate::error::{GroupfitError, Result};

/// The default `max_cat`: most categories of a feature with a column of
/// their own in one group.
pub const DEFAULT_MAX_CAT: usize = 64;
/// The default `min_cat_rows`: fewest training rows of a category with a
/// column of its own.
pub const DEFAULT_MIN_CAT_ROWS: usize = 1;

/// Which categories get a column of their own (the families' `max_cat` and
/// `min_cat_rows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cap {
    /// Most categories with a column of their own.
    pub max_cat: usize,
    /// Fewest rows of a category with a column of its own.
    pub min_cat_rows: usize,
}

impl Cap {
    /// The parameter names: `max_cat`, `min_cat_rows`.
    pub const NAMES: [&'static str; 2] = ["max_cat", "min_cat_rows"];

    /// The cap with parameter `name` (one of [`Cap::NAMES`]) set to
    /// `value`, a whole number of at least 1.
    pub fn set(self, name: &str, value: f64) -> Result<Cap> {
        if value.fract() != 0.0 || value < 1.0 || value > u32::MAX as f64 {
            return Err(GroupfitError::param(
                name,
                format!("{value} is not a positive integer"),
            ));
        }
        let n = value as usize;
        Ok(match name {
            "max_cat" => Cap { max_cat: n, ..self },
            "min_cat_rows" => Cap {
                min_cat_rows: n,
                ..self
            },
            other => return Err(GroupfitError::param(other, "not a one-hot parameter")),
        })
    }

    /// Checks both counts are at least 1.
    pub fn check(self) -> Result<Cap> {
        if self.max_cat == 0 {
            return Err(GroupfitError::param("max_cat", "must be at least 1"));
        }
        if self.min_cat_rows == 0 {
            return Err(GroupfitError::param("min_cat_rows", "must be at least 1"));
        }
        Ok(self)
    }
}

impl Default for Cap {
    fn default() -> Self {
        Cap {
            max_cat: DEFAULT_MAX_CAT,
            min_cat_rows: DEFAULT_MIN_CAT_ROWS,
        }
    }
}

/// No column: the table value of a code without one.
const NONE: u32 = u32::MAX;

/// One group's one-hot encoding of one categorical feature, as models store it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OneHot {
    /// The feature (index in the bundle's feature order).
    pub feature: usize,
    /// The codes with a column of their own, in column order (ascending;
    /// [`NULL_CODE`] for null).
    #[serde(with = "crate::codec::f64s")]
    pub codes: Vec<f64>,
    /// The codes seen in training that share the "other" column (ascending);
    /// empty: no "other" column.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "crate::codec::f64s"
    )]
    pub other: Vec<f64>,
}

impl OneHot {
    /// The encoding of the categories `counts` (code, rows), each code once.
    pub fn from_counts(feature: usize, counts: &mut [(f64, u64)], cap: Cap) -> OneHot {
        // Most frequent first; ties by code.
        counts.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.total_cmp(&b.0)));
        let kept = counts
            .iter()
            .take(cap.max_cat)
            .take_while(|c| c.1 >= cap.min_cat_rows as u64)
            .count();
        let mut codes: Vec<f64> = counts[..kept].iter().map(|c| c.0).collect();
        let mut other: Vec<f64> = counts[kept..].iter().map(|c| c.0).collect();
        codes.sort_unstable_by(f64::total_cmp);
        other.sort_unstable_by(f64::total_cmp);
        OneHot {
            feature,
            codes,
            other,
        }
    }

    /// Columns: one per code, plus "other" when a category was folded.
    pub fn width(&self) -> usize {
        self.codes.len() + usize::from(!self.other.is_empty())
    }

    /// The column of `code`; `None` for a code the group did not see.
    pub fn column(&self, code: f64) -> Option<usize> {
        if let Ok(i) = self.codes.binary_search_by(|c| c.total_cmp(&code)) {
            return Some(i);
        }
        self.other
            .binary_search_by(|c| c.total_cmp(&code))
            .ok()
            .map(|_| self.codes.len())
    }

    /// Writes the column of every code into `table` (index `code + 1`,
    /// grown as needed; `u32::MAX`: none). [`OneHot::clear`] undoes it.
    pub fn fill(&self, table: &mut Vec<u32>) {
        let top = self
            .codes
            .iter()
            .chain(&self.other)
            .fold(-1.0f64, |m, &c| m.max(c));
        let len = top as usize + 2;
        if table.len() < len {
            table.resize(len, NONE);
        }
        for (i, &c) in self.codes.iter().enumerate() {
            table[(c + 1.0) as usize] = i as u32;
        }
        let o = self.codes.len() as u32;
        for &c in &self.other {
            table[(c + 1.0) as usize] = o;
        }
    }

    /// Resets the entries [`OneHot::fill`] wrote.
    pub fn clear(&self, table: &mut [u32]) {
        for &c in self.codes.iter().chain(&self.other) {
            table[(c + 1.0) as usize] = NONE;
        }
    }

    /// Checks a model file's encoding against `d` features: a feature in
    /// range, whole codes from [`NULL_CODE`] up, ascending, and no code both
    /// kept and folded.
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        if self.feature >= d {
            return Err(format!("one-hot feature {} of {d} features", self.feature));
        }
        for list in [&self.codes, &self.other] {
            let ok = list
                .iter()
                .all(|&c| c >= NULL_CODE && c.fract() == 0.0 && c < u32::MAX as f64)
                && list.windows(2).all(|w| w[0] < w[1]);
            if !ok {
                return Err(format!(
                    "feature {}: one-hot codes are not ascending whole codes",
                    self.feature
                ));
            }
        }
        if self
            .other
            .iter()
            .any(|c| self.column(*c) != Some(self.codes.len()))
        {
            return Err(format!(
                "feature {}: a code both kept and in the other column",
                self.feature
            ));
        }
        Ok(())
    }
}

/// The column of code `c` in a [`OneHot::fill`] table, or `u32::MAX`.
#[inline]
pub fn lookup(table: &[u32], c: f64) -> u32 {
    // Codes below `NULL_CODE` (unseen) and past the table have no column.
    if c < NULL_CODE {
        return NONE;
    }
    table.get((c + 1.0) as usize).copied().unwrap_or(NONE)
}

/// One categorical feature's block in a layout.
#[derive(Debug, Clone, PartialEq)]
pub struct CatBlock {
    /// The feature.
    pub feature: usize,
    /// Its first layout column.
    pub base: usize,
    /// Its columns (the widest group's encoding).
    pub width: usize,
}

/// Every (pseudo-)group's encoding of every categorical feature, and the
/// layout's columns (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct OneHotPlan {
    /// The numeric features, in layout (and feature) order.
    pub numeric: Vec<usize>,
    /// The categorical features' blocks, in feature order.
    pub blocks: Vec<CatBlock>,
    /// `maps[b][g]`: group `g`'s encoding of block `b`'s feature.
    maps: Vec<Vec<OneHot>>,
}

/// What [`OneHotPlan::build`] reads.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// Feature columns over every row of the table (codes for categorical ones).
    pub columns: &'a [Column],
    /// What each feature is.
    pub kinds: &'a [FeatureKind],
    /// Training rows.
    pub rows: &'a [u32],
    /// Group of each training row.
    pub group_of: &'a [u32],
    /// Groups; group `n_groups` is the global pseudo-group of every row.
    pub n_groups: usize,
    /// Which categories get columns.
    pub cap: Cap,
    /// Threads (one categorical feature each).
    pub threads: usize,
}

/// The grid's configs grouped by their [`Cap`] (first appearance order):
/// configs with different caps encode differently, so each group of them
/// gets its own layout.
pub fn parts(caps: &[Cap]) -> Vec<(Cap, Vec<usize>)> {
    let mut out: Vec<(Cap, Vec<usize>)> = Vec::new();
    for (k, &c) in caps.iter().enumerate() {
        match out.iter_mut().find(|p| p.0 == c) {
            Some(p) => p.1.push(k),
            None => out.push((c, vec![k])),
        }
    }
    out
}

/// Whether any feature is categorical.
pub fn any_categorical(kinds: &[FeatureKind]) -> bool {
    kinds.iter().any(|k| k.levels().is_some())
}

/// A grid in parts that share a layout: one part, unless there are
/// categorical features and the configs' caps (`max_cat`, `min_cat_rows`)
/// differ; each part's cap (`None`: no categorical features) and configs.
pub fn layout_parts(
    kinds: &[FeatureKind],
    caps: impl Iterator<Item = Cap>,
) -> Vec<(Option<Cap>, Vec<usize>)> {
    let caps: Vec<Cap> = caps.collect();
    if !any_categorical(kinds) {
        return vec![(None, (0..caps.len()).collect())];
    }
    parts(&caps)
        .into_iter()
        .map(|(c, ks)| (Some(c), ks))
        .collect()
}

impl OneHotPlan {
    /// Counts every group's categories (and the global pseudo-group's, over
    /// every training row) and encodes them.
    pub fn build(input: PlanInput<'_>) -> OneHotPlan {
        let ng = input.n_groups;
        let numeric: Vec<usize> = (0..input.kinds.len())
            .filter(|&j| input.kinds[j].levels().is_none())
            .collect();
        let cats: Vec<(usize, usize)> = (0..input.kinds.len())
            .filter_map(|j| input.kinds[j].levels().map(|l| (j, l)))
            .collect();
        // Group-sorted training rows (a counting sort).
        let counts = super::rows_per_group(input.group_of, ng);
        let mut start = vec![0usize; ng + 1];
        for g in 0..ng {
            start[g + 1] = start[g] + counts[g];
        }
        let mut cursor = start.clone();
        let mut sorted = vec![0u32; input.rows.len()];
        for (k, &r) in input.rows.iter().enumerate() {
            let g = input.group_of[k] as usize;
            sorted[cursor[g]] = r;
            cursor[g] += 1;
        }
        let encode = |&(j, levels): &(usize, usize)| -> Vec<OneHot> {
            crate::with_values!(input.columns[j], |v| encode_feature(
                v, j, levels, &sorted, &start, input.cap
            ))
        };
        let maps: Vec<Vec<OneHot>> = if input.threads <= 1 || cats.len() < 2 {
            cats.iter().map(encode).collect()
        } else {
            let t = input.threads.min(cats.len());
            let mut parts: Vec<(usize, Vec<OneHot>)> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..t)
                    .map(|w| {
                        let (cats, encode) = (&cats, &encode);
                        s.spawn(move || {
                            (w..cats.len())
                                .step_by(t)
                                .map(|i| (i, encode(&cats[i])))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                hs.into_iter()
                    .flat_map(|h| h.join().expect("one-hot thread panicked"))
                    .collect()
            });
            parts.sort_by_key(|p| p.0);
            parts.into_iter().map(|p| p.1).collect()
        };
        let mut base = numeric.len();
        let blocks = cats
            .iter()
            .zip(&maps)
            .map(|(&(feature, _), m)| {
                let width = m.iter().map(OneHot::width).max().unwrap_or(0);
                let b = CatBlock {
                    feature,
                    base,
                    width,
                };
                base += width;
                b
            })
            .collect();
        OneHotPlan {
            numeric,
            blocks,
            maps,
        }
    }

    /// Layout columns: the numeric features, then every block.
    pub fn width(&self) -> usize {
        self.numeric.len() + self.blocks.iter().map(|b| b.width).sum::<usize>()
    }

    /// Group `g`'s encoding of block `b`'s feature.
    pub fn map(&self, b: usize, g: usize) -> &OneHot {
        &self.maps[b][g]
    }

    /// The layout columns group `g` uses, ascending: the numeric ones, then
    /// the first columns of each block (as many as its encoding's width).
    pub fn columns(&self, g: usize) -> Vec<usize> {
        let mut c: Vec<usize> = (0..self.numeric.len()).collect();
        for (b, blk) in self.blocks.iter().enumerate() {
            c.extend(blk.base..blk.base + self.maps[b][g].width());
        }
        c
    }
}

/// Every group's encoding of one feature (codes `v`, `levels` levels),
/// then the global pseudo-group's: one dense count table reused group
/// after group (only the entries a group touched are read and reset).
fn encode_feature<T: Copy + Into<f64>>(
    v: &[T],
    feature: usize,
    levels: usize,
    sorted: &[u32],
    start: &[usize],
    cap: Cap,
) -> Vec<OneHot> {
    let ng = start.len() - 1;
    let mut count = vec![0u64; levels + 1];
    let mut total = vec![0u64; levels + 1];
    let mut touched: Vec<usize> = Vec::new();
    let mut pairs: Vec<(f64, u64)> = Vec::new();
    let mut maps = Vec::with_capacity(ng + 1);
    for g in 0..ng {
        for &r in &sorted[start[g]..start[g + 1]] {
            let c: f64 = v[r as usize].into();
            // Training rows hold dictionary codes; anything else has no column.
            if c < NULL_CODE || c >= levels as f64 {
                continue;
            }
            let i = (c + 1.0) as usize;
            if count[i] == 0 {
                touched.push(i);
            }
            count[i] += 1;
        }
        pairs.clear();
        for &i in &touched {
            pairs.push((i as f64 - 1.0, count[i]));
            total[i] += count[i];
            count[i] = 0;
        }
        touched.clear();
        maps.push(OneHot::from_counts(feature, &mut pairs, cap));
    }
    pairs.clear();
    pairs.extend(
        total
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (i as f64 - 1.0, n)),
    );
    maps.push(OneHot::from_counts(feature, &mut pairs, cap));
    maps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(max_cat: usize, min_cat_rows: usize) -> Cap {
        Cap {
            max_cat,
            min_cat_rows,
        }
    }

    #[test]
    fn the_most_frequent_categories_get_columns_in_code_order() {
        // code: rows -- 0: 5, 1: 2, 2: 5, 3: 1, null: 3
        let mut c = vec![(0.0, 5), (1.0, 2), (2.0, 5), (3.0, 1), (NULL_CODE, 3)];
        let m = OneHot::from_counts(7, &mut c, cap(64, 1));
        assert_eq!(m.codes, vec![NULL_CODE, 0.0, 1.0, 2.0, 3.0]);
        assert!(m.other.is_empty());
        assert_eq!(m.width(), 5);
        assert_eq!(m.column(NULL_CODE), Some(0));
        assert_eq!(m.column(3.0), Some(4));
        assert_eq!(m.column(4.0), None);
        // The cap: 0 and 2 (5 rows), then null (3); 1 and 3 share "other".
        let m = OneHot::from_counts(7, &mut c, cap(3, 1));
        assert_eq!(m.codes, vec![NULL_CODE, 0.0, 2.0]);
        assert_eq!(m.other, vec![1.0, 3.0]);
        assert_eq!(m.width(), 4);
        assert_eq!((m.column(1.0), m.column(3.0)), (Some(3), Some(3)));
        // A tie at the cap goes to the lower code: 0 over 2.
        let m = OneHot::from_counts(7, &mut c, cap(1, 1));
        assert_eq!(
            (m.codes.clone(), m.other.clone()),
            (vec![0.0], vec![NULL_CODE, 1.0, 2.0, 3.0])
        );
        // min_cat_rows 3: 1 (2 rows) and 3 (1 row) fold.
        let m = OneHot::from_counts(7, &mut c, cap(64, 3));
        assert_eq!(m.codes, vec![NULL_CODE, 0.0, 2.0]);
        assert_eq!(m.other, vec![1.0, 3.0]);
        // Everything rarer than min_cat_rows: only "other".
        let m = OneHot::from_counts(7, &mut c, cap(64, 6));
        assert!(m.codes.is_empty());
        assert_eq!((m.width(), m.column(NULL_CODE)), (1, Some(0)));
    }

    #[test]
    fn tables_map_codes_to_columns_and_clear() {
        let m = OneHot {
            feature: 0,
            codes: vec![NULL_CODE, 2.0],
            other: vec![0.0, 5.0],
        };
        let mut t = Vec::new();
        m.fill(&mut t);
        assert_eq!(t.len(), 7);
        let cols: Vec<u32> = [NULL_CODE, 0.0, 1.0, 2.0, 5.0, 6.0, -2.0]
            .iter()
            .map(|&c| lookup(&t, c))
            .collect();
        assert_eq!(cols, vec![0, 2, NONE, 1, 2, NONE, NONE]);
        m.clear(&mut t);
        assert!(t.iter().all(|&x| x == NONE));
        assert_eq!(m.check(1), Ok(()));
        assert!(m.check(0).is_err());
        let bad = OneHot {
            other: vec![2.0],
            ..m.clone()
        };
        assert!(bad.check(1).is_err());
    }

    #[test]
    fn caps_take_positive_whole_numbers() {
        let c = Cap::default().set("max_cat", 3.0).unwrap();
        assert_eq!(c, cap(3, 1));
        assert_eq!(c.set("min_cat_rows", 5.0).unwrap(), cap(3, 5));
        assert!(c.set("max_cat", 0.0).is_err());
        assert!(c.set("min_cat_rows", 2.5).is_err());
        assert!(cap(0, 1).check().is_err());
        assert!(cap(1, 0).check().is_err());
    }

    #[test]
    fn configs_with_the_same_cap_share_a_part() {
        let (a, b) = (cap(64, 1), cap(8, 1));
        assert_eq!(
            parts(&[a, b, a, b, cap(8, 2)]),
            vec![(a, vec![0, 2]), (b, vec![1, 3]), (cap(8, 2), vec![4])]
        );
    }

    #[test]
    fn plans_encode_each_group_and_the_global_rows() {
        // Feature 0 numeric; feature 1 categorical with 3 levels.
        // Row groups: [0, 0, 1, 1, 1, 0]; codes [2, 2, 0, null, 0, 1].
        let cols = vec![
            Column::Owned(vec![0.0; 6]),
            Column::Owned(vec![2.0, 2.0, 0.0, NULL_CODE, 0.0, 1.0]),
        ];
        let kinds = [FeatureKind::Numeric, FeatureKind::Categorical { levels: 3 }];
        let plan = OneHotPlan::build(PlanInput {
            columns: &cols,
            kinds: &kinds,
            rows: &[0, 1, 2, 3, 4, 5],
            group_of: &[0, 0, 1, 1, 1, 0],
            n_groups: 2,
            cap: cap(1, 1),
            threads: 2,
        });
        assert_eq!(plan.numeric, vec![0]);
        // Group 0: 2 (2 rows) kept, 1 folded; group 1: 0 kept, null
        // folded; global: 0 and 2 have 2 rows, 0 wins the tie.
        assert_eq!(
            (plan.map(0, 0).codes.clone(), plan.map(0, 0).other.clone()),
            (vec![2.0], vec![1.0])
        );
        assert_eq!(
            (plan.map(0, 1).codes.clone(), plan.map(0, 1).other.clone()),
            (vec![0.0], vec![NULL_CODE])
        );
        assert_eq!(
            (plan.map(0, 2).codes.clone(), plan.map(0, 2).other.clone()),
            (vec![0.0], vec![NULL_CODE, 1.0, 2.0])
        );
        assert_eq!(
            plan.blocks,
            vec![CatBlock {
                feature: 1,
                base: 1,
                width: 2
            }]
        );
        assert_eq!(plan.width(), 3);
        assert_eq!(plan.columns(1), vec![0, 1, 2]);
    }
}
