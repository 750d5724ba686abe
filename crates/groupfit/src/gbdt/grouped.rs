//! Every (group, config) booster of every group fitted together.
//!
//! [`GbdtLayout`] bins each group's training rows once per distinct
//! [`Binning`] (`max_bin`, `min_data_in_bin`) of the grid (the configs of a
//! group share its bins): one `u8` per row and feature, stored column-major
//! and row-major (see [`super::histogram`]), rows of a group contiguous (group-sorted),
//! the global pseudo-group (every training row, global bins) after the
//! groups. Validation rows are binned with their group's bins for early
//! stopping. A categorical feature's bins are its categories
//! ([`CatBins`]); one with more levels than a byte holds is *wide*, its
//! bins `u16` in matrices of their own (see [`super::histogram`]).
//!
//! [`GbdtPass`] plugs the boosters into the pass driver
//! ([`crate::exec::run_passes`]) through the partial-step API
//! ([`crate::exec::PartialStep`]):
//!
//! * a *whole-group* shard (the worker sees every row of the group) runs one
//!   full boosting round of each active booster in `accumulate` — every
//!   histogram of the round built from the group's bins on that worker, the
//!   smaller child scanned and the larger one obtained by subtraction;
//! * a shard of a group *cut* over workers adds the rows of its range into
//!   the histogram of the leaf each booster asks for (`accumulate`); the
//!   driver adds the partial histograms in row order and `apply` takes one
//!   split step with the full histogram.
//!
//! Both paths run the same [`Booster`] steps, so every strategy grows the same
//! trees (up to the summation order of histogram partials). The statistics
//! buffer of a unit is one histogram; groups are run in classes of similar
//! histogram size so small groups do not carry the largest group's buffer.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;
use std::time::Instant;

use super::binning::{in_bin_sample, BinMapper, Binning, GivenBins, Mapper};
use super::booster::{Booster, GroupView, StepScratch};
use super::categorical::CatBins;
use super::histogram::{BinnedGroup, STRIDE};
use super::model::GbdtModel;
use super::params::GbdtConfig;
use crate::data::bucket;
use crate::data::categorical::FeatureKind;
use crate::data::keys::group_stream;
use crate::exec::{explain, Explain, PartialStep, UnitProgress};
use crate::family::TrainData;
use crate::util::trace::trace;

/// The binned rows of every group for one [`Binning`].
#[derive(Debug, Clone)]
pub struct GbdtLayout {
    d: usize,
    /// Column-major per group (`bins[j * rows + r]`).
    bins: Vec<u8>,
    /// The same bins row-major per group (`rbins[r * d + j]`).
    rbins: Vec<u8>,
    y: Vec<f64>,
    /// Row boundaries, `n_groups + 2` entries (the last group is the global one).
    starts: Vec<usize>,
    /// Histogram offsets, `d + 1` per group.
    offsets: Vec<u32>,
    /// Where the row-major scan adds each feature's `u8` bins, `d` per
    /// group (see [`BinnedGroup::row_offsets`]); empty without wide features.
    row_offsets: Vec<u32>,
    mappers: Vec<Vec<Mapper>>,
    valid_bins: Vec<u8>,
    valid_y: Vec<f64>,
    valid_starts: Vec<usize>,
    /// The wide features, ascending.
    wide: Vec<u32>,
    /// Their `u16` bins: column-major per group, row-major, and the
    /// validation rows' row-major.
    wbins: Vec<u16>,
    wrbins: Vec<u16>,
    valid_wbins: Vec<u16>,
}

/// The values of `col` at `rows`, as `f64`, into `out` (cleared first).
// One body for `f32` and `f64` columns: the cast is needed for one.
#[allow(clippy::unnecessary_cast)]
fn gather(col: &crate::data::Column, rows: &[u32], out: &mut Vec<f64>) {
    out.clear();
    crate::with_values!(col, |v| out
        .extend(rows.iter().map(|&r| v[r as usize] as f64)));
}

/// Writes the bin of each of `values` under `m` into `out`.
fn bin_into(m: &BinMapper, values: &[f64], out: &mut [u8]) {
    for (b, &v) in out.iter_mut().zip(values) {
        *b = m.bin(v) as u8;
    }
}

/// Writes the bin of each of `values` (codes) under `c` and `table` into `out`.
fn cat_bin_into<B: TryFrom<u16>>(c: &CatBins, table: &[u16], values: &[f64], out: &mut [B]) {
    for (b, &v) in out.iter_mut().zip(values) {
        // A narrow feature has at most 256 bins: its bins fit a byte.
        *b = B::try_from(c.bin(table, v))
            .ok()
            .expect("a bin of the column's width");
    }
}

/// The bins of a feature's rows: a byte each, or two for a wide feature.
enum Codes {
    Narrow(Vec<u8>),
    Wide(Vec<u16>),
}

/// Whether a feature of kind `k` is wide: categorical with more levels than
/// a byte holds beside the null bin.
fn is_wide(k: Option<&FeatureKind>) -> bool {
    k.and_then(|k| k.levels()).is_some_and(|l| l + 1 > 256)
}

/// One feature's bins over every group: each group's mapper, fitted on its
/// own training values, and the bin of every training and validation value (in layout order).
struct FeatureBins {
    mappers: Vec<Mapper>,
    bins: Codes,
    valid_bins: Codes,
}

/// The table rows of every fitted group in layout order, group after group
/// (groups not fitted get none); the global group (last) holds every
/// training row in table order. The same for the validation rows.
struct LayoutRows {
    rows: Vec<u32>,
    /// Row boundaries, `n_groups + 2` entries.
    starts: Vec<usize>,
    valid_rows: Vec<u32>,
    /// Validation row boundaries, `n_groups + 2` entries.
    valid_starts: Vec<usize>,
}

/// A binning thread's buffers: a feature's values in layout order, the
/// mapper's sort keys, and a categorical feature's counts and code table.
#[derive(Default)]
struct BinScratch {
    values: Vec<f64>,
    keys: Vec<u64>,
    counts: Vec<u32>,
    table: Vec<u16>,
}

impl LayoutRows {
    fn new(input: &TrainData<'_>) -> LayoutRows {
        let ng = input.n_groups;
        // Positions in `input.rows` (`input.valid.rows`) sorted by group.
        let (train_order, train_starts) = bucket(input.group_of.iter().map(|&g| g as usize), ng);
        let (valid_order, valid_group_starts) = bucket(
            input
                .valid
                .groups
                .iter()
                .map(|g| g.map_or(ng, |g| g as usize)),
            ng + 1,
        );
        let mut rows: Vec<u32> = Vec::new();
        let mut valid_rows: Vec<u32> = Vec::new();
        let mut starts = vec![0usize];
        let mut valid_starts = vec![0usize];
        for g in 0..=ng {
            if input.fit[g] {
                if g == ng {
                    rows.extend_from_slice(input.rows);
                    valid_rows.extend_from_slice(input.valid.rows);
                } else {
                    rows.extend(
                        train_order[train_starts[g]..train_starts[g + 1]]
                            .iter()
                            .map(|&p| input.rows[p as usize]),
                    );
                    valid_rows.extend(
                        valid_order[valid_group_starts[g]..valid_group_starts[g + 1]]
                            .iter()
                            .map(|&p| input.valid.rows[p as usize]),
                    );
                }
            }
            starts.push(rows.len());
            valid_starts.push(valid_rows.len());
        }
        LayoutRows {
            rows,
            starts,
            valid_rows,
            valid_starts,
        }
    }

    /// Feature `j`'s bins: its values gathered in layout order, each group's
    /// mapper fitted on its slice and binning it, then the validation values
    /// binned by their group's mapper.
    fn bin_feature(
        &self,
        input: &TrainData<'_>,
        binning: Binning,
        given: Option<&GivenBins<'_>>,
        j: usize,
        scratch: &mut BinScratch,
    ) -> FeatureBins {
        if let Some(levels) = input.kinds.get(j).and_then(|k| k.levels()) {
            return self.bin_categorical(input, binning, j, levels, scratch);
        }
        let n_all = self.starts.len() - 1;
        let (starts, valid_starts) = (&self.starts, &self.valid_starts);
        let BinScratch { values, keys, .. } = scratch;
        gather(&input.columns[j], &self.rows, values);
        let mut bins = vec![0u8; self.rows.len()];
        let mut mappers = Vec::with_capacity(n_all);
        for g in 0..n_all {
            let (lo, hi) = (starts[g], starts[g + 1]);
            let m = match given.and_then(|gv| gv.mappers.get(g)?.as_ref()) {
                Some(ms) => ms[j].clone(),
                None => {
                    // The sample is chosen by table row (`given`'s ids on a
                    // remote worker, whose rows are numbered by shard).
                    let table_row = |r: u32| given.map_or(r, |gv| gv.ids[r as usize]);
                    let n = hi - lo;
                    let sample = values[lo..hi]
                        .iter()
                        .zip(&self.rows[lo..hi])
                        .filter(|&(_, &r)| in_bin_sample(table_row(r), n))
                        .map(|(&v, _)| v);
                    BinMapper::fit(sample, binning.max_bin, binning.min_data_in_bin, keys)
                }
            };
            bin_into(&m, &values[lo..hi], &mut bins[lo..hi]);
            mappers.push(m);
        }
        gather(&input.valid.columns[j], &self.valid_rows, values);
        let mut valid_bins = vec![0u8; self.valid_rows.len()];
        for (g, m) in mappers.iter().enumerate() {
            let (lo, hi) = (valid_starts[g], valid_starts[g + 1]);
            bin_into(m, &values[lo..hi], &mut valid_bins[lo..hi]);
        }
        FeatureBins {
            mappers: mappers.into_iter().map(Mapper::Numeric).collect(),
            bins: Codes::Narrow(bins),
            valid_bins: Codes::Narrow(valid_bins),
        }
    }

    /// [`LayoutRows::bin_feature`] of a categorical feature of `levels`
    /// levels: each group's categories ([`CatBins`]), `u16` bins when the
    /// feature is wide.
    fn bin_categorical(
        &self,
        input: &TrainData<'_>,
        binning: Binning,
        j: usize,
        levels: usize,
        scratch: &mut BinScratch,
    ) -> FeatureBins {
        let n_all = self.starts.len() - 1;
        let (starts, valid_starts) = (&self.starts, &self.valid_starts);
        let BinScratch {
            values,
            counts,
            table,
            ..
        } = scratch;
        gather(&input.columns[j], &self.rows, values);
        let mut cats = Vec::with_capacity(n_all);
        for g in 0..n_all {
            let (lo, hi) = (starts[g], starts[g + 1]);
            cats.push(CatBins::fit(
                &values[lo..hi],
                levels,
                binning.max_bin,
                binning.min_data_in_bin,
                counts,
            ));
        }
        let mut valid_values = Vec::with_capacity(self.valid_rows.len());
        gather(&input.valid.columns[j], &self.valid_rows, &mut valid_values);
        // Every group's training and validation rows through its table.
        fn fill<B: TryFrom<u16> + Copy + Default>(
            cats: &[CatBins],
            levels: usize,
            table: &mut Vec<u16>,
            (values, starts): (&[f64], &[usize]),
            (valid_values, valid_starts): (&[f64], &[usize]),
        ) -> (Vec<B>, Vec<B>) {
            let mut bins = vec![B::default(); values.len()];
            let mut valid_bins = vec![B::default(); valid_values.len()];
            for (g, c) in cats.iter().enumerate() {
                c.table(levels, table);
                let (lo, hi) = (starts[g], starts[g + 1]);
                cat_bin_into(c, table, &values[lo..hi], &mut bins[lo..hi]);
                let (lo, hi) = (valid_starts[g], valid_starts[g + 1]);
                cat_bin_into(c, table, &valid_values[lo..hi], &mut valid_bins[lo..hi]);
            }
            (bins, valid_bins)
        }
        let train = (&values[..], &starts[..]);
        let valid = (&valid_values[..], &valid_starts[..]);
        let (bins, valid_bins) = if is_wide(input.kinds.get(j)) {
            let (b, v) = fill::<u16>(&cats, levels, table, train, valid);
            (Codes::Wide(b), Codes::Wide(v))
        } else {
            let (b, v) = fill::<u8>(&cats, levels, table, train, valid);
            (Codes::Narrow(b), Codes::Narrow(v))
        };
        FeatureBins {
            mappers: cats.into_iter().map(Mapper::Categorical).collect(),
            bins,
            valid_bins,
        }
    }
}

/// The layout's byte matrices, assembled from the per-feature bins, and
/// the wide features' `u16` ones.
struct ByteMatrices {
    /// Column-major per group (a wide feature's column: zeros).
    bins: Vec<u8>,
    /// Row-major (a transpose over every row).
    rbins: Vec<u8>,
    /// Validation, row-major.
    valid_bins: Vec<u8>,
    /// The wide features.
    wide: Vec<u32>,
    /// Their bins: column-major per group, row-major, validation row-major.
    wbins: Vec<u16>,
    wrbins: Vec<u16>,
    valid_wbins: Vec<u16>,
}

/// Copies each group's rows of each column into `out`, column-major per
/// group (`starts`: the groups' row boundaries).
fn group_columns<B: Copy>(cols: &[&[B]], starts: &[usize], out: &mut [B]) {
    let d = cols.len();
    for g in 0..starts.len() - 1 {
        let (lo, hi) = (starts[g], starts[g + 1]);
        let block = &mut out[lo * d..hi * d];
        for (j, c) in cols.iter().enumerate() {
            block[j * (hi - lo)..(j + 1) * (hi - lo)].copy_from_slice(&c[lo..hi]);
        }
    }
}

/// Writes column `j` of `d` into the row-major `out`.
fn transpose_into<B: Copy>(col: &[B], j: usize, d: usize, out: &mut [B]) {
    for (r, &b) in col.iter().enumerate() {
        out[r * d + j] = b;
    }
}

impl ByteMatrices {
    /// Two threads (when `threads > 1`): the first matrix, the others.
    fn new(per_feature: &[FeatureBins], order: &LayoutRows, threads: usize) -> ByteMatrices {
        let d = per_feature.len();
        let (n, nv) = (order.rows.len(), order.valid_rows.len());
        let starts = &order.starts;
        let zeros = vec![0u8; n];
        let narrow: Vec<&[u8]> = per_feature
            .iter()
            .map(|f| match &f.bins {
                Codes::Narrow(b) => &b[..],
                Codes::Wide(_) => &zeros[..],
            })
            .collect();
        let (mut wide, mut wide_cols, mut wide_valid) = (Vec::new(), Vec::new(), Vec::new());
        for (j, f) in per_feature.iter().enumerate() {
            if let (Codes::Wide(b), Codes::Wide(v)) = (&f.bins, &f.valid_bins) {
                wide.push(j as u32);
                wide_cols.push(&b[..]);
                wide_valid.push(&v[..]);
            }
        }
        let dw = wide.len();
        let mut bins = vec![0u8; n * d];
        let mut rbins = vec![0u8; n * d];
        let mut valid_bins = vec![0u8; nv * d];
        let mut wbins = vec![0u16; n * dw];
        let mut wrbins = vec![0u16; n * dw];
        let mut valid_wbins = vec![0u16; nv * dw];
        let first = |bins: &mut [u8]| group_columns(&narrow, starts, bins);
        let mut rest = |rbins: &mut [u8], valid_bins: &mut [u8]| {
            for (j, f) in per_feature.iter().enumerate() {
                if let (Codes::Narrow(b), Codes::Narrow(v)) = (&f.bins, &f.valid_bins) {
                    transpose_into(b, j, d, rbins);
                    transpose_into(v, j, d, valid_bins);
                }
            }
            group_columns(&wide_cols, starts, &mut wbins);
            for k in 0..dw {
                transpose_into(wide_cols[k], k, dw, &mut wrbins);
                transpose_into(wide_valid[k], k, dw, &mut valid_wbins);
            }
        };
        std::thread::scope(|sc| {
            if threads > 1 {
                let (first, bins) = (&first, &mut bins);
                sc.spawn(move || first(bins));
            } else {
                first(&mut bins);
            }
            rest(&mut rbins, &mut valid_bins);
        });
        ByteMatrices {
            bins,
            rbins,
            valid_bins,
            wide,
            wbins,
            wrbins,
            valid_wbins,
        }
    }
}

/// The mappers of each of the `n_all` groups (feature after feature), their
/// histogram offsets (`d + 1` per group) and, with wide features, their
/// row-scan offsets (`d` per group: a wide feature's is the sink, after the last feature).
fn mappers_by_group(
    per_feature: Vec<FeatureBins>,
    n_all: usize,
    wide: &[u32],
) -> (Vec<Vec<Mapper>>, Vec<u32>, Vec<u32>) {
    let d = per_feature.len();
    let mut offsets = Vec::with_capacity(n_all * (d + 1));
    let mut row_offsets = Vec::new();
    let mut mappers: Vec<Vec<Mapper>> = (0..n_all).map(|_| Vec::with_capacity(d)).collect();
    for f in per_feature {
        for (g, m) in f.mappers.into_iter().enumerate() {
            mappers[g].push(m);
        }
    }
    for ms in &mappers {
        let mut o = 0u32;
        let first = offsets.len();
        offsets.push(0);
        for m in ms {
            o += m.n_bins() as u32;
            offsets.push(o);
        }
        if !wide.is_empty() {
            let own = &offsets[first..first + d];
            row_offsets.extend((0..d).map(|j| {
                if wide.binary_search(&(j as u32)).is_ok() {
                    o
                } else {
                    own[j]
                }
            }));
        }
    }
    (mappers, offsets, row_offsets)
}

impl GbdtLayout {
    /// Bins the training and validation rows of every group with `fit` set
    /// (groups not fitted get no rows), as `binning` says.
    ///
    /// Feature by feature (features spread over the threads): the feature's
    /// values are gathered in layout order once (a group's rows are scattered
    /// over the table; gathering a column at a time keeps the reads within
    /// one column), then each group's mapper is fitted on its slice and bins
    /// it. The layout's three byte matrices are then assembled from the
    /// per-feature bins.
    pub fn build(input: &TrainData<'_>, binning: Binning) -> GbdtLayout {
        GbdtLayout::build_with(input, binning, None)
    }

    /// [`GbdtLayout::build`] with bins given for some groups (a remote
    /// worker's pieces of groups cut over workers).
    pub fn build_with(
        input: &TrainData<'_>,
        binning: Binning,
        given: Option<&GivenBins<'_>>,
    ) -> GbdtLayout {
        let d = input.columns.len();
        let order = LayoutRows::new(input);
        let threads = input.threads.clamp(1, d.max(1));
        let per_feature: Vec<FeatureBins> = crate::util::par::par_map_with(
            d,
            threads,
            &|_| 1,
            &BinScratch::default,
            &|scratch, j| order.bin_feature(input, binning, given, j, scratch),
        );
        let matrices = ByteMatrices::new(&per_feature, &order, threads);
        let (mappers, offsets, row_offsets) =
            mappers_by_group(per_feature, input.n_groups + 1, &matrices.wide);
        GbdtLayout {
            d,
            bins: matrices.bins,
            rbins: matrices.rbins,
            row_offsets,
            wide: matrices.wide,
            wbins: matrices.wbins,
            wrbins: matrices.wrbins,
            valid_wbins: matrices.valid_wbins,
            y: order
                .rows
                .iter()
                .map(|&i| input.target[i as usize])
                .collect(),
            starts: order.starts,
            offsets,
            mappers,
            valid_bins: matrices.valid_bins,
            valid_y: order
                .valid_rows
                .iter()
                .map(|&i| input.valid.target[i as usize])
                .collect(),
            valid_starts: order.valid_starts,
        }
    }

    /// Groups including the global pseudo-group.
    pub fn n_units_groups(&self) -> usize {
        self.starts.len() - 1
    }

    /// Rows of group `g` in the layout.
    pub fn range(&self, g: usize) -> Range<usize> {
        self.starts[g]..self.starts[g + 1]
    }

    /// What a booster of group `g` reads.
    pub fn view(&self, g: usize) -> GroupView<'_> {
        let (d, dw) = (self.d, self.wide.len());
        let r = self.range(g);
        let v = self.valid_starts[g]..self.valid_starts[g + 1];
        let offsets = &self.offsets[g * (d + 1)..(g + 1) * (d + 1)];
        GroupView {
            data: BinnedGroup {
                d,
                n: r.len(),
                bins: &self.bins[r.start * d..r.end * d],
                rbins: &self.rbins[r.start * d..r.end * d],
                offsets,
                row_offsets: if dw == 0 {
                    &offsets[..d]
                } else {
                    &self.row_offsets[g * d..(g + 1) * d]
                },
                wide: &self.wide,
                wbins: &self.wbins[r.start * dw..r.end * dw],
                wrbins: &self.wrbins[r.start * dw..r.end * dw],
            },
            y: &self.y[r],
            mappers: &self.mappers[g],
            valid_bins: &self.valid_bins[v.start * d..v.end * d],
            valid_wbins: &self.valid_wbins[v.start * dw..v.end * dw],
            valid_y: &self.valid_y[v],
        }
    }

    /// Histogram length of group `g` in `f64`s (with the sink of the wide
    /// features' `u8` bins).
    pub fn hist_len(&self, g: usize) -> usize {
        let d = self.d;
        STRIDE * (self.offsets[g * (d + 1) + d] as usize + usize::from(!self.wide.is_empty()))
    }
}

/// The gbdt family over one layout. Each booster is a pass-driver group of
/// its own (its rows are its data group's rows), so the planner places the
/// boosters of one large group, or of the global model, on different workers.
pub struct GbdtPass<'a> {
    pub(super) layout: &'a GbdtLayout,
    /// The data group of each driver group.
    pub(super) owner: Vec<usize>,
    /// The rounds of each driver group's booster (its config's).
    pub(super) rounds: Vec<u32>,
    pub(super) stats_len: usize,
    /// Thread-nanoseconds building histograms (traced runs only).
    pub(super) hist_ns: AtomicU64,
    /// Thread-nanoseconds in `accumulate` (traced runs only).
    pub(super) round_ns: AtomicU64,
}

impl<'a> GbdtPass<'a> {
    /// The boosters of a class: driver group `i` is data group `owner[i]`'s
    /// booster of config `config_of[i]`.
    pub(super) fn new(
        layout: &'a GbdtLayout,
        owner: Vec<usize>,
        config_of: &[usize],
        configs: &[GbdtConfig],
        stats_len: usize,
    ) -> Self {
        GbdtPass {
            layout,
            owner,
            rounds: config_of.iter().map(|&k| configs[k].rounds()).collect(),
            stats_len,
            hist_ns: AtomicU64::new(0),
            round_ns: AtomicU64::new(0),
        }
    }

    fn local(&self, group: usize, rows: &Range<usize>) -> Range<usize> {
        let s = self.layout.starts[self.owner[group]];
        rows.start - s..rows.end - s
    }
}

impl PartialStep for GbdtPass<'_> {
    /// A read lock per shard of a cut booster (its shards build their
    /// histograms at the same time); the write lock for a whole round.
    type Unit = RwLock<Booster>;
    type Scratch = StepScratch;

    fn stats_len(&self) -> usize {
        self.stats_len
    }

    fn scratch(&self) -> StepScratch {
        StepScratch::default()
    }

    fn is_active(&self, unit: &RwLock<Booster>) -> bool {
        !unit.read().unwrap().is_done()
    }

    /// Steps are rounds; a booster that stops early has none left.
    fn progress(&self, group: usize, _k: usize, unit: &RwLock<Booster>) -> UnitProgress {
        let b = unit.read().unwrap();
        let done = b.rounds() as f64;
        if b.is_done() {
            UnitProgress::finished(done)
        } else {
            UnitProgress::known(done, (self.rounds[group] as f64 - done).max(1.0))
        }
    }

    fn accumulate(
        &self,
        group: usize,
        units: &[(usize, &RwLock<Booster>)],
        rows: Range<usize>,
        out: &mut [f64],
        scratch: &mut StepScratch,
    ) {
        let view = self.layout.view(self.owner[group]);
        let local = self.local(group, &rows);
        let tracing = trace();
        if local.start == 0 && local.end == view.data.rows() {
            // The whole group is here: one full round per booster.
            let t = tracing.then(Instant::now);
            let mut ns = 0u64;
            for (_, u) in units {
                let mut b = u.write().unwrap();
                // The planner's pilot runs real rounds of small groups'
                // boosters: one may end there, before the passes list it.
                if b.is_done() {
                    continue;
                }
                b.run_round(&view, scratch, tracing.then_some(&mut ns));
                b.ran_round = true;
            }
            if let Some(t) = t {
                self.hist_ns.fetch_add(ns, Ordering::Relaxed);
                self.round_ns
                    .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
        } else {
            let t = tracing.then(Instant::now);
            let len = self.stats_len;
            let hl = view.data.hist_len();
            for (i, (_, u)) in units.iter().enumerate() {
                let b = u.read().unwrap();
                if b.is_done() {
                    continue;
                }
                b.build(&view, local.clone(), &mut out[i * len..i * len + hl]);
            }
            if let Some(t) = t {
                let ns = t.elapsed().as_nanos() as u64;
                self.hist_ns.fetch_add(ns, Ordering::Relaxed);
                self.round_ns.fetch_add(ns, Ordering::Relaxed);
            }
        }
    }

    /// One round of each active booster of the whole group, as the pass
    /// driver's next pass would run it.
    fn time_whole_pass(
        &self,
        group: usize,
        units: &mut [RwLock<Booster>],
        rows: Range<usize>,
        scratch: &mut StepScratch,
    ) -> Option<f64> {
        let view = self.layout.view(self.owner[group]);
        let local = self.local(group, &rows);
        if local.start != 0 || local.end != view.data.rows() {
            return None;
        }
        let t = Instant::now();
        for u in units.iter_mut() {
            let b = u.get_mut().unwrap();
            if !b.is_done() {
                b.run_round(&view, scratch, None);
            }
        }
        Some(t.elapsed().as_secs_f64())
    }

    fn apply(
        &self,
        group: usize,
        _k: usize,
        unit: &mut RwLock<Booster>,
        stats: &mut [f64],
        scratch: &mut StepScratch,
    ) {
        let b = unit.get_mut().unwrap();
        if b.ran_round || b.is_done() {
            b.ran_round = false;
            return;
        }
        let view = self.layout.view(self.owner[group]);
        let mut hist = scratch.pool.get(0);
        hist.extend_from_slice(&stats[..view.data.hist_len()]);
        b.step(&view, hist, scratch);
    }
}

/// One fitted booster.
#[derive(Debug, Clone)]
pub struct FittedBooster {
    /// The model.
    pub model: GbdtModel,
    /// Trees kept.
    pub rounds: usize,
}

/// The boosters of one histogram-size class: one driver group per (data
/// group, config) booster.
pub(super) struct ClassUnits {
    pub owner: Vec<usize>,
    pub config_of: Vec<usize>,
    pub units: Vec<Vec<RwLock<Booster>>>,
    pub drows: Vec<Range<usize>>,
    pub stats_len: usize,
}

pub(super) fn class_units(
    input: &TrainData<'_>,
    layout: &GbdtLayout,
    configs: &[GbdtConfig],
    ks: &[usize],
    class: usize,
) -> ClassUnits {
    let n_all = input.n_groups + 1;
    let members: Vec<bool> = (0..n_all)
        .map(|g| input.fit[g] && layout.hist_len(g).next_power_of_two() == class)
        .collect();
    let stats_len = (0..n_all)
        .filter(|&g| members[g])
        .map(|g| layout.hist_len(g))
        .max()
        .unwrap_or(0);
    let mut c = ClassUnits {
        owner: Vec::new(),
        config_of: Vec::new(),
        units: Vec::new(),
        drows: Vec::new(),
        stats_len,
    };
    for g in (0..n_all).filter(|&g| members[g]) {
        let view = layout.view(g);
        for &k in ks {
            c.owner.push(g);
            c.config_of.push(k);
            c.drows.push(layout.range(g));
            let stream = group_stream(input.keys.get(g));
            let b = Booster::new(input.task, configs[k], input.seed, &view);
            c.units
                .push(vec![RwLock::new(b.rounding_stream(stream, &view))]);
        }
    }
    c
}

/// What the planner would do with the boosters of the largest class (by
/// rows) of the first config's [`Binning`] — the class that dominates the run;
/// see [`crate::exec::explain`].
pub fn explain_grouped(input: &TrainData<'_>, configs: &[GbdtConfig]) -> Explain {
    let n_all = input.n_groups + 1;
    let bn = configs.first().map_or_else(
        || {
            Binning::of(
                &super::params::GbdtParams::new()
                    .check()
                    .expect("the defaults are valid"),
            )
        },
        Binning::of,
    );
    let ks: Vec<usize> = (0..configs.len())
        .filter(|&k| Binning::of(&configs[k]) == bn)
        .collect();
    let layout = GbdtLayout::build(input, bn);
    let mut rows_of_class: Vec<(usize, usize)> = Vec::new();
    for g in (0..n_all).filter(|&g| input.fit[g]) {
        let class = layout.hist_len(g).next_power_of_two();
        match rows_of_class.iter_mut().find(|(c, _)| *c == class) {
            Some((_, r)) => *r += layout.range(g).len(),
            None => rows_of_class.push((class, layout.range(g).len())),
        }
    }
    let class = rows_of_class
        .iter()
        .max_by_key(|(c, r)| (*r, *c))
        .map_or(1, |(c, _)| *c);
    let c = class_units(input, &layout, configs, &ks, class);
    let family = GbdtPass::new(&layout, c.owner, &c.config_of, configs, c.stats_len);
    let mut e = explain(&family, c.units, &c.drows, input.threads);
    // Driver groups are boosters: report the data group each belongs to.
    for p in &mut e.strategies {
        for (g, _) in &mut p.cut {
            *g = family.owner[*g];
        }
    }
    e
}
