//! Partial pooling over a key hierarchy: how a group's prediction blends
//! the predictions of the models on its path, from the global model (the
//! root, level 0) down to its own (the last level).
//!
//! The modes other than `auto` have scikit-lego's `HierarchicalPredictor`
//! semantics: each gives weights over the path from the training rows of
//! every group on it, normalised to sum to 1. `auto` chains
//! `w·own + (1−w)·parent` down the path with `w = n / (n + k)`: `n` is the
//! group's training rows and `k` is chosen per level on validation rows
//! ([`choose_k`]). A binary task blends margins (log-odds), not
//! probabilities (see `docs/hierarchy.md`).

use crate::data::Task;
use crate::error::{GroupfitError, Result};

/// How predictions are pooled over a group's path. In a model file it is
/// the text of [`Shrinkage::name`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Shrinkage {
    /// The group's own model alone.
    None,
    /// scikit-lego's `constant_shrinkage`: the own level weighs `1 − alpha`,
    /// each level above `alpha` times the one below it.
    Constant {
        /// In `(0, 1]`.
        alpha: f64,
    },
    /// Every level on the path weighs the same.
    Equal,
    /// Each level weighs its group's training rows.
    Relative,
    /// All weight on the deepest level whose group has at least `n` training rows.
    MinNObs {
        /// At least 1.
        n: u64,
    },
    /// `w = n / (n + k)` chained down the path, `k` chosen per level.
    Auto,
}

/// The `k` that [`choose_k`] tries, ascending (0: no pooling).
pub const K_GRID: [f64; 14] = [
    0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1e3, 2e3, 5e3, 1e4,
];

impl Shrinkage {
    /// Reads `none`, `constant:ALPHA`, `equal`, `relative`, `min_n_obs:N`
    /// or `auto`; anything else is an error naming it.
    pub fn parse(text: &str) -> Result<Shrinkage> {
        let bad = |why: &str| GroupfitError::arg(format!("--shrinkage '{text}': {why}"));
        let (mode, arg) = match text.split_once(':') {
            Some((m, a)) => (m, Some(a)),
            None => (text, None),
        };
        let number = |what: &str| -> Result<f64> {
            let a = arg.ok_or_else(|| bad(&format!("{mode} takes {what}, as {mode}:VALUE")))?;
            a.trim()
                .parse::<f64>()
                .map_err(|_| bad(&format!("'{a}' is not a number")))
        };
        let s = match mode {
            "none" | "equal" | "relative" | "auto" if arg.is_some() => {
                return Err(bad(&format!("{mode} takes no value")))
            }
            "none" => Shrinkage::None,
            "equal" => Shrinkage::Equal,
            "relative" => Shrinkage::Relative,
            "auto" => Shrinkage::Auto,
            "constant" => {
                let alpha = number("an alpha in (0, 1]")?;
                if !(alpha > 0.0 && alpha <= 1.0) {
                    return Err(bad("alpha must be in (0, 1]"));
                }
                Shrinkage::Constant { alpha }
            }
            "min_n_obs" => {
                let n = number("a row count of at least 1")?;
                if !(n >= 1.0 && n.fract() == 0.0 && n <= u64::MAX as f64) {
                    return Err(bad("the row count must be a whole number of at least 1"));
                }
                Shrinkage::MinNObs { n: n as u64 }
            }
            _ => {
                return Err(bad(
                    "the modes are none, auto, equal, relative, constant:ALPHA and min_n_obs:N",
                ))
            }
        };
        Ok(s)
    }

    /// The text [`Shrinkage::parse`] reads back.
    pub fn name(&self) -> String {
        match self {
            Shrinkage::None => "none".into(),
            Shrinkage::Constant { alpha } => format!("constant:{alpha}"),
            Shrinkage::Equal => "equal".into(),
            Shrinkage::Relative => "relative".into(),
            Shrinkage::MinNObs { n } => format!("min_n_obs:{n}"),
            Shrinkage::Auto => "auto".into(),
        }
    }

    /// Checks the mode against the training rows of the whole table (the
    /// root's): `min_n_obs` above them leaves no level to use, an error as
    /// in scikit-lego.
    pub fn check_rows(&self, total: u64) -> Result<()> {
        match *self {
            Shrinkage::MinNObs { n } if n > total => Err(GroupfitError::arg(format!(
                "--shrinkage min_n_obs:{n}: no group has {n} training rows (all rows together have {total})"
            ))),
            _ => Ok(()),
        }
    }

    /// The weights of the models on a path, root first, summing to 1.
    /// `sizes`: the training rows of each group on the path (the root's
    /// first, non-increasing); `ks`: for `auto`, each level's `k` (the
    /// root's is not read). `out` gets one weight per level.
    pub fn weights(&self, sizes: &[u64], ks: &[f64], out: &mut Vec<f64>) {
        let n = sizes.len();
        out.clear();
        if n == 0 {
            return;
        }
        match *self {
            Shrinkage::None => {
                out.resize(n, 0.0);
                out[n - 1] = 1.0;
            }
            Shrinkage::Equal => out.resize(n, 1.0 / n as f64),
            Shrinkage::Relative => {
                let total: f64 = sizes.iter().map(|&s| s as f64).sum();
                out.extend(sizes.iter().map(|&s| s as f64 / total));
            }
            Shrinkage::Constant { alpha } => {
                // scikit-lego's: alpha^(n-1) at the root, alpha^(n-1-i) (1 -
                // alpha) at level i, 1 - alpha at the group; a path of one
                // level (the root alone) weighs it 1.
                if n == 1 {
                    out.push(1.0);
                } else {
                    out.push(alpha.powi(n as i32 - 1));
                    out.extend((1..n - 1).map(|i| alpha.powi((n - 1 - i) as i32) * (1.0 - alpha)));
                    out.push(1.0 - alpha);
                    let total: f64 = out.iter().sum();
                    out.iter_mut().for_each(|w| *w /= total);
                }
            }
            Shrinkage::MinNObs { n: min } => {
                out.resize(n, 0.0);
                // The deepest level with enough rows (the root's rows bound
                // `min`, see `check_rows`; with none, the root).
                let at = sizes.iter().rposition(|&s| s >= min).unwrap_or(0);
                out[at] = 1.0;
            }
            Shrinkage::Auto => {
                out.resize(n, 0.0);
                // Level j weighs w_j times (1 - w_i) for every level i below it.
                let mut below = 1.0;
                for j in (0..n).rev() {
                    let w = if j == 0 {
                        1.0
                    } else {
                        own_weight(sizes[j], ks[j])
                    };
                    out[j] = w * below;
                    below *= 1.0 - w;
                }
            }
        }
    }
}

impl TryFrom<String> for Shrinkage {
    type Error = GroupfitError;
    fn try_from(text: String) -> Result<Shrinkage> {
        Shrinkage::parse(&text)
    }
}

impl From<Shrinkage> for String {
    fn from(s: Shrinkage) -> String {
        s.name()
    }
}

/// The weight of a group's own prediction under `auto`: `n / (n + k)`.
pub fn own_weight(rows: u64, k: f64) -> f64 {
    let n = rows as f64;
    if n + k > 0.0 {
        n / (n + k)
    } else {
        1.0
    }
}

/// One validation row as [`choose_k`] sees it: its group's own prediction
/// and the pooled prediction of the group's parent (both margins for a
/// binary task), the group's training rows, the target, and the group.
#[derive(Debug, Clone, Copy)]
pub struct PoolRow {
    /// The group's own model's prediction.
    pub own: f64,
    /// The parent's pooled prediction.
    pub parent: f64,
    /// Training rows of the row's group.
    pub rows: u64,
    /// Target.
    pub y: f64,
    /// Its group (an index below the level's group count).
    pub group: u32,
}

/// What [`choose_k`] found for one level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chosen {
    /// The `k` with the lowest validation loss (ties: the smallest).
    pub k: f64,
    /// The mean over groups of their loss with that `k`.
    pub loss: f64,
    /// The same without pooling (`k = 0`).
    pub loss_none: f64,
}

/// The `k` of [`K_GRID`] whose blend `w·own + (1−w)·parent` has the lowest
/// mean over groups of their loss on `rows`: RMSE, or the log-loss of the
/// blended margin. Every group counts once, as in groupfit's per-group
/// scores and the summary's means. `None` without rows.
pub fn choose_k(task: Task, rows: &[PoolRow], threads: usize) -> Option<Chosen> {
    if rows.is_empty() {
        return None;
    }
    let n_groups = rows.iter().map(|r| r.group as usize + 1).max().unwrap_or(0);
    // A group's rows share one w, and its blend is p + w (o - p): its
    // squared errors sum to A + 2 w B + w^2 C, with A = sum (p - y)^2,
    // B = sum (p - y)(o - p) and C = sum (o - p)^2.
    let mut sums = vec![GroupSums::default(); n_groups];
    if task == Task::Regression {
        for r in rows {
            let s = &mut sums[r.group as usize];
            let (e, d) = (r.parent - r.y, r.own - r.parent);
            s.a += e * e;
            s.b += e * d;
            s.c += d * d;
            s.count += 1;
            s.train_rows = r.rows;
        }
        sums.retain(|s| s.count > 0);
    }
    let loss_at = |k: f64| -> f64 {
        match task {
            Task::Regression => {
                let total: f64 = sums
                    .iter()
                    .map(|s| {
                        let w = own_weight(s.train_rows, k);
                        let sse = s.a + 2.0 * w * s.b + w * w * s.c;
                        (sse.max(0.0) / s.count as f64).sqrt()
                    })
                    .sum();
                total / sums.len() as f64
            }
            Task::Binary => {
                let mut by_group = vec![(0.0f64, 0usize); n_groups];
                for r in rows {
                    let w = own_weight(r.rows, k);
                    let z = w * r.own + (1.0 - w) * r.parent;
                    // -log p(y | z), stable in both tails.
                    let s = &mut by_group[r.group as usize];
                    s.0 += softplus(z) - r.y * z;
                    s.1 += 1;
                }
                let scored = by_group.iter().filter(|s| s.1 > 0);
                let (total, groups) = scored.fold((0.0, 0usize), |(t, n), &(sum, count)| {
                    (t + sum / count as f64, n + 1)
                });
                total / groups as f64
            }
        }
    };
    // A binary task reads every row per k: the grid goes over the threads.
    let threads = if task == Task::Binary { threads } else { 1 };
    let losses = crate::util::par::par_map(K_GRID.len(), threads, &|_| 1, &|i| loss_at(K_GRID[i]));
    let mut best = Chosen {
        k: 0.0,
        loss: losses[0],
        loss_none: losses[0],
    };
    for (&k, &loss) in K_GRID.iter().zip(&losses).skip(1) {
        if loss < best.loss {
            best.k = k;
            best.loss = loss;
        }
    }
    Some(best)
}

/// One group's sums for [`choose_k`]'s squared error at any `k`.
#[derive(Debug, Clone, Copy, Default)]
struct GroupSums {
    a: f64,
    b: f64,
    c: f64,
    count: usize,
    train_rows: u64,
}

/// `log(1 + e^z)` without overflow.
fn softplus(z: f64) -> f64 {
    z.max(0.0) + (-z.abs()).exp().ln_1p()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(s: Shrinkage, sizes: &[u64], ks: &[f64]) -> Vec<f64> {
        let mut out = Vec::new();
        s.weights(sizes, ks, &mut out);
        out
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn modes_parse_and_name_themselves() {
        for text in [
            "none",
            "equal",
            "relative",
            "auto",
            "constant:0.3",
            "min_n_obs:20",
        ] {
            assert_eq!(Shrinkage::parse(text).unwrap().name(), text);
        }
        for (text, says) in [
            ("median", "the modes are"),
            ("constant", "takes an alpha"),
            ("constant:1.5", "(0, 1]"),
            ("constant:x", "'x' is not a number"),
            ("min_n_obs:0", "at least 1"),
            ("min_n_obs:2.5", "whole number"),
            ("equal:2", "takes no value"),
        ] {
            let e = Shrinkage::parse(text).unwrap_err().to_string();
            assert!(e.contains(text) && e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn weights_are_scikit_legos() {
        // A path of 20, 11 and 6 training rows (scikit-lego's own example).
        let sizes = [20, 11, 6];
        close(&weights(Shrinkage::None, &sizes, &[]), &[0.0, 0.0, 1.0]);
        close(&weights(Shrinkage::Equal, &sizes, &[]), &[1.0 / 3.0; 3]);
        close(
            &weights(Shrinkage::Relative, &sizes, &[]),
            &[20.0 / 37.0, 11.0 / 37.0, 6.0 / 37.0],
        );
        // alpha^2, alpha (1 - alpha), 1 - alpha: 0.09, 0.21, 0.7.
        close(
            &weights(Shrinkage::Constant { alpha: 0.3 }, &sizes, &[]),
            &[0.09, 0.21, 0.7],
        );
        close(
            &weights(Shrinkage::Constant { alpha: 0.3 }, &[20], &[]),
            &[1.0],
        );
        close(
            &weights(Shrinkage::MinNObs { n: 10 }, &sizes, &[]),
            &[0.0, 1.0, 0.0],
        );
        close(
            &weights(Shrinkage::MinNObs { n: 6 }, &sizes, &[]),
            &[0.0, 0.0, 1.0],
        );
        close(
            &weights(Shrinkage::MinNObs { n: 20 }, &sizes, &[]),
            &[1.0, 0.0, 0.0],
        );
        assert!(Shrinkage::MinNObs { n: 21 }.check_rows(20).is_err());
        assert!(Shrinkage::MinNObs { n: 20 }.check_rows(20).is_ok());
    }

    #[test]
    fn auto_chains_n_over_n_plus_k() {
        // Level 1: 30 / (30 + 10) = 0.75; level 2: 5 / (5 + 20) = 0.2.
        // Group 0.2; its parent 0.75 x 0.8 = 0.6; the root 0.25 x 0.8 = 0.2.
        close(
            &weights(Shrinkage::Auto, &[100, 30, 5], &[f64::NAN, 10.0, 20.0]),
            &[0.2, 0.6, 0.2],
        );
        // k = 0 everywhere is no pooling.
        close(
            &weights(Shrinkage::Auto, &[100, 30, 5], &[0.0; 3]),
            &[0.0, 0.0, 1.0],
        );
    }

    #[test]
    fn choose_k_pools_noisy_groups_and_leaves_exact_ones() {
        // Own predictions off by +-1 around a parent that is right: the
        // blend gains from a large k (w -> 0).
        let noisy: Vec<PoolRow> = (0..40)
            .map(|i| PoolRow {
                own: 2.0 + if i % 2 == 0 { 1.0 } else { -1.0 },
                parent: 2.0,
                rows: 10,
                y: 2.0,
                group: 0,
            })
            .collect();
        let c = choose_k(Task::Regression, &noisy, 2).unwrap();
        assert_eq!(c.k, 1e4);
        assert_eq!(c.loss_none, 1.0);
        // The blend is 2 +- w, w = 10 / 10010: the loss is w^2.
        let w = 10.0 / 10_010.0;
        assert!((c.loss - w).abs() < 1e-15);
        // Exact own predictions, a wrong parent: no pooling.
        let exact: Vec<PoolRow> = (0..10)
            .map(|i| PoolRow {
                own: i as f64,
                parent: 0.5,
                rows: 3,
                y: i as f64,
                group: 0,
            })
            .collect();
        let c = choose_k(Task::Regression, &exact, 1).unwrap();
        assert_eq!((c.k, c.loss, c.loss_none), (0.0, 0.0, 0.0));
        assert!(choose_k(Task::Regression, &[], 1).is_none());
    }

    #[test]
    fn choose_k_scores_the_mean_over_groups_of_their_rmse() {
        // Group 0 (10 training rows): the blend is 2 -+ w against 1.5 and
        // 2.5, exact at w = 0.5 (k = 10). Group 1 (30 rows): 4 + w against
        // 4.75, exact at w = 0.75 (k = 10 again). Without pooling their
        // RMSEs are 0.5 and 0.25.
        let row = |own, parent, rows, y, group| PoolRow {
            own,
            parent,
            rows,
            y,
            group,
        };
        let rows = [
            row(1.0, 2.0, 10, 1.5, 0),
            row(3.0, 2.0, 10, 2.5, 0),
            row(5.0, 4.0, 30, 4.75, 1),
        ];
        let c = choose_k(Task::Regression, &rows, 2).unwrap();
        assert_eq!(c.k, 10.0);
        assert!(c.loss.abs() < 1e-12, "{c:?}");
        assert!((c.loss_none - 0.375).abs() < 1e-15, "{c:?}");
    }

    #[test]
    fn choose_k_blends_margins_for_a_binary_task() {
        // Own margins far too sure (+-4 on a coin flip), parent 0: pooling
        // toward log-odds 0 wins; the log-loss of margin 0 is ln 2.
        let rows: Vec<PoolRow> = (0..20)
            .map(|i| PoolRow {
                own: if i % 2 == 0 { 4.0 } else { -4.0 },
                parent: 0.0,
                rows: 50,
                y: f64::from(i % 4 < 2),
                group: 0,
            })
            .collect();
        let c = choose_k(Task::Binary, &rows, 2).unwrap();
        assert!(c.k > 0.0 && c.loss < c.loss_none, "{c:?}");
        // Half the rows are right at margin 4 and half wrong.
        let want_none = 0.5 * (softplus(4.0) - 4.0) + 0.5 * softplus(4.0);
        assert!((c.loss_none - want_none).abs() < 1e-12);
        assert!(c.loss >= 2f64.ln() - 1e-12);
    }
}
