//! The boosters' objective: the starting score, each round's gradients and
//! hessians (quantized to a few integer levels with `use_quantized_grad`),
//! and the validation metric early stopping watches.

use super::params::Quantization;
use crate::data::Task;
use crate::math::{sigmoid, splitmix64 as mix};

/// The starting score: log-odds of the mean label (binary), the mean (regression).
pub fn init_score(task: Task, y: &[f64]) -> f64 {
    let n = y.len().max(1) as f64;
    init_from_mean(task, y.iter().sum::<f64>() / n)
}

/// [`init_score`] from the mean label.
pub fn init_from_mean(task: Task, mean: f64) -> f64 {
    match task {
        Task::Binary => {
            let p = mean.clamp(1e-15, 1.0 - 1e-15);
            (p / (1.0 - p)).ln()
        }
        Task::Regression => mean,
    }
}

/// Gradient and hessian of the loss at each row's score: log-loss (binary),
/// squared error halved (regression, hessian 1).
pub fn gradients(task: Task, scores: &[f64], y: &[f64], gh: &mut [[f32; 2]]) {
    match task {
        Task::Binary => {
            for ((o, &s), &t) in gh.iter_mut().zip(scores).zip(y) {
                let p = sigmoid(s);
                *o = [(p - t) as f32, (p * (1.0 - p)) as f32];
            }
        }
        Task::Regression => {
            for ((o, &s), &t) in gh.iter_mut().zip(scores).zip(y) {
                *o = [(s - t) as f32, 1.0];
            }
        }
    }
}

/// The validation metric early stopping watches: log-loss or RMSE.
pub fn metric(task: Task, y: &[f64], raw: &[f64]) -> f64 {
    match task {
        Task::Binary => {
            let p: Vec<f64> = raw.iter().map(|&z| sigmoid(z)).collect();
            crate::metrics::logloss(y, &p)
        }
        Task::Regression => crate::metrics::rmse(y, raw),
    }
}

impl Quantization {
    /// Writes into `out` the gradients and hessians of `raw` rounded to
    /// integer levels, each times its scale, as LightGBM's quantized
    /// training does. The gradient scale is the largest `|g|` over
    /// `bins / 2` (integer division), the hessian scale the largest `h`
    /// over `bins`; with a constant hessian (`regression`) it stays 1.
    /// Stochastic rounding adds to `|g|` (and to `h`) a uniform draw in
    /// `[0, 1)` (32 bits) of the stream `(seed, group, round)` and the row
    /// before it truncates, so a level's expectation is the true value; otherwise it
    /// adds 0.5. The histograms then sum exact multiples of the scales.
    pub fn apply(
        &self,
        raw: &[[f32; 2]],
        out: &mut [[f32; 2]],
        constant_hessian: bool,
        (seed, group, round): (u64, u64, u32),
    ) {
        let (mut gmax, mut hmax) = (0.0f64, 0.0f64);
        for &[g, h] in raw {
            gmax = gmax.max((g as f64).abs());
            hmax = hmax.max((h as f64).abs());
        }
        let gscale = gmax / (self.bins / 2) as f64;
        let hscale = hmax / self.bins as f64;
        // All zero (every row fitted exactly): every level is 0.
        let inv = |s: f64| if s > 0.0 { 1.0 / s } else { 0.0 };
        let (ginv, hinv) = (inv(gscale), inv(hscale));
        let stream = mix(seed ^ mix(group ^ mix(u64::from(round) + 1)));
        // One hash a row: its high and low 32 bits are the gradient's and
        // the hessian's draws.
        let draws = |r: usize| {
            if self.stochastic {
                let z = mix(stream ^ r as u64);
                let unit = 1.0 / (1u64 << 32) as f64;
                ((z >> 32) as f64 * unit, (z as u32) as f64 * unit)
            } else {
                (0.5, 0.5)
            }
        };
        // Truncation toward zero (levels are small: the cast is exact).
        let trunc = |x: f64| x as i64 as f64;
        for (r, (o, &[g, h])) in out.iter_mut().zip(raw).enumerate() {
            let x = g as f64 * ginv;
            let (u, v) = draws(r);
            let level = if x >= 0.0 { trunc(x + u) } else { trunc(x - u) };
            o[0] = (level * gscale) as f32;
            o[1] = if constant_hessian {
                h
            } else {
                (trunc(h as f64 * hinv + v) * hscale) as f32
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(bins: u32, stochastic: bool) -> Quantization {
        Quantization {
            bins,
            stochastic,
            renew_leaf: false,
        }
    }

    #[test]
    fn nearest_levels_by_hand() {
        // Largest |g| 0.8 over 4 bins: gradient scale 0.8 / 2 = 0.4, levels
        // -2..=2. Largest h 0.2: hessian scale 0.2 / 4 = 0.05.
        let raw = [[0.8f32, 0.2], [-0.5, 0.11], [0.1, 0.06], [-0.1, 0.0]];
        let mut out = [[0.0f32; 2]; 4];
        q(4, false).apply(&raw, &mut out, false, (1, 2, 3));
        // 0.8/0.4 = 2 -> 2; -0.5/0.4 = -1.25 -> -1; 0.25 -> 0; -0.25 -> 0.
        // h: 4, 2.2 -> 2, 1.2 -> 1, 0.
        let want = [[0.8, 0.2], [-0.4, 0.1], [0.0, 0.05], [0.0, 0.0]];
        for (o, w) in out.iter().zip(want) {
            assert!(
                (o[0] - w[0]).abs() < 1e-6 && (o[1] - w[1]).abs() < 1e-6,
                "{o:?} {w:?}"
            );
        }
        // A constant hessian stays itself.
        let raw = [[1.0f32, 1.0], [-3.0, 1.0]];
        q(4, false).apply(&raw, &mut out[..2], true, (0, 0, 0));
        // Scale 3 / 2 = 1.5: 1/1.5 = 0.67 -> 1 (level 1.5), -2 -> -2 (-3).
        assert_eq!(&out[..2], &[[1.5, 1.0], [-3.0, 1.0]]);
        // All zero: levels 0, no NaN.
        q(4, true).apply(&[[0.0, 0.0]], &mut out[..1], false, (0, 0, 0));
        assert_eq!(out[0], [0.0, 0.0]);
    }

    #[test]
    fn stochastic_rounding_is_unbiased_and_depends_on_seed_group_and_round() {
        // One row at 0.3 of the scale between levels 0 and 1, many times:
        // the mean level is 0.3. The row of the largest |g| pins the scale.
        let n = 20_000;
        let mut raw = vec![[0.3f32 * 0.5, 0.25]; n];
        raw[0] = [1.0, 0.25];
        let mut out = vec![[0.0f32; 2]; n];
        q(4, true).apply(&raw, &mut out, false, (7, 11, 2));
        let mean = out[1..].iter().map(|o| o[0] as f64).sum::<f64>() / (n - 1) as f64;
        assert!((mean - 0.15).abs() < 0.01, "{mean}");
        assert!(out[1..].iter().all(|o| o[0] == 0.0 || o[0] == 0.5));
        let mut again = vec![[0.0f32; 2]; n];
        q(4, true).apply(&raw, &mut again, false, (7, 11, 2));
        assert_eq!(out, again);
        for other in [(8, 11, 2), (7, 12, 2), (7, 11, 3)] {
            q(4, true).apply(&raw, &mut again, false, other);
            assert_ne!(out, again, "{other:?}");
        }
    }
}
