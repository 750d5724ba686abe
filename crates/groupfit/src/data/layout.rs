//! The group-sorted, per-group standardised feature matrix every solver scans.
//!
//! Rows of one group are contiguous (an O(n) counting sort on the group id)
//! and cut into blocks of up to [`BLOCK`] rows, each block stored
//! feature-major (all values of feature 0, then feature 1, ...), its row count
//! padded with zeros to a multiple of [`LANES`] and its feature count to a
//! multiple of 4, so kernels stream whole SIMD vectors with no transposition.
//! Categorical features are not stored as dense one-hot rows: each block
//! holds, per categorical feature and row, the column of the row's category
//! (a *slot*), so a row's one-hot part costs one index per feature.

use super::onehot::{lookup, OneHotPlan};
use super::stats::{group_major_stats, std_or_one, ColumnStats};
use super::Column;
use crate::error::{GroupfitError, Result};

/// Rows per block.
pub const BLOCK: usize = 256;
/// Row padding unit of a block (SIMD lanes of `f32` kernels).
pub const LANES: usize = 16;
/// Feature padding unit of a block.
const FEATURE_PAD: usize = 4;

/// One block of a group's rows.
#[derive(Debug, Clone, Copy)]
pub struct Block<'a> {
    /// `dp x width` values, feature-major; padding is zero.
    pub x: &'a [f32],
    /// Slots per feature (rows rounded up to [`LANES`]).
    pub width: usize,
    /// Feature rows stored (features rounded up to 4).
    pub dp: usize,
    /// Targets of the block's rows (its length is the row count).
    pub y: &'a [f64],
    /// Position of the block in its group (0 for the first).
    pub index: usize,
    /// The real feature rows of `x` (at most `dp`): every column before
    /// the one-hot ones.
    pub dense: usize,
    /// `k x width` slots, categorical feature-major: the one-hot column
    /// (`>= dense`) that is 1 in a row, or [`NO_SLOT`] (all zeros: an
    /// unseen category, or a padding slot). Empty without categorical features.
    pub slots: &'a [u32],
}

/// A slot of a row whose one-hot columns of a feature are all zero.
pub const NO_SLOT: u32 = u32::MAX;

/// Features of the training rows as `f32`, group-sorted and blocked (see the
/// module docs), each group's columns standardised by that group's own mean
/// and standard deviation.
///
/// Standardising per group is an exact reparameterisation for the solvers
/// (the intercept absorbs the mean; the L2 penalty is rescaled by the scale), and
/// it makes a column that is constant inside a group exactly zero there, so a
/// per-route `distance` column does not make the route's problem ill-conditioned.
///
/// With `with_global`, one extra pseudo-group (index `n_groups`) holds every
/// training row again, standardised by the global statistics: the global model
/// is then one more work unit, planned and solved like any other.
///
/// Built with a [`OneHotPlan`] ([`GroupedMatrix::build_encoded`]), the
/// columns are the plan's: the numeric features, standardised, then the
/// categorical features one-hot, per each row's group's encoding (the global
/// copy per the global one), as raw 0/1 (mean 0, scale 1). The numeric
/// columns are the blocks' dense rows; the one-hot ones are their slots
/// ([`Block::slots`]).
#[derive(Debug, Clone)]
pub struct GroupedMatrix {
    d: usize,
    /// Dense feature rows (the numeric columns; `d` without a plan).
    dense: usize,
    dp: usize,
    x: Vec<f32>,
    /// Categorical features stored as slots (0 without a plan).
    k: usize,
    /// Per block, `k x width` slots (block `b`'s start at `k * block_off[b] / dp`).
    slots: Vec<u32>,
    y: Vec<f64>,
    offsets: Vec<usize>,
    /// Per group, its first block (length `groups + 1`).
    first_block: Vec<usize>,
    /// Per block, its offset in `x` (length `blocks + 1`).
    block_off: Vec<usize>,
    mean: Vec<f64>,
    scale: Vec<f64>,
    /// Per input feature (a categorical one: 0).
    impute: Vec<f64>,
    /// Per group, the index its first block has in the whole group (0 unless
    /// the matrix holds a shard of a group that starts further in).
    block_base: Vec<usize>,
    /// The one-hot columns' plan, when there are categorical features.
    onehot: Option<OneHotPlan>,
}

/// Standardisation given from outside instead of computed from the rows: a
/// worker holding shards of groups standardises them by each group's
/// statistics over all workers, so its blocks are those of a single-machine
/// layout (see `crate::remote`).
#[derive(Debug, Clone, Copy)]
pub struct GivenStats<'a> {
    /// Per group, the mean of each feature (`n_groups x d`).
    pub mean: &'a [f64],
    /// Per group, the scale of each feature (`n_groups x d`).
    pub scale: &'a [f64],
    /// The value that replaces a missing value of each feature.
    pub impute: &'a [f64],
    /// Per group, the position (in blocks) of its first row in the whole group.
    pub block_base: &'a [usize],
}

/// What [`GroupedMatrix::build`] reads: raw feature columns (NaN for missing),
/// the target, and which rows are training rows in which group.
#[derive(Debug, Clone, Copy)]
pub struct LayoutInput<'a> {
    /// Raw feature columns, each as long as the input table.
    pub columns: &'a [Column],
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
    /// Values replacing a missing feature given from outside (a worker
    /// holding some of the groups: the means over every training row);
    /// `None`: the mean of the feature over `rows`.
    pub impute: Option<&'a [f64]>,
    /// Threads to spread the columns over.
    pub threads: usize,
}

/// A raw pointer that may cross threads; every thread writes a disjoint set of
/// elements (here its own feature rows of every block; in the MLP layout its
/// own rows).
#[derive(Clone, Copy)]
pub(crate) struct SharedOut<T = f32>(pub(crate) *mut T);
// SAFETY: see the type's docs: writes through it never overlap between threads.
unsafe impl<T> Send for SharedOut<T> {}
unsafe impl<T> Sync for SharedOut<T> {}

impl GroupedMatrix {
    /// Builds the layout. Per column (columns spread over threads): one pass
    /// for the group sums and the imputation value (the training mean of the
    /// non-missing values), one for the group variances, one gather into the
    /// blocks. Returns the matrix; [`GroupedMatrix::impute`] gives the values
    /// that replaced NaN.
    pub fn build(input: LayoutInput<'_>) -> Result<GroupedMatrix> {
        Self::build_inner(input, None, None)
    }

    /// Builds the layout with the columns of `plan` (built for the same
    /// rows and groups): the numeric features as [`GroupedMatrix::build`]
    /// does, then each categorical feature's one-hot block.
    pub fn build_encoded(input: LayoutInput<'_>, plan: OneHotPlan) -> Result<GroupedMatrix> {
        Self::build_inner(input, None, Some(plan))
    }

    /// Builds the layout with the given standardisation (no statistics
    /// passes; `with_global` must be false). Each group's blocks are numbered
    /// from its `block_base`, so a shard cut at a block boundary of a group
    /// has the blocks (and Hessian sample) it has in the whole group.
    pub fn build_with_stats(
        input: LayoutInput<'_>,
        given: GivenStats<'_>,
    ) -> Result<GroupedMatrix> {
        let (d, ng) = (input.columns.len(), input.n_groups);
        if input.with_global
            || given.mean.len() != ng * d
            || given.scale.len() != ng * d
            || given.impute.len() != d
            || given.block_base.len() != ng
        {
            return Err(GroupfitError::arg(
                "layout: given statistics do not match the groups and features",
            ));
        }
        Self::build_inner(input, Some(given), None)
    }

    fn build_inner(
        input: LayoutInput<'_>,
        given: Option<GivenStats<'_>>,
        plan: Option<OneHotPlan>,
    ) -> Result<GroupedMatrix> {
        let d_in = input.columns.len();
        let numeric: Vec<usize> = plan
            .as_ref()
            .map_or_else(|| (0..d_in).collect(), |p| p.numeric.clone());
        let d = plan.as_ref().map_or(d_in, OneHotPlan::width);
        if input.group_of.len() != input.rows.len() {
            return Err(GroupfitError::arg(
                "layout: rows and group ids differ in length",
            ));
        }
        let g_total = input.n_groups + usize::from(input.with_global);
        let t0 = std::time::Instant::now();
        let stamp = |what: &str| {
            if crate::util::trace::trace() {
                eprintln!(
                    "[groupfit]   layout {what}: {:.1} ms",
                    t0.elapsed().as_secs_f64() * 1e3
                );
            }
        };
        let sorted = SortedRows::new(&input);
        let dense = numeric.len();
        // At least one padded row, so a block's width is its size over `dp`.
        let dp = dense.max(1).div_ceil(FEATURE_PAD) * FEATURE_PAD;
        let k = plan.as_ref().map_or(0, |p| p.blocks.len());
        let blocks = BlockMap::new(&sorted.offsets, dp);
        stamp("sort and block map");
        let mut x = super::zeroed_f32_large(*blocks.block_off.last().unwrap());
        let mut slots = vec![NO_SLOT; k * *blocks.block_off.last().unwrap() / dp];
        stamp("allocate");
        let shape = Shape {
            offsets: &sorted.offsets,
            first_block: &blocks.first_block,
            block_off: &blocks.block_off,
            dp,
            src: &sorted.src,
        };
        let out = SharedOut(x.as_mut_ptr());
        let per_column = standardise_columns(&input, &numeric, given, &shape, out);
        stamp("columns");
        if let Some(p) = &plan {
            onehot_slots(&input, p, &shape, SharedOut(slots.as_mut_ptr()));
            stamp("one-hot slots");
        }
        let (mean, scale, stats_impute) = group_major_stats(per_column, g_total, d);
        let mut impute = vec![0.0; d_in];
        for (i, &j) in numeric.iter().enumerate() {
            impute[j] = stats_impute[i];
        }
        Ok(GroupedMatrix {
            d,
            dense,
            dp,
            x,
            k,
            slots,
            y: sorted.y,
            offsets: sorted.offsets,
            first_block: blocks.first_block,
            block_off: blocks.block_off,
            mean,
            scale,
            impute,
            block_base: given.map_or_else(|| vec![0; g_total], |gs| gs.block_base.to_vec()),
            onehot: plan,
        })
    }

    /// The value that replaced a missing value of each input feature
    /// (training mean; 0 for a categorical feature).
    pub fn impute(&self) -> &[f64] {
        &self.impute
    }

    /// The one-hot plan of [`GroupedMatrix::build_encoded`].
    pub fn onehot(&self) -> Option<&OneHotPlan> {
        self.onehot.as_ref()
    }

    /// Feature rows stored per block (the dense columns rounded up to 4).
    pub fn dp(&self) -> usize {
        self.dp
    }

    /// Dense columns: all of them, or the numeric ones with a one-hot plan.
    pub fn dense(&self) -> usize {
        self.dense
    }

    /// The blocks covering `rows` of group `g`. `rows` must start at a block
    /// boundary of the group (a multiple of [`BLOCK`] from its first row) and
    /// end at one or at the group's end.
    pub fn blocks(
        &self,
        g: usize,
        rows: std::ops::Range<usize>,
    ) -> impl Iterator<Item = Block<'_>> + '_ {
        let gs = self.offsets[g];
        let ge = self.offsets[g + 1];
        debug_assert!(
            (rows.start - gs) % BLOCK == 0 && (rows.end == ge || (rows.end - gs) % BLOCK == 0)
        );
        let b0 = (rows.start - gs) / BLOCK;
        let b1 = (rows.end - gs).div_ceil(BLOCK);
        (b0..b1).map(move |i| {
            let b = self.first_block[g] + i;
            let r0 = gs + i * BLOCK;
            let r1 = (r0 + BLOCK).min(ge);
            let off = self.block_off[b];
            let end = self.block_off[b + 1];
            Block {
                x: &self.x[off..end],
                width: (end - off) / self.dp,
                dp: self.dp,
                y: &self.y[r0..r1],
                index: self.block_base[g] + i,
                dense: self.dense,
                slots: &self.slots[self.k * off / self.dp..self.k * end / self.dp],
            }
        })
    }

    /// The standardised features of row `i` (a layout row index) of group `g`.
    pub fn row(&self, g: usize, i: usize) -> Vec<f32> {
        let k = i - self.offsets[g];
        let b = self.first_block[g] + k / BLOCK;
        let width = (self.block_off[b + 1] - self.block_off[b]) / self.dp;
        let mut row: Vec<f32> = (0..self.d)
            .map(|j| {
                if j < self.dense {
                    self.x[self.block_off[b] + j * width + k % BLOCK]
                } else {
                    0.0
                }
            })
            .collect();
        let slots = self.k * self.block_off[b] / self.dp;
        for f in 0..self.k {
            let s = self.slots[slots + f * width + k % BLOCK];
            if s != NO_SLOT {
                row[s as usize] = 1.0;
            }
        }
        row
    }

    /// Number of columns (the input features, or the one-hot plan's columns).
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

/// Where things are in the blocked layout being built.
struct Shape<'a> {
    offsets: &'a [usize],
    first_block: &'a [usize],
    block_off: &'a [usize],
    dp: usize,
    src: &'a [u32],
}

/// The training rows in group-sorted order (a counting sort on the group
/// id; the global pseudo-group, when present, repeats every row after the
/// groups).
struct SortedRows {
    /// Per (pseudo-)group, its first row (length `groups + 1`).
    offsets: Vec<usize>,
    /// Targets in layout order (the global copy included).
    y: Vec<f64>,
    /// Source row of every group-sorted position (the global copy reuses it).
    src: Vec<u32>,
}

impl SortedRows {
    fn new(input: &LayoutInput<'_>) -> SortedRows {
        let n = input.rows.len();
        let ng = input.n_groups;
        let g_total = ng + usize::from(input.with_global);
        // Counting sort: destination position of each training row.
        let mut counts = vec![0usize; ng];
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
        let mut cursor = offsets[..ng].to_vec();
        let mut position = vec![0u32; n];
        for (k, &g) in input.group_of.iter().enumerate() {
            position[k] = cursor[g as usize] as u32;
            cursor[g as usize] += 1;
        }
        let total = *offsets.last().unwrap();
        let mut y = vec![0.0; total];
        for (k, &r) in input.rows.iter().enumerate() {
            y[position[k] as usize] = input.target[r as usize];
            if input.with_global {
                y[n + position[k] as usize] = input.target[r as usize];
            }
        }
        let mut src = vec![0u32; n];
        for (k, &r) in input.rows.iter().enumerate() {
            src[position[k] as usize] = r;
        }
        SortedRows { offsets, y, src }
    }
}

/// Where each group's blocks are: per group, `ceil(rows / BLOCK)` blocks of
/// `dp x width` values.
struct BlockMap {
    /// Per group, its first block (length `groups + 1`).
    first_block: Vec<usize>,
    /// Per block, its offset in `x` (length `blocks + 1`).
    block_off: Vec<usize>,
}

impl BlockMap {
    fn new(offsets: &[usize], dp: usize) -> BlockMap {
        let g_total = offsets.len() - 1;
        let mut first_block = Vec::with_capacity(g_total + 1);
        let mut block_off = vec![0usize];
        for g in 0..g_total {
            first_block.push(block_off.len() - 1);
            let mut left = offsets[g + 1] - offsets[g];
            while left > 0 {
                let m = left.min(BLOCK);
                block_off.push(block_off.last().unwrap() + dp * m.div_ceil(LANES) * LANES);
                left -= m;
            }
        }
        first_block.push(block_off.len() - 1);
        BlockMap {
            first_block,
            block_off,
        }
    }
}

/// Standardises the input columns `numeric` into the blocks' first feature
/// rows through `out` (column `numeric[j]` into row `j`), the columns spread
/// over `input.threads` threads; returns each column's statistics (computed
/// from the rows, or taken from `given`) with its row.
fn standardise_columns(
    input: &LayoutInput<'_>,
    numeric: &[usize],
    given: Option<GivenStats<'_>>,
    shape: &Shape<'_>,
    out: SharedOut,
) -> Vec<(usize, ColumnStats)> {
    let d = numeric.len();
    let threads = input.threads.clamp(1, d.max(1));
    let group_rows: Vec<f64> = shape
        .offsets
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64)
        .collect();
    let work = |t: usize| -> Vec<(usize, ColumnStats)> {
        (t..d)
            .step_by(threads)
            .map(|j| {
                let column = &input.columns[numeric[j]];
                let st = match given {
                    None => crate::with_values!(column, |v| column_pass(
                        v,
                        input,
                        &group_rows,
                        shape,
                        j,
                        out
                    )),
                    Some(gs) => crate::with_values!(column, |v| given_column_pass(
                        v, input, &gs, shape, j, out
                    )),
                };
                (j, st)
            })
            .collect()
    };
    if threads == 1 {
        work(0)
    } else {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads).map(|t| s.spawn(move || work(t))).collect();
            hs.into_iter()
                .flat_map(|h| h.join().expect("layout thread panicked"))
                .collect()
        })
    }
}

/// Writes every categorical feature's slots through `out` (the features
/// spread over `input.threads` threads; each writes its own feature's slots).
fn onehot_slots(
    input: &LayoutInput<'_>,
    plan: &OneHotPlan,
    shape: &Shape<'_>,
    out: SharedOut<u32>,
) {
    let nb = plan.blocks.len();
    let threads = input.threads.clamp(1, nb.max(1));
    let work = |t: usize| {
        for b in (t..nb).step_by(threads) {
            crate::with_values!(input.columns[plan.blocks[b].feature], |v| {
                gather_onehot(v, input, shape, plan, b, out)
            });
        }
    };
    if threads == 1 {
        work(0);
    } else {
        std::thread::scope(|s| {
            for t in 0..threads {
                let work = &work;
                s.spawn(move || work(t));
            }
        });
    }
}

/// Writes, as the slot of categorical feature `b`, the column of each
/// training row's category per its group's encoding (and in the global copy,
/// per the global encoding); an uncoded category leaves [`NO_SLOT`].
fn gather_onehot<T: Copy + Into<f64>>(
    v: &[T],
    input: &LayoutInput<'_>,
    shape: &Shape<'_>,
    plan: &OneHotPlan,
    b: usize,
    out: SharedOut<u32>,
) {
    let ng = input.n_groups;
    let base = plan.blocks[b].base as u32;
    let k = plan.blocks.len();
    let mut table = Vec::new();
    let mut global = Vec::new();
    if input.with_global {
        plan.map(b, ng).fill(&mut global);
    }
    // Where the global copy's current block keeps this feature's slots.
    let mut global_off = 0;
    for g in 0..ng {
        let map = plan.map(b, g);
        map.fill(&mut table);
        let (b0, b1) = (shape.first_block[g], shape.first_block[g + 1]);
        for blk in b0..b1 {
            let p0 = shape.offsets[g] + (blk - b0) * BLOCK;
            let p1 = (p0 + BLOCK).min(shape.offsets[g + 1]);
            let width = (shape.block_off[blk + 1] - shape.block_off[blk]) / shape.dp;
            let off = k * shape.block_off[blk] / shape.dp + b * width;
            for (i, &r) in shape.src[p0..p1].iter().enumerate() {
                let c: f64 = v[r as usize].into();
                let s = lookup(&table, c);
                if s != NO_SLOT {
                    // SAFETY: slot i of feature `b` in block `blk` (inside
                    // `slots`: `k * width` slots per block), written by no
                    // other thread (threads own features).
                    unsafe { *out.0.add(off + i) = base + s };
                }
                if input.with_global {
                    let p = p0 + i;
                    if p.is_multiple_of(BLOCK) {
                        let gb = shape.first_block[ng] + p / BLOCK;
                        let width = (shape.block_off[gb + 1] - shape.block_off[gb]) / shape.dp;
                        global_off = k * shape.block_off[gb] / shape.dp + b * width;
                    }
                    let s = lookup(&global, c);
                    if s != NO_SLOT {
                        // SAFETY: as above, in the global copy's block.
                        unsafe { *out.0.add(global_off + p % BLOCK) = base + s };
                    }
                }
            }
        }
        map.clear(&mut table);
    }
}

/// Gather of feature `j` standardised by the given statistics (no
/// statistics passes).
fn given_column_pass<T: Copy + Into<f64>>(
    v: &[T],
    input: &LayoutInput<'_>,
    given: &GivenStats<'_>,
    shape: &Shape<'_>,
    j: usize,
    out: SharedOut,
) -> ColumnStats {
    let (d, ng) = (input.columns.len(), input.n_groups);
    let st = ColumnStats {
        mean: (0..ng).map(|g| given.mean[g * d + j]).collect(),
        scale: (0..ng).map(|g| given.scale[g * d + j]).collect(),
        impute: given.impute[j],
    };
    let inv: Vec<f64> = st.scale.iter().map(|s| 1.0 / s).collect();
    gather_column(v, input, shape, j, out, &st, &inv);
    st
}

/// Statistics and gather of feature `j`: group sums (and the imputation
/// value), group variances, then the standardised values into the blocks.
fn column_pass<T: Copy + Into<f64>>(
    v: &[T],
    input: &LayoutInput<'_>,
    group_rows: &[f64],
    shape: &Shape<'_>,
    j: usize,
    out: SharedOut,
) -> ColumnStats {
    let ng = input.n_groups;
    let g_total = group_rows.len();
    let mut sum = vec![0.0f64; g_total];
    let mut present = vec![0.0f64; g_total];
    // A run of rows of one group adds in locals, stored when the group
    // changes: through `sum[g]`, each row would wait on the previous row's
    // store (a long run is a level's or the root's group with
    // `--hierarchy`). The additions are the same, in the same order.
    let mut run = (usize::MAX, 0.0f64, 0.0f64);
    for (k, &r) in input.rows.iter().enumerate() {
        let x: f64 = v[r as usize].into();
        if !x.is_nan() {
            let g = input.group_of[k] as usize;
            if g != run.0 {
                if run.0 != usize::MAX {
                    (sum[run.0], present[run.0]) = (run.1, run.2);
                }
                run = (g, sum[g], present[g]);
            }
            run.1 += x;
            run.2 += 1.0;
        }
    }
    if run.0 != usize::MAX {
        (sum[run.0], present[run.0]) = (run.1, run.2);
    }
    let all_present: f64 = present[..ng].iter().sum();
    let impute = match input.impute {
        Some(given) => given[j],
        None if all_present > 0.0 => sum[..ng].iter().sum::<f64>() / all_present,
        None => 0.0,
    };
    let mut mean = vec![0.0; g_total];
    for g in 0..ng {
        if group_rows[g] > 0.0 {
            mean[g] = (sum[g] + (group_rows[g] - present[g]) * impute) / group_rows[g];
        }
    }
    if input.with_global {
        mean[ng] = impute;
    }
    let value = |r: u32| -> f64 {
        let x: f64 = v[r as usize].into();
        if x.is_nan() {
            impute
        } else {
            x
        }
    };
    let mut sq = vec![0.0f64; g_total];
    // The global sum lives in a local: added to through `sq[ng]`, every row
    // would wait on the previous row's store.
    let mut sq_global = 0.0f64;
    let mut run = (usize::MAX, 0.0f64, 0.0f64);
    for (k, &r) in input.rows.iter().enumerate() {
        let x = value(r);
        let g = input.group_of[k] as usize;
        if g != run.0 {
            if run.0 != usize::MAX {
                sq[run.0] = run.1;
            }
            run = (g, sq[g], mean[g]);
        }
        let dv = x - run.2;
        run.1 += dv * dv;
        if input.with_global {
            let dg = x - impute;
            sq_global += dg * dg;
        }
    }
    if run.0 != usize::MAX {
        sq[run.0] = run.1;
    }
    if input.with_global {
        sq[ng] = sq_global;
    }
    let scale: Vec<f64> = (0..g_total)
        .map(|g| std_or_one(sq[g], group_rows[g], mean[g]))
        .collect();
    let inv: Vec<f64> = scale.iter().map(|s| 1.0 / s).collect();
    let st = ColumnStats {
        mean,
        scale,
        impute,
    };
    gather_column(v, input, shape, j, out, &st, &inv);
    st
}

/// Writes feature `j`, standardised by `st` (`inv`: reciprocal scales), into
/// the blocks (and the global copy when the layout has one).
fn gather_column<T: Copy + Into<f64>>(
    v: &[T],
    input: &LayoutInput<'_>,
    shape: &Shape<'_>,
    j: usize,
    out: SharedOut,
    st: &ColumnStats,
    inv: &[f64],
) {
    let ng = input.n_groups;
    let (mean, impute) = (&st.mean, st.impute);
    let value = |r: u32| -> f64 {
        let x: f64 = v[r as usize].into();
        if x.is_nan() {
            impute
        } else {
            x
        }
    };
    // Gather in layout order: one (random) read of the source per row, then
    // sequential writes into the group's block and, if present, the global
    // copy, whose rows are in the same order: row `p` of the layout is row `p`
    // of the global copy (its block's feature row is found once per block).
    let inv_global = if input.with_global { inv[ng] } else { 0.0 };
    let mut global_row = 0;
    for g in 0..ng {
        let (mg, ig) = (mean[g], inv[g]);
        let (b0, b1) = (shape.first_block[g], shape.first_block[g + 1]);
        for b in b0..b1 {
            let p0 = shape.offsets[g] + (b - b0) * BLOCK;
            let p1 = (p0 + BLOCK).min(shape.offsets[g + 1]);
            let off = shape.block_off[b];
            let width = (shape.block_off[b + 1] - off) / shape.dp;
            for (i, &r) in shape.src[p0..p1].iter().enumerate() {
                let raw = value(r);
                // SAFETY: slot i of feature row j of block b, and the global
                // copy's slot of the same row: inside `x` (i < width, j < dp)
                // and written by no other thread (threads own features).
                unsafe { *out.0.add(off + j * width + i) = ((raw - mg) * ig) as f32 };
                if input.with_global {
                    let p = p0 + i;
                    if p % BLOCK == 0 {
                        let gb = shape.first_block[ng] + p / BLOCK;
                        let off = shape.block_off[gb];
                        global_row = off + j * ((shape.block_off[gb + 1] - off) / shape.dp);
                    }
                    unsafe {
                        *out.0.add(global_row + p % BLOCK) = ((raw - impute) * inv_global) as f32
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layout input of these rows, two threads, imputed by the rows' means.
    fn input<'a>(
        columns: &'a [Column],
        target: &'a [f64],
        rows: &'a [u32],
        group_of: &'a [u32],
        n_groups: usize,
        with_global: bool,
    ) -> LayoutInput<'a> {
        LayoutInput {
            columns,
            target,
            rows,
            group_of,
            n_groups,
            with_global,
            impute: None,
            threads: 2,
        }
    }

    #[test]
    fn sorts_by_group_standardises_and_appends_global() {
        // rows 0..5, groups [1, 0, 1, 0, 1], one feature with a NaN imputed by
        // the mean of the others, 3.25.
        let col = vec![Column::Owned(vec![1.0, 4.0, 3.0, f64::NAN, 5.0])];
        let y = vec![0.0, 1.0, 2.0, 3.0, 4.0];
        let rows = [0u32, 1, 2, 3, 4];
        let gid = [1u32, 0, 1, 0, 1];
        let m = GroupedMatrix::build(input(&col, &y, &rows, &gid, 2, true)).unwrap();
        assert_eq!(m.n_groups(), 3);
        assert_eq!(m.range(0), 0..2);
        assert_eq!(m.range(1), 2..5);
        assert_eq!(m.range(2), 5..10);
        assert_eq!(m.y(0..5), &[1.0, 3.0, 0.0, 2.0, 4.0]);
        assert_eq!(m.impute(), &[3.25]);
        // group 0: values 4, 3.25 -> mean 3.625, sd 0.375 -> +1, -1
        assert_eq!(m.mean(0), &[3.625]);
        assert_eq!(m.scale(0), &[0.375]);
        assert_eq!((m.row(0, 0), m.row(0, 1)), (vec![1.0], vec![-1.0]));
        // group 1: values 1, 3, 5 -> mean 3, sd sqrt(8/3)
        let sd = (8.0f64 / 3.0).sqrt();
        assert!((m.row(1, 2)[0] as f64 - (-2.0 / sd)).abs() < 1e-6);
        // Imputed by a value given from outside (a worker holding some of
        // the groups): group 0 is 4 and 10, mean 7, sd 3.
        let given = GroupedMatrix::build(LayoutInput {
            impute: Some(&[10.0]),
            ..input(&col, &y, &rows, &gid, 2, false)
        })
        .unwrap();
        assert_eq!(
            (given.impute(), given.mean(0), given.scale(0)),
            (&[10.0][..], &[7.0][..], &[3.0][..])
        );
        // blocks: group 1 is one block of 3 rows padded to 16 slots, 4 feature rows
        let blocks: Vec<_> = m.blocks(1, 2..5).collect();
        assert_eq!(
            (
                blocks.len(),
                blocks[0].width,
                blocks[0].dp,
                blocks[0].y.len()
            ),
            (1, 16, 4, 3)
        );
        assert_eq!(blocks[0].x[16..].iter().filter(|&&v| v != 0.0).count(), 0);
        // global: 1, 4, 3, 3.25, 5: mean 3.25
        assert!((m.mean(2)[0] - 3.25).abs() < 1e-12);
        // the global copy keeps the group-sorted order: its first row is row 1 (4.0)
        assert!((m.row(2, 5)[0] as f64 - (4.0 - 3.25) / m.scale(2)[0]).abs() < 1e-6);
    }

    #[test]
    fn global_copy_spans_blocks_in_group_sorted_order() {
        // 3 groups, 700 rows (the global copy holds 3 blocks), 2 features.
        let n = 700usize;
        let gid: Vec<u32> = (0..n).map(|i| ((i * 7) % 3) as u32).collect();
        let cols: Vec<Column> = (0..2)
            .map(|j| Column::Owned((0..n).map(|i| ((i * 31 + j * 17) % 97) as f64).collect()))
            .collect();
        let y = vec![0.0; n];
        let rows: Vec<u32> = (0..n as u32).collect();
        let m = GroupedMatrix::build(input(&cols, &y, &rows, &gid, 3, true)).unwrap();
        let gid_ref = &gid;
        let sorted: Vec<usize> = (0..3u32)
            .flat_map(|g| (0..n).filter(move |&i| gid_ref[i] == g))
            .collect();
        for j in 0..2 {
            let vals: Vec<f64> = (0..n).map(|i| ((i * 31 + j * 17) % 97) as f64).collect();
            let mean = vals.iter().sum::<f64>() / n as f64;
            let sd = (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
            assert!((m.mean(3)[j] - mean).abs() < 1e-9 && (m.scale(3)[j] - sd).abs() < 1e-9);
            for (k, &i) in sorted.iter().enumerate() {
                let got = m.row(3, n + k)[j] as f64;
                assert!(
                    (got - (vals[i] - mean) / sd).abs() < 1e-5,
                    "feature {j}, global row {k}"
                );
            }
        }
    }

    #[test]
    fn large_groups_are_cut_into_blocks() {
        let n = BLOCK * 2 + 5;
        let col = vec![
            Column::Owned((0..n).map(|i| i as f64).collect()),
            Column::Owned(vec![1.0; n]),
        ];
        let rows: Vec<u32> = (0..n as u32).collect();
        let m =
            GroupedMatrix::build(input(&col, &vec![0.0; n], &rows, &vec![0; n], 1, false)).unwrap();
        let blocks: Vec<_> = m.blocks(0, 0..n).collect();
        assert_eq!(
            blocks
                .iter()
                .map(|b| (b.y.len(), b.width))
                .collect::<Vec<_>>(),
            vec![(BLOCK, BLOCK), (BLOCK, BLOCK), (5, LANES)]
        );
        assert_eq!(m.blocks(0, BLOCK..n).count(), 2);
        // row order is kept inside the group: standardised values increase
        let v: Vec<f32> = (0..n).map(|i| m.row(0, i)[0]).collect();
        assert!(v.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn categorical_features_become_raw_one_hot_columns_per_group() {
        use crate::data::categorical::{FeatureKind, NULL_CODE};
        use crate::data::onehot::{Cap, OneHotPlan, PlanInput};
        // Feature 0 categorical (3 levels), feature 1 numeric. Groups
        // [0, 1, 0, 1, 0]; codes [2, 0, null, 0, 2]; max_cat 1.
        // Group 0: 2 (2 rows) kept, null in "other": columns [2, other].
        // Group 1: 0 kept: [0]. Global: 0 and 2 (2 rows each), 0 wins the
        // tie: [0, other]. Layout: numeric, then a block of 2.
        let cols = vec![
            Column::Owned(vec![2.0, 0.0, NULL_CODE, 0.0, 2.0]),
            Column::Owned(vec![1.0, 2.0, 3.0, f64::NAN, 5.0]),
        ];
        let kinds = [FeatureKind::Categorical { levels: 3 }, FeatureKind::Numeric];
        let (rows, gid) = ([0u32, 1, 2, 3, 4], [0u32, 1, 0, 1, 0]);
        let plan = OneHotPlan::build(PlanInput {
            columns: &cols,
            kinds: &kinds,
            rows: &rows,
            group_of: &gid,
            n_groups: 2,
            cap: Cap {
                max_cat: 1,
                min_cat_rows: 1,
            },
            threads: 1,
        });
        let m = GroupedMatrix::build_encoded(input(&cols, &[0.0; 5], &rows, &gid, 2, true), plan)
            .unwrap();
        assert_eq!(m.d(), 3);
        // The numeric feature's mean (of 1, 2, 3, 5) imputes; 0 for codes.
        assert_eq!(m.impute(), &[0.0, 2.75]);
        assert_eq!(m.mean(0), &[3.0, 0.0, 0.0]);
        assert!((m.scale(0)[0] - (8.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(m.scale(0)[1..], [1.0, 1.0]);
        // Group 0's rows (2, null, 2): one-hot [1, 0], [0, 1], [1, 0].
        let onehot = |g: usize, i: usize| m.row(g, i)[1..].to_vec();
        assert_eq!(
            (onehot(0, 0), onehot(0, 1), onehot(0, 2)),
            (vec![1.0, 0.0], vec![0.0, 1.0], vec![1.0, 0.0])
        );
        // Group 1's rows (0, 0): [1, 0] twice (its second column unused).
        assert_eq!(
            (onehot(1, 3), onehot(1, 4)),
            (vec![1.0, 0.0], vec![1.0, 0.0])
        );
        // The global copy, in group-sorted order (2, null, 2, 0, 0): 0 kept.
        let global: Vec<Vec<f32>> = (5..10).map(|i| onehot(2, i)).collect();
        assert_eq!(
            global,
            vec![
                vec![0.0, 1.0],
                vec![0.0, 1.0],
                vec![0.0, 1.0],
                vec![1.0, 0.0],
                vec![1.0, 0.0]
            ]
        );
        assert_eq!(m.mean(2)[1..], [0.0, 0.0]);
        assert_eq!(m.onehot().unwrap().map(0, 1).codes, vec![0.0]);
    }

    #[test]
    fn constant_column_in_a_group_becomes_zero() {
        let col = vec![Column::Owned(vec![7.0, 7.0, 7.0])];
        let m = GroupedMatrix::build(input(
            &col,
            &[0.0, 1.0, 0.0],
            &[0, 1, 2],
            &[0, 0, 0],
            1,
            false,
        ))
        .unwrap();
        assert_eq!(m.scale(0), &[1.0]);
        assert_eq!(
            (0..3).map(|i| m.row(0, i)[0]).collect::<Vec<_>>(),
            vec![0.0, 0.0, 0.0]
        );
    }
}
