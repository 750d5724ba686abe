//! Calibrating the planner's cost model on this machine.
//!
//! Two kinds of constants feed [`CostModel`]:
//!
//! * **machine constants** — the cost of a stage (waking the workers and the
//!   barrier at its end) and of combining one statistic — come from a
//!   micro-benchmark run once per (machine, worker count) and cached with its
//!   date in `calibration.json` under `$GROUPFIT_CACHE_DIR`, else
//!   `$XDG_CACHE_HOME/groupfit`, else `~/.cache/groupfit`; entries older than
//!   30 days are measured again. Nothing breaks when the cache cannot be
//!   written: the constants are then measured on every run (a few ms).
//! * **family constants** — nanoseconds per unit-row of `accumulate` (and
//!   the extra of a heavy row, `PartialStep::heavy_rows`), the fixed cost of a
//!   shard, microseconds per unit of `apply_group` — come from a short pilot
//!   run on the job's own data: the largest group's active units over its
//!   first block, over up to 32 blocks and, when the first block is heavy and
//!   the second not, over the second; best of five each.

use std::path::PathBuf;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::barrier::SpinBarrier;
use super::step::{active_units, count_active, PartialStep};
use crate::plan::{CostModel, SizeCurve};

/// Machine constants of the cost model, as measured and cached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineCosts {
    /// UTC date of the measurement (`YYYY-MM-DD`).
    pub date: String,
    /// Days since 1970-01-01 of the measurement.
    pub day: u64,
    /// The CPU it was measured on (`/proc/cpuinfo` model name).
    pub cpu: String,
    /// Workers it was measured for.
    pub workers: usize,
    /// Microseconds per stage: starting the workers' stage and the barrier.
    pub stage_us: f64,
    /// Nanoseconds to combine one statistic.
    pub combine_ns: f64,
    /// How the stage was synchronised ([`BARRIER`]); entries measured with
    /// another barrier are measured again.
    #[serde(default)]
    pub barrier: String,
    /// Whether these came from the cache file (rather than measured now).
    #[serde(skip)]
    pub cached: bool,
}

/// The barrier the pass driver uses (and the micro-benchmark times).
pub const BARRIER: &str = "spin-then-sleep";

/// Where the calibration cache lives (`None`: no usable directory).
pub fn cache_path() -> Option<PathBuf> {
    let dir = if let Some(d) = std::env::var_os("GROUPFIT_CACHE_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(d).join("groupfit")
    } else {
        PathBuf::from(std::env::var_os("HOME")?).join(".cache/groupfit")
    };
    Some(dir.join("calibration.json"))
}

fn today() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400)
}

/// `YYYY-MM-DD` of a day count since 1970-01-01 (proleptic Gregorian).
pub fn civil_date(days: u64) -> String {
    // Howard Hinnant's days-to-civil algorithm.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The machine constants for `workers`: from the cache when it has a recent
/// entry for this CPU and worker count, otherwise measured (and cached).
pub fn machine(workers: usize) -> MachineCosts {
    machine_at(cache_path(), workers)
}

/// [`machine`] with the cache file given (`None`: no cache).
fn machine_at(path: Option<PathBuf>, workers: usize) -> MachineCosts {
    let workers = workers.max(1);
    let cpu = cpu_name();
    let mut entries: Vec<MachineCosts> = path
        .as_ref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let now = today();
    if let Some(e) = entries.iter().find(|e| {
        e.workers == workers
            && e.cpu == cpu
            && e.barrier == BARRIER
            && now.saturating_sub(e.day) <= 30
    }) {
        return MachineCosts {
            cached: true,
            ..e.clone()
        };
    }
    let fresh = measure(workers, cpu);
    if let Some(p) = path {
        entries.retain(|e| !(e.workers == workers && e.cpu == fresh.cpu));
        entries.push(fresh.clone());
        if let Ok(json) = serde_json::to_vec_pretty(&entries) {
            if let Some(dir) = p.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = crate::util::fs::write_atomic(&p, |f| {
                use std::io::Write;
                f.write_all(&json)
                    .map_err(|e| crate::GroupfitError::io("write", &p, e))
            });
        }
    }
    fresh
}

/// Best of `reps` timings of `f`.
fn best(reps: usize, mut f: impl FnMut()) -> Duration {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn measure(workers: usize, cpu: String) -> MachineCosts {
    // A stage: every worker thread reaches a barrier, one reduces, all wait again.
    let stages = 200;
    let barrier = SpinBarrier::new(workers);
    let t = best(3, || {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    for _ in 0..stages {
                        barrier.wait();
                        barrier.wait();
                    }
                });
            }
        })
    });
    let stage_us = t.as_secs_f64() * 1e6 / stages as f64;
    // Combining: adding one statistics vector into another.
    let n = 1 << 16;
    let mut a = vec![1.0f64; n];
    let b = vec![0.5f64; n];
    let t = best(5, || {
        for (x, y) in a.iter_mut().zip(&b) {
            *x += y;
        }
        std::hint::black_box(&a);
    });
    let combine_ns = t.as_secs_f64() * 1e9 / n as f64;
    let day = today();
    MachineCosts {
        date: civil_date(day),
        day,
        cpu,
        workers,
        stage_us,
        combine_ns,
        barrier: BARRIER.to_string(),
        cached: false,
    }
}

/// The cost model for `family` on its data: machine constants for `workers`
/// plus a pilot run on the largest group's active units.
pub fn cost_model<F: PartialStep>(
    family: &F,
    groups: &[RwLock<Vec<F::Unit>>],
    rows: &[std::ops::Range<usize>],
    workers: usize,
) -> (CostModel, MachineCosts) {
    let m = machine(workers);
    let len = family.stats_len();
    let align = family.align().max(1);
    // The largest group with active units.
    let has_active = |g: usize| {
        groups[g]
            .read()
            .unwrap()
            .iter()
            .any(|x| family.is_active(x))
    };
    let pick = (0..groups.len())
        .filter(|&g| has_active(g))
        .max_by_key(|&g| (rows[g].len(), std::cmp::Reverse(g)));
    let (mut row_unit_ns, mut heavy_unit_ns, mut shard_us, mut apply_unit_us) =
        (1.0, 0.0, 1.0, 1.0);
    let mut by_size = None;
    if let Some(g) = pick {
        let units = groups[g].read().unwrap();
        let real = active_units(family, &units);
        // Time the family's pilot copies when it gives them (a state typical
        // of a pass), else the units themselves.
        let copies: Option<Vec<(usize, F::Unit)>> = real
            .iter()
            .map(|(k, u)| family.pilot_unit(*k, u).map(|c| (*k, c)))
            .collect();
        let active: Vec<(usize, &F::Unit)> = match &copies {
            Some(c) => c.iter().map(|(k, u)| (*k, u)).collect(),
            None => real.iter().copied().collect(),
        };
        let u = active.len() as f64;
        let mut scratch = family.scratch();
        let mut out = vec![0.0; active.len() * len];
        let r = rows[g].clone();
        let block =
            |i: usize| (r.start + i * align).min(r.end)..(r.start + (i + 1) * align).min(r.end);
        let small = block(0);
        let big_blocks = (r.len() / align).clamp(1, 32);
        let big = r.start..(r.start + big_blocks * align).min(r.end);
        let second = block(1);
        let mut time = |rows: std::ops::Range<usize>| {
            best(5, || {
                out.iter_mut().for_each(|v| *v = 0.0);
                family.accumulate(g, &active, rows.clone(), &mut out, &mut scratch);
            })
            .as_secs_f64()
        };
        let heavy = |rows: &std::ops::Range<usize>| family.heavy_rows(g, rows.clone()) as f64;
        let t_small = time(small.clone());
        let t_big = time(big.clone());
        let extra = big.len().saturating_sub(small.len()) as f64;
        // A second block as long as the first and without heavy rows where
        // the first is all heavy: the two differ by the heavy rows' extra
        // alone, which then is told apart from the shard's fixed cost.
        let split = (second.len() == small.len()
            && heavy(&second) == 0.0
            && heavy(&small) == small.len() as f64
            && extra > 0.0)
            .then(|| {
                let t_second = time(second.clone());
                let n = small.len() as f64;
                let h = ((t_small - t_second) / (u * n)).max(0.0);
                let grad =
                    ((t_big - t_small) - u * (heavy(&big) - heavy(&small)) * h) / (u * extra);
                (grad > 0.0).then_some((grad, h, t_small - u * n * (grad + h)))
            })
            .flatten();
        if let Some((grad, h, shard_s)) = split {
            row_unit_ns = grad * 1e9;
            heavy_unit_ns = h * 1e9;
            shard_us = (shard_s * 1e6).max(0.0);
        } else if extra > 0.0 && t_big > t_small {
            row_unit_ns = (t_big - t_small) * 1e9 / (extra * u);
            shard_us = ((t_small - small.len() as f64 * u * row_unit_ns * 1e-9) * 1e6).max(0.0);
        } else {
            row_unit_ns = t_small * 1e9 / (small.len().max(1) as f64 * u);
            shard_us = 0.0;
        }
        // Updates are timed on a group whose statistics come from all of its
        // rows (on part of a group, a unit may look converged and skip its
        // solve): the largest with at most 32 blocks, else the pilot group's
        // first 32 blocks.
        let whole = (0..groups.len())
            .filter(|&a| rows[a].len() <= 32 * align && has_active(a))
            .max_by_key(|&a| (rows[a].len(), std::cmp::Reverse(a)));
        let (ag, arows) = whole.map_or((g, big), |a| (a, rows[a].clone()));
        drop(units);
        apply_unit_us = time_apply(family, groups, ag, arows, &mut scratch)
            // Without copies to update, price the update as reading its
            // statistics twice.
            .unwrap_or(2.0 * len as f64 * m.combine_ns * 1e-3);
        by_size = size_curve(family, groups, rows, g, &mut scratch);
    }
    (
        CostModel {
            row_unit_ns,
            heavy_unit_ns,
            apply_unit_us,
            shard_us,
            stage_us: m.stage_us,
            combine_ns: m.combine_ns,
            stats_len: len,
            unit_bytes: family.unit_bytes(),
            by_size,
        },
        m,
    )
}

/// Nanoseconds per unit-row of a whole pass by group size, where the family
/// times whole passes ([`PartialStep::time_whole_pass`]): one pass each of
/// the median group (by count, of those with active units: the typical
/// group), of the largest group with at most 1/64 of the largest one's rows,
/// and of the largest group `large`. `None` without such a family, or with
/// no group of at most 1/64 of the largest one's rows (group sizes too close
/// for their costs to differ much).
fn size_curve<F: PartialStep>(
    family: &F,
    groups: &[RwLock<Vec<F::Unit>>],
    rows: &[std::ops::Range<usize>],
    large: usize,
    scratch: &mut F::Scratch,
) -> Option<SizeCurve> {
    let active = |g: usize| count_active(family, &groups[g]);
    let n_large = rows[large].len();
    let mut live: Vec<usize> = (0..groups.len())
        .filter(|&a| !rows[a].is_empty() && active(a) > 0)
        .collect();
    let small = live
        .iter()
        .copied()
        .filter(|&a| rows[a].len() <= n_large / 64)
        .max_by_key(|&a| (rows[a].len(), std::cmp::Reverse(a)))?;
    live.sort_by_key(|&a| (rows[a].len(), a));
    let median = live[live.len() / 2];
    let median = if rows[median].len() <= rows[small].len() {
        median
    } else {
        small
    };
    let mut point = |g: usize| -> Option<(usize, f64)> {
        let u = active(g).max(1) as f64;
        let mut units = groups[g].write().unwrap();
        let t = family.time_whole_pass(g, &mut units, rows[g].clone(), scratch)?;
        Some((rows[g].len(), t * 1e9 / (u * rows[g].len() as f64)))
    };
    // Each group is timed once (its pass is real progress): the median
    // group may be the small one, never the largest.
    let small_at = point(small)?;
    let median_at = if median == small {
        small_at
    } else {
        point(median)?
    };
    Some(SizeCurve {
        points: [median_at, small_at, point(large)?],
    })
}

/// Microseconds per unit of `apply_group` on copies of group `g`'s active
/// units ([`PartialStep::pilot_unit`]), with their statistics over `rows`:
/// best of five, each on fresh copies. `None` when the family gives no copies.
fn time_apply<F: PartialStep>(
    family: &F,
    groups: &[RwLock<Vec<F::Unit>>],
    g: usize,
    rows: std::ops::Range<usize>,
    scratch: &mut F::Scratch,
) -> Option<f64> {
    let units = groups[g].read().unwrap();
    let fresh = || -> Option<Vec<F::Unit>> {
        units
            .iter()
            .enumerate()
            .map(|(k, x)| family.pilot_unit(k, x))
            .collect()
    };
    let mut copy = fresh()?;
    let ks: Vec<usize> = (0..units.len())
        .filter(|&k| family.is_active(&units[k]))
        .collect();
    let active: Vec<(usize, &F::Unit)> = ks.iter().map(|&k| (k, &copy[k])).collect();
    let mut stats = vec![0.0; ks.len() * family.stats_len()];
    family.accumulate(g, &active, rows, &mut stats, scratch);
    let mut t = Duration::MAX;
    for _ in 0..5 {
        let mut st = stats.clone();
        let start = Instant::now();
        family.apply_group(g, &mut copy, &ks, &mut st, scratch);
        t = t.min(start.elapsed());
        copy = fresh()?;
    }
    Some(t.as_secs_f64() * 1e6 / ks.len().max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(59), "1970-03-01");
        // 2000-02-29 is day 11016; 2026-12-02 is day 20789.
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_789), "2026-12-02");
    }

    #[test]
    fn cache_round_trips_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/calibration.json");
        let first = machine_at(Some(path.clone()), 2);
        assert!(!first.cached);
        assert!(first.stage_us > 0.0 && first.combine_ns > 0.0);
        let second = machine_at(Some(path.clone()), 2);
        assert!(second.cached);
        assert_eq!(second.stage_us, first.stage_us);
        assert_eq!(second.date, civil_date(today()));
        // Another worker count is measured and kept beside the first.
        assert!(!machine_at(Some(path.clone()), 3).cached);
        let kept: Vec<MachineCosts> =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(kept.len(), 2);
        // An entry timed with another barrier (older files have none) is
        // measured again and replaced.
        let mut old = kept.clone();
        for e in &mut old {
            e.barrier.clear();
        }
        std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
        let again = machine_at(Some(path.clone()), 2);
        assert!(!again.cached && again.barrier == BARRIER);
        let kept: Vec<MachineCosts> =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(kept.iter().filter(|e| e.barrier == BARRIER).count(), 1);
        assert_eq!(kept.len(), 2);
    }
}
