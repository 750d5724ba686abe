//! A fitted regression tree, stored as arrays (LightGBM's layout): internal
//! node `i` sends a row left when `x[split_feature[i]] <= threshold[i]` (a
//! missing value goes left when `default_left[i]`); a child `c >= 0` is an
//! internal node, `c < 0` is the leaf `!c`. A tree with one leaf has no nodes.
//!
//! A node on a categorical feature sends left the codes in its category set
//! (`cat_left[i]`, ascending); every other value goes right: other codes,
//! null and unseen values (negative codes) and NaN (LightGBM's
//! `CategoricalDecision`). Its threshold is 0 and unused.

use serde::{Deserialize, Serialize};

/// One tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    /// Feature of each internal node.
    pub split_feature: Vec<u32>,
    /// Threshold of each internal node (`<=` goes left).
    #[serde(with = "crate::codec::f64s")]
    pub threshold: Vec<f64>,
    /// Where a missing value goes at each internal node.
    pub default_left: Vec<bool>,
    /// Left child (`>= 0` node, `< 0` leaf `!c`).
    pub left: Vec<i32>,
    /// Right child.
    pub right: Vec<i32>,
    /// Value of each leaf (learning rate applied).
    #[serde(with = "crate::codec::f64s")]
    pub leaf_value: Vec<f64>,
    /// Per internal node, the codes a categorical node sends left
    /// (ascending, at least one); empty for a numeric node. Empty when no
    /// node is categorical (so files written before categorical features
    /// load unchanged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cat_left: Vec<Vec<u32>>,
}

/// A tree's category sets as bitsets over codes ([`Tree::cat_bits`]), for
/// walking many rows: node `n`'s set is `words[start..start + len]`,
/// codes from `64 * first` on (`len` 0: a numeric node), with `[start,
/// first, len]` its entry of `nodes`.
#[derive(Debug, Clone, PartialEq)]
pub struct CatBits {
    words: Vec<u64>,
    /// Per node, `[start, first, len]` (one load a step).
    nodes: Vec<[u32; 3]>,
}

/// Rows that walk a tree together in [`Tree::add_rows`]: one row's walk
/// waits on each node's loads; several independent walks overlap.
const LANES: usize = 8;

impl Tree {
    /// Checks the structure against `d` features (model files).
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        let n = self.split_feature.len();
        if [
            self.threshold.len(),
            self.default_left.len(),
            self.left.len(),
            self.right.len(),
        ]
        .iter()
        .any(|&l| l != n)
        {
            return Err("node arrays of different lengths".into());
        }
        if !self.cat_left.is_empty() {
            if self.cat_left.len() != n {
                return Err(format!(
                    "{} category sets for {n} internal nodes",
                    self.cat_left.len()
                ));
            }
            if let Some(i) = self
                .cat_left
                .iter()
                .position(|c| c.windows(2).any(|w| w[0] >= w[1]))
            {
                return Err(format!("node {i}: category set not ascending"));
            }
        }
        if self.leaf_value.len() != n + 1 {
            return Err(format!(
                "{} leaf values for {n} internal nodes",
                self.leaf_value.len()
            ));
        }
        for i in 0..n {
            if self.split_feature[i] as usize >= d {
                return Err(format!(
                    "node {i} splits feature {} of {d}",
                    self.split_feature[i]
                ));
            }
            for c in [self.left[i], self.right[i]] {
                let ok = if c >= 0 {
                    (c as usize) > i && (c as usize) < n
                } else {
                    (!c as usize) <= n
                };
                if !ok {
                    return Err(format!("node {i} has child {c} out of range"));
                }
            }
        }
        Ok(())
    }

    /// The child of internal node `n` that a row with value `v` of the
    /// node's feature goes to (`<=` the threshold, or missing and
    /// `default_left`: left), chosen without a branch.
    #[inline(always)]
    fn child(&self, n: usize, v: f64) -> i32 {
        let left = (v <= self.threshold[n]) | (v.is_nan() & self.default_left[n]);
        [self.right[n], self.left[n]][left as usize]
    }

    /// [`Tree::child`] of a tree with categorical nodes: a categorical
    /// node sends left exactly the codes in its set.
    #[inline]
    fn child_any(&self, n: usize, v: f64) -> i32 {
        let set = &self.cat_left[n];
        if set.is_empty() {
            return self.child(n, v);
        }
        // Null and unseen codes are negative; NaN fails `>=` too.
        let left = v >= 0.0 && set.binary_search(&(v as u32)).is_ok();
        [self.right[n], self.left[n]][left as usize]
    }

    /// The leaf a row lands in.
    pub fn leaf(&self, x: &[f64]) -> usize {
        if self.split_feature.is_empty() {
            return 0;
        }
        let mut i = 0i32;
        if self.cat_left.is_empty() {
            while i >= 0 {
                let n = i as usize;
                i = self.child(n, x[self.split_feature[n] as usize]);
            }
        } else {
            while i >= 0 {
                let n = i as usize;
                i = self.child_any(n, x[self.split_feature[n] as usize]);
            }
        }
        !i as usize
    }

    /// Adds the tree's output for the rows of `x` (row-major, `d` values
    /// a row, `out.len()` rows) to `out`: the values [`Tree::predict`]
    /// gives, [`LANES`] rows walking the tree at a time. A tree with
    /// categorical nodes walks them so with `bits` (its [`Tree::cat_bits`]),
    /// else one row at a time.
    pub fn add_rows(&self, x: &[f64], d: usize, out: &mut [f64], bits: Option<&CatBits>) {
        if self.split_feature.is_empty() {
            let v = self.leaf_value[0];
            out.iter_mut().for_each(|o| *o += v);
            return;
        }
        match bits {
            _ if self.cat_left.is_empty() => self.walk_lanes(x, d, out, |n, v| self.child(n, v)),
            Some(b) => self.walk_lanes(x, d, out, |n, v| self.child_bits(n, v, b)),
            None => {
                for (r, o) in out.iter_mut().enumerate() {
                    *o += self.predict(&x[r * d..r * d + d]);
                }
            }
        }
    }

    /// [`Tree::add_rows`] with `child` choosing each step, [`LANES`] rows
    /// at a time; the rows past the last full set of lanes one by one.
    #[inline(always)]
    fn walk_lanes(&self, x: &[f64], d: usize, out: &mut [f64], child: impl Fn(usize, f64) -> i32) {
        let mut chunks = out.chunks_exact_mut(LANES);
        let mut base = 0;
        for chunk in &mut chunks {
            let mut node = [0i32; LANES];
            // Every lane steps each round, without branches; a lane at its
            // leaf (negative) stays there.
            while node.iter().any(|&i| i >= 0) {
                for (l, i) in node.iter_mut().enumerate() {
                    let n = (*i).max(0) as usize;
                    let next = child(n, x[(base + l) * d + self.split_feature[n] as usize]);
                    *i = [*i, next][(*i >= 0) as usize];
                }
            }
            for (o, &i) in chunk.iter_mut().zip(&node) {
                *o += self.leaf_value[!i as usize];
            }
            base += LANES;
        }
        for (k, o) in chunks.into_remainder().iter_mut().enumerate() {
            let r = (base + k) * d;
            *o += self.predict(&x[r..r + d]);
        }
    }

    /// The category sets as bitsets over codes, for [`Tree::add_rows`];
    /// `None` for a tree without categorical nodes, or whose bitsets would
    /// be far larger than its code lists (codes spread far apart, as only a
    /// crafted file has them: such a tree walks one row at a time).
    pub fn cat_bits(&self) -> Option<CatBits> {
        if self.cat_left.is_empty() {
            return None;
        }
        // A node's words: from its lowest code's to its highest code's.
        let span = |set: &[u32]| match (set.first(), set.last()) {
            (Some(&lo), Some(&hi)) => (lo / 64, hi / 64 - lo / 64 + 1),
            _ => (0, 0),
        };
        let codes: usize = self.cat_left.iter().map(Vec::len).sum();
        let words: usize = self.cat_left.iter().map(|c| span(c).1 as usize).sum();
        if words > 16 * codes + 1024 {
            return None;
        }
        // Word 0 is a zero word that numeric nodes point at.
        let n = self.cat_left.len();
        let mut b = CatBits {
            words: Vec::with_capacity(words + 1),
            nodes: Vec::with_capacity(n),
        };
        b.words.push(0);
        for set in &self.cat_left {
            let (first, len) = span(set);
            let start = if len == 0 { 0 } else { b.words.len() as u32 };
            b.nodes.push([start, first, len]);
            let at = b.words.len();
            b.words.resize(at + len as usize, 0);
            for &c in set {
                b.words[at + (c / 64 - first) as usize] |= 1 << (c % 64);
            }
        }
        Some(b)
    }

    /// [`Tree::child_any`] through `bits` ([`Tree::cat_bits`]), without a
    /// branch on the value.
    #[inline(always)]
    fn child_bits(&self, n: usize, v: f64, bits: &CatBits) -> i32 {
        let [start, first, len] = bits.nodes[n].map(|v| v as usize);
        // NaN and negative values convert to 0; `v >= 0.0` rules them out.
        // A code below the set's first word wraps to a large `w`.
        let c = v as usize;
        let w = (c / 64).wrapping_sub(first);
        let inside = (v >= 0.0) & (w < len);
        let word = bits.words[start + if inside { w } else { 0 }];
        let cat = inside & ((word >> (c % 64)) & 1 == 1);
        let num = (v <= self.threshold[n]) | (v.is_nan() & self.default_left[n]);
        let left = if len > 0 { cat } else { num };
        [self.right[n], self.left[n]][left as usize]
    }

    /// The tree's output for one row.
    pub fn predict(&self, x: &[f64]) -> f64 {
        self.leaf_value[self.leaf(x)]
    }
}

/// A tree being grown, in bin space (`bin <= split_bin` goes left).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BinTree {
    /// Feature of each internal node.
    pub feature: Vec<u32>,
    /// Threshold bin of each internal node.
    pub bin: Vec<u16>,
    /// The NaN bin of the node's feature (rows in it follow `default_left`).
    pub nan_bin: Vec<u16>,
    /// Default direction.
    pub default_left: Vec<bool>,
    /// Children as in [`Tree`].
    pub left: Vec<i32>,
    /// Right children.
    pub right: Vec<i32>,
    /// For each leaf, its parent node and whether it is the left child (`None` for the root).
    pub leaf_parent: Vec<Option<(usize, bool)>>,
    /// Per node, the bins a categorical node sends left, as a bitset (64
    /// bins a word); empty for a numeric node.
    pub cat_bits: Vec<Vec<u64>>,
}

impl BinTree {
    /// A tree of one leaf.
    pub fn new() -> Self {
        BinTree {
            leaf_parent: vec![None],
            ..BinTree::default()
        }
    }

    /// Splits `leaf`: it becomes the left child, the new leaf (returned) the right.
    pub fn split(
        &mut self,
        leaf: usize,
        feature: usize,
        bin: usize,
        nan_bin: usize,
        default_left: bool,
    ) -> usize {
        let node = self.feature.len();
        let new_leaf = self.leaf_parent.len();
        self.feature.push(feature as u32);
        self.bin.push(bin as u16);
        self.nan_bin.push(nan_bin as u16);
        self.default_left.push(default_left);
        self.left.push(!(leaf as i32));
        self.right.push(!(new_leaf as i32));
        self.cat_bits.push(Vec::new());
        if let Some((p, is_left)) = self.leaf_parent[leaf] {
            if is_left {
                self.left[p] = node as i32;
            } else {
                self.right[p] = node as i32;
            }
        }
        self.leaf_parent[leaf] = Some((node, true));
        self.leaf_parent.push(Some((node, false)));
        new_leaf
    }

    /// Splits `leaf` on the categorical `feature`: the category bins
    /// `left_bins` go left, every other bin (the null bin `nan_bin` among
    /// them) right. Returns the new (right) leaf.
    pub fn split_categorical(
        &mut self,
        leaf: usize,
        feature: usize,
        left_bins: &[u32],
        nan_bin: usize,
    ) -> usize {
        let new_leaf = self.split(leaf, feature, 0, nan_bin, false);
        let words = left_bins.iter().max().map_or(0, |&b| b as usize / 64 + 1);
        let mut bits = vec![0u64; words];
        for &b in left_bins {
            debug_assert!((b as usize) < nan_bin, "the null bin never goes left");
            bits[b as usize / 64] |= 1 << (b % 64);
        }
        *self.cat_bits.last_mut().unwrap() = bits;
        new_leaf
    }

    /// Whether a row with bin `b` at node `n` goes left.
    #[inline]
    pub fn goes_left(&self, n: usize, b: usize) -> bool {
        let bits = &self.cat_bits[n];
        if !bits.is_empty() {
            return bits.get(b / 64).is_some_and(|w| (w >> (b % 64)) & 1 == 1);
        }
        if b == self.nan_bin[n] as usize {
            self.default_left[n]
        } else {
            b <= self.bin[n] as usize
        }
    }

    /// The leaf of a row of bins (row-major, one per feature).
    pub fn leaf_of(&self, bins: &[u8]) -> usize {
        self.leaf_by(|j| bins[j] as usize)
    }

    /// The leaf of a row whose bin of feature `j` is `bin(j)`.
    pub fn leaf_by(&self, bin: impl Fn(usize) -> usize) -> usize {
        if self.feature.is_empty() {
            return 0;
        }
        let mut i = 0i32;
        while i >= 0 {
            let n = i as usize;
            let b = bin(self.feature[n] as usize);
            i = if self.goes_left(n, b) {
                self.left[n]
            } else {
                self.right[n]
            };
        }
        !i as usize
    }

    /// The fitted tree: thresholds are the upper bounds of the split bins
    /// (`upper(feature, bin)`); a categorical node's set is the codes of
    /// its bins (`code(feature, bin)`), ascending, and its threshold 0.
    pub fn finish(
        &self,
        upper: impl Fn(usize, usize) -> f64,
        code: impl Fn(usize, usize) -> u32,
        leaf_value: Vec<f64>,
    ) -> Tree {
        let is_cat = |n: usize| !self.cat_bits[n].is_empty();
        let cat_left = if (0..self.feature.len()).any(is_cat) {
            (0..self.feature.len())
                .map(|n| {
                    let f = self.feature[n] as usize;
                    let mut codes: Vec<u32> = (0..64 * self.cat_bits[n].len())
                        .filter(|&b| self.goes_left(n, b))
                        .map(|b| code(f, b))
                        .collect();
                    codes.sort_unstable();
                    codes
                })
                .collect()
        } else {
            Vec::new()
        };
        Tree {
            split_feature: self.feature.clone(),
            threshold: (0..self.feature.len())
                .map(|n| {
                    if is_cat(n) {
                        0.0
                    } else {
                        upper(self.feature[n] as usize, self.bin[n] as usize)
                    }
                })
                .collect(),
            default_left: self.default_left.clone(),
            left: self.left.clone(),
            right: self.right.clone(),
            leaf_value,
            cat_left,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grown_tree_routes_like_its_fitted_form() {
        // Root splits f0 at bin 1 (upper 2.5); the right leaf splits f1 at bin 0 (upper 0.0).
        let mut t = BinTree::new();
        let r = t.split(0, 0, 1, 3, false);
        assert_eq!(r, 1);
        let r2 = t.split(1, 1, 0, 2, true);
        assert_eq!(r2, 2);
        let upper = [
            [1.5, 2.5, f64::INFINITY],
            [0.0, f64::INFINITY, f64::INFINITY],
        ];
        let tree = t.finish(
            |f, b| upper[f][b],
            |_, _| unreachable!(),
            vec![10.0, 20.0, 30.0],
        );
        assert_eq!(tree.predict(&[2.0, 5.0]), 10.0);
        assert_eq!(tree.predict(&[3.0, -1.0]), 20.0);
        assert_eq!(tree.predict(&[3.0, 1.0]), 30.0);
        assert_eq!(tree.predict(&[f64::NAN, 1.0]), 30.0); // f0 missing: right
        assert_eq!(tree.predict(&[3.0, f64::NAN]), 20.0); // f1 missing: left
        assert_eq!(t.leaf_of(&[1, 1]), 0);
        assert_eq!(t.leaf_of(&[3, 0]), 1); // f0 missing: right; f1 bin 0: left
        assert_eq!(t.leaf_of(&[2, 1]), 2);
        assert_eq!(t.leaf_of(&[2, 2]), 1); // f1 missing: left
    }

    #[test]
    fn categorical_nodes_send_their_set_left_and_null_and_unseen_right() {
        // f0 numeric, f1 categorical. The root splits f1: bins 2 and 0 go
        // left (the group's bins hold codes 7, 3, 5, 70; null bin 4); the
        // left leaf then splits f0 at bin 0 (upper 0.5).
        let mut t = BinTree::new();
        assert_eq!(t.split_categorical(0, 1, &[2, 0], 4), 1);
        assert_eq!(t.split(0, 0, 0, 3, true), 2);
        let codes = [7u32, 3, 5, 70];
        let tree = t.finish(
            |_, _| 0.5,
            |f, b| {
                assert_eq!(f, 1);
                codes[b]
            },
            vec![1.0, 2.0, 3.0],
        );
        tree.check(2).unwrap();
        assert_eq!(tree.cat_left, vec![vec![5, 7], vec![]]);
        assert_eq!(tree.threshold, vec![0.0, 0.5]);
        // Bins: 0 and 2 left, 1, 3 and the null bin 4 right.
        for (b, leaf) in [(0, 0), (2, 0), (1, 1), (3, 1), (4, 1)] {
            assert_eq!(t.leaf_of(&[0, b]), leaf, "bin {b}");
        }
        // Codes: 5 and 7 left (then f0 <= 0.5: leaf 0, else leaf 2); every
        // other code, null (-1), unseen (-2) and NaN right (leaf 1).
        assert_eq!(tree.predict(&[0.0, 5.0]), 1.0);
        assert_eq!(tree.predict(&[1.0, 7.0]), 3.0);
        for v in [3.0, 70.0, 6.0, -1.0, -2.0, f64::NAN] {
            assert_eq!(tree.predict(&[0.0, v]), 2.0, "code {v}");
        }
        // Many rows at once, with and without the bitsets: the same.
        let rows: Vec<[f64; 2]> = (0..21)
            .map(|i| {
                [
                    (i % 3) as f64 * 0.5,
                    [5.0, 7.0, 3.0, 70.0, 6.0, -1.0, -2.0][i % 7],
                ]
            })
            .chain([[0.0, f64::NAN], [1.0, 7.0], [0.0, 700.0]])
            .collect();
        let x: Vec<f64> = rows.iter().flatten().copied().collect();
        let want: Vec<f64> = rows.iter().map(|r| tree.predict(r)).collect();
        let bits = tree.cat_bits();
        for b in [bits.as_ref(), None] {
            let mut out = vec![0.0; rows.len()];
            tree.add_rows(&x, 2, &mut out, b);
            assert_eq!(out, want);
        }
        // [0, 5] and [0.5, 7]: left, then f0 <= 0.5; [1, 3]: right; [1, 5]: left, f0 > 0.5.
        assert_eq!(&want[..3], &[1.0, 1.0, 2.0]);
        assert_eq!(want[14], 3.0);
        // A set past 64 bins, as in a feature of many levels.
        let mut w = BinTree::new();
        w.split_categorical(0, 0, &[300, 64, 1], 900);
        assert!(w.goes_left(0, 300) && w.goes_left(0, 64) && w.goes_left(0, 1));
        assert!(!w.goes_left(0, 0) && !w.goes_left(0, 299) && !w.goes_left(0, 900));
        // Codes spread far apart (a crafted file): no bitsets, the same
        // predictions one row at a time.
        let mut far = tree.clone();
        far.cat_left[0] = vec![5, 7, u32::MAX - 1];
        assert!(far.cat_bits().is_none());
        let mut out = vec![0.0; rows.len()];
        far.add_rows(&x, 2, &mut out, None);
        assert_eq!(out, want);
        // Sets of high codes only start at their first word.
        let mut high = tree.clone();
        high.cat_left[0] = vec![1_000_005, 1_000_007];
        let hb = high.cat_bits().unwrap();
        // Node 0: one word from word 1_000_005 / 64; node 1 numeric.
        assert_eq!(hb.nodes, vec![[1, 1_000_005 / 64, 1], [0, 0, 0]]);
        let hx: Vec<f64> = [
            1_000_005.0,
            5.0,
            1_000_006.0,
            1_000_007.0,
            -1.0,
            64.0,
            0.0,
            1e9,
        ]
        .iter()
        .flat_map(|&c| [0.0, c])
        .collect();
        let mut got = vec![0.0; 8];
        high.add_rows(&hx, 2, &mut got, Some(&hb));
        let want_high: Vec<f64> = hx.chunks(2).map(|r| high.predict(r)).collect();
        assert_eq!(got, want_high);
        assert_eq!(want_high[..4], [1.0, 2.0, 2.0, 1.0]);
        // Checks of a loaded tree.
        let mut bad = tree.clone();
        bad.cat_left[0] = vec![7, 5];
        assert!(bad.check(2).unwrap_err().contains("ascending"));
        bad.cat_left.pop();
        assert!(bad.check(2).unwrap_err().contains("category sets"));
    }
}
