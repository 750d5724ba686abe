//! What a family adds to its partial step to run on workers in other
//! processes: [`Sharded`], over a worker's [`ShardSpec`] and [`ShardRows`].
//!
//! A worker holds [`Piece`]s: whole groups, and block-aligned runs of rows of
//! groups cut over several workers. Before the passes, the family's
//! statistics rounds make every worker agree on what its pieces need of
//! their whole groups (linear: means and scales; gbdt: bin bounds). Then the
//! generic session (`remote::WorkerSession`) runs the family's
//! [`PartialStep`] on its pieces, and the coordinator adds the partial
//! statistics of cut groups in row order.

pub mod standardise;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::data::categorical::FeatureKind;
use crate::data::keys::GroupKey;
use crate::data::{Column, Task};
use crate::error::{GroupfitError, Result};
use crate::exec::PartialStep;
use crate::family::UnitFit;
use crate::tune::ConfigEntry;

/// An error of the remote protocol: a message or spec that does not fit.
pub fn protocol_error(what: &str) -> GroupfitError {
    GroupfitError::arg(format!("remote worker protocol: {what}"))
}

/// A run of rows of one group held by one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// The group (the global pseudo-group is the last, `groups - 1`).
    pub group: usize,
    /// First row of the piece inside its group (a multiple of the family's
    /// alignment).
    pub offset: usize,
    /// Rows in the piece.
    pub rows: usize,
    /// Rows of the whole group.
    pub group_rows: usize,
    /// Whether other workers hold other pieces of the group.
    pub shared: bool,
    /// Whether the group's models are trained here; otherwise its rows only
    /// count in the statistics rounds (a group without its own model,
    /// whose rows the imputation values still cover).
    #[serde(default = "trained")]
    pub train: bool,
}

fn trained() -> bool {
    true
}

/// What one worker trains: its pieces, in the order of its rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardSpec {
    /// The family (`--model` name).
    pub model: String,
    /// Binary or regression.
    pub task: Task,
    /// Number of features.
    pub d: usize,
    /// What each feature is (empty: all numeric).
    #[serde(default)]
    pub kinds: Vec<FeatureKind>,
    /// The grid.
    pub configs: Vec<ConfigEntry>,
    /// The run's seed.
    pub seed: u64,
    /// Groups including the global pseudo-group (`n_groups + 1`).
    pub groups: usize,
    /// The pieces; the worker's rows are their rows, concatenated in this order.
    pub pieces: Vec<Piece>,
    /// The key of each piece's group (the global pseudo-group's is empty):
    /// families seed a group's random numbers from its key.
    pub keys: Vec<GroupKey>,
}

impl ShardSpec {
    /// Rows of the shard.
    pub fn rows(&self) -> usize {
        self.pieces.iter().map(|p| p.rows).sum()
    }

    /// Row range of each piece in the shard.
    pub fn piece_rows(&self) -> Vec<std::ops::Range<usize>> {
        let mut at = 0;
        self.pieces
            .iter()
            .map(|p| {
                at += p.rows;
                at - p.rows..at
            })
            .collect()
    }
}

/// A worker's rows: raw features (NaN = missing) and target, pieces
/// concatenated in spec order, and the validation rows of its pieces'
/// groups (all of a cut group's on each of its holders).
#[derive(Debug, Default)]
pub struct ShardRows {
    /// Feature columns.
    pub columns: Vec<Column>,
    /// Target.
    pub target: Vec<f64>,
    /// The table row of each row (families that sample rows choose them
    /// by it).
    pub ids: Vec<u32>,
    /// Validation feature columns.
    pub valid_columns: Vec<Column>,
    /// Validation target.
    pub valid_target: Vec<f64>,
    /// The piece each validation row belongs to.
    pub valid_piece: Vec<u32>,
}

/// A family's part of the remote protocol. Everything else (the rounds,
/// the passes, combining, snapshots, models) is generic.
pub trait Sharded: Sync {
    /// A unit's state between passes (saved in snapshots).
    type Unit: Serialize + DeserializeOwned + Send + Sync;
    /// A fitted unit's model.
    type Model: Serialize + DeserializeOwned;
    /// A worker's layout of its rows, built by [`Sharded::prepare`].
    type Prepared: Send;
    /// The partial step's per-worker buffers.
    type Scratch: Send;
    /// The family's partial step over a prepared layout: group `i` is the
    /// spec's piece `i`, its rows [`Sharded::piece_range`].
    type Pass<'a>: PartialStep<Unit = Self::Unit, Scratch = Self::Scratch>
    where
        Self: 'a;

    /// Statistics rounds before [`Sharded::prepare`].
    fn rounds(&self) -> usize;
    /// A worker's statistics of round `round` over its rows, given the
    /// reduced message of the round before (empty for round 0).
    fn statistics(
        &self,
        spec: &ShardSpec,
        rows: &ShardRows,
        round: usize,
        agreed: &[f64],
    ) -> Result<Vec<f64>>;
    /// The coordinator's reduction of round `round` (one message per
    /// worker, in worker order) into the message every worker gets.
    fn reduce(
        &self,
        specs: &[ShardSpec],
        round: usize,
        agreed: &[f64],
        parts: &[Vec<f64>],
    ) -> Result<Vec<f64>>;
    /// Builds the worker's layout from its rows and the last reduced
    /// message, and the starting units: per piece, one per config.
    fn prepare(
        &self,
        spec: &ShardSpec,
        rows: ShardRows,
        agreed: &[f64],
    ) -> Result<(Self::Prepared, Vec<Vec<Self::Unit>>)>;
    /// The partial step over a prepared layout.
    fn pass<'a>(&'a self, spec: &'a ShardSpec, prepared: &'a Self::Prepared) -> Self::Pass<'a>;
    /// Piece `piece`'s rows in the partial step's row numbers.
    fn piece_range(&self, prepared: &Self::Prepared, piece: usize) -> std::ops::Range<usize>;
    /// The fitted model of `unit` (config `k` of piece `piece`).
    fn model(
        &self,
        prepared: &Self::Prepared,
        piece: usize,
        k: usize,
        unit: &Self::Unit,
    ) -> UnitFit<Self::Model>;
    /// The values replacing a missing feature, from the last reduced message
    /// (empty: the family does not impute).
    fn impute(&self, agreed: &[f64]) -> Vec<f64>;
}
