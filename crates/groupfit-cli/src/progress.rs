//! The training progress bar on stderr (`indicatif`): the stage, the share
//! of the work done, the time taken and left, and the models trained.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use groupfit::job::{Progress, Stage};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Positions of the bar: tenths of a percent.
const SCALE: u64 = 1000;

/// Seconds of a run before the bar is drawn.
const QUIET_S: f64 = 1.0;

/// A progress bar drawn on a terminal only, once a run has taken a second,
/// at most 10 times a second.
pub struct Bar {
    start: Instant,
    /// `None`: not a terminal, or `--json`.
    bar: Option<ProgressBar>,
    /// When the training stage started (the time-left estimate's origin).
    training: Option<Instant>,
    last: Progress,
}

impl Bar {
    pub fn new(quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let style = ProgressStyle::with_template(
                "{prefix:>8} [{bar:30}] {percent:>3}% {elapsed_precise} {msg}",
            )
            .expect("the template parses")
            .progress_chars("=> ");
            ProgressBar::with_draw_target(Some(SCALE), ProgressDrawTarget::hidden())
                .with_style(style)
        });
        Bar {
            start: Instant::now(),
            bar,
            training: None,
            last: Progress::stage(Stage::Reading),
        }
    }

    /// Shows a progress event.
    pub fn event(&mut self, p: Progress) {
        if p.stage == Stage::Training && self.training.is_none() {
            self.training = Some(Instant::now());
        }
        self.last = p;
        let Some(bar) = &self.bar else {
            return;
        };
        if bar.is_hidden() && self.start.elapsed().as_secs_f64() >= QUIET_S {
            bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(10));
            // The clock moves on between events (reading, scoring).
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        bar.set_prefix(p.stage.name());
        bar.set_message(self.message(&p));
        bar.set_position((p.fraction() * SCALE as f64).round() as u64);
    }

    /// The stage that follows the job's (the model file is written).
    pub fn stage(&mut self, stage: Stage) {
        let p = self.last.at(stage);
        self.event(p);
    }

    /// The time left and the models trained.
    fn message(&self, p: &Progress) -> String {
        let models = if p.models > 0 {
            format!(
                "{}/{} models",
                groupfit::util::text::thousands(p.models_done),
                groupfit::util::text::thousands(p.models)
            )
        } else {
            String::new()
        };
        match (p.stage, self.training) {
            (Stage::Training, Some(t)) => match eta(p, t.elapsed().as_secs_f64()) {
                Some(s) => format!("ETA {}  {models}", clock(s)),
                None => format!("ETA ?  {models}"),
            },
            _ => models,
        }
    }

    /// Clears the bar (the summary follows).
    pub fn finish(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Seconds left at the rate so far (`None` until 1% of the work and half a
/// second of training).
pub fn eta(p: &Progress, elapsed_s: f64) -> Option<f64> {
    let f = p.fraction();
    (f >= 0.01 && elapsed_s >= 0.5).then(|| elapsed_s * (1.0 - f) / f)
}

/// `m:ss`, or `h:mm:ss` from an hour.
fn clock(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(done: f64, total: f64) -> Progress {
        Progress {
            stage: Stage::Training,
            done,
            total,
            models_done: 0,
            models: 4,
        }
    }

    #[test]
    fn the_time_left_is_the_rate_so_far() {
        // A quarter done in 3 s: 9 s to go.
        assert_eq!(eta(&at(25.0, 100.0), 3.0), Some(9.0));
        assert_eq!(eta(&at(0.5, 100.0), 3.0), None);
        assert_eq!(eta(&at(50.0, 100.0), 0.2), None);
        assert_eq!(clock(9.0), "0:09");
        assert_eq!(clock(3725.4), "1:02:05");
    }
}
