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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partials_parse_into_groups_units_and_statistics() {
        // group 2, units 0 and 3, stats of length 2 each; then group 5, unit 1.
        let m = [
            2.0, 2.0, 0.0, 3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 1.0, 1.0, 6.0, 7.0,
        ];
        let parts = parse_partials(&m, 2).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].0, &parts[0].1[..], parts[0].2),
            (2, &[0, 3][..], &[1.0, 2.0, 3.0, 4.0][..])
        );
        assert_eq!(
            (parts[1].0, &parts[1].1[..], parts[1].2),
            (5, &[1][..], &[6.0, 7.0][..])
        );
        assert!(parse_partials(&m[..12], 2).is_err());
        assert!(parse_partials(&m[..1], 2).is_err());
        assert!(parse_partials(&[], 2).unwrap().is_empty());
    }

    #[test]
    fn standardisation_round_trips_through_its_message() {
        // d = 1, two groups: `[y_mean, mean, scale]` each.
        let st = Standardisation {
            impute: vec![0.5],
            per_group: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        };
        let m = st.to_message();
        let back = Standardisation::from_message(&m, 1, 2).unwrap();
        assert_eq!(back.group(1, 1), &[4.0, 5.0, 6.0]);
        assert_eq!(back.impute, vec![0.5]);
        assert!(Standardisation::from_message(&m, 1, 3).is_err());
    }
}
