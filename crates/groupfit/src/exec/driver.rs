//! The pass driver: runs passes under any plan until no unit is active.
//!
//! In each pass every worker scans its shards, whole-group shards are
//! updated on the spot, and cut groups are combined in row order and updated
//! after the workers meet. The driver owns the threads: one scoped thread
//! per worker for the whole run, parked at a barrier between passes, and no
//! nested pools.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Instant;

use super::barrier::SpinBarrier;
use super::books::{Books, Local, LONG_STEP_ROWS};
use super::calibrate;
use super::progress::OnProgress;
use super::step::{
    active_counts, active_units, count_active, group_loads, heavy_counts, steps_counts, PartialStep,
};
use crate::plan::{CostModel, GroupLoad, Plan, Strategy};
use crate::util::trace::trace;

/// What [`run_passes`] did.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The strategy that ran (resolved from `Auto`).
    pub strategy: Strategy,
    /// Passes over the data.
    pub passes: usize,
    /// Seconds spent inside the passes (scans, reductions and updates).
    pub passes_s: f64,
    /// The most groups any plan of the run cut into pieces on two or more
    /// workers (0: every group was scanned whole by one worker).
    pub cut_groups: usize,
    /// Per group, the thread-seconds its scans and updates took (empty
    /// when not measured: a remote run).
    pub group_s: Vec<f64>,
}

/// Runs passes until every unit is inactive (or `max_passes`).
///
/// `units[g]` holds group `g`'s units (empty for groups not trained);
/// `rows[g]` its row range. The plan is re-made when the set of groups with
/// active units changes, so load balance follows convergence. `progress`
/// gets the run's training progress at most every 100 ms, from any worker,
/// and once at the end.
pub fn run_passes<F: PartialStep>(
    family: &F,
    units: Vec<Vec<F::Unit>>,
    rows: &[Range<usize>],
    strategy: Strategy,
    workers: usize,
    max_passes: usize,
    progress: &mut OnProgress<'_>,
) -> (Vec<Vec<F::Unit>>, RunReport) {
    let workers = workers.max(1);
    let groups: Vec<RwLock<Vec<F::Unit>>> = units.into_iter().map(RwLock::new).collect();
    let models: usize = groups.iter().map(|g| g.read().unwrap().len()).sum();
    // Counted before the calibration, whose pilot may run real steps.
    let mut live = LiveGroups::new(family, &groups);
    let mut planner = Planner::new(family, &groups, rows, strategy, workers);
    let books = Books::new(family, &groups, planner.prices(rows), models, progress);
    let mut pass = 0;
    let mut replan = true;
    let mut passes_s = 0.0;
    // The workers live for the whole run: the calling thread is worker 0,
    // the others wait at `start` between passes (see `Workers`).
    let ctl = Workers::new(workers);
    std::thread::scope(|scope| {
        for w in 1..workers {
            let (ctl, groups, books) = (&ctl, &groups, &books);
            scope.spawn(move || ctl.serve(family, groups, w, books));
        }
        // Stops the workers however the loop ends (a panic included), so the
        // scope can join them.
        let _stop = StopOnDrop(&ctl);
        let mut scratch = family.scratch();
        while pass < max_passes {
            let n_active = live.active_units();
            if n_active == 0 {
                break;
            }
            // Re-plan when the active counts changed (units converged).
            if replan {
                ctl.set_plan(planner.next_plan(family, &groups, rows, &live));
                replan = false;
            }
            let t = Instant::now();
            ctl.run_pass(family, &groups, &mut scratch, max_passes - pass, &books);
            passes_s += t.elapsed().as_secs_f64();
            pass += 1;
            if trace() {
                let rows_active: usize = rows
                    .iter()
                    .zip(&live.active)
                    .map(|(r, &a)| r.len() * a)
                    .sum();
                eprintln!(
                    "[groupfit] pass {pass}: {n_active} active units, {rows_active} unit-rows, {:.1} ms",
                    t.elapsed().as_secs_f64() * 1e3
                );
            }
            replan |= live.recount(family, &groups);
            books.meter.tick(family.expected_steps());
        }
    });
    books.meter.finish(family.expected_steps());
    let report = RunReport {
        strategy: planner.first_strategy(),
        passes: pass,
        passes_s,
        cut_groups: planner.cut_groups,
        group_s: books.clock.seconds(),
    };
    (
        groups
            .into_iter()
            .map(|g| g.into_inner().unwrap())
            .collect(),
        report,
    )
}

/// Active units per group, recounted after each pass for the groups that
/// still have some (`live`): units never become active again, and an MLP
/// run takes thousands of passes over a few groups at its end.
struct LiveGroups {
    /// Per group, its active units.
    active: Vec<usize>,
    /// The groups with active units.
    live: Vec<usize>,
}

impl LiveGroups {
    fn new<F: PartialStep>(family: &F, groups: &[RwLock<Vec<F::Unit>>]) -> Self {
        let active = active_counts(family, groups);
        let live = (0..groups.len()).filter(|&g| active[g] > 0).collect();
        LiveGroups { active, live }
    }

    /// Active units over all groups.
    fn active_units(&self) -> usize {
        self.live.iter().map(|&g| self.active[g]).sum()
    }

    /// Recounts the live groups' active units and drops the groups left
    /// without any; true when a count changed.
    fn recount<F: PartialStep>(&mut self, family: &F, groups: &[RwLock<Vec<F::Unit>>]) -> bool {
        let mut changed = false;
        for &g in &self.live {
            let a = count_active(family, &groups[g]);
            changed |= a != self.active[g];
            self.active[g] = a;
        }
        let active = &self.active;
        self.live.retain(|&g| active[g] > 0);
        changed
    }
}

/// The driver's choice of plans over a run: the strategy asked for, the
/// costs plans are priced with, and (for `auto`) when it last chose.
struct Planner {
    /// The strategy asked for (possibly `Auto`).
    asked: Strategy,
    workers: usize,
    cost: CostModel,
    /// Heavy rows per group (fixed for the run).
    heavy: Vec<usize>,
    /// The strategy of the first plan (what the report names).
    first: Option<Strategy>,
    /// The strategy of the current plan.
    current: Option<Strategy>,
    /// `auto`: groups with active units when it last chose a strategy.
    decided_at: usize,
    /// The most groups one plan cut over two or more workers.
    cut_groups: usize,
}

impl Planner {
    fn new<F: PartialStep>(
        family: &F,
        groups: &[RwLock<Vec<F::Unit>>],
        rows: &[Range<usize>],
        asked: Strategy,
        workers: usize,
    ) -> Self {
        let heavy = heavy_counts(family, rows);
        // Every strategy places work by the calibrated costs (updates and shards
        // count, not only rows); `auto` also prices whole plans with them. One
        // worker has nothing to place.
        let cost = if workers > 1 {
            calibrate::cost_model(family, groups, rows, workers).0
        } else {
            CostModel::uncalibrated(family.stats_len(), family.unit_bytes())
        };
        Planner {
            asked,
            workers,
            cost,
            heavy,
            first: None,
            current: None,
            decided_at: usize::MAX,
            cut_groups: 0,
        }
    }

    /// The plan for the current active counts.
    fn next_plan<F: PartialStep>(
        &mut self,
        family: &F,
        groups: &[RwLock<Vec<F::Unit>>],
        rows: &[Range<usize>],
        live: &LiveGroups,
    ) -> Plan {
        let loads = group_loads(
            rows,
            &live.active,
            &self.heavy,
            &steps_counts(family, groups),
        );
        // `auto` chooses on the first pass and again each time the
        // groups with active units have halved since its last choice
        // (the end of a run, where one large group may be left, can
        // want another plan than its start); in between it keeps its
        // strategy.
        let n_groups = live.live.len();
        let s = match self.asked {
            Strategy::Auto if 2 * n_groups <= self.decided_at => {
                self.decided_at = n_groups;
                Strategy::Auto
            }
            Strategy::Auto => self.current.unwrap_or(Strategy::Auto),
            s => s,
        };
        let p = Plan::build(s, &loads, self.workers, family.align(), &self.cost);
        if trace() && self.current.is_some_and(|c| c != p.strategy) {
            eprintln!(
                "[groupfit] auto: {} groups left, now {}",
                n_groups,
                p.strategy.name()
            );
        }
        self.first.get_or_insert(p.strategy);
        self.current = Some(p.strategy);
        self.cut_groups = self.cut_groups.max(groups_cut(&p, groups.len()));
        p
    }

    /// Per group, the price of one step of one of its units: the planner's
    /// cost of the group's load with one unit and one step.
    fn prices(&self, rows: &[Range<usize>]) -> Vec<f64> {
        rows.iter()
            .zip(&self.heavy)
            .map(|(r, &heavy)| {
                GroupLoad {
                    rows: r.clone(),
                    units: 1,
                    heavy,
                    steps: 1,
                    syncs: 1,
                    scan: 1.0,
                }
                .cost(&self.cost)
                .max(1e-9)
            })
            .collect()
    }

    /// The strategy the run is reported under: the first plan's, or (no
    /// pass ran) the one asked for, `auto` naming `tp`.
    fn first_strategy(&self) -> Strategy {
        self.first.unwrap_or(match self.asked {
            Strategy::Auto => Strategy::Tp,
            s => s,
        })
    }
}

/// Groups whose shards in some stage of `plan` lie with two or more workers.
fn groups_cut(plan: &Plan, n_groups: usize) -> usize {
    let mut cut = vec![false; n_groups];
    for stage in &plan.stages {
        // The first worker holding each group in this stage.
        let mut first: Vec<Option<usize>> = vec![None; n_groups];
        for (w, shards) in stage.iter().enumerate() {
            for s in shards {
                match first[s.group] {
                    None => first[s.group] = Some(w),
                    Some(f) if f != w => cut[s.group] = true,
                    Some(_) => {}
                }
            }
        }
    }
    cut.iter().filter(|&&c| c).count()
}

/// Partial statistics of a cut group, tagged for the in-order reduction.
struct Partial {
    group: usize,
    start: usize,
    /// `(unit index, stats)` for each active unit.
    stats: Vec<(usize, Vec<f64>)>,
}

/// The pass driver's worker threads, alive for a whole [`run_passes`]: a
/// pass costs two barrier waits instead of spawning threads (an MLP run takes
/// thousands of short passes), and each worker keeps its scratch buffers.
///
/// Worker 0 is the calling thread. Between passes the others wait at
/// `start`; the caller sets the plan (only while they wait), meets them at
/// `start`, runs its own part, and all meet again at `end`. A panic in a
/// worker's part is caught so that every barrier is still met, and raised
/// again on the calling thread at the end of the pass.
struct Workers {
    workers: usize,
    start: SpinBarrier,
    end: SpinBarrier,
    /// The current plan; `None` tells the workers to stop.
    plan: RwLock<Option<Plan>>,
    /// Updates a whole group may take in the current pass (set before `start`).
    steps: AtomicUsize,
    /// Workers done with their part of a stage, counted over the pass's
    /// stages (reset before `start`); see [`step_while_others_work`].
    finished: AtomicUsize,
    /// Stage barrier and the cut groups' partial statistics.
    stage: SpinBarrier,
    shared: Mutex<Vec<Partial>>,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

impl Workers {
    fn new(workers: usize) -> Self {
        Workers {
            workers,
            start: SpinBarrier::new(workers),
            end: SpinBarrier::new(workers),
            plan: RwLock::new(None),
            steps: AtomicUsize::new(1),
            finished: AtomicUsize::new(0),
            stage: SpinBarrier::new(workers),
            shared: Mutex::new(Vec::new()),
            panic: Mutex::new(None),
        }
    }

    /// Sets the plan of the next passes (between passes only).
    fn set_plan(&self, plan: Plan) {
        *self.plan.write().unwrap() = Some(plan);
    }

    /// Runs one pass under the current plan; returns when every worker is
    /// done. A whole group takes up to [`PartialStep::whole_steps`] updates
    /// (at most `left`), a cut group one.
    fn run_pass<F: PartialStep>(
        &self,
        family: &F,
        groups: &[RwLock<Vec<F::Unit>>],
        scratch: &mut F::Scratch,
        left: usize,
        books: &Books,
    ) {
        let guard = self.plan.read().unwrap();
        let plan = guard.as_ref().expect("a plan is set before a pass");
        let steps = family.whole_steps().clamp(1, left.max(1));
        self.steps.store(steps, Ordering::Relaxed);
        // A plan with work for one worker at a time runs on the calling
        // thread alone; the others stay parked.
        if self.workers == 1 || plan.single_worker() {
            for stage in &plan.stages {
                if let Some(shards) = stage.iter().find(|w| !w.is_empty()) {
                    let partials = scan_shards(family, groups, shards, scratch, steps, books);
                    reduce_and_apply(family, groups, partials, scratch, books);
                }
            }
            return;
        }
        self.finished.store(0, Ordering::Relaxed);
        self.start.wait();
        self.work(family, groups, plan, 0, scratch, books);
        self.end.wait();
        if let Some(p) = self.panic.lock().unwrap().take() {
            std::panic::resume_unwind(p);
        }
    }

    /// Worker `w`'s part of a pass: one stage at a time, each ending at a
    /// barrier where one thread (the barrier's leader) reduces and updates
    /// the cut groups.
    fn work<F: PartialStep>(
        &self,
        family: &F,
        groups: &[RwLock<Vec<F::Unit>>],
        plan: &Plan,
        w: usize,
        scratch: &mut F::Scratch,
        books: &Books,
    ) {
        let caught = |r: std::thread::Result<()>| {
            if let Err(p) = r {
                self.panic.lock().unwrap().get_or_insert(p);
            }
        };
        let steps = self.steps.load(Ordering::Relaxed);
        for (i, stage) in plan.stages.iter().enumerate() {
            caught(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                || {
                    let mine = scan_shards(family, groups, &stage[w], scratch, steps, books);
                    if !mine.is_empty() {
                        self.shared.lock().unwrap().extend(mine);
                    }
                },
            )));
            if steps > 1 {
                // Counted even after a panic, so no worker waits on this
                // one (and only where whole groups may step on: `dp`'s
                // thousands of stages a pass do not share a cache line).
                self.finished.fetch_add(1, Ordering::AcqRel);
                let target = (i + 1) * self.workers;
                caught(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                    || {
                        step_while_others_work(
                            family,
                            groups,
                            &stage[w],
                            scratch,
                            &self.finished,
                            target,
                            books,
                        );
                    },
                )));
            }
            if self.stage.wait() {
                caught(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                    || {
                        let partials = std::mem::take(&mut *self.shared.lock().unwrap());
                        reduce_and_apply(family, groups, partials, scratch, books);
                    },
                )));
            }
            self.stage.wait();
        }
    }

    /// The loop of worker `w > 0`: a pass per meeting at `start`, until stopped.
    fn serve<F: PartialStep>(
        &self,
        family: &F,
        groups: &[RwLock<Vec<F::Unit>>],
        w: usize,
        books: &Books,
    ) {
        let mut scratch = family.scratch();
        loop {
            self.start.wait();
            {
                let guard = self.plan.read().unwrap();
                let Some(plan) = guard.as_ref() else {
                    return;
                };
                self.work(family, groups, plan, w, &mut scratch, books);
            }
            self.end.wait();
        }
    }

    /// Releases the waiting workers for good.
    fn stop(&self) {
        if self.workers > 1 {
            *self.plan.write().unwrap() = None;
            self.start.wait();
        }
    }
}

/// Calls [`Workers::stop`] when dropped.
struct StopOnDrop<'a>(&'a Workers);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Scans one worker's shards of a stage: whole groups are accumulated and
/// updated on the spot (up to `steps` times while they have active units),
/// cut groups return their partial statistics.
fn scan_shards<F: PartialStep>(
    family: &F,
    groups: &[RwLock<Vec<F::Unit>>],
    shards: &[crate::plan::Shard],
    scratch: &mut F::Scratch,
    steps: usize,
    books: &Books,
) -> Vec<Partial> {
    let len = family.stats_len();
    let mut bufs = StepBuffers::default();
    let mut partials = Vec::new();
    for s in shards {
        if s.whole {
            // A small group's steps are short: the clock is read after
            // every few (for progress) and once for the group's time.
            let t = Instant::now();
            let every = if s.rows.len() >= LONG_STEP_ROWS { 1 } else { 8 };
            for i in 0..steps {
                if !step_whole(family, groups, s, scratch, &mut bufs, books) {
                    break;
                }
                if i % every == every - 1 {
                    books.tick(family, Instant::now(), &mut bufs.local);
                }
            }
            books.stepped(family, s.group, t, &mut bufs.local);
        } else {
            let t = Instant::now();
            let units = groups[s.group].read().unwrap();
            let active = active_units(family, &units);
            if active.is_empty() {
                continue;
            }
            let mut out = vec![0.0; active.len() * len];
            family.accumulate(s.group, &active, s.rows.clone(), &mut out, scratch);
            partials.push(Partial {
                group: s.group,
                start: s.rows.start,
                stats: active
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (*k, out[i * len..(i + 1) * len].to_vec()))
                    .collect(),
            });
            books.stepped(family, s.group, t, &mut bufs.local);
        }
    }
    books.flush(&mut bufs.local);
    partials
}

/// A worker's buffers for whole-group steps: the units' statistics, their
/// config indices, and the worker's progress tally (see [`Books::stepped`]).
#[derive(Default)]
struct StepBuffers {
    stats: Vec<f64>,
    ks: Vec<usize>,
    local: Local,
}

/// One update of the active units of the whole group of shard `s`
/// (accumulate over all its rows, then apply); false when none is active.
fn step_whole<F: PartialStep>(
    family: &F,
    groups: &[RwLock<Vec<F::Unit>>],
    s: &crate::plan::Shard,
    scratch: &mut F::Scratch,
    bufs: &mut StepBuffers,
    books: &Books,
) -> bool {
    let StepBuffers {
        stats: buf,
        ks,
        local,
    } = bufs;
    let len = family.stats_len();
    let mut units = groups[s.group].write().unwrap();
    let active = active_units(family, &units);
    if active.is_empty() {
        return false;
    }
    let before = books.before(family, s.group, &units);
    ks.clear();
    ks.extend(active.iter().map(|(k, _)| *k));
    buf.clear();
    buf.resize(active.len() * len, 0.0);
    family.accumulate(s.group, &active, s.rows.clone(), buf, scratch);
    drop(active);
    family.apply_group(s.group, &mut units, ks, buf, scratch);
    books.after(family, s.group, &units, before, local);
    true
}

/// A worker's whole groups step on, one update each in turn, while another
/// worker is still busy with its part of the stage (`finished` below
/// `target`): a whole group takes the same steps however many passes they
/// are spread over, so the time a worker would wait is spent on its own
/// groups' later steps (a group with thousands of steps left then runs
/// beside many short ones instead of after them).
fn step_while_others_work<F: PartialStep>(
    family: &F,
    groups: &[RwLock<Vec<F::Unit>>],
    shards: &[crate::plan::Shard],
    scratch: &mut F::Scratch,
    finished: &AtomicUsize,
    target: usize,
    books: &Books,
) {
    let mut bufs = StepBuffers::default();
    'outer: while finished.load(Ordering::Acquire) < target {
        let mut any = false;
        for s in shards.iter().filter(|s| s.whole) {
            if finished.load(Ordering::Acquire) >= target {
                break 'outer;
            }
            let t = Instant::now();
            any |= step_whole(family, groups, s, scratch, &mut bufs, books);
            books.stepped(family, s.group, t, &mut bufs.local);
        }
        if !any {
            break;
        }
    }
    books.flush(&mut bufs.local);
}

/// Reduces the partial statistics of cut groups in row order, then updates them.
fn reduce_and_apply<F: PartialStep>(
    family: &F,
    groups: &[RwLock<Vec<F::Unit>>],
    mut partials: Vec<Partial>,
    scratch: &mut F::Scratch,
    books: &Books,
) {
    partials.sort_by_key(|p| (p.group, p.start));
    let mut local = Local::default();
    let mut i = 0;
    while i < partials.len() {
        let t = Instant::now();
        let g = partials[i].group;
        let mut j = i + 1;
        while j < partials.len() && partials[j].group == g {
            j += 1;
        }
        let (head, tail) = partials[i..j].split_first_mut().unwrap();
        for other in tail.iter() {
            for ((_, into), (_, from)) in head.stats.iter_mut().zip(&other.stats) {
                family.combine(into, from);
            }
        }
        let ks: Vec<usize> = head.stats.iter().map(|(k, _)| *k).collect();
        let mut stats: Vec<f64> = Vec::with_capacity(ks.len() * family.stats_len());
        for (_, st) in &head.stats {
            stats.extend_from_slice(st);
        }
        let mut units = groups[g].write().unwrap();
        let before = books.before(family, g, &units);
        family.apply_group(g, &mut units, &ks, &mut stats, scratch);
        books.after(family, g, &units, before, &mut local);
        drop(units);
        books.stepped(family, g, t, &mut local);
        i = j;
    }
    books.flush(&mut local);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{Progress, UnitProgress};
    use std::sync::atomic::AtomicBool;

    /// Units that take `left` passes and add up the rows they are shown.
    struct Countdown {
        /// Set: the next `accumulate` call panics.
        armed: AtomicBool,
        /// [`PartialStep::whole_steps`].
        steps: usize,
    }

    struct Unit {
        left: usize,
        rows: f64,
    }

    impl PartialStep for Countdown {
        type Unit = Unit;
        type Scratch = ();
        fn stats_len(&self) -> usize {
            1
        }
        fn scratch(&self) {}
        fn whole_steps(&self) -> usize {
            self.steps
        }
        fn is_active(&self, u: &Unit) -> bool {
            u.left > 0
        }
        fn progress(&self, group: usize, k: usize, u: &Unit) -> UnitProgress {
            // `countdown_units`: unit k of group g takes 1 + (g + k) % 4 steps.
            let steps = (1 + (group + k) % 4) as f64;
            UnitProgress::known(steps - u.left as f64, u.left as f64)
        }
        fn accumulate(
            &self,
            _group: usize,
            units: &[(usize, &Unit)],
            rows: Range<usize>,
            out: &mut [f64],
            _scratch: &mut (),
        ) {
            if self.armed.swap(false, Ordering::SeqCst) {
                panic!("a family bug");
            }
            for o in &mut out[..units.len()] {
                *o += rows.len() as f64;
            }
        }
        fn apply(&self, _group: usize, _k: usize, u: &mut Unit, stats: &mut [f64], _s: &mut ()) {
            u.rows += stats[0];
            u.left -= 1;
        }
    }

    fn countdown_units(sizes: &[usize]) -> (Vec<Vec<Unit>>, Vec<Range<usize>>) {
        let mut start = 0;
        let rows = sizes
            .iter()
            .map(|&n| {
                start += n;
                start - n..start
            })
            .collect();
        let units = (0..sizes.len())
            .map(|g| {
                (0..2)
                    .map(|k| Unit {
                        left: 1 + (g + k) % 4,
                        rows: 0.0,
                    })
                    .collect()
            })
            .collect();
        (units, rows)
    }

    #[test]
    fn every_strategy_shows_each_unit_its_rows_once_a_pass() {
        let sizes = [1000, 10, 10, 500, 1, 3];
        let family = Countdown {
            armed: AtomicBool::new(false),
            steps: 1,
        };
        for strategy in std::iter::once(Strategy::Auto).chain(Strategy::FIXED) {
            for workers in [1, 2, 3] {
                let (units, rows) = countdown_units(&sizes);
                let mut events: Vec<Progress> = Vec::new();
                let (done, report) =
                    run_passes(&family, units, &rows, strategy, workers, 100, &mut |p| {
                        events.push(p)
                    });
                assert_eq!(report.passes, 4, "{strategy:?} x {workers}");
                for (g, us) in done.iter().enumerate() {
                    for (k, u) in us.iter().enumerate() {
                        let passes = 1 + (g + k) % 4;
                        assert_eq!(
                            (u.left, u.rows),
                            (0, (passes * sizes[g]) as f64),
                            "{strategy:?} x {workers}: group {g} unit {k}"
                        );
                    }
                }
                // Progress rises to the whole work, which is known from the
                // start (every unit's steps are), with every model done.
                let last = *events.last().unwrap();
                assert!(last.done > 0.0 && last.done == last.total, "{last:?}");
                assert_eq!((last.models_done, last.models), (12, 12));
                for w in events.windows(2) {
                    assert!(w[0].done <= w[1].done, "{strategy:?} x {workers}: {w:?}");
                }
                assert!(events
                    .iter()
                    .all(|p| (p.total - last.total).abs() < 1e-6 * last.total));
            }
        }
    }

    #[test]
    fn whole_groups_take_their_steps_in_one_pass() {
        let sizes = [1000, 10, 10, 500, 1, 3];
        let family = Countdown {
            armed: AtomicBool::new(false),
            steps: usize::MAX,
        };
        for strategy in Strategy::FIXED {
            for workers in [1, 2] {
                let (units, rows) = countdown_units(&sizes);
                let (done, report) =
                    run_passes(&family, units, &rows, strategy, workers, 100, &mut |_| {});
                // Every unit still sees its rows once per update.
                for (g, us) in done.iter().enumerate() {
                    for (k, u) in us.iter().enumerate() {
                        let updates = 1 + (g + k) % 4;
                        assert_eq!((u.left, u.rows), (0, (updates * sizes[g]) as f64));
                    }
                }
                // One worker, or whole groups per worker: nothing is cut,
                // and every unit ends in the first pass.
                if workers == 1 || strategy == Strategy::Tp {
                    assert_eq!(report.passes, 1, "{strategy:?} x {workers}");
                }
                // Otherwise the run's plan depends on the calibrated costs
                // (timed on this machine): it may cut groups, whose units
                // take a pass per update (at most 4) while whole groups end
                // in the first pass.
                assert!(report.passes <= 4, "{strategy:?} x {workers}");
                // `dp` cuts every group of 2+ rows, whatever the costs: they
                // take 4 passes.
                if strategy == Strategy::Dp && workers == 2 {
                    assert_eq!(report.passes, 4);
                }
            }
        }
    }

    /// Group 0's unit takes `long` one-row steps; group 1's one step waits
    /// until group 0 has none left (or a timeout).
    struct LongBeside {
        left0: AtomicUsize,
    }

    /// A unit of [`LongBeside`]; the planner's pilot runs on copies marked
    /// `pilot`, which never wait.
    struct LongUnit {
        left: usize,
        rows: f64,
        pilot: bool,
    }

    impl PartialStep for LongBeside {
        type Unit = LongUnit;
        type Scratch = ();
        fn stats_len(&self) -> usize {
            1
        }
        fn scratch(&self) {}
        fn whole_steps(&self) -> usize {
            2
        }
        fn steps_left(&self, _group: usize, _k: usize, u: &LongUnit) -> usize {
            u.left
        }
        fn pilot_unit(&self, _k: usize, u: &LongUnit) -> Option<LongUnit> {
            Some(LongUnit {
                left: u.left,
                rows: 0.0,
                pilot: true,
            })
        }
        fn is_active(&self, u: &LongUnit) -> bool {
            u.left > 0
        }
        fn accumulate(
            &self,
            group: usize,
            units: &[(usize, &LongUnit)],
            rows: Range<usize>,
            out: &mut [f64],
            _scratch: &mut (),
        ) {
            if group == 1 && !units[0].1.pilot {
                let t = std::time::Instant::now();
                while self.left0.load(Ordering::SeqCst) > 0 && t.elapsed().as_secs() < 10 {
                    std::thread::yield_now();
                }
            }
            out[0] += rows.len() as f64;
        }
        fn apply(&self, group: usize, _k: usize, u: &mut LongUnit, stats: &mut [f64], _s: &mut ()) {
            u.rows += stats[0];
            u.left -= 1;
            if group == 0 && !u.pilot {
                self.left0.store(u.left, Ordering::SeqCst);
            }
        }
    }

    #[test]
    fn a_worker_steps_its_whole_groups_on_while_another_is_busy() {
        let long = 500;
        let family = LongBeside {
            left0: AtomicUsize::new(long),
        };
        // One row a step for group 0, whose 500 steps outweigh group 1's
        // one step of 100 rows: a worker each under every strategy that
        // keeps groups whole.
        let unit = |left| LongUnit {
            left,
            rows: 0.0,
            pilot: false,
        };
        let units = vec![vec![unit(long)], vec![unit(1)]];
        let rows = vec![0..1, 1..101];
        let (done, report) = run_passes(&family, units, &rows, Strategy::Tp, 2, 1000, &mut |_| {});
        assert_eq!((done[0][0].left, done[0][0].rows), (0, long as f64));
        assert_eq!((done[1][0].left, done[1][0].rows), (0, 100.0));
        // Two steps a pass would take 250 passes; group 0 instead stepped
        // on while group 1's step waited for it, all in the first pass.
        assert_eq!(report.passes, 1);
    }

    #[test]
    fn a_panic_in_a_worker_reaches_the_caller() {
        let family = Countdown {
            armed: AtomicBool::new(false),
            steps: 1,
        };
        for strategy in [Strategy::Dp, Strategy::Fused, Strategy::Tp] {
            let (units, rows) = countdown_units(&[1000, 500, 300, 200]);
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // The first event arms it: a later step panics.
                run_passes(&family, units, &rows, strategy, 2, 100, &mut |_| {
                    family.armed.store(true, Ordering::SeqCst);
                })
            }));
            assert!(caught.is_err(), "{strategy:?}");
        }
    }
}
