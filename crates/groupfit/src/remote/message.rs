//! The messages the coordinator and the workers exchange, beyond the unit
//! statistics: the standardisation of every group, the partial-statistics
//! framing `[group, n, k_1..k_n, stats...]*`, and the protocol's errors.

use crate::error::{GroupfitError, Result};

/// Standardisation of every group: imputation values, per-group target mean,
/// feature means and scales.
#[derive(Debug, Clone)]
pub(super) struct Standardisation {
    pub(super) impute: Vec<f64>,
    /// Per group: `[y_mean, mean (d), scale (d)]`.
    pub(super) per_group: Vec<f64>,
}

impl Standardisation {
    pub(super) fn width(d: usize) -> usize {
        1 + 2 * d
    }
    pub(super) fn to_message(&self) -> Vec<f64> {
        let mut m = self.impute.clone();
        m.extend_from_slice(&self.per_group);
        m
    }
    pub(super) fn from_message(m: &[f64], d: usize, groups: usize) -> Result<Standardisation> {
        if m.len() != d + groups * Self::width(d) {
            return Err(protocol("standardisation message has the wrong length"));
        }
        Ok(Standardisation {
            impute: m[..d].to_vec(),
            per_group: m[d..].to_vec(),
        })
    }
    pub(super) fn group(&self, g: usize, d: usize) -> &[f64] {
        let w = Self::width(d);
        &self.per_group[g * w..(g + 1) * w]
    }
}

pub(super) fn protocol(what: &str) -> GroupfitError {
    GroupfitError::arg(format!("remote worker protocol: {what}"))
}

/// Parses `[group, n, k_1..k_n, stats...]*`.
pub(super) fn parse_partials(m: &[f64], len: usize) -> Result<Vec<(usize, Vec<usize>, &[f64])>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < m.len() {
        if at + 2 > m.len() {
            return Err(protocol("truncated statistics message"));
        }
        let group = m[at] as usize;
        let n = m[at + 1] as usize;
        at += 2;
        if at + n + n * len > m.len() {
            return Err(protocol("truncated statistics message"));
        }
        let ks = m[at..at + n].iter().map(|&k| k as usize).collect();
        at += n;
        out.push((group, ks, &m[at..at + n * len]));
        at += n * len;
    }
    Ok(out)
}
