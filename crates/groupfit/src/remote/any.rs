//! The protocol with the family chosen at run time: [`session`] and
//! [`coordinator`] build a [`WorkerSession`] or a [`Coordinator`] of the
//! family a spec names (through [`crate::registry::with_sharded`]), behind
//! [`AnySession`] and [`AnyCoordinator`]. This is what the bindings hold.

use crate::error::Result;
use crate::family::UnitFit;
use crate::registry::{with_sharded, ShardedVisitor};
use crate::shard::{ShardRows, ShardSpec, Sharded};
use crate::store::FittedModel;

use super::coordinator::Coordinator;
use super::message::protocol;
use super::session::{ReportedUnit, WorkerSession};

/// A [`WorkerSession`] of any family.
pub trait AnySession: Send {
    /// The shard spec.
    fn spec(&self) -> &ShardSpec;
    /// Statistics rounds before `prepare`.
    fn rounds(&self) -> usize;
    /// This worker's statistics of round `round`.
    fn statistics(&self, round: usize, agreed: &[f64]) -> Result<Vec<f64>>;
    /// Builds the layout and the starting units.
    fn prepare(&mut self, agreed: &[f64]) -> Result<()>;
    /// One pass; the partial statistics of shared groups.
    fn step(&mut self) -> Result<Vec<f64>>;
    /// Applies combined statistics; the units still active here.
    fn apply(&mut self, combined: &[f64]) -> Result<usize>;
    /// Units still active here.
    fn active(&self) -> usize;
    /// The units' states.
    fn snapshot(&self) -> Result<Vec<u8>>;
    /// Restores a snapshot of a session over the same shard.
    fn restore(&mut self, snapshot: &[u8]) -> Result<()>;
    /// The fitted units this worker reports, for [`AnyCoordinator::finish`].
    fn models(&self) -> Result<Vec<u8>>;
}

impl<S> AnySession for WorkerSession<S>
where
    S: Sharded + Send,
{
    fn spec(&self) -> &ShardSpec {
        WorkerSession::spec(self)
    }
    fn rounds(&self) -> usize {
        WorkerSession::rounds(self)
    }
    fn statistics(&self, round: usize, agreed: &[f64]) -> Result<Vec<f64>> {
        WorkerSession::statistics(self, round, agreed)
    }
    fn prepare(&mut self, agreed: &[f64]) -> Result<()> {
        WorkerSession::prepare(self, agreed)
    }
    fn step(&mut self) -> Result<Vec<f64>> {
        WorkerSession::step(self)
    }
    fn apply(&mut self, combined: &[f64]) -> Result<usize> {
        WorkerSession::apply(self, combined)
    }
    fn active(&self) -> usize {
        WorkerSession::active(self)
    }
    fn snapshot(&self) -> Result<Vec<u8>> {
        WorkerSession::snapshot(self)
    }
    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        WorkerSession::restore(self, snapshot)
    }
    fn models(&self) -> Result<Vec<u8>> {
        // As the model file holds models: JSON and its binary section.
        let units = WorkerSession::models(self)?;
        crate::codec::to_packed(&units).map_err(|e| protocol(&format!("models: {e}")))
    }
}

/// A [`Coordinator`] of any family, whose models come out as the model
/// file's [`FittedModel`].
pub trait AnyCoordinator: Send {
    /// Statistics rounds before the passes.
    fn rounds(&self) -> usize;
    /// Reduces the next statistics round.
    fn reduce(&mut self, parts: &[Vec<f64>]) -> Result<Vec<f64>>;
    /// Combines a pass's partial statistics in worker order.
    fn combine(&mut self, parts: &[Vec<f64>]) -> Result<Vec<f64>>;
    /// Passes combined so far.
    fn passes(&self) -> usize;
    /// The values replacing a missing feature.
    fn impute(&self) -> Vec<f64>;
    /// Per group, one fitted unit per config, from every worker's
    /// [`AnySession::models`], in worker order; each is parsed and dropped
    /// before the next is taken.
    fn finish(
        &self,
        parts: &mut dyn Iterator<Item = Result<Vec<u8>>>,
    ) -> Result<Vec<Vec<UnitFit<FittedModel>>>>;
}

impl<S> AnyCoordinator for Coordinator<S>
where
    S: Sharded + Send,
    FittedModel: From<S::Model>,
{
    fn rounds(&self) -> usize {
        Coordinator::rounds(self)
    }
    fn reduce(&mut self, parts: &[Vec<f64>]) -> Result<Vec<f64>> {
        Coordinator::reduce(self, parts)
    }
    fn combine(&mut self, parts: &[Vec<f64>]) -> Result<Vec<f64>> {
        Coordinator::combine(self, parts)
    }
    fn passes(&self) -> usize {
        self.passes
    }
    fn impute(&self) -> Vec<f64> {
        Coordinator::impute(self)
    }
    fn finish(
        &self,
        parts: &mut dyn Iterator<Item = Result<Vec<u8>>>,
    ) -> Result<Vec<Vec<UnitFit<FittedModel>>>> {
        let parts = parts
            .map(|b| {
                crate::codec::from_packed::<Vec<ReportedUnit<S::Model>>>(&b?)
                    .map_err(|e| protocol(&format!("a worker's models do not parse: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Coordinator::finish(self, parts)?
            .into_iter()
            .map(|us| {
                us.into_iter()
                    .map(|u| UnitFit {
                        model: FittedModel::from(u.model),
                        iterations: u.iterations,
                        converged: u.converged,
                    })
                    .collect()
            })
            .collect())
    }
}

struct NewSession(ShardSpec, ShardRows);

impl ShardedVisitor for NewSession {
    type Out = Result<Box<dyn AnySession>>;
    fn visit<S>(self, family: S) -> Self::Out
    where
        S: Sharded + Send + 'static,
        FittedModel: From<S::Model>,
    {
        Ok(Box::new(WorkerSession::new(family, self.0, self.1)?))
    }
}

struct NewCoordinator(Vec<ShardSpec>);

impl ShardedVisitor for NewCoordinator {
    type Out = Result<Box<dyn AnyCoordinator>>;
    fn visit<S>(self, family: S) -> Self::Out
    where
        S: Sharded + Send + 'static,
        FittedModel: From<S::Model>,
    {
        Ok(Box::new(Coordinator::new(family, self.0)?))
    }
}

/// A worker session of the family `spec` names, over `rows`.
pub fn session(spec: ShardSpec, rows: ShardRows) -> Result<Box<dyn AnySession>> {
    let s = spec.clone();
    with_sharded(&s, NewSession(spec, rows))?
}

/// A coordinator of the family the specs name (one spec per worker).
pub fn coordinator(specs: Vec<ShardSpec>) -> Result<Box<dyn AnyCoordinator>> {
    let first = specs.first().ok_or_else(|| protocol("no workers"))?.clone();
    with_sharded(&first, NewCoordinator(specs))?
}
