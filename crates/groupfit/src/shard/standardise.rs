//! Two statistics rounds that standardise every piece with its whole
//! group's statistics, for the families that standardise per group
//! (linear, mlp):
//!
//! 1. [`moments`]: per piece `[sum of y, (count, sum) of the present values
//!    of each feature]`; [`reduce_moments`] makes the imputation values
//!    (the means over every training row: the global pseudo-group's, or all
//!    groups' when it is not placed) and each group's target mean and
//!    feature means, missing values imputed.
//! 2. [`deviations`]: per piece, the squared deviations of each imputed
//!    feature from its group's mean; [`reduce_deviations`] makes the scales
//!    with the family's rule.
//!
//! The reduced message is `[impute (d), per group: y_mean, mean (d), scale
//! (d)]`; [`Standardisation`] reads it.

use super::{protocol_error as protocol, ShardRows, ShardSpec};
use crate::error::Result;

/// A reduced standardisation message, read.
pub struct Standardisation<'m> {
    /// The values replacing a missing feature.
    pub impute: &'m [f64],
    per_group: &'m [f64],
    d: usize,
}

impl<'m> Standardisation<'m> {
    fn width(d: usize) -> usize {
        1 + 2 * d
    }

    /// Reads `m`, a message for `d` features and `groups` groups.
    pub fn parse(m: &'m [f64], d: usize, groups: usize) -> Result<Standardisation<'m>> {
        if m.len() != d + groups * Self::width(d) {
            return Err(protocol("standardisation message has the wrong length"));
        }
        Ok(Standardisation {
            impute: &m[..d],
            per_group: &m[d..],
            d,
        })
    }

    /// Group `g`'s target mean.
    pub fn y_mean(&self, g: usize) -> f64 {
        self.per_group[g * Self::width(self.d)]
    }

    /// Group `g`'s feature means.
    pub fn mean(&self, g: usize) -> &'m [f64] {
        let at = g * Self::width(self.d) + 1;
        &self.per_group[at..at + self.d]
    }

    /// Group `g`'s feature scales.
    pub fn scale(&self, g: usize) -> &'m [f64] {
        let at = g * Self::width(self.d) + 1 + self.d;
        &self.per_group[at..at + self.d]
    }
}

/// Adds each piece's `width` values of `part` into its group's slot of `acc`.
fn add_by_group(acc: &mut [f64], spec: &ShardSpec, part: &[f64], width: usize) -> Result<()> {
    if part.len() != spec.pieces.len() * width {
        return Err(protocol("statistics message has the wrong length"));
    }
    for (p, m) in spec.pieces.iter().zip(part.chunks(width.max(1))) {
        for (a, b) in acc[p.group * width..(p.group + 1) * width]
            .iter_mut()
            .zip(m)
        {
            *a += b;
        }
    }
    Ok(())
}

/// Rows of each group, from the specs.
fn group_rows(specs: &[ShardSpec]) -> Vec<usize> {
    let mut rows = vec![0usize; specs[0].groups];
    for p in specs.iter().flat_map(|s| &s.pieces) {
        rows[p.group] = p.group_rows;
    }
    rows
}

/// Round 1 on a worker: per piece `[sum y, (n, sum) per feature]`.
pub fn moments(spec: &ShardSpec, rows: &ShardRows) -> Vec<f64> {
    let mut out = Vec::with_capacity(spec.pieces.len() * (1 + 2 * spec.d));
    for r in spec.piece_rows() {
        out.push(rows.target[r.clone()].iter().sum());
        for c in &rows.columns {
            let (mut n, mut s) = (0.0, 0.0);
            for i in r.clone() {
                let x = c.get(i);
                if !x.is_nan() {
                    n += 1.0;
                    s += x;
                }
            }
            out.push(n);
            out.push(s);
        }
    }
    out
}

/// Round 1 reduced: the imputation value of a feature is its mean over all
/// training rows (the global pseudo-group's, the last group); a group's
/// mean counts its missing values as imputed. Scales are 1 until round 2.
pub fn reduce_moments(specs: &[ShardSpec], parts: &[Vec<f64>]) -> Result<Vec<f64>> {
    let (d, ng) = (specs[0].d, specs[0].groups);
    let w = 1 + 2 * d;
    let mut acc = vec![0.0; ng * w];
    for (spec, part) in specs.iter().zip(parts) {
        add_by_group(&mut acc, spec, part, w)?;
    }
    let rows = group_rows(specs);
    let global = ng - 1;
    // Every training row once: the global pseudo-group's pieces, or else
    // all groups' (groups without models placed for their statistics).
    let sources: Vec<usize> = if rows[global] > 0 {
        vec![global]
    } else {
        (0..global).collect()
    };
    let impute: Vec<f64> = (0..d)
        .map(|j| {
            let (n, s) = sources.iter().fold((0.0, 0.0), |(n, s), &g| {
                (n + acc[g * w + 1 + 2 * j], s + acc[g * w + 2 + 2 * j])
            });
            if n > 0.0 {
                s / n
            } else {
                0.0
            }
        })
        .collect();
    let sw = Standardisation::width(d);
    let mut out = impute.clone();
    out.resize(d + ng * sw, 0.0);
    for g in 0..ng {
        let n_rows = rows[g] as f64;
        if n_rows == 0.0 {
            continue;
        }
        let o = &mut out[d + g * sw..d + (g + 1) * sw];
        o[0] = acc[g * w] / n_rows;
        for j in 0..d {
            let (n, s) = (acc[g * w + 1 + 2 * j], acc[g * w + 2 + 2 * j]);
            o[1 + j] = if g == global {
                impute[j]
            } else {
                (s + (n_rows - n) * impute[j]) / n_rows
            };
            o[1 + d + j] = 1.0;
        }
    }
    Ok(out)
}

/// Round 2 on a worker: per piece, the squared deviations of each imputed
/// feature from its group's mean (`means`: round 1's message).
pub fn deviations(spec: &ShardSpec, rows: &ShardRows, means: &[f64]) -> Result<Vec<f64>> {
    let st = Standardisation::parse(means, spec.d, spec.groups)?;
    let mut out = Vec::with_capacity(spec.pieces.len() * spec.d);
    for (p, r) in spec.pieces.iter().zip(spec.piece_rows()) {
        let mean = st.mean(p.group);
        for (j, c) in rows.columns.iter().enumerate() {
            let (m, fill) = (mean[j], st.impute[j]);
            let mut sq = 0.0;
            for i in r.clone() {
                let x = c.get(i);
                let x = if x.is_nan() { fill } else { x };
                sq += (x - m) * (x - m);
            }
            out.push(sq);
        }
    }
    Ok(out)
}

/// Round 2 reduced: each group's scales, `scale(squared deviations, rows,
/// mean)` per feature (the family's rule).
pub fn reduce_deviations(
    specs: &[ShardSpec],
    means: &[f64],
    parts: &[Vec<f64>],
    scale: impl Fn(f64, f64, f64) -> f64,
) -> Result<Vec<f64>> {
    let (d, ng) = (specs[0].d, specs[0].groups);
    Standardisation::parse(means, d, ng)?;
    let mut sq = vec![0.0; ng * d];
    for (spec, part) in specs.iter().zip(parts) {
        add_by_group(&mut sq, spec, part, d)?;
    }
    let rows = group_rows(specs);
    let sw = Standardisation::width(d);
    let mut out = means.to_vec();
    for g in 0..ng {
        let o = &mut out[d + g * sw..d + (g + 1) * sw];
        for j in 0..d {
            o[1 + d + j] = scale(sq[g * d + j], rows[g] as f64, o[1 + j]);
        }
    }
    Ok(out)
}

/// A worker's statistics of round `round` (0: [`moments`], 1:
/// [`deviations`]).
pub fn statistics(
    spec: &ShardSpec,
    rows: &ShardRows,
    round: usize,
    agreed: &[f64],
) -> Result<Vec<f64>> {
    match round {
        0 => Ok(moments(spec, rows)),
        _ => deviations(spec, rows, agreed),
    }
}

/// The coordinator's reduction of round `round`, with the family's scale
/// rule for round 1.
pub fn reduce(
    specs: &[ShardSpec],
    round: usize,
    agreed: &[f64],
    parts: &[Vec<f64>],
    scale: impl Fn(f64, f64, f64) -> f64,
) -> Result<Vec<f64>> {
    match round {
        0 => reduce_moments(specs, parts),
        _ => reduce_deviations(specs, agreed, parts, scale),
    }
}
