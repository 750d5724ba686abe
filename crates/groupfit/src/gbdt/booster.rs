//! One (group, config) booster as a state machine.
//!
//! A round grows one tree leaf-wise: the booster asks for the histogram of
//! one leaf at a time ([`Booster::build`] adds the rows of a row range into
//! it, so partial histograms of a group cut over workers add up), and
//! [`Booster::step`] consumes the full histogram: the larger sibling's comes
//! from the parent's by subtraction, both children get their best split, the
//! leaf with the largest gain is split next (its rows partitioned in place,
//! each leaf's rows kept in ascending order) and the smaller child's
//! histogram is asked for. When no leaf can be split or the tree has
//! `num_leaves` leaves, the round ends: leaf values `−G/(H+λ)·learning_rate`
//! are added to the scores, gradients are recomputed, the validation score is
//! updated for early stopping. A round whose tree cannot split ends boosting
//! (as LightGBM does).
//!
//! A leaf's best split is the best of its numeric features' ([`best_split`])
//! and of each categorical feature's ([`best_cat_split`]); equal gains go to
//! the lower feature. A leaf made by a sorted categorical split takes
//! `cat_l2` into its value's L2 penalty, as in LightGBM. As in LightGBM, a
//! categorical feature without a valid split at a leaf is not searched
//! again below it (LightGBM skips any such feature; for numeric features
//! it makes no difference in practice, so they are always searched).

use serde::{Deserialize, Serialize};

use super::binning::Mapper;
use super::categorical::{best_cat_split, CatRules};
use super::histogram::{build_range, build_rows, subtract, BinnedGroup, STRIDE};
use super::model::GbdtModel;
use super::objective::{gradients, init_from_mean, init_score, metric};
use super::params::GbdtConfig;
use super::split::{best_split, totals, Rules, Split, Sums};
use super::tree::{BinTree, Tree};
use crate::data::Task;
use crate::math::splitmix64 as mix;

/// What a booster reads of its group: binned training rows and targets, the
/// bin mappers, and the binned validation rows (for early stopping).
#[derive(Debug, Clone, Copy)]
pub struct GroupView<'a> {
    /// Binned training rows.
    pub data: BinnedGroup<'a>,
    /// Training targets.
    pub y: &'a [f64],
    /// Bins of each feature.
    pub mappers: &'a [Mapper],
    /// Binned validation rows, row-major (a wide feature's: 0).
    pub valid_bins: &'a [u8],
    /// The wide features' bins of the validation rows, row-major.
    pub valid_wbins: &'a [u16],
    /// Validation targets.
    pub valid_y: &'a [f64],
}

/// Per-thread buffers of the boosting steps.
#[derive(Debug, Default)]
pub struct StepScratch {
    /// Histogram buffers.
    pub pool: HistPool,
    /// Row indices (partition).
    pub tmp: Vec<u32>,
    /// Which bins go left (partition on a wide feature).
    pub sides: Vec<usize>,
}

/// Reusable histogram buffers.
#[derive(Debug, Default)]
pub struct HistPool {
    bufs: Vec<Vec<f64>>,
}

impl HistPool {
    /// A zeroed buffer of `len`.
    pub fn get(&mut self, len: usize) -> Vec<f64> {
        match self.bufs.pop() {
            Some(mut b) => {
                b.clear();
                b.resize(len, 0.0);
                b
            }
            None => vec![0.0; len],
        }
    }
    /// Returns a buffer.
    pub fn put(&mut self, b: Vec<f64>) {
        self.bufs.push(b);
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Leaf {
    begin: usize,
    count: usize,
    sums: Sums,
    /// Added to `lambda_l2` in the leaf's value (`cat_l2` after a sorted
    /// categorical split).
    extra_l2: f64,
    depth: u32,
    hist: Option<Vec<f64>>,
    split: Option<Split>,
    /// Per categorical feature of the round (as [`Grow::categorical`]),
    /// whether it is searched: not once a leaf above found no valid split
    /// on it.
    cat_live: Vec<bool>,
}

/// What [`Booster::split_next`] did.
enum Next {
    /// No leaf to split: the round ends.
    Done,
    /// Split a leaf; the smaller child's histogram is wanted.
    Build,
    /// Split a leaf whose children may not split: no histogram is wanted.
    Again,
}

#[derive(Debug, Serialize, Deserialize)]
struct Grow {
    tree: BinTree,
    leaves: Vec<Leaf>,
    /// (smaller child, larger child) of the last split; the larger child's
    /// slot holds the parent's histogram until the smaller one's arrives.
    pending: (usize, usize),
    /// The round's numeric features, ascending.
    numeric: Vec<usize>,
    /// The round's categorical features, ascending.
    categorical: Vec<usize>,
    gains: Vec<(u32, f64)>,
    /// Rows of the leaf split last, over every holder (a piece's booster).
    parent_n: f64,
}

/// The state of one booster between steps (serialised in a remote
/// worker's snapshots).
#[derive(Debug, Serialize, Deserialize)]
pub struct Booster {
    task: Task,
    cfg: GbdtConfig,
    seed: u64,
    init: f64,
    /// The rows of the whole group, where this booster holds a piece of it
    /// (on a remote worker) and other holders grow the same trees.
    piece_of: Option<usize>,
    /// The global row count of the leaf whose histogram was built, from the
    /// holders' counts (a piece's booster, see [`Booster::step_counted`]).
    #[serde(skip)]
    counted: Option<f64>,
    scores: Vec<f64>,
    gh: Vec<[f32; 2]>,
    /// With quantized gradients: the true ones (`gh` holds the levels), and
    /// the group's stream of rounding draws.
    #[serde(default)]
    raw: Vec<[f32; 2]>,
    #[serde(default)]
    stream: u64,
    order: Vec<u32>,
    valid_scores: Vec<f64>,
    #[serde(with = "crate::codec::packed")]
    trees: Vec<Tree>,
    gains: Vec<Vec<(u32, f64)>>,
    round: u32,
    done: bool,
    best: Option<(f64, usize)>,
    grow: Option<Grow>,
    /// Set by a caller that ran a whole round outside [`Booster::step`]'s usual caller.
    pub ran_round: bool,
}

/// The features a round may split on: all, or `round(fraction * d)` (at least
/// one) drawn from `(seed, round)` alone, so a group draws the same features
/// whether trained alone or with others.
pub fn round_features(d: usize, fraction: f64, seed: u64, round: u32) -> Vec<usize> {
    let mut f: Vec<usize> = (0..d).collect();
    if fraction >= 1.0 || d == 0 {
        return f;
    }
    let k = ((d as f64 * fraction).round() as usize).clamp(1, d);
    let mut s = mix(seed ^ mix(round as u64 + 1));
    for i in 0..k {
        s = mix(s);
        let j = i + (s % (d - i) as u64) as usize;
        f.swap(i, j);
    }
    f.truncate(k);
    f.sort_unstable();
    f
}

impl Booster {
    /// A booster at round 0 for the group in `view`.
    pub fn new(task: Task, cfg: GbdtConfig, seed: u64, view: &GroupView<'_>) -> Booster {
        Booster::start(task, cfg, seed, view, init_score(task, view.y), None)
    }

    /// A booster at round 0 for a piece of a group of `group_rows` rows whose
    /// mean label is `mean`: `view` holds the piece's rows, the validation
    /// rows of the whole group, and the whole group's bins. Its holders grow
    /// the same trees from the sums of their histograms
    /// ([`Booster::step_counted`]).
    pub fn for_piece(
        task: Task,
        cfg: GbdtConfig,
        seed: u64,
        view: &GroupView<'_>,
        (group_rows, mean): (usize, f64),
    ) -> Booster {
        let init = init_from_mean(task, mean);
        Booster::start(task, cfg, seed, view, init, Some(group_rows))
    }

    fn start(
        task: Task,
        cfg: GbdtConfig,
        seed: u64,
        view: &GroupView<'_>,
        init: f64,
        piece_of: Option<usize>,
    ) -> Booster {
        let n = view.y.len();
        let mut b = Booster {
            task,
            cfg,
            seed,
            init,
            piece_of,
            counted: None,
            scores: vec![init; n],
            gh: vec![[0.0f32; 2]; n],
            raw: Vec::new(),
            stream: 0,
            order: (0..n as u32).collect(),
            valid_scores: if cfg.early_stopping_rounds() > 0 {
                vec![init; view.valid_y.len()]
            } else {
                Vec::new()
            },
            trees: Vec::new(),
            gains: Vec::new(),
            round: 0,
            done: false,
            best: None,
            grow: None,
            ran_round: false,
        };
        b.set_gradients(view.y);
        b
    }

    /// The same booster with the group's stream of quantization draws
    /// (`group_stream` of its key): groups round independently.
    pub fn rounding_stream(mut self, stream: u64, view: &GroupView<'_>) -> Booster {
        self.stream = stream;
        if self.cfg.quantization().is_some() {
            self.set_gradients(view.y);
        }
        self
    }

    /// The gradients of the next round from the scores: quantized when the
    /// config asks (the true ones kept in `raw`).
    fn set_gradients(&mut self, y: &[f64]) {
        match self.cfg.quantization() {
            None => gradients(self.task, &self.scores, y, &mut self.gh),
            Some(q) => {
                self.raw.resize(self.gh.len(), [0.0; 2]);
                gradients(self.task, &self.scores, y, &mut self.raw);
                let constant = self.task == Task::Regression;
                let at = (self.seed, self.stream, self.round);
                q.apply(&self.raw, &mut self.gh, constant, at);
            }
        }
    }

    /// Whether boosting has ended.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Rounds done so far (trees kept at the end).
    pub fn rounds(&self) -> usize {
        self.trees.len()
    }

    fn rules(&self) -> Rules {
        Rules {
            min_data: self.cfg.min_data_in_leaf() as f64,
            min_hess: self.cfg.min_sum_hessian_in_leaf(),
            lambda: self.cfg.lambda_l2(),
        }
    }

    fn cat_rules(&self) -> CatRules {
        let c = &self.cfg;
        CatRules {
            max_cat_to_onehot: c.max_cat_to_onehot() as usize,
            cat_smooth: c.cat_smooth(),
            cat_l2: c.cat_l2(),
            max_cat_threshold: c.max_cat_threshold() as usize,
            min_data_per_group: c.min_data_per_group() as f64,
        }
    }

    /// Local rows of the leaf whose histogram is asked for (all rows at the
    /// start of a round).
    pub fn pending_rows(&self) -> usize {
        match &self.grow {
            None => self.order.len(),
            Some(g) => g.leaves[g.pending.0].count,
        }
    }

    /// [`Booster::step`] for a piece's booster: `count` is the asked-for
    /// leaf's rows over every holder (the sum of their
    /// [`Booster::pending_rows`]).
    pub fn step_counted(
        &mut self,
        view: &GroupView<'_>,
        hist: Vec<f64>,
        count: f64,
        scratch: &mut StepScratch,
    ) -> bool {
        self.counted = Some(count);
        self.step(view, hist, scratch)
    }

    /// Adds the rows of the asked-for leaf that lie in `range` (group-local)
    /// into `hist`.
    pub fn build(&self, view: &GroupView<'_>, range: std::ops::Range<usize>, hist: &mut [f64]) {
        match &self.grow {
            None => build_range(hist, &view.data, range, &self.gh),
            Some(g) => {
                let leaf = &g.leaves[g.pending.0];
                let rows = &self.order[leaf.begin..leaf.begin + leaf.count];
                let a = rows.partition_point(|&r| (r as usize) < range.start);
                let b = rows.partition_point(|&r| (r as usize) < range.end);
                build_rows(hist, &view.data, &rows[a..b], &self.gh);
            }
        }
    }

    /// Runs the rest of the current round on this thread (every row is
    /// local). With `timer`, adds the nanoseconds spent building histograms.
    pub fn run_round(
        &mut self,
        view: &GroupView<'_>,
        scratch: &mut StepScratch,
        mut timer: Option<&mut u64>,
    ) {
        let len = view.data.hist_len();
        let n = view.data.rows();
        loop {
            let t = timer.is_some().then(std::time::Instant::now);
            let mut hist = scratch.pool.get(len);
            self.build(view, 0..n, &mut hist);
            if let (Some(t), Some(ns)) = (t, timer.as_deref_mut()) {
                *ns += t.elapsed().as_nanos() as u64;
            }
            if self.step(view, hist, scratch) {
                break;
            }
        }
    }

    /// Whether `leaf` may split at all (before its histogram is known): not
    /// at the depth limit, and rows enough for two leaves of
    /// `min_data_in_leaf`. A leaf that may not split needs no histogram.
    fn may_split(&self, leaf: &Leaf) -> bool {
        let md = self.cfg.max_depth();
        let deep = md > 0 && leaf.depth >= md as u32;
        !deep && leaf.sums.n >= 2.0 * self.rules().min_data
    }

    /// The best split of leaf `l` from its histogram; records which of its
    /// categorical features had no valid split (see [`Leaf::cat_live`]).
    fn find(&self, view: &GroupView<'_>, g: &mut Grow, l: usize, hist: &[f64]) {
        let leaf = &g.leaves[l];
        if !self.may_split(leaf) {
            g.leaves[l].split = None;
            return;
        }
        let rules = self.rules();
        let mut best = best_split(hist, &view.data, &g.numeric, leaf.sums, &rules);
        if !g.categorical.is_empty() {
            let cat = self.cat_rules();
            let mut live = leaf.cat_live.clone();
            for (&j, live) in g.categorical.iter().zip(live.iter_mut()) {
                if !*live {
                    continue;
                }
                let off = view.data.offsets[j] as usize;
                let h = &hist[STRIDE * off..STRIDE * view.data.offsets[j + 1] as usize];
                let Some(s) = best_cat_split(h, j, leaf.sums, &rules, &cat) else {
                    *live = false;
                    continue;
                };
                let better = best
                    .as_ref()
                    .is_none_or(|b| s.gain > b.gain || (s.gain == b.gain && j < b.feature));
                if better {
                    best = Some(s);
                }
            }
            g.leaves[l].cat_live = live;
        }
        g.leaves[l].split = best;
    }

    /// Consumes the full histogram of the asked-for leaf (`hist_len` long,
    /// kept or returned to the pool); returns whether the round ended.
    pub fn step(
        &mut self,
        view: &GroupView<'_>,
        hist: Vec<f64>,
        scratch: &mut StepScratch,
    ) -> bool {
        let StepScratch { pool, tmp, sides } = scratch;
        let mut g = match self.grow.take() {
            None => {
                // A round starts from the rows in ascending order: the stable
                // partitions keep every leaf's rows ascending, which `build`
                // (a range of a cut group) and the scans' locality rely on.
                for (i, o) in self.order.iter_mut().enumerate() {
                    *o = i as u32;
                }
                let (categorical, numeric): (Vec<usize>, Vec<usize>) = round_features(
                    view.data.d,
                    self.cfg.feature_fraction(),
                    self.seed,
                    self.round,
                )
                .into_iter()
                .partition(|&j| view.mappers[j].is_categorical());
                let buf = hist;
                let rows = self.piece_of.unwrap_or(view.data.rows());
                let sums = totals(&buf, &view.data, rows);
                let mut g = Grow {
                    tree: BinTree::new(),
                    leaves: vec![Leaf {
                        begin: 0,
                        count: view.data.rows(),
                        sums,
                        extra_l2: 0.0,
                        depth: 0,
                        hist: None,
                        split: None,
                        cat_live: vec![true; categorical.len()],
                    }],
                    pending: (0, 0),
                    numeric,
                    categorical,
                    gains: Vec::new(),
                    parent_n: 0.0,
                };
                self.find(view, &mut g, 0, &buf);
                if g.leaves[0].split.is_some() {
                    g.leaves[0].hist = Some(buf);
                } else {
                    pool.put(buf);
                }
                g
            }
            Some(mut g) => {
                let (small, large) = g.pending;
                if let Some(n) = self.counted.take().filter(|_| self.piece_of.is_some()) {
                    // A piece's children counts: the holders' sum.
                    g.leaves[small].sums.n = n;
                    g.leaves[large].sums.n = g.parent_n - n;
                }
                let mut parent = g.leaves[large].hist.take().expect("parent histogram");
                let sibling = if self.may_split(&g.leaves[large]) {
                    subtract(&mut parent, &hist);
                    Some((large, parent))
                } else {
                    pool.put(parent);
                    None
                };
                for (leaf, buf) in std::iter::once((small, hist)).chain(sibling) {
                    self.find(view, &mut g, leaf, &buf);
                    if g.leaves[leaf].split.is_some() {
                        g.leaves[leaf].hist = Some(buf);
                    } else {
                        pool.put(buf);
                    }
                }
                g
            }
        };
        loop {
            match self.split_next(view, &mut g, pool, tmp, sides) {
                Next::Done => {
                    self.finish_round(view, g, pool);
                    return true;
                }
                Next::Build => {
                    self.grow = Some(g);
                    return false;
                }
                // Neither new leaf may split: no histograms are needed, the
                // next leaf is split at once.
                Next::Again => {}
            }
        }
    }

    /// Splits the open leaf of largest gain, if any and the tree has room.
    fn split_next(
        &mut self,
        view: &GroupView<'_>,
        g: &mut Grow,
        pool: &mut HistPool,
        tmp: &mut Vec<u32>,
        sides: &mut Vec<usize>,
    ) -> Next {
        // The leaf to split next: the largest gain (first on ties).
        let mut next: Option<usize> = None;
        if g.leaves.len() < self.cfg.num_leaves() as usize {
            for (i, l) in g.leaves.iter().enumerate() {
                if let Some(s) = &l.split {
                    if next.is_none_or(|b| s.gain > g.leaves[b].split.as_ref().unwrap().gain) {
                        next = Some(i);
                    }
                }
            }
        }
        let Some(l) = next else {
            return Next::Done;
        };
        let s = g.leaves[l].split.take().unwrap();
        let (begin, count) = (g.leaves[l].begin, g.leaves[l].count);
        let nan_bin = view.data.n_bins(s.feature) - 1;
        let new_leaf = if s.left_bins.is_empty() {
            g.tree.split(l, s.feature, s.bin, nan_bin, s.default_left)
        } else {
            g.tree
                .split_categorical(l, s.feature, &s.left_bins, nan_bin)
        };
        let node = g.tree.feature.len() - 1;
        // Stable partition of the leaf's rows: left in place, right after.
        // The rows are ascending, so the split feature's column is read
        // front to back (one byte per row where the row-major copy would
        // bring a cache line per row).
        let rows = &mut self.order[begin..begin + count];
        if tmp.len() < count {
            tmp.resize(count, 0);
        }
        let w = match view.data.wide_slot(s.feature) {
            None => {
                let mut left = [0usize; 256];
                for (b, l) in left.iter_mut().enumerate().take(nan_bin + 1) {
                    *l = usize::from(g.tree.goes_left(node, b));
                }
                let col = view.data.col(s.feature);
                partition(rows, tmp, |r| left[col[r as usize] as usize])
            }
            Some(k) => {
                sides.clear();
                sides.extend((0..=nan_bin).map(|b| usize::from(g.tree.goes_left(node, b))));
                let col = view.data.wcol(k);
                partition(rows, tmp, |r| sides[col[r as usize] as usize])
            }
        };
        let depth = g.leaves[l].depth + 1;
        let parent_hist = g.leaves[l].hist.take();
        let cat_live = std::mem::take(&mut g.leaves[l].cat_live);
        // A piece knows its own rows only: its children's counts are the
        // split's estimates until the holders' sum arrives with the next
        // histogram, and the estimates pick the child to scan.
        let piece = self.piece_of.is_some();
        let (n_left, n_right) = if piece {
            (s.left.n, s.right.n)
        } else {
            (w as f64, (count - w) as f64)
        };
        g.parent_n = g.leaves[l].sums.n;
        g.leaves[l] = Leaf {
            begin,
            count: w,
            sums: Sums {
                n: n_left,
                ..s.left
            },
            extra_l2: s.extra_l2,
            depth,
            hist: None,
            split: None,
            cat_live: cat_live.clone(),
        };
        g.leaves.push(Leaf {
            begin: begin + w,
            count: count - w,
            sums: Sums {
                n: n_right,
                ..s.right
            },
            extra_l2: s.extra_l2,
            depth,
            hist: None,
            split: None,
            cat_live,
        });
        let (small, large) = if n_left <= n_right {
            (l, new_leaf)
        } else {
            (new_leaf, l)
        };
        g.leaves[large].hist = parent_hist;
        g.pending = (small, large);
        g.gains.push((s.feature as u32, s.gain));
        if g.leaves.len() >= self.cfg.num_leaves() as usize {
            // The tree is full: its two new leaves will not be split, so
            // they need neither a histogram nor a split search.
            return Next::Done;
        }
        if !piece && !self.may_split(&g.leaves[small]) && !self.may_split(&g.leaves[large]) {
            if let Some(h) = g.leaves[large].hist.take() {
                pool.put(h);
            }
            return Next::Again;
        }
        Next::Build
    }

    fn finish_round(&mut self, view: &GroupView<'_>, mut g: Grow, pool: &mut HistPool) {
        for l in g.leaves.iter_mut() {
            if let Some(h) = l.hist.take() {
                pool.put(h);
            }
        }
        if g.leaves.len() <= 1 {
            // No split possible: boosting ends (LightGBM stops here too).
            self.end();
            return;
        }
        let rules = self.rules();
        let lr = self.cfg.learning_rate();
        let renew = self.cfg.quantization().is_some_and(|q| q.renew_leaf);
        let values: Vec<f64> = g
            .leaves
            .iter()
            .map(|l| {
                let r = Rules {
                    lambda: rules.lambda + l.extra_l2,
                    ..rules
                };
                let sums = if renew {
                    // The leaf's true sums (`quant_train_renew_leaf`).
                    let rows = &self.order[l.begin..l.begin + l.count];
                    let (g, h) = rows.iter().fold((0.0, 0.0), |(g, h), &i| {
                        let [a, b] = self.raw[i as usize];
                        (g + a as f64, h + b as f64)
                    });
                    Sums { g, h, ..l.sums }
                } else {
                    l.sums
                };
                r.value(sums) * lr
            })
            .collect();
        for (l, &v) in g.leaves.iter().zip(&values) {
            for &r in &self.order[l.begin..l.begin + l.count] {
                self.scores[r as usize] += v;
            }
        }
        self.round += 1;
        self.set_gradients(view.y);
        let d = view.data.d;
        let es = self.cfg.early_stopping_rounds() as usize;
        // Validation scores are kept only for early stopping (the chosen
        // model is scored once, after training).
        let stopping = es > 0 && !view.valid_y.is_empty();
        if stopping {
            let dw = view.data.wide.len();
            for (i, s) in self.valid_scores.iter_mut().enumerate() {
                let row = &view.valid_bins[i * d..(i + 1) * d];
                let leaf = if dw == 0 {
                    g.tree.leaf_of(row)
                } else {
                    let wrow = &view.valid_wbins[i * dw..(i + 1) * dw];
                    g.tree.leaf_by(|j| match view.data.wide_slot(j) {
                        Some(k) => wrow[k] as usize,
                        None => row[j] as usize,
                    })
                };
                *s += values[leaf];
            }
        }
        let tree = g.tree.finish(
            |f, b| match &view.mappers[f] {
                Mapper::Numeric(m) => m.upper[b],
                Mapper::Categorical(_) => unreachable!("a numeric split of a categorical feature"),
            },
            |f, b| match &view.mappers[f] {
                Mapper::Categorical(c) => c.codes[b],
                Mapper::Numeric(_) => unreachable!("a categorical split of a numeric feature"),
            },
            values,
        );
        self.trees.push(tree);
        self.gains.push(g.gains);
        if stopping {
            let m = metric(self.task, view.valid_y, &self.valid_scores);
            match self.best {
                Some((b, _)) if m >= b => {
                    if self.trees.len() - self.best.unwrap().1 >= es {
                        self.end();
                        return;
                    }
                }
                _ => self.best = Some((m, self.trees.len())),
            }
        }
        if self.round >= self.cfg.rounds() {
            self.end();
        }
    }

    fn end(&mut self) {
        self.done = true;
        if let Some((_, k)) = self.best {
            self.trees.truncate(k);
            self.gains.truncate(k);
        }
        self.gh = Vec::new();
        self.scores = Vec::new();
        self.order = Vec::new();
        self.valid_scores = Vec::new();
    }

    /// The fitted model (call when done).
    pub fn model(&self, view: &GroupView<'_>) -> GbdtModel {
        let d = view.data.d;
        let mut importance = vec![0.0; d];
        for t in &self.gains {
            for &(f, gain) in t {
                importance[f as usize] += gain;
            }
        }
        GbdtModel {
            init: self.init,
            trees: self.trees.clone(),
            importance,
            bins: view.mappers.iter().map(|m| m.value_bins() as u32).collect(),
        }
    }
}

/// Stable partition of `rows`: the rows with `side(row) == 1` stay in front,
/// in order, the others follow, in order; returns how many went left.
/// Without branches: each row is written to both sides and only the cursor
/// of its side advances (a split sends rows left and right unpredictably).
/// `w <= i`, so the left side is written in place.
#[inline(always)]
fn partition(rows: &mut [u32], tmp: &mut [u32], side: impl Fn(u32) -> usize) -> usize {
    let count = rows.len();
    let (mut w, mut t) = (0, 0);
    for i in 0..count {
        let r = rows[i];
        let l = side(r);
        rows[w] = r;
        tmp[t] = r;
        w += l;
        t += 1 - l;
    }
    rows[w..].copy_from_slice(&tmp[..t]);
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gbdt::binning::BinMapper;
    use crate::gbdt::params::GbdtParams;

    /// Bins and offsets for one feature of the given bins per row.
    fn view<'a>(
        bins: &'a [u8],
        offsets: &'a [u32],
        y: &'a [f64],
        mappers: &'a [Mapper],
    ) -> GroupView<'a> {
        GroupView {
            data: BinnedGroup {
                d: 1,
                n: bins.len(),
                bins,
                rbins: bins,
                offsets,
                row_offsets: &offsets[..1],
                wide: &[],
                wbins: &[],
                wrbins: &[],
            },
            y,
            mappers,
            valid_bins: &[],
            valid_wbins: &[],
            valid_y: &[],
        }
    }

    // The hand-computed data: x in bins 0,0,1,1,2,2 (uppers 1.5, 2.5, inf);
    // y = 1,1,1,1,7,7; stumps (2 leaves) without a row minimum.
    const HAND_BINS: [u8; 6] = [0, 0, 1, 1, 2, 2];
    const HAND_OFFSETS: [u32; 2] = [0, 4];
    const HAND_Y: [f64; 6] = [1.0, 1.0, 1.0, 1.0, 7.0, 7.0];

    fn hand_mappers() -> [Mapper; 1] {
        [Mapper::Numeric(BinMapper {
            upper: vec![1.5, 2.5, f64::INFINITY],
        })]
    }

    /// A checked config of `rounds` trees of `num_leaves` leaves.
    fn trees(rounds: u32, num_leaves: u32, min_data_in_leaf: u32) -> GbdtConfig {
        GbdtParams::new()
            .rounds(rounds)
            .num_leaves(num_leaves)
            .min_data_in_leaf(min_data_in_leaf)
            .check()
            .unwrap()
    }

    fn hand_stumps(rounds: u32) -> GbdtConfig {
        trees(rounds, 2, 1)
    }

    #[test]
    fn one_regression_round_by_hand() {
        // init = mean = 3; gradients s - y = 2,2,2,2,-4,-4; hessians 1.
        // Split t=1: L (8, 4) R (-8, 2): 64/4 + 64/2 - 0 = 48 (t=0: 16/2+16/4=12).
        // Leaf values: -8/4*0.1 = -0.2, 8/2*0.1 = 0.4.
        let mappers = hand_mappers();
        let v = view(&HAND_BINS, &HAND_OFFSETS, &HAND_Y, &mappers);
        let mut b = Booster::new(Task::Regression, hand_stumps(1), 0, &v);
        assert_eq!(b.init, 3.0);
        b.run_round(&v, &mut StepScratch::default(), None);
        assert!(b.is_done());
        let m = b.model(&v);
        assert_eq!(m.trees.len(), 1);
        let t = &m.trees[0];
        assert_eq!(t.threshold, vec![2.5]);
        assert!((t.leaf_value[0] + 0.2).abs() < 1e-12);
        assert!((t.leaf_value[1] - 0.4).abs() < 1e-12);
        assert_eq!(m.importance, vec![48.0]);
        assert!((m.raw(&[1.0]) - 2.8).abs() < 1e-12);
        assert!((m.raw(&[3.0]) - 3.4).abs() < 1e-12);
    }

    #[test]
    fn a_full_tree_ends_its_round_without_more_histograms() {
        // The hand-computed data, stepped by hand: the root histogram, then
        // the split fills the 2-leaf tree, so the step ends the round at
        // once instead of asking for the children's.
        let mappers = hand_mappers();
        let v = view(&HAND_BINS, &HAND_OFFSETS, &HAND_Y, &mappers);
        let mut b = Booster::new(Task::Regression, hand_stumps(2), 0, &v);
        let mut scratch = StepScratch::default();
        let mut hist = vec![0.0; v.data.hist_len()];
        b.build(&v, 0..6, &mut hist);
        assert!(b.step(&v, hist, &mut scratch), "the split filled the tree");
        assert_eq!(b.model(&v).trees.len(), 1);
        assert!(!b.is_done(), "one of two rounds");
        // Round 2 starts from a root histogram again.
        let mut hist = vec![0.0; v.data.hist_len()];
        b.build(&v, 0..6, &mut hist);
        assert!(b.step(&v, hist, &mut scratch));
        assert!(b.is_done());
        assert_eq!(b.model(&v).trees.len(), 2);
    }

    #[test]
    fn leaves_too_small_to_split_get_no_histograms() {
        // 60 rows, min_data_in_leaf 20: the root (x in bins 0..2, y jumps at
        // bin 1) splits 20/40; the 20 may not split, the 40 may, so its
        // sibling's histogram is asked for; the 40 then splits 20/20, and
        // neither may split: the round ends in that step, asking nothing.
        let bins: Vec<u8> = (0..60u8).map(|i| i / 20).collect();
        let y: Vec<f64> = (0..60u32)
            .map(|i| f64::from(i / 20 * (i / 20) + i % 2))
            .collect();
        let offsets = [0u32, 4];
        let mappers = [Mapper::Numeric(BinMapper {
            upper: vec![0.5, 1.5, f64::INFINITY],
        })];
        let v = view(&bins, &offsets, &y, &mappers);
        let cfg = trees(1, 31, 20);
        let mut b = Booster::new(Task::Regression, cfg, 0, &v);
        let mut scratch = StepScratch::default();
        let mut asked = 0;
        loop {
            let mut hist = vec![0.0; v.data.hist_len()];
            b.build(&v, 0..60, &mut hist);
            asked += 1;
            if b.step(&v, hist, &mut scratch) {
                break;
            }
        }
        assert_eq!(asked, 2, "the root's and one child's histogram");
        let t = &b.model(&v).trees[0];
        assert_eq!(t.leaf_value.len(), 3);
    }

    #[test]
    fn binary_start_and_min_data_stop() {
        // y = 1,0,0,0: init = ln(0.25/0.75); 4 rows < 2*min_data=20: no split, boosting ends.
        let bins = [0u8, 1, 2, 3];
        let offsets = [0u32, 5];
        let y = [1.0, 0.0, 0.0, 0.0];
        let mappers = [Mapper::Numeric(BinMapper {
            upper: vec![0.5, 1.5, 2.5, f64::INFINITY],
        })];
        let v = view(&bins, &offsets, &y, &mappers);
        let cfg = GbdtParams::new().check().unwrap();
        let mut b = Booster::new(Task::Binary, cfg, 0, &v);
        assert!((b.init - (1.0f64 / 3.0).ln()).abs() < 1e-12);
        // gradient p - y with p = 0.25; hessian p (1 - p)
        assert_eq!(b.gh[0], [-0.75f32, 0.1875]);
        b.run_round(&v, &mut StepScratch::default(), None);
        assert!(b.is_done());
        assert!(b.model(&v).trees.is_empty());
    }

    #[test]
    fn a_cut_group_builds_the_same_histograms_in_every_round() {
        // 40 rows of one feature, trees of 4 leaves over 3 rounds, stepped
        // with each histogram built from two row ranges (as two workers
        // holding halves of the group do): each range must hold exactly the
        // leaf's rows in it, and the sum equal the one-range build, in every
        // round (which needs each leaf's rows ascending).
        let bins: Vec<u8> = (0..40u32).map(|i| ((i * 7) % 10) as u8).collect();
        let y: Vec<f64> = (0..40u32)
            .map(|i| f64::from((i * 7) % 10 * (i % 3)))
            .collect();
        let offsets = [0u32, 11];
        let mappers = [Mapper::Numeric(BinMapper {
            upper: (0..10)
                .map(|b| {
                    if b == 9 {
                        f64::INFINITY
                    } else {
                        f64::from(b) + 0.5
                    }
                })
                .collect(),
        })];
        let v = view(&bins, &offsets, &y, &mappers);
        let cfg = trees(3, 4, 1);
        let mut b = Booster::new(Task::Regression, cfg, 0, &v);
        let mut scratch = StepScratch::default();
        let len = v.data.hist_len();
        let mut steps = 0;
        while !b.is_done() {
            let mut whole = vec![0.0; len];
            b.build(&v, 0..40, &mut whole);
            let mut first = vec![0.0; len];
            b.build(&v, 0..17, &mut first);
            // By definition: the asked-for leaf's rows below 17.
            let mut want = vec![0.0; len];
            match &b.grow {
                None => build_range(&mut want, &v.data, 0..17, &b.gh),
                Some(g) => {
                    let leaf = &g.leaves[g.pending.0];
                    let rows: Vec<u32> = b.order[leaf.begin..leaf.begin + leaf.count]
                        .iter()
                        .copied()
                        .filter(|&r| r < 17)
                        .collect();
                    build_rows(&mut want, &v.data, &rows, &b.gh);
                }
            }
            assert_eq!(first, want, "step {steps}: rows 0..17");
            let mut halves = first;
            b.build(&v, 17..40, &mut halves);
            for (x, y) in whole.iter().zip(&halves) {
                assert!(
                    (x - y).abs() < 1e-9,
                    "step {steps}: {whole:?} vs {halves:?}"
                );
            }
            b.step(&v, whole, &mut scratch);
            steps += 1;
        }
        assert_eq!(b.model(&v).trees.len(), 3);
        assert!(
            steps >= 6,
            "{steps} steps: the trees must grow past the root"
        );
    }

    #[test]
    fn feature_sampling_depends_on_seed_and_round_only() {
        let a = round_features(10, 0.5, 3, 1);
        assert_eq!(a.len(), 5);
        assert_eq!(a, round_features(10, 0.5, 3, 1));
        assert_eq!(round_features(10, 1.0, 3, 1), (0..10).collect::<Vec<_>>());
        assert_eq!(round_features(10, 0.01, 3, 1).len(), 1);
    }
}
