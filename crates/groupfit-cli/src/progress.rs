//! The training progress bar on stderr.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use groupfit::job::Event;

/// A progress bar on stderr, drawn only on a terminal and only once a run has
/// taken more than a second.
pub struct Progress {
    start: Instant,
    enabled: bool,
    drawn: bool,
    stage: String,
}

impl Progress {
    pub fn new(quiet: bool) -> Self {
        Progress {
            start: Instant::now(),
            enabled: !quiet && std::io::stderr().is_terminal(),
            drawn: false,
            stage: String::new(),
        }
    }

    pub fn event(&mut self, e: Event) {
        if !self.enabled {
            return;
        }
        match e {
            Event::Stage(s) => self.stage = s.to_string(),
            Event::Pass(p) => {
                if self.start.elapsed().as_secs_f64() < 1.0 {
                    return;
                }
                let done = p.total - p.active;
                let width = 30;
                let filled = if p.total > 0 {
                    done * width / p.total
                } else {
                    width
                };
                eprint!(
                    "\r{} [{}{}] {}/{} models converged, pass {}  {:.1}s",
                    self.stage,
                    "#".repeat(filled),
                    "-".repeat(width - filled),
                    done,
                    p.total,
                    p.pass,
                    self.start.elapsed().as_secs_f64()
                );
                let _ = std::io::stderr().flush();
                self.drawn = true;
            }
        }
    }

    pub fn finish(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}
