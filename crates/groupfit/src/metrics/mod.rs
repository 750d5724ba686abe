//! Validation metrics, defined as in `shared/bench/baselines.py` so that the
//! figures are comparable: log-loss with probabilities clipped to
//! `[1e-7, 1 - 1e-7]`, ROC AUC with ties averaged, RMSE.

/// Mean log-loss of probabilities `p` for 0/1 labels `y`.
pub fn logloss(y: &[f64], p: &[f64]) -> f64 {
    let n = y.len().max(1) as f64;
    y.iter()
        .zip(p)
        .map(|(&y, &p)| {
            let p = p.clamp(1e-7, 1.0 - 1e-7);
            -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
        })
        .sum::<f64>()
        / n
}

/// Root mean squared error.
pub fn rmse(y: &[f64], p: &[f64]) -> f64 {
    let n = y.len().max(1) as f64;
    let s = y.iter().zip(p).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
    if s.is_finite() {
        return (s / n).sqrt();
    }
    // Squares past f64's range (errors beyond ~1e154): the same mean over
    // errors scaled by the largest one; an infinite or NaN error stays so.
    let m = y
        .iter()
        .zip(p)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    if !m.is_finite() {
        return (s / n).sqrt();
    }
    let scaled = y
        .iter()
        .zip(p)
        .map(|(a, b)| ((a - b) / m) * ((a - b) / m))
        .sum::<f64>();
    m * (scaled / n).sqrt()
}

/// Area under the ROC curve; `None` unless both classes are present.
/// Ties in `p` get the average rank (Mann-Whitney U).
pub fn auc(y: &[f64], p: &[f64]) -> Option<f64> {
    let pos = y.iter().filter(|&&v| v > 0.5).count();
    let neg = y.len() - pos;
    if pos == 0 || neg == 0 {
        return None;
    }
    // (score, label) pairs sorted by score: ties are averaged below, so the
    // order within a tie does not matter and an unstable sort of the pairs
    // (no indirection) will do.
    let mut pairs: Vec<(f64, bool)> = p.iter().zip(y).map(|(&s, &v)| (s, v > 0.5)).collect();
    pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let mut rank_sum_pos = 0.0;
    let mut i = 0;
    while i < pairs.len() {
        let mut j = i + 1;
        while j < pairs.len() && pairs[j].0 == pairs[i].0 {
            j += 1;
        }
        let avg_rank = (i + j + 1) as f64 / 2.0; // ranks are 1-based: (i+1 + j) / 2
        let positives = pairs[i..j].iter().filter(|q| q.1).count();
        rank_sum_pos += avg_rank * positives as f64;
        i = j;
    }
    let u = rank_sum_pos - (pos * (pos + 1)) as f64 / 2.0;
    Some(u / (pos * neg) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmse_by_hand_and_past_the_range_of_squares() {
        assert_eq!(rmse(&[1.0, 2.0], &[1.0, 4.0]), 2f64.sqrt());
        let r = rmse(&[3e200, 0.0], &[-1e200, 0.0]);
        assert!((r / (4e200 / 2f64.sqrt()) - 1.0).abs() < 1e-12, "{r}");
        assert!(rmse(&[f64::NAN], &[0.0]).is_nan());
        assert!(rmse(&[f64::INFINITY], &[0.0]).is_infinite());
    }

    #[test]
    fn hand_computed() {
        let y = [1.0, 0.0];
        let p = [0.8, 0.4];
        let ll = -(0.8f64.ln() + 0.6f64.ln()) / 2.0;
        assert!((logloss(&y, &p) - ll).abs() < 1e-15);
        assert_eq!(auc(&y, &p), Some(1.0));
        assert_eq!(auc(&[1.0, 1.0], &p), None);
        assert!((rmse(&[1.0, 3.0], &[2.0, 1.0]) - (2.5f64).sqrt()).abs() < 1e-15);
    }

    #[test]
    fn auc_averages_ties() {
        // scores: pos {0.5, 0.9}, neg {0.5, 0.1}: pairs (0.5,0.5) tie = 0.5,
        // (0.5,0.1) 1, (0.9,0.5) 1, (0.9,0.1) 1 -> 3.5 / 4
        let y = [1.0, 1.0, 0.0, 0.0];
        let p = [0.5, 0.9, 0.5, 0.1];
        assert_eq!(auc(&y, &p), Some(0.875));
    }

    #[test]
    fn logloss_clips() {
        assert!((logloss(&[1.0], &[0.0]) - (1e7f64).ln()).abs() < 1e-6);
    }
}
