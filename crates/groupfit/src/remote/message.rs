//! The frames of the partial-statistics messages, `[group, n, len, k_1..k_n,
//! stats...]*` (`n` units of `len` statistics each), and the protocol's
//! errors.

use crate::error::Result;
pub(super) use crate::shard::protocol_error as protocol;

/// One group's partial statistics: its active units and their statistics.
pub(super) struct Partial<'m> {
    pub(super) group: usize,
    pub(super) ks: Vec<usize>,
    /// `ks.len()` slices of `len` values.
    pub(super) stats: &'m [f64],
    pub(super) len: usize,
}

/// Appends a frame.
pub(super) fn push_partial(out: &mut Vec<f64>, group: usize, ks: &[usize], stats: &[f64]) {
    let len = stats.len().checked_div(ks.len()).unwrap_or(0);
    out.extend([group as f64, ks.len() as f64, len as f64]);
    out.extend(ks.iter().map(|&k| k as f64));
    out.extend_from_slice(stats);
}

/// Parses a message of frames.
pub(super) fn parse_partials(m: &[f64]) -> Result<Vec<Partial<'_>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < m.len() {
        if at + 3 > m.len() {
            return Err(protocol("truncated statistics message"));
        }
        let (group, n, len) = (m[at] as usize, m[at + 1] as usize, m[at + 2] as usize);
        at += 3;
        if at + n + n * len > m.len() {
            return Err(protocol("truncated statistics message"));
        }
        let ks = m[at..at + n].iter().map(|&k| k as usize).collect();
        at += n;
        out.push(Partial {
            group,
            ks,
            stats: &m[at..at + n * len],
            len,
        });
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
        let mut m = Vec::new();
        push_partial(&mut m, 2, &[0, 3], &[1.0, 2.0, 3.0, 4.0]);
        push_partial(&mut m, 5, &[1], &[6.0, 7.0]);
        assert_eq!(m[..6], [2.0, 2.0, 2.0, 0.0, 3.0, 1.0]);
        let parts = parse_partials(&m).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (
                parts[0].group,
                &parts[0].ks[..],
                parts[0].stats,
                parts[0].len
            ),
            (2, &[0, 3][..], &[1.0, 2.0, 3.0, 4.0][..], 2)
        );
        assert_eq!(
            (parts[1].group, &parts[1].ks[..], parts[1].stats),
            (5, &[1][..], &[6.0, 7.0][..])
        );
        assert!(parse_partials(&m[..13]).is_err());
        assert!(parse_partials(&m[..2]).is_err());
        assert!(parse_partials(&[]).unwrap().is_empty());
    }
}
