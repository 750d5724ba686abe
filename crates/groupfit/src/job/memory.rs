//! The peak-memory estimate of a training job, and its check against the
//! memory the machine has. It is made once the keys and the target are
//! read, before the features are: a job that will not fit fails at once.
//!
//! The estimate sums what is alive while the family fits: the process
//! itself, the keys, target and row lists, the feature columns as read, the
//! validation rows, and the family's own layout and per-unit state
//! ([`crate::family::Family::memory`]).

use serde::{Deserialize, Serialize};

use super::arguments::TrainSpec;
use crate::error::{GroupfitError, Result};
use crate::family::{MemoryShape, MemoryTerm};
use crate::registry::AnyFamily;
use crate::tune::ConfigEntry;
use crate::util::mem::{available, show_size};

/// The process before any data: the binary, the threads' stacks and the
/// allocator's arenas (a run on 10,000 rows peaks at 11 MiB).
const PROCESS_BYTES: u64 = 16 << 20;

/// Bytes a row costs the job besides its features: in the training table,
/// the target (`f64`) and the key id (`u32`); as a training row, its index
/// and group (`u32` each).
const TABLE_ROW_BYTES: u64 = 8 + 4;
const TRAIN_ROW_BYTES: u64 = 4 + 4;
/// A validation row: its target, index and group (`f64`, `u32`, `Option<u32>`).
const VALID_ROW_BYTES: u64 = 8 + 4 + 8;
/// The Parquet reader's buffers, schema and metadata per column read,
/// kept by the allocator once freed (2,000 features: 45 MiB).
const COLUMN_BYTES: u64 = 24 << 10;

/// A training job's estimated peak memory, in named parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEstimate {
    /// The estimated peak, in bytes.
    pub bytes: u64,
    /// Its parts (name, bytes), largest first.
    pub parts: Vec<(String, u64)>,
}

/// What the estimate was checked against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryLimit {
    /// Bytes the job may use.
    pub bytes: u64,
    /// Where that figure comes from: `--max-memory`, `MemAvailable` or the
    /// control group's limit.
    pub source: String,
}

/// Memory in the training summary: the estimate, the limit it was checked
/// against, and the process's peak resident set when training ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemorySummary {
    /// The estimate made before the features were read.
    pub estimate: MemoryEstimate,
    /// The limit (`None`: the available memory cannot be read here).
    pub limit: Option<MemoryLimit>,
    /// The process's peak resident set (`VmHWM`) at the end of training, in
    /// bytes: the whole process's, so in Python it counts what the
    /// interpreter held before (`None`: not readable here).
    pub peak_bytes: Option<u64>,
}

/// What the job holds besides the family's data, known before the
/// features are read.
#[derive(Debug, Clone, Copy)]
pub(super) struct InputMemory {
    /// Rows of the training table.
    pub table_rows: usize,
    /// Rows of the validation table (0: validation rows are held out of the
    /// training table).
    pub valid_table_rows: usize,
    /// Features.
    pub features: usize,
    /// Bytes one training row of the features takes once read, counting
    /// only what the job allocates (in-memory `f32` and `f64` columns are
    /// shared; a family that reads the features itself: 0).
    pub feature_row_bytes: u64,
    /// The same for a row of the validation table.
    pub valid_row_bytes: u64,
    /// Bytes of the keys and the target as read.
    pub keys_bytes: u64,
}

/// Estimates the peak of `spec` fitted by `family` with `grid`, given
/// every table row's key id (`row_keys`, ids `0..groups`).
pub(super) fn estimate(
    spec: &TrainSpec,
    family: &dyn AnyFamily,
    grid: &[ConfigEntry],
    input: InputMemory,
    row_keys: &[u32],
    groups: usize,
) -> Result<MemoryEstimate> {
    let mut counts = vec![0usize; groups];
    for &k in row_keys {
        counts[k as usize] += 1;
    }
    // Held-out validation rows leave the training rows.
    let share = if spec.valid.is_some() {
        1.0
    } else {
        1.0 - spec.valid_fraction
    };
    let mut group_rows: Vec<usize> = counts
        .iter()
        .map(|&n| (n as f64 * share).round() as usize)
        .filter(|&n| n >= spec.min_rows.max(1))
        .collect();
    if spec.hierarchy {
        // Every level partitions the rows: the finest level's groups stand
        // in for each level's.
        let finest = group_rows.clone();
        for _ in 1..spec.by.len() {
            group_rows.extend_from_slice(&finest);
        }
    }
    let train_rows = (input.table_rows as f64 * share).round() as usize;
    let valid_rows = if spec.valid.is_some() {
        input.valid_table_rows
    } else {
        input.table_rows - train_rows
    };
    let shape = MemoryShape {
        group_rows: &group_rows,
        train_rows,
        valid_rows,
        features: input.features,
        groups,
        global: spec.global_model,
        threads: crate::util::par::resolve_threads(spec.threads),
    };
    let rows = |n: usize, bytes: u64| n as u64 * bytes;
    let mut terms = vec![
        MemoryTerm {
            name: "process",
            bytes: PROCESS_BYTES,
        },
        MemoryTerm {
            name: "keys and target",
            bytes: input.keys_bytes
                + rows(input.table_rows, TABLE_ROW_BYTES)
                + rows(train_rows, TRAIN_ROW_BYTES)
                + rows(valid_rows, VALID_ROW_BYTES),
        },
        MemoryTerm {
            name: "column readers",
            bytes: COLUMN_BYTES * input.features as u64,
        },
        MemoryTerm {
            name: "training features",
            bytes: rows(input.table_rows, input.feature_row_bytes),
        },
        MemoryTerm {
            name: "validation features",
            bytes: rows(input.valid_table_rows, input.valid_row_bytes),
        },
    ];
    terms.extend(family.memory(&shape, grid)?);
    Ok(sum(terms))
}

/// The terms gathered into an estimate: same-named ones added, the empty
/// ones left out, largest first.
fn sum(terms: Vec<MemoryTerm>) -> MemoryEstimate {
    let mut parts: Vec<(String, u64)> = Vec::new();
    for t in terms.into_iter().filter(|t| t.bytes > 0) {
        match parts.iter_mut().find(|(n, _)| n == t.name) {
            Some((_, b)) => *b += t.bytes,
            None => parts.push((t.name.to_string(), t.bytes)),
        }
    }
    parts.sort_by_key(|p| std::cmp::Reverse(p.1));
    MemoryEstimate {
        bytes: parts.iter().map(|(_, b)| b).sum(),
        parts,
    }
}

/// The memory `spec` may use: `--max-memory`, else what the machine has
/// available; `None` when neither is known.
pub(super) fn limit(spec: &TrainSpec) -> Option<MemoryLimit> {
    match spec.max_memory {
        Some(bytes) => Some(MemoryLimit {
            bytes,
            source: "--max-memory".into(),
        }),
        None => available().map(|(bytes, source)| MemoryLimit {
            bytes,
            source: source.into(),
        }),
    }
}

/// Fails with one line when `estimate` is over `limit`: the estimate and
/// its largest parts, the limit and where it comes from, what to change.
pub(super) fn check(
    spec: &TrainSpec,
    estimate: &MemoryEstimate,
    limit: Option<&MemoryLimit>,
) -> Result<()> {
    let Some(limit) = limit.filter(|l| estimate.bytes > l.bytes) else {
        return Ok(());
    };
    let parts: Vec<String> = estimate
        .parts
        .iter()
        .take(3)
        .map(|(n, b)| format!("{n} {}", show_size(*b)))
        .collect();
    let mut advice = Vec::new();
    if spec.global_model {
        advice.push("--no-global");
    }
    advice.extend([
        "fewer configs",
        "a sample of the rows",
        "the Ray runner",
        "or a higher --max-memory",
    ]);
    Err(GroupfitError::MemoryLimit {
        path: spec.data.display().to_string(),
        needed: format!(
            "{} of memory ({})",
            show_size(estimate.bytes),
            parts.join(", ")
        ),
        available: format!("{} it may use ({})", show_size(limit.bytes), limit.source),
        advice: format!("try {}", advice.join(", ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_add_up_by_name_largest_first() {
        let e = sum(vec![
            MemoryTerm {
                name: "a",
                bytes: 10,
            },
            MemoryTerm {
                name: "b",
                bytes: 25,
            },
            MemoryTerm {
                name: "a",
                bytes: 20,
            },
            MemoryTerm {
                name: "c",
                bytes: 0,
            },
        ]);
        assert_eq!(e.bytes, 55);
        assert_eq!(e.parts, vec![("a".into(), 30), ("b".into(), 25)]);
    }
}
