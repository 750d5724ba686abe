//! One remote worker's side of the protocol: a [`WorkerSession`] holds the
//! worker's shard of the data and the states of its units, and answers the
//! coordinator's rounds (statistics, prepare, step, apply, snapshot,
//! restore, models) for any [`Sharded`] family.

use crate::error::Result;
use crate::exec::PartialStep;
use crate::family::UnitFit;
use crate::shard::{ShardRows, ShardSpec, Sharded};

use super::message::{parse_partials, protocol, push_partial};

/// One worker: its shard of the data and the states of its units.
pub struct WorkerSession<S: Sharded> {
    family: S,
    spec: ShardSpec,
    /// Raw features and target, until [`WorkerSession::prepare`].
    rows: Option<ShardRows>,
    prepared: Option<S::Prepared>,
    /// Per piece, one unit per config (empty until prepared).
    units: Vec<Vec<S::Unit>>,
    scratch: Option<S::Scratch>,
}

/// A fitted unit as a worker reports it: its group, its config and the fit.
pub type ReportedUnit<M> = (usize, usize, UnitFit<M>);

impl<S: Sharded> WorkerSession<S> {
    /// A session of `family` over the shard `spec` whose rows are `rows`.
    pub fn new(family: S, spec: ShardSpec, rows: ShardRows) -> Result<WorkerSession<S>> {
        let n = spec.rows();
        let nv = rows.valid_target.len();
        let valid_ok = rows.valid_piece.len() == nv
            && rows
                .valid_piece
                .iter()
                .all(|&p| (p as usize) < spec.pieces.len())
            && (nv == 0 && rows.valid_columns.is_empty()
                || rows.valid_columns.len() == spec.d
                    && rows.valid_columns.iter().all(|c| c.len() == nv));
        if rows.columns.len() != spec.d
            || rows.columns.iter().any(|c| c.len() != n)
            || rows.target.len() != n
            || !(rows.ids.is_empty() || rows.ids.len() == n)
            || !valid_ok
        {
            return Err(protocol(&format!(
                "shard data does not match its spec ({} rows, {} features)",
                n, spec.d
            )));
        }
        let bad = |p: &crate::shard::Piece| {
            p.group >= spec.groups || p.offset + p.rows > p.group_rows || p.rows == 0
        };
        if spec.pieces.iter().any(bad) || spec.keys.len() != spec.pieces.len() {
            return Err(protocol("bad piece in the shard spec"));
        }
        Ok(WorkerSession {
            family,
            spec,
            rows: Some(rows),
            prepared: None,
            units: Vec::new(),
            scratch: None,
        })
    }

    /// The shard spec.
    pub fn spec(&self) -> &ShardSpec {
        &self.spec
    }

    /// Statistics rounds before [`WorkerSession::prepare`].
    pub fn rounds(&self) -> usize {
        self.family.rounds()
    }

    /// This worker's statistics of round `round`, given the coordinator's
    /// reduction of the round before (empty for round 0).
    pub fn statistics(&self, round: usize, agreed: &[f64]) -> Result<Vec<f64>> {
        let rows = self
            .rows
            .as_ref()
            .ok_or_else(|| protocol("the shard's raw data is gone (already prepared)"))?;
        if round >= self.family.rounds() {
            return Err(protocol("no such statistics round"));
        }
        self.family.statistics(&self.spec, rows, round, agreed)
    }

    /// Builds the layout and the starting units from the last reduction;
    /// drops the raw data.
    pub fn prepare(&mut self, agreed: &[f64]) -> Result<()> {
        let rows = self.rows.take().ok_or_else(|| protocol("prepared twice"))?;
        let (prepared, mut units) = self.family.prepare(&self.spec, rows, agreed)?;
        if units.len() != self.spec.pieces.len() {
            return Err(protocol("units do not match the pieces"));
        }
        // A piece of a group without models counts in the statistics only.
        for (us, p) in units.iter_mut().zip(&self.spec.pieces) {
            if !p.train {
                us.clear();
            }
        }
        let scratch = self.family.pass(&self.spec, &prepared).scratch();
        self.prepared = Some(prepared);
        self.units = units;
        self.scratch = Some(scratch);
        Ok(())
    }

    fn ready(&self) -> Result<&S::Prepared> {
        self.prepared
            .as_ref()
            .ok_or_else(|| protocol("the session is not prepared"))
    }

    /// One pass over the shard: accumulates every active unit over its
    /// piece, updates the units of whole groups (up to the family's
    /// [`PartialStep::whole_steps`] times; to the end on a worker without
    /// shared pieces), and returns the partial statistics of shared groups.
    pub fn step(&mut self) -> Result<Vec<f64>> {
        self.ready()?;
        let WorkerSession {
            family,
            spec,
            prepared,
            units: all,
            scratch,
            ..
        } = self;
        let prepared = prepared.as_ref().expect("prepared");
        let scratch = scratch.as_mut().expect("prepared");
        let pass = family.pass(spec, prepared);
        let len = pass.stats_len();
        let mut out = Vec::new();
        let mut buf = Vec::new();
        // Without shared pieces nothing waits on this worker's passes: whole
        // groups run to the end in one (no round trips, one snapshot).
        let alone = spec.pieces.iter().all(|p| !p.shared);
        for (i, p) in spec.pieces.iter().enumerate() {
            let range = family.piece_range(prepared, i);
            let steps = match (p.shared, alone) {
                (true, _) => 1,
                (false, true) => usize::MAX,
                (false, false) => pass.whole_steps().max(1),
            };
            for _ in 0..steps {
                let units = &mut all[i];
                let ks: Vec<usize> = (0..units.len())
                    .filter(|&k| pass.is_active(&units[k]))
                    .collect();
                if ks.is_empty() {
                    break;
                }
                buf.clear();
                buf.resize(ks.len() * len, 0.0);
                let active: Vec<(usize, &S::Unit)> = ks.iter().map(|&k| (k, &units[k])).collect();
                pass.accumulate(i, &active, range.clone(), &mut buf, scratch);
                drop(active);
                if p.shared {
                    push_partial(&mut out, p.group, &ks, &buf);
                } else {
                    pass.apply_group(i, units, &ks, &mut buf, scratch);
                }
            }
        }
        Ok(out)
    }

    /// Applies the combined statistics of shared groups (from
    /// [`super::Coordinator::combine`]) to this worker's replicas; returns
    /// the number of units still active on this worker.
    pub fn apply(&mut self, combined: &[f64]) -> Result<usize> {
        self.ready()?;
        let WorkerSession {
            family,
            spec,
            prepared,
            units,
            scratch,
            ..
        } = self;
        let prepared = prepared.as_ref().expect("prepared");
        let scratch = scratch.as_mut().expect("prepared");
        let pass = family.pass(spec, prepared);
        let mut stats = Vec::new();
        for part in parse_partials(combined)? {
            let Some(i) = spec.pieces.iter().position(|p| p.group == part.group) else {
                continue;
            };
            if part.len != pass.stats_len() {
                return Err(protocol("statistics of the wrong length"));
            }
            for &k in &part.ks {
                let unit = units[i]
                    .get(k)
                    .ok_or_else(|| protocol("unit index out of range"))?;
                if !pass.is_active(unit) {
                    return Err(protocol("statistics for a unit that is not active"));
                }
            }
            stats.clear();
            stats.extend_from_slice(part.stats);
            pass.apply_group(i, &mut units[i], &part.ks, &mut stats, scratch);
        }
        Ok(units.iter().flatten().filter(|u| pass.is_active(u)).count())
    }

    /// Units still active on this worker (replicas of shared units included).
    pub fn active(&self) -> usize {
        let Some(prepared) = self.prepared.as_ref() else {
            return 0;
        };
        let pass = self.family.pass(&self.spec, prepared);
        self.units
            .iter()
            .flatten()
            .filter(|u| pass.is_active(u))
            .count()
    }

    /// The state of every unit, to resume from after a failure.
    pub fn snapshot(&self) -> Result<Vec<u8>> {
        self.ready()?;
        postcard::to_stdvec(&self.units).map_err(|e| protocol(&format!("snapshot: {e}")))
    }

    /// Restores the unit states of a [`WorkerSession::snapshot`] (of a session
    /// over the same shard, prepared).
    pub fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        self.ready()?;
        let units: Vec<Vec<S::Unit>> = postcard::from_bytes(snapshot)
            .map_err(|e| protocol(&format!("snapshot of another shard ({e})")))?;
        let shape = |u: &[Vec<S::Unit>]| u.iter().map(Vec::len).collect::<Vec<_>>();
        if shape(&units) != shape(&self.units) {
            return Err(protocol("snapshot of another shard"));
        }
        self.units = units;
        Ok(())
    }

    /// The fitted units of the groups this worker reports: whole groups, and
    /// the first piece of each shared group.
    pub fn models(&self) -> Result<Vec<ReportedUnit<S::Model>>> {
        let prepared = self.ready()?;
        let mut out = Vec::new();
        for (i, p) in self.spec.pieces.iter().enumerate() {
            if p.shared && p.offset != 0 || !p.train {
                continue;
            }
            for (k, u) in self.units[i].iter().enumerate() {
                out.push((p.group, k, self.family.model(prepared, i, k, u)));
            }
        }
        Ok(out)
    }
}
