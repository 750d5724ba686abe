//! The MLP family plugged into the pass driver: every (group, config) network
//! trained together, one mini-batch step per pass.
//!
//! **Row space.** The driver plans over row ranges; for this family group
//! `g`'s range has one *slot* per row of a mini-batch (`min(batch_size,
//! rows of g)`, the largest over configs). A shard of slots `lo..hi` means
//! "batch members `lo..hi` of this step's batch", so the planner's cost
//! (rows × active units) is exactly a pass's work, task parallelism gives
//! whole batches to workers, and a cut group is data parallel inside its
//! batch: `accumulate` computes the gradient of a part of the batch,
//! `combine` sums the parts and `apply` takes the optimizer step.
//!
//! **Schedule.** Which rows form a batch depends only on the seed, the
//! group's stream id (a hash of its key) and the epoch: never on the plan or
//! on other groups. So every strategy and thread count computes the same
//! models up to summation order, and a group trained with thousands of others
//! equals the group trained alone. The configs of a group that share a batch
//! (same `batch_size`, same step) read it once, and their first layers are
//! one GEMM ([`super::kernel::batch_gradients`]).

use std::ops::Range;

use super::init::{epoch_permutation, init_params};
use super::kernel::{batch_gradients, optimizer_step, Net, OptState, StepScratch};
use super::model::MlpModel;
use super::params::MlpConfig;
use crate::data::onehot::{lookup, OneHotPlan};
use crate::data::{Column, Task};
use crate::exec::{run_passes, OnProgress, PartialStep, RunReport, UnitProgress};
use crate::plan::Strategy;

/// The training rows of every fitted group, standardised by the group's own
/// mean and standard deviation, row-major `f32`, group after group.
///
/// With a [`OneHotPlan`] ([`MlpData::build_encoded`]), a row's columns are
/// the plan's: the numeric features, standardised, then each categorical
/// feature's one-hot block, per the row's group's encoding, as raw 0/1
/// (mean 0, standard deviation 1). A group's network reads only the
/// columns it uses ([`OneHotPlan::columns`]): the others are zero, and so
/// are its first-layer weights on them.
#[derive(Debug, Clone)]
pub struct MlpData {
    d: usize,
    x: Vec<f32>,
    y: Vec<f32>,
    start: Vec<usize>,
    mean: Vec<f64>,
    std: Vec<f64>,
    src: Vec<u32>,
    onehot: Option<OneHotPlan>,
}

/// What [`MlpData::build`] reads.
#[derive(Debug, Clone, Copy)]
pub struct MlpInput<'a> {
    /// Raw feature columns over every row of the table (NaN: missing).
    pub columns: &'a [Column],
    /// The target over every row of the table.
    pub target: &'a [f64],
    /// Training rows, ascending.
    pub rows: &'a [u32],
    /// Group id of each training row (aligned with `rows`).
    pub group_of: &'a [u32],
    /// Number of groups; group `n_groups` is the global pseudo-group of all rows.
    pub n_groups: usize,
    /// Which groups to lay out (`n_groups + 1` entries).
    pub fit: &'a [bool],
    /// Per-feature replacement of NaN.
    pub impute: &'a [f64],
    /// Threads to spread the work over.
    pub threads: usize,
}

impl MlpData {
    /// Lays out the rows of every group with `fit[g]` in file order, imputes
    /// missing values, and standardises each group by its own statistics
    /// (population standard deviation, 1 where it is 0).
    pub fn build(input: MlpInput<'_>) -> MlpData {
        Self::build_from(input, None, None)
    }

    /// [`MlpData::build`] with the columns of `plan` (built for the same
    /// rows and groups; see the type's docs).
    pub fn build_encoded(input: MlpInput<'_>, plan: OneHotPlan) -> MlpData {
        Self::build_from(input, Some(plan), None)
    }

    /// [`MlpData::build`] standardised with given statistics: per group
    /// (`n_groups + 1` of them), every feature's mean and standard
    /// deviation (a remote worker's pieces, with their whole groups').
    pub fn build_with_stats(input: MlpInput<'_>, mean: Vec<f64>, std: Vec<f64>) -> MlpData {
        Self::build_from(input, None, Some(GroupStats { mean, std }))
    }

    fn build_from(
        input: MlpInput<'_>,
        plan: Option<OneHotPlan>,
        given: Option<GroupStats>,
    ) -> MlpData {
        debug_assert_eq!(input.group_of.len(), input.rows.len());
        let numeric: Vec<usize> = plan
            .as_ref()
            .map_or_else(|| (0..input.columns.len()).collect(), |p| p.numeric.clone());
        let d = plan.as_ref().map_or(numeric.len(), OneHotPlan::width);
        let order = RowOrder::new(&input);
        let y: Vec<f32> = order
            .src
            .iter()
            .map(|&r| input.target[r as usize] as f32)
            .collect();
        let stats = given.unwrap_or_else(|| GroupStats::new(&input, &order, &numeric, d));
        let mut x = standardised_rows(&input, &order, &stats, &numeric, d);
        if let Some(p) = &plan {
            onehot_rows(&input, &order, p, d, &mut x);
        }
        MlpData {
            d,
            x,
            y,
            start: order.start,
            mean: stats.mean,
            std: stats.std,
            src: order.src,
            onehot: plan,
        }
    }

    /// Columns of a row (the features, or the one-hot plan's columns).
    pub fn d(&self) -> usize {
        self.d
    }

    /// The one-hot plan of [`MlpData::build_encoded`].
    pub fn onehot(&self) -> Option<&OneHotPlan> {
        self.onehot.as_ref()
    }
    /// Rows of group `g`.
    pub fn rows_of(&self, g: usize) -> usize {
        self.start[g + 1] - self.start[g]
    }
    /// Group `g`'s training mean per feature.
    pub fn mean(&self, g: usize) -> &[f64] {
        &self.mean[g * self.d..(g + 1) * self.d]
    }
    /// Group `g`'s standard deviation per feature.
    pub fn std(&self, g: usize) -> &[f64] {
        &self.std[g * self.d..(g + 1) * self.d]
    }
    /// The training-file rows of group `g`, in the order the batch
    /// permutations index.
    pub fn source_rows(&self, g: usize) -> &[u32] {
        &self.src[self.start[g]..self.start[g + 1]]
    }
}

/// Where the training rows go in the layout: the fitted groups' rows in file
/// order, group after group, then (when it is fitted) every row again for
/// the global pseudo-group.
struct RowOrder {
    /// First layout row of each group (`n_groups + 2` entries).
    start: Vec<usize>,
    /// The training-file row of each layout row.
    src: Vec<u32>,
    /// The layout row of each training row in its own group (`u32::MAX`:
    /// the group is not fitted); its global row is `start[n_groups] + k`.
    dest: Vec<u32>,
}

impl RowOrder {
    fn new(input: &MlpInput<'_>) -> RowOrder {
        let ng = input.n_groups;
        let counts = crate::data::rows_per_group(input.group_of, ng);
        let mut start = vec![0usize; ng + 2];
        for g in 0..=ng {
            start[g + 1] = start[g] + if input.fit[g] { counts[g] } else { 0 };
        }
        let total = start[ng + 1];
        let mut src = vec![0u32; total];
        let mut dest = vec![u32::MAX; input.rows.len()];
        let mut cursor = start[..=ng].to_vec();
        for (k, &r) in input.rows.iter().enumerate() {
            let g = input.group_of[k] as usize;
            if input.fit[g] {
                src[cursor[g]] = r;
                dest[k] = cursor[g] as u32;
                cursor[g] += 1;
            }
            if input.fit[ng] {
                src[cursor[ng]] = r;
                cursor[ng] += 1;
            }
        }
        RowOrder { start, src, dest }
    }
}

/// Each (pseudo-)group's mean and population standard deviation (1 where
/// it is 0) of every imputed feature, `(n_groups + 1) x d` (a one-hot
/// column: 0 and 1).
struct GroupStats {
    mean: Vec<f64>,
    std: Vec<f64>,
}

impl GroupStats {
    /// The statistics of the input columns `numeric` (row columns
    /// `0..numeric.len()` of `width`), columns spread over the threads.
    fn new(input: &MlpInput<'_>, order: &RowOrder, numeric: &[usize], width: usize) -> GroupStats {
        let d = numeric.len();
        let ng = input.n_groups;
        let threads = input.threads.max(1);
        let column_stats = |i: usize| column_stats(input, order, numeric[i]);
        let per_column: Vec<(Vec<f64>, Vec<f64>)> = if threads == 1 || d < 2 {
            (0..d).map(column_stats).collect()
        } else {
            let t = threads.min(d);
            let mut parts: Vec<Vec<(usize, (Vec<f64>, Vec<f64>))>> = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..t)
                    .map(|w| {
                        let f = &column_stats;
                        sc.spawn(move || (w..d).step_by(t).map(|j| (j, f(j))).collect())
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().expect("layout thread panicked"))
                    .collect()
            });
            let mut all: Vec<(usize, (Vec<f64>, Vec<f64>))> = parts.drain(..).flatten().collect();
            all.sort_by_key(|(j, _)| *j);
            all.into_iter().map(|(_, st)| st).collect()
        };
        let mut mean = vec![0.0; (ng + 1) * width];
        let mut std = vec![1.0; (ng + 1) * width];
        for (j, (m, sd)) in per_column.iter().enumerate() {
            for g in 0..=ng {
                mean[g * width + j] = m[g];
                std[g * width + j] = sd[g];
            }
        }
        GroupStats { mean, std }
    }
}

/// Column `j`'s mean and standard deviation (1 where it is 0) in each
/// (pseudo-)group, missing values imputed.
fn column_stats(input: &MlpInput<'_>, order: &RowOrder, j: usize) -> (Vec<f64>, Vec<f64>) {
    let ng = input.n_groups;
    let mut mean = vec![0.0; ng + 1];
    let mut std = vec![1.0; ng + 1];
    crate::with_values!(input.columns[j], |v| {
        let get = |r: u32| {
            let a = v[r as usize] as f64;
            if a.is_nan() {
                input.impute[j]
            } else {
                a
            }
        };
        for g in 0..=ng {
            let part = &order.src[order.start[g]..order.start[g + 1]];
            if part.is_empty() {
                continue;
            }
            let (m, sd) = mean_and_std(part, get);
            mean[g] = m;
            std[g] = if sd > 0.0 { sd } else { 1.0 };
        }
    });
    (mean, std)
}

/// Mean and population standard deviation of `get(r)` over the rows `part`
/// (not empty).
#[inline]
fn mean_and_std(part: &[u32], get: impl Fn(u32) -> f64) -> (f64, f64) {
    // One pass of sums shifted by the group's first value
    // (no cancellation for data far from 0).
    let n = part.len() as f64;
    let k = get(part[0]);
    let (mut s1, mut s2) = (0.0, 0.0);
    for &r in part {
        let t = get(r) - k;
        s1 += t;
        s2 += t * t;
    }
    let (m1, sd) = if s2.is_finite() {
        (s1 / n, (s2 / n - (s1 / n) * (s1 / n)).max(0.0).sqrt())
    } else {
        // Squares beyond f64 (values past ~1e154): the same
        // sums over values scaled by the largest deviation.
        let mx = part.iter().fold(0.0f64, |a, &r| a.max((get(r) - k).abs()));
        let (mut u1, mut u2) = (0.0, 0.0);
        for &r in part {
            let t = (get(r) - k) / mx;
            u1 += t;
            u2 += t * t;
        }
        let scaled = (u2 / n - (u1 / n) * (u1 / n)).max(0.0);
        (mx * (u1 / n), mx * scaled.sqrt())
    };
    (k + m1, sd)
}

/// The standardised rows, row-major `f32` in layout order.
///
/// The training rows are read in their order (threads take ranges of them),
/// each column in turn over a chunk of rows: the table's columns are read
/// sequentially and a chunk's destination rows (its groups' rows and, with
/// the global model, its global rows) stay in cache until every column is
/// written. Reading in layout order instead fetches a cache line of the
/// table per value when the groups are small.
///
/// Input column `numeric[i]` goes to row column `i` (of `d`).
fn standardised_rows(
    input: &MlpInput<'_>,
    order: &RowOrder,
    stats: &GroupStats,
    numeric: &[usize],
    d: usize,
) -> Vec<f32> {
    const CHUNK: usize = 1024;
    let ng = input.n_groups;
    let threads = input.threads.max(1);
    let (start, dest) = (&order.start, &order.dest);
    let (mean, std) = (&stats.mean, &stats.std);
    let mut x = crate::data::zeroed_f32_large(start[ng + 1] * d);
    let n = input.rows.len();
    let out = crate::data::layout::SharedOut(x.as_mut_ptr());
    let write = |lo: usize, hi: usize| {
        let out = out;
        for c0 in (lo..hi).step_by(CHUNK) {
            let ks = c0..(c0 + CHUNK).min(hi);
            for (j, &col) in numeric.iter().enumerate() {
                let fill = input.impute[col];
                let gm = ng * d + j;
                crate::with_values!(input.columns[col], |v| {
                    for k in ks.clone() {
                        let a = v[input.rows[k] as usize] as f64;
                        let a = if a.is_nan() { fill } else { a };
                        let p = dest[k];
                        if p != u32::MAX {
                            let at = input.group_of[k] as usize * d + j;
                            // SAFETY: position `p` (a row of an own
                            // group) is `k`'s alone, and `p * d + j` is
                            // within `x` (p < start[ng]).
                            unsafe {
                                *out.0.add(p as usize * d + j) = ((a - mean[at]) / std[at]) as f32;
                            }
                        }
                        if input.fit[ng] {
                            // SAFETY: global row `start[ng] + k` is
                            // `k`'s alone and within `x`.
                            unsafe {
                                *out.0.add((start[ng] + k) * d + j) =
                                    ((a - mean[gm]) / std[gm]) as f32;
                            }
                        }
                    }
                });
            }
        }
    };
    if !numeric.is_empty() {
        let per = n.div_ceil(threads).max(1);
        std::thread::scope(|sc| {
            for lo in (0..n).step_by(per) {
                let w = &write;
                sc.spawn(move || w(lo, (lo + per).min(n)));
            }
        });
    }
    x
}

/// Writes 1.0 in each row's one-hot column of every categorical feature
/// of `plan` (per the row's group's encoding; the global rows per the
/// global one) into `x` (rows of `d` columns), group by group.
fn onehot_rows(input: &MlpInput<'_>, order: &RowOrder, plan: &OneHotPlan, d: usize, x: &mut [f32]) {
    for b in 0..plan.blocks.len() {
        crate::with_values!(input.columns[plan.blocks[b].feature], |v| {
            onehot_block(v, input.n_groups, order, plan, b, d, x)
        });
    }
}

/// [`onehot_rows`] of block `b` (codes `v`).
fn onehot_block<T: Copy + Into<f64>>(
    v: &[T],
    n_groups: usize,
    order: &RowOrder,
    plan: &OneHotPlan,
    b: usize,
    d: usize,
    x: &mut [f32],
) {
    let base = plan.blocks[b].base;
    let mut table = Vec::new();
    for g in 0..=n_groups {
        let (p0, p1) = (order.start[g], order.start[g + 1]);
        if p0 == p1 {
            continue;
        }
        let map = plan.map(b, g);
        map.fill(&mut table);
        for p in p0..p1 {
            let k = lookup(&table, v[order.src[p] as usize].into());
            if k != u32::MAX {
                x[p * d + base + k as usize] = 1.0;
            }
        }
        map.clear(&mut table);
    }
}

/// Training state of one (group, config) network (serialised in a remote
/// worker's snapshots).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MlpUnit {
    params: Vec<f32>,
    opt: OptState,
    epoch: u32,
    batch: usize,
    perm: Vec<u32>,
    loss_sum: f64,
    loss_rows: f64,
    epoch_loss: Vec<f64>,
    done: bool,
}

/// Mini-batch steps of one epoch over `n` rows (the last batch may be short).
pub(super) fn steps_per_epoch(n: usize, cfg: &MlpConfig) -> usize {
    n.div_ceil(cfg.batch_size())
}

/// Mini-batch steps a whole group may take in one pass.
pub const WHOLE_STEPS: usize = 64;

/// Per-worker buffers.
#[derive(Debug, Default)]
pub struct MlpScratch {
    step: StepScratch,
    members: Vec<usize>,
    taken: Vec<bool>,
    /// The layout rows of the batch members read.
    batch_rows: Vec<usize>,
}

/// The MLP family over one layout and one grid.
pub struct MlpPass<'a> {
    data: &'a MlpData,
    task: Task,
    configs: &'a [MlpConfig],
    widths: Vec<Vec<usize>>,
    n_params: Vec<usize>,
    streams: &'a [u64],
    seed: u64,
    /// First slot of each group in the driver's row space.
    slot0: Vec<usize>,
    /// Where each layout group is a piece of a larger group (a remote
    /// worker's): its first row in the whole group and the whole group's
    /// rows. Batches are drawn over the whole group; a piece adds the
    /// members it holds.
    pieces: Option<Vec<(usize, usize)>>,
}

impl<'a> MlpPass<'a> {
    /// The family for `data` and the grid `configs`; `streams[g]` is group
    /// `g`'s RNG stream id.
    pub fn new(
        data: &'a MlpData,
        task: Task,
        configs: &'a [MlpConfig],
        streams: &'a [u64],
        seed: u64,
    ) -> Self {
        let d = data.d();
        let widths: Vec<Vec<usize>> = configs.iter().map(|c| c.widths(d)).collect();
        let n_params = configs.iter().map(|c| c.n_params(d)).collect();
        let mut slot0 = vec![0usize];
        for g in 0..data.start.len() - 1 {
            let n = data.rows_of(g);
            let slots = configs
                .iter()
                .map(|c| c.batch_size().min(n))
                .max()
                .unwrap_or(0);
            slot0.push(slot0[g] + slots);
        }
        MlpPass {
            data,
            task,
            configs,
            widths,
            n_params,
            streams,
            seed,
            slot0,
            pieces: None,
        }
    }

    /// The same family where layout group `g` holds rows `pieces[g].0..`
    /// of a group of `pieces[g].1` rows.
    pub fn pieces_of(mut self, pieces: Vec<(usize, usize)>) -> Self {
        self.pieces = Some(pieces);
        self
    }

    /// The fitted model of `unit` (config `k` of group `g`), without one-hot
    /// columns, and the epochs it took.
    pub fn model_of(&self, g: usize, k: usize, unit: &MlpUnit) -> (MlpModel, u32) {
        let m = MlpModel::from_flat(
            unit.params.clone(),
            &self.widths[k],
            self.data.mean(g).to_vec(),
            self.data.std(g).to_vec(),
            unit.epoch_loss.clone(),
        );
        (m, unit.epoch)
    }

    /// Rows of `g`'s whole group (what its batches are drawn over).
    fn whole_rows(&self, g: usize) -> usize {
        match &self.pieces {
            Some(p) => p[g].1,
            None => self.data.rows_of(g),
        }
    }

    /// Each group's slot range (the driver's row space).
    pub fn slot_ranges(&self) -> Vec<Range<usize>> {
        self.slot0.windows(2).map(|w| w[0]..w[1]).collect()
    }

    /// Fresh units of every config for every group with `fit[g]`, built on
    /// `threads` threads (20,000 groups' initial networks are hundreds of
    /// megabytes, and touching fresh memory is most of the cost: it goes
    /// faster on every core).
    pub fn initial_units(&self, fit: &[bool], threads: usize) -> Vec<Vec<MlpUnit>> {
        crate::util::par::par_map(fit.len(), threads, &|g| usize::from(fit[g]), &|g| {
            if fit[g] {
                (0..self.configs.len())
                    .map(|k| self.new_unit(g, k))
                    .collect()
            } else {
                Vec::new()
            }
        })
    }

    /// A fresh unit for config `k` of group `g`. With one-hot columns, the
    /// network is initialised as one over the group's own columns alone
    /// (so as the group trained alone), its first-layer weights on the
    /// other columns zero (their inputs are zero: they stay zero).
    pub fn new_unit(&self, g: usize, k: usize) -> MlpUnit {
        let params = match self.data.onehot().map(|p| p.columns(g)) {
            Some(cols) if cols.len() < self.data.d() => {
                let mut own = self.widths[k].clone();
                own[0] = cols.len();
                let p = init_params(&own, self.seed, self.streams[g]);
                widen_first_layer(&p, &cols, self.data.d(), own[1])
            }
            _ => init_params(&self.widths[k], self.seed, self.streams[g]),
        };
        let n = self.whole_rows(g);
        let mut perm = Vec::new();
        epoch_permutation(n, self.seed, self.streams[g], 0, &mut perm);
        MlpUnit {
            // Moments come with the first step and go with the last.
            opt: OptState::default(),
            params,
            epoch: 0,
            batch: 0,
            perm,
            loss_sum: 0.0,
            loss_rows: 0.0,
            epoch_loss: Vec::new(),
            done: n == 0,
        }
    }
}

impl PartialStep for MlpPass<'_> {
    type Unit = MlpUnit;
    type Scratch = MlpScratch;

    fn stats_len(&self) -> usize {
        self.n_params.iter().max().copied().unwrap_or(0) + 2
    }

    fn scratch(&self) -> MlpScratch {
        MlpScratch::default()
    }

    fn is_active(&self, unit: &MlpUnit) -> bool {
        !unit.done
    }

    /// A whole group takes up to [`WHOLE_STEPS`] mini-batch steps a pass: a
    /// small group's units run to the end in one pass (their optimizer
    /// moments are then freed and reused by the next group's, where
    /// lockstep passes would hold every unit's at once), and a large group
    /// still reports progress every few dozen steps.
    fn whole_steps(&self) -> usize {
        WHOLE_STEPS
    }

    /// Steps are mini-batch steps, every epoch's known in advance.
    fn progress(&self, group: usize, k: usize, unit: &MlpUnit) -> UnitProgress {
        let per_epoch = steps_per_epoch(self.whole_rows(group), &self.configs[k]);
        let done = (unit.epoch as usize * per_epoch + unit.batch) as f64;
        if unit.done {
            UnitProgress::finished(done)
        } else {
            UnitProgress::known(done, self.steps_left(group, k, unit) as f64)
        }
    }

    fn steps_left(&self, group: usize, k: usize, unit: &MlpUnit) -> usize {
        if unit.done {
            return 0;
        }
        let cfg = &self.configs[k];
        let per_epoch = steps_per_epoch(self.whole_rows(group), cfg);
        (cfg.epochs() - unit.epoch) as usize * per_epoch - unit.batch
    }

    fn accumulate(
        &self,
        group: usize,
        units: &[(usize, &MlpUnit)],
        rows: Range<usize>,
        out: &mut [f64],
        scratch: &mut MlpScratch,
    ) {
        let d = self.data.d();
        let n = self.whole_rows(group);
        let base = self.data.start[group];
        let lo = rows.start - self.slot0[group];
        let hi = rows.end - self.slot0[group];
        // A piece: the batch members whose rows it holds (by their place
        // in the whole group); otherwise the batch slots `lo..hi`.
        let held = self
            .pieces
            .as_ref()
            .map(|p| p[group].0..p[group].0 + self.data.rows_of(group));
        let stride = self.stats_len();
        let MlpScratch {
            step,
            members,
            taken,
            batch_rows,
        } = scratch;
        taken.clear();
        taken.resize(units.len(), false);
        for i in 0..units.len() {
            if taken[i] {
                continue;
            }
            // Units in lockstep on the same batch read it once.
            let (k, u) = units[i];
            let bs = self.configs[k].batch_size();
            members.clear();
            for (j, &(kj, uj)) in units.iter().enumerate().skip(i) {
                if !taken[j]
                    && self.configs[kj].batch_size() == bs
                    && uj.epoch == u.epoch
                    && uj.batch == u.batch
                {
                    taken[j] = true;
                    members.push(j);
                }
            }
            let first = u.batch * bs;
            let total = bs.min(n - first);
            let batch = &u.perm[first..first + total];
            batch_rows.clear();
            match &held {
                Some(h) => batch_rows.extend(
                    batch
                        .iter()
                        .map(|&p| p as usize)
                        .filter(|p| h.contains(p))
                        .map(|p| base + p - h.start),
                ),
                None => batch_rows.extend(
                    batch[lo.min(total)..hi.min(total)]
                        .iter()
                        .map(|&p| base + p as usize),
                ),
            }
            let m = batch_rows.len();
            if m == 0 {
                continue;
            }
            if step.x.len() < m * d {
                step.x.resize(m * d, 0.0);
            }
            step.y.clear();
            for (i, &r) in batch_rows.iter().enumerate() {
                let (dst, src) = (
                    &mut step.x[i * d..(i + 1) * d],
                    &self.data.x[r * d..(r + 1) * d],
                );
                for (o, v) in dst.iter_mut().zip(src) {
                    *o = *v;
                }
                step.y.push(self.data.y[r]);
            }
            let net = |t: usize| {
                let j = members[t];
                let (kj, uj) = units[j];
                (
                    Net {
                        widths: &self.widths[kj],
                        params: &uj.params,
                    },
                    j,
                )
            };
            let members_len = members.len();
            batch_gradients(self.task, d, m, total, members_len, &net, out, stride, step);
        }
    }

    fn apply(
        &self,
        group: usize,
        k: usize,
        unit: &mut MlpUnit,
        stats: &mut [f64],
        _scratch: &mut MlpScratch,
    ) {
        let cfg = &self.configs[k];
        let np = self.n_params[k];
        optimizer_step(
            cfg.optimizer(),
            cfg.lr(),
            cfg.weight_decay(),
            &mut unit.params,
            &stats[..np],
            &mut unit.opt,
        );
        unit.loss_sum += stats[np];
        unit.loss_rows += stats[np + 1];
        unit.batch += 1;
        let n = self.whole_rows(group);
        if unit.batch * cfg.batch_size() >= n {
            unit.epoch_loss
                .push(unit.loss_sum / unit.loss_rows.max(1.0));
            unit.loss_sum = 0.0;
            unit.loss_rows = 0.0;
            unit.batch = 0;
            unit.epoch += 1;
            if unit.epoch >= cfg.epochs() {
                unit.done = true;
                unit.perm = Vec::new();
                // The optimizer's moments are not needed again.
                unit.opt = OptState::default();
            } else {
                epoch_permutation(
                    n,
                    self.seed,
                    self.streams[group],
                    unit.epoch,
                    &mut unit.perm,
                );
            }
        }
    }
}

/// Parameters of a network over `cols.len()` inputs as those of one over
/// `d` inputs: input `i`'s first-layer weights (`h` of them) become those
/// of input `cols[i]`; the other inputs' are zero.
fn widen_first_layer(p: &[f32], cols: &[usize], d: usize, h: usize) -> Vec<f32> {
    let n = cols.len();
    let mut out = vec![0.0f32; d * h];
    for (i, &c) in cols.iter().enumerate() {
        out[c * h..(c + 1) * h].copy_from_slice(&p[i * h..(i + 1) * h]);
    }
    out.extend_from_slice(&p[n * h..]);
    out
}

/// A network over a one-hot layout's columns as a model of group `g` over
/// the features: the first layer keeps the rows of the group's own columns
/// (numeric features, then its encodings' columns), the standardisation
/// goes to the numeric features' places (0 and 1 for categorical ones),
/// and the model keeps the group's encodings.
fn onehot_model(mut m: MlpModel, plan: &OneHotPlan, g: usize) -> MlpModel {
    let cols = plan.columns(g);
    let first = &mut m.layers[0];
    let h = first.n_out;
    let mut w = Vec::with_capacity(cols.len() * h);
    for &c in &cols {
        w.extend_from_slice(&first.w[c * h..(c + 1) * h]);
    }
    first.w = w;
    first.n_in = cols.len();
    let d = plan.numeric.len() + plan.blocks.len();
    let (mut mean, mut std) = (vec![0.0; d], vec![1.0; d]);
    for (i, &j) in plan.numeric.iter().enumerate() {
        mean[j] = m.mean[i];
        std[j] = m.std[i];
    }
    m.mean = mean;
    m.std = std;
    m.onehot = (0..plan.blocks.len())
        .map(|b| plan.map(b, g).clone())
        .collect();
    m
}

/// One fitted network.
#[derive(Debug, Clone)]
pub struct FittedUnit {
    /// The model (with its group's standardisation).
    pub model: MlpModel,
    /// Epochs taken.
    pub iterations: u32,
}

/// What [`fit_grouped`] needs besides the layout and the grid.
#[derive(Debug, Clone, Copy)]
pub struct FitOptions<'a> {
    /// Binary or regression.
    pub task: Task,
    /// Groups to fit (`n_groups + 1` entries, the last the global model).
    pub fit: &'a [bool],
    /// Each group's RNG stream id (independent of which other groups exist).
    pub streams: &'a [u64],
    /// The run's seed.
    pub seed: u64,
    /// Strategy of the pass driver.
    pub strategy: Strategy,
    /// Worker threads.
    pub workers: usize,
}

/// Fits every config of every group with `fit[g]`; returns, per group, one
/// [`FittedUnit`] per config (empty for groups not fitted), plus the driver's
/// report and the floating-point operations of the training steps.
pub fn fit_grouped(
    data: &MlpData,
    configs: &[MlpConfig],
    opt: FitOptions<'_>,
    progress: &mut OnProgress<'_>,
) -> (Vec<Vec<FittedUnit>>, RunReport, f64) {
    let family = MlpPass::new(data, opt.task, configs, opt.streams, opt.seed);
    let n_units_groups = opt.fit.len();
    let units = family.initial_units(opt.fit, opt.workers);
    let mut max_passes = 1;
    let mut flops = 0.0;
    for g in (0..n_units_groups).filter(|&g| opt.fit[g]) {
        let n = data.rows_of(g);
        for c in configs {
            let steps = steps_per_epoch(n, c) * c.epochs() as usize;
            max_passes = max_passes.max(steps + 1);
            flops += c.flops_per_row(data.d()) * n as f64 * c.epochs() as f64;
        }
    }
    if let Some(path) = std::env::var_os("GROUPFIT_MLP_DUMP") {
        dump_schedule(std::path::Path::new(&path), data, configs, &family, &units);
    }
    let ranges = family.slot_ranges();
    let (units, report) = run_passes(
        &family,
        units,
        &ranges,
        opt.strategy,
        opt.workers,
        max_passes,
        progress,
    );
    let fitted = units
        .into_iter()
        .enumerate()
        .map(|(g, us)| {
            us.into_iter()
                .enumerate()
                .map(|(k, u)| {
                    let m = MlpModel::from_flat(
                        u.params,
                        &family.widths[k],
                        data.mean(g).to_vec(),
                        data.std(g).to_vec(),
                        u.epoch_loss,
                    );
                    FittedUnit {
                        iterations: u.epoch,
                        model: match data.onehot() {
                            Some(plan) => onehot_model(m, plan, g),
                            None => m,
                        },
                    }
                })
                .collect()
        })
        .collect();
    (fitted, report, flops)
}

/// `GROUPFIT_MLP_DUMP=FILE`: writes, for every fitted group, its training
/// rows (file row indices, in the order permutations index), each config's
/// initial parameters and each epoch's permutation, as JSON — what an
/// independent reference implementation needs to replay training. Meant for
/// tests on small data; it does not change what is trained.
fn dump_schedule(
    path: &std::path::Path,
    data: &MlpData,
    configs: &[MlpConfig],
    family: &MlpPass<'_>,
    units: &[Vec<MlpUnit>],
) {
    let mut groups = Vec::new();
    for (g, us) in units.iter().enumerate() {
        if us.is_empty() {
            continue;
        }
        let n = data.rows_of(g);
        let epochs = configs.iter().map(|c| c.epochs()).max().unwrap_or(0);
        let mut perms = Vec::new();
        let mut p = Vec::new();
        for e in 0..epochs {
            epoch_permutation(n, family.seed, family.streams[g], e, &mut p);
            perms.push(p.clone());
        }
        groups.push(serde_json::json!({
            "group": g,
            "rows": data.source_rows(g),
            "mean": data.mean(g),
            "std": data.std(g),
            "init": us.iter().map(|u| &u.params).collect::<Vec<_>>(),
            "widths": family.widths,
            "permutations": perms,
        }));
    }
    let doc = serde_json::json!({ "groups": groups });
    if let Err(e) = std::fs::write(path, doc.to_string()) {
        eprintln!(
            "warning: GROUPFIT_MLP_DUMP: cannot write '{}': {e}",
            path.display()
        );
    }
}
