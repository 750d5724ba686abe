//! A gbdt fit over the pass driver: the layout of each [`Binning`] of the
//! grid, then its boosters class by class (histogram sizes), with the
//! progress of the whole mapped over those runs.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::binning::Binning;
use super::grouped::{class_units, ClassUnits, FittedBooster, GbdtLayout, GbdtPass};
use super::params::GbdtConfig;
use crate::exec::{run_passes, OnProgress, RunReport, Sequence};
use crate::family::TrainData;
use crate::util::trace::trace;

/// Fits every config of every group with `fit[g]` set (and the global model,
/// `fit[n_groups]`); returns, per group, one [`FittedBooster`] per config
/// (empty for groups not fitted).
pub fn fit_grouped(
    input: &TrainData<'_>,
    configs: &[GbdtConfig],
    progress: &mut OnProgress<'_>,
) -> (Vec<Vec<FittedBooster>>, RunReport) {
    let mut fit = GroupedFit::new(input, configs);
    let mut binnings: Vec<Binning> = configs.iter().map(Binning::of).collect();
    binnings.sort_unstable();
    binnings.dedup();
    // Each binning's share of the work, from the configs' rounds and leaves
    // and the groups' sizes (its layout, and so its histograms' sizes, do
    // not exist yet).
    let sizes = &group_sizes(input);
    let d = input.kinds.len();
    let (shares, models): (Vec<f64>, Vec<usize>) = binnings
        .iter()
        .map(|b| {
            let ks = b.configs(configs);
            let work = (0..sizes.len())
                .filter(|&g| input.fit[g])
                .flat_map(|g| {
                    let hist = d * b.max_bin.min(sizes[g] / b.min_data_in_bin.max(1)).max(1);
                    ks.iter()
                        .map(move |&k| booster_work(sizes[g], d, hist, &configs[k]))
                })
                .sum::<f64>();
            let boosters = input.fit.iter().filter(|&&f| f).count() * ks.len();
            (work, boosters)
        })
        .unzip();
    let mut seq = Sequence::new(progress, shares, models);
    for (i, binning) in binnings.into_iter().enumerate() {
        fit.run_binning(binning, &mut seq.part(i));
    }
    if trace() {
        fit.trace_times();
    }
    fit.finish()
}

/// A [`fit_grouped`] under way: the boosters fitted so far, the progress
/// over every binning and class, and the report.
struct GroupedFit<'a> {
    input: &'a TrainData<'a>,
    configs: &'a [GbdtConfig],
    /// Per group, per config, its fitted booster.
    out: Vec<Vec<Option<FittedBooster>>>,
    report: RunReport,
    /// Rows of the largest class run so far, whose strategy the report names.
    strategy_rows: usize,
    /// Seconds binning; thread-seconds building histograms and in rounds.
    bin_s: f64,
    hist_s: f64,
    round_s: f64,
}

impl<'a> GroupedFit<'a> {
    fn new(input: &'a TrainData<'a>, configs: &'a [GbdtConfig]) -> Self {
        let n_all = input.n_groups + 1;
        let out: Vec<Vec<Option<FittedBooster>>> = (0..n_all)
            .map(|g| {
                if input.fit[g] {
                    vec![None; configs.len()]
                } else {
                    Vec::new()
                }
            })
            .collect();
        GroupedFit {
            input,
            configs,
            out,
            report: RunReport {
                strategy: input.strategy,
                passes: 0,
                passes_s: 0.0,
                cut_groups: 0,
                group_s: vec![0.0; n_all],
            },
            strategy_rows: 0,
            bin_s: 0.0,
            hist_s: 0.0,
            round_s: 0.0,
        }
    }

    /// Bins the rows for the configs of `binning`, then runs their boosters
    /// class by class (histogram sizes, powers of two), largest first.
    fn run_binning(&mut self, binning: Binning, progress: &mut OnProgress<'_>) {
        let (input, configs) = (self.input, self.configs);
        let n_all = input.n_groups + 1;
        let ks = binning.configs(configs);
        let t = Instant::now();
        let layout = GbdtLayout::build(input, binning);
        self.bin_s += t.elapsed().as_secs_f64();
        let mut classes: Vec<usize> = (0..n_all)
            .filter(|&g| input.fit[g])
            .map(|g| layout.hist_len(g).next_power_of_two())
            .collect();
        classes.sort_unstable();
        classes.dedup();
        classes.reverse();
        // Each class's share of the binning's work, now with its histograms' sizes.
        let d = input.kinds.len();
        let (shares, models): (Vec<f64>, Vec<usize>) = classes
            .iter()
            .map(|&class| {
                let members: Vec<usize> = (0..n_all)
                    .filter(|&g| input.fit[g] && layout.hist_len(g).next_power_of_two() == class)
                    .collect();
                let work = members
                    .iter()
                    .flat_map(|&g| {
                        let (rows, hist) = (layout.range(g).len(), layout.hist_len(g));
                        ks.iter()
                            .map(move |&k| booster_work(rows, d, hist, &configs[k]))
                    })
                    .sum::<f64>();
                (work, members.len() * ks.len())
            })
            .unzip();
        let mut seq = Sequence::new(progress, shares, models);
        for (i, &class) in classes.iter().enumerate() {
            self.run_class(&layout, &ks, class, &mut seq.part(i));
        }
    }

    /// Runs the boosters of configs `ks` of the groups in histogram-size
    /// class `class` to the end, and keeps their models.
    fn run_class(
        &mut self,
        layout: &GbdtLayout,
        ks: &[usize],
        class: usize,
        progress: &mut OnProgress<'_>,
    ) {
        let (input, configs) = (self.input, self.configs);
        let ClassUnits {
            owner,
            config_of,
            units,
            drows,
            stats_len,
        } = class_units(input, layout, configs, ks, class);
        let class_rows: usize = drows.iter().map(|r| r.len()).sum();
        let family = GbdtPass::new(layout, owner, &config_of, configs, stats_len);
        let max_rounds = ks
            .iter()
            .map(|&k| configs[k].rounds() as usize)
            .max()
            .unwrap_or(1);
        let max_leaves = ks
            .iter()
            .map(|&k| configs[k].num_leaves() as usize)
            .max()
            .unwrap_or(2);
        let (units, r) = run_passes(
            &family,
            units,
            &drows,
            input.strategy,
            input.threads,
            max_rounds * (max_leaves + 1) + 1,
            progress,
        );
        self.report.passes += r.passes;
        self.report.passes_s += r.passes_s;
        // The pass driver's groups here are boosters (one per group and config).
        self.report.cut_groups = self.report.cut_groups.max(r.cut_groups);
        self.hist_s += family.hist_ns.load(Ordering::Relaxed) as f64 * 1e-9;
        self.round_s += family.round_ns.load(Ordering::Relaxed) as f64 * 1e-9;
        if class_rows >= self.strategy_rows {
            self.strategy_rows = class_rows;
            self.report.strategy = r.strategy;
        }
        for (i, us) in units.into_iter().enumerate() {
            let g = family.owner[i];
            self.report.group_s[g] += r.group_s[i];
            let view = layout.view(g);
            let b = us.into_iter().next().unwrap().into_inner().unwrap();
            self.out[g][config_of[i]] = Some(FittedBooster {
                rounds: b.rounds(),
                model: b.model(&view),
            });
        }
    }

    /// Where the time went (traced runs).
    fn trace_times(&self) {
        let (report, threads) = (&self.report, self.input.threads);
        let worker_s = report.passes_s * threads as f64;
        eprintln!(
            "[groupfit] gbdt: binning {:.1} ms; in passes {:.2} s x {} workers = {:.2} thread-s: \
             histogram building {:.2} thread-s ({:.0}%), rest of the boosting steps {:.2} thread-s",
            self.bin_s * 1e3,
            report.passes_s,
            threads,
            worker_s,
            self.hist_s,
            100.0 * self.hist_s / worker_s.max(1e-12),
            self.round_s - self.hist_s,
        );
    }

    /// Every booster fitted, and the report.
    fn finish(self) -> (Vec<Vec<FittedBooster>>, RunReport) {
        let fitted = self
            .out
            .into_iter()
            .map(|us| {
                us.into_iter()
                    .map(|u| u.expect("every unit fitted"))
                    .collect()
            })
            .collect();
        (fitted, self.report)
    }
}

/// Training rows per group, the global pseudo-group (every row) last.
fn group_sizes(input: &TrainData<'_>) -> Vec<usize> {
    let mut sizes = vec![0; input.n_groups + 1];
    for &g in input.group_of {
        sizes[g as usize] += 1;
    }
    sizes[input.n_groups] = input.rows.len();
    sizes
}

/// The prior work of a booster of `rows` rows, `d` features and histograms
/// of `hist` bins, for progress only: per round, about 2.5 histogram adds a
/// row and feature (the smaller child is scanned, the larger subtracted),
/// and a split search of about 5 a bin for each leaf it can grow.
fn booster_work(rows: usize, d: usize, hist: usize, cfg: &GbdtConfig) -> f64 {
    let most = (rows / (cfg.min_data_in_leaf() as usize).max(1)).max(1);
    let leaves = (cfg.num_leaves() as usize).min(most);
    cfg.rounds() as f64 * (2.5 * (rows * d) as f64 + 5.0 * (leaves * hist) as f64)
}
