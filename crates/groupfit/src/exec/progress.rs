//! Progress of a training job, in the planner's units of work.
//!
//! Each unit says where it stands in its family's steps ([`UnitProgress`]):
//! rounds, epochs' mini-batches or passes. The [`Meter`] prices a step of a
//! unit of each group with the cost model, so a step of a large group weighs
//! more than one of a small group. Work done plus work left is the total; a
//! family that cannot count its steps in advance (linear, which stops at a
//! tolerance) estimates them and refines the estimate as units converge.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// What a job is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading the input files or tables.
    Reading,
    /// Building a family's data layout.
    Layout,
    /// Training: the passes over the data.
    Training,
    /// Scoring the validation rows and choosing each group's model.
    Scoring,
    /// Writing the model file.
    Writing,
}

impl Stage {
    /// The stage's name, as progress bars and Python callbacks show it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Reading => "reading",
            Stage::Layout => "layout",
            Stage::Training => "training",
            Stage::Scoring => "scoring",
            Stage::Writing => "writing",
        }
    }
}

/// A progress event. `done` never decreases over a job; `total` is the
/// current estimate of all the work (at least `done`; 0 before training).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// What the job is doing.
    pub stage: Stage,
    /// Work done, in the planner's units.
    pub done: f64,
    /// Work in all, as now estimated.
    pub total: f64,
    /// Models (units) trained to the end.
    pub models_done: usize,
    /// Models to train.
    pub models: usize,
}

impl Progress {
    /// The start of `stage`, with no work counted yet.
    pub fn stage(stage: Stage) -> Progress {
        Progress {
            stage,
            done: 0.0,
            total: 0.0,
            models_done: 0,
            models: 0,
        }
    }

    /// The same counts in another stage.
    pub fn at(self, stage: Stage) -> Progress {
        Progress { stage, ..self }
    }

    /// The share of the work done (0 when nothing is known yet).
    pub fn fraction(&self) -> f64 {
        if self.total > 0.0 {
            (self.done / self.total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// Where progress events go. It may be called from any worker thread.
pub type OnProgress<'a> = dyn FnMut(Progress) + Send + 'a;

/// Where a unit stands, in its family's steps (see
/// [`crate::exec::PartialStep::progress`]). Its steps still to come are
/// `left + per_expected * E`, at least `least`, where `E` is the family's
/// current estimate of a unit's steps ([`crate::exec::PartialStep::expected_steps`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct UnitProgress {
    /// Steps taken.
    pub done: f64,
    /// Steps to come, as far as they are known.
    pub left: f64,
    /// How many times the family's estimate `E` to add to `left`.
    pub per_expected: f64,
    /// The fewest steps to come (1 for an active unit, 0 once it is done).
    pub least: f64,
}

impl UnitProgress {
    /// A unit whose steps are known: `done` taken, `left` to come.
    pub fn known(done: f64, left: f64) -> UnitProgress {
        UnitProgress {
            done,
            left,
            per_expected: 0.0,
            least: left,
        }
    }

    /// A unit that is done after `done` steps.
    pub fn finished(done: f64) -> UnitProgress {
        UnitProgress::known(done, 0.0)
    }

    /// An active unit that took `done` steps of an expected `E`.
    pub fn estimated(done: f64) -> UnitProgress {
        UnitProgress {
            done,
            left: -done,
            per_expected: 1.0,
            least: 1.0,
        }
    }
}

/// Priced sums of [`UnitProgress`] over units.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    done: f64,
    left: f64,
    per_expected: f64,
    least: f64,
    /// Units done.
    finished: i64,
    /// Of the units done, their priced steps and their prices: the
    /// price-weighted mean of the steps a unit took.
    finished_work: f64,
    finished_price: f64,
}

impl Tally {
    /// Adds unit `u` at `price` a step (`sign` -1 takes it away).
    pub fn add(&mut self, u: UnitProgress, price: f64, finished: bool, sign: f64) {
        self.done += sign * price * u.done;
        self.left += sign * price * u.left;
        self.per_expected += sign * price * u.per_expected;
        self.least += sign * price * u.least;
        if finished {
            self.finished += sign as i64;
            self.finished_work += sign * price * u.done;
            self.finished_price += sign * price;
        }
    }

    /// Adds `o`.
    pub fn merge(&mut self, o: &Tally) {
        self.done += o.done;
        self.left += o.left;
        self.per_expected += o.per_expected;
        self.least += o.least;
        self.finished += o.finished;
        self.finished_work += o.finished_work;
        self.finished_price += o.finished_price;
    }

    /// The steps a unit is expected to take: the mean over the units done
    /// so far (weighted by price), else the family's `prior`.
    fn expected(&self, prior: f64) -> f64 {
        if self.finished > 0 && self.finished_price > 0.0 {
            self.finished_work / self.finished_price
        } else {
            prior
        }
    }
}

/// Least time between two events.
const EVERY_NS: u64 = 100_000_000;

/// The progress of one run of the pass driver: the priced tally of its
/// units, and the callback, called at most every 100 ms by whichever worker
/// finds it due.
pub(crate) struct Meter<'a, 'b> {
    /// Per group, the price of one step of one unit.
    prices: Vec<f64>,
    models: usize,
    tally: Mutex<Tally>,
    on: Mutex<&'a mut OnProgress<'b>>,
    start: Instant,
    /// Nanoseconds after `start` when the next event is due.
    due_ns: AtomicU64,
    /// `done` of the last event sent (events never go back).
    sent: Mutex<f64>,
}

impl<'a, 'b> Meter<'a, 'b> {
    /// A meter over units whose tally is `tally`, `prices[g]` a step of a
    /// unit of group `g`.
    pub fn new(prices: Vec<f64>, tally: Tally, models: usize, on: &'a mut OnProgress<'b>) -> Self {
        Meter {
            prices,
            models,
            tally: Mutex::new(tally),
            on: Mutex::new(on),
            start: Instant::now(),
            due_ns: AtomicU64::new(0),
            sent: Mutex::new(0.0),
        }
    }

    /// The price of a step of a unit of group `g`.
    pub fn price(&self, g: usize) -> f64 {
        self.prices[g]
    }

    /// Adds a group's change of tally (its units after a step less before).
    pub fn add(&self, change: &Tally) {
        self.tally.lock().unwrap().merge(change);
    }

    /// Whether an event is due at `now`.
    pub fn due(&self, now: Instant) -> bool {
        let at = now.saturating_duration_since(self.start).as_nanos() as u64;
        at >= self.due_ns.load(Ordering::Relaxed)
    }

    /// Sends an event if one is due (at most every 100 ms); `prior` is the
    /// family's estimate of a unit's steps before any unit is done.
    pub fn tick(&self, prior: f64) {
        let now = self.start.elapsed().as_nanos() as u64;
        if now < self.due_ns.load(Ordering::Relaxed) {
            return;
        }
        // Another worker is sending one: this one goes on working.
        let Ok(mut on) = self.on.try_lock() else {
            return;
        };
        self.due_ns.store(now + EVERY_NS, Ordering::Relaxed);
        let p = self.progress(prior);
        (*on)(p);
    }

    /// Sends the run's last event.
    pub fn finish(&self, prior: f64) {
        let p = self.progress(prior);
        (*self.on.lock().unwrap())(p);
    }

    /// The run's progress now.
    fn progress(&self, prior: f64) -> Progress {
        let t = *self.tally.lock().unwrap();
        let expected = t.expected(prior);
        let models_done = (t.finished.max(0) as usize).min(self.models);
        let left = if models_done == self.models {
            0.0
        } else {
            (t.left + t.per_expected * expected).max(t.least).max(0.0)
        };
        let mut sent = self.sent.lock().unwrap();
        let done = t.done.max(*sent);
        *sent = done;
        Progress {
            stage: Stage::Training,
            done,
            total: done + left,
            models_done,
            models: self.models,
        }
    }
}

/// Progress over runs made one after another (a family's layouts, gbdt's
/// binnings and classes): run `i`'s share of the work is `shares[i]`, and
/// its events are mapped onto the whole.
pub struct Sequence<'a, 'b> {
    on: &'a mut OnProgress<'b>,
    shares: Vec<f64>,
    models: Vec<usize>,
}

impl<'a, 'b> Sequence<'a, 'b> {
    /// Runs with `shares` of the work (any positive scale) and `models` units each.
    pub fn new(on: &'a mut OnProgress<'b>, shares: Vec<f64>, models: Vec<usize>) -> Self {
        Sequence { on, shares, models }
    }

    /// Where run `i`'s events go.
    pub fn part(&mut self, i: usize) -> impl FnMut(Progress) + Send + use<'_, 'a, 'b> {
        let total: f64 = self.shares.iter().sum();
        let before: f64 = self.shares[..i].iter().sum();
        let share = self.shares[i];
        let models: usize = self.models.iter().sum();
        let models_before: usize = self.models[..i].iter().sum();
        let on = &mut *self.on;
        move |p: Progress| {
            if p.stage != Stage::Training {
                on(p);
                return;
            }
            on(Progress {
                stage: p.stage,
                done: before + share * p.fraction(),
                total,
                models_done: models_before + p.models_done,
                models,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_prices_steps_and_estimates_the_unknown() {
        // Two units at 2.0 a step: one known (3 taken, 5 to come), one that
        // took 4 steps of an expected E.
        let mut t = Tally::default();
        t.add(UnitProgress::known(3.0, 5.0), 2.0, false, 1.0);
        let guess = UnitProgress::estimated(4.0);
        t.add(guess, 2.0, false, 1.0);
        let mut events = Vec::new();
        let mut on = |p: Progress| events.push(p);
        let meter = Meter::new(vec![2.0], t, 2, &mut on);
        // E = 10: 5 + (10 - 4) = 11 steps to come, 22 of work; 14 done.
        meter.finish(10.0);
        // E = 4: the second unit is due its one step at least: 5 + 1.
        meter.finish(4.0);
        // The second unit ends at 6 steps.
        let mut change = Tally::default();
        change.add(guess, 2.0, false, -1.0);
        change.add(UnitProgress::finished(6.0), 2.0, true, 1.0);
        meter.add(&change);
        meter.finish(10.0);
        drop(meter);
        let got: Vec<(f64, f64, usize)> = events
            .iter()
            .map(|p| (p.done, p.total, p.models_done))
            .collect();
        assert_eq!(got, [(14.0, 36.0, 0), (14.0, 26.0, 0), (18.0, 28.0, 1)]);
    }

    #[test]
    fn the_expected_steps_follow_the_units_done() {
        // Three estimated units, prices 1, 1 and 2, steps taken 2, 3, 0.
        let prices = vec![1.0, 1.0, 2.0];
        let mut t = Tally::default();
        for (p, done) in [(1.0, 2.0), (1.0, 3.0), (2.0, 0.0)] {
            t.add(UnitProgress::estimated(done), p, false, 1.0);
        }
        let mut events = Vec::new();
        let mut on = |p: Progress| events.push((p.done, p.total));
        let meter = Meter::new(prices, t, 3, &mut on);
        // Prior 6: (6 - 2) + (6 - 3) + 2 * 6 = 19 left, 5 done.
        meter.finish(6.0);
        // The first unit stops at 4 steps, the second goes on to 5: the
        // expected steps are now 4, so the second is due 1 (its least),
        // the third 2 * 4.
        let mut change = Tally::default();
        change.add(UnitProgress::estimated(2.0), 1.0, false, -1.0);
        change.add(UnitProgress::finished(4.0), 1.0, true, 1.0);
        change.add(UnitProgress::estimated(3.0), 1.0, false, -1.0);
        change.add(UnitProgress::estimated(5.0), 1.0, false, 1.0);
        meter.add(&change);
        meter.finish(6.0);
        drop(meter);
        // Left: 2 * 4 + (4 - 5), at least 1 + 2 = 3: 7; done 9.
        assert_eq!(events, [(5.0, 24.0), (9.0, 16.0)]);
    }

    #[test]
    fn a_finished_run_has_nothing_left() {
        let mut t = Tally::default();
        t.add(UnitProgress::finished(7.0), 1.5, true, 1.0);
        // Rounding left a trace of work behind: it is not shown.
        t.left = 1e-12;
        let mut last = None;
        let mut on = |p: Progress| last = Some(p);
        Meter::new(vec![1.5], t, 1, &mut on).finish(3.0);
        let p = last.unwrap();
        assert_eq!((p.done, p.total, p.models_done), (10.5, 10.5, 1));
    }

    #[test]
    fn a_sequence_fills_each_runs_share() {
        let mut events = Vec::new();
        let mut on = |p: Progress| events.push((p.done, p.total, p.models_done, p.models));
        let mut seq = Sequence::new(&mut on, vec![3.0, 1.0], vec![2, 4]);
        let training = |done, total, models_done, models| Progress {
            stage: Stage::Training,
            done,
            total,
            models_done,
            models,
        };
        seq.part(0)(training(50.0, 100.0, 1, 2));
        seq.part(1)(training(0.0, 0.0, 0, 4));
        seq.part(1)(training(30.0, 40.0, 3, 4));
        assert_eq!(
            events,
            [(1.5, 4.0, 1, 6), (3.0, 4.0, 2, 6), (3.75, 4.0, 5, 6)]
        );
    }
}
