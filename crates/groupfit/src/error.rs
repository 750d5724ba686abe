//! The engine's one error type.
//!
//! Every variant renders as a single line that names the file, column or group
//! at fault, so the CLI and the Python package can show it as it is.

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum GroupfitError {
    /// A file could not be opened, read or written.
    #[error("cannot {action} '{path}': {reason}")]
    Io {
        /// What was being done: "read", "write", "create", ...
        action: &'static str,
        /// The file.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The file exists but is not valid Parquet (or Arrow could not decode it).
    #[error("'{path}' is not a readable Parquet file: {reason}")]
    Parquet {
        /// The file.
        path: String,
        /// The decoder's reason.
        reason: String,
    },
    /// A CSV file's record cannot be read: more or fewer fields than the
    /// header, invalid UTF-8, or no header at all.
    #[error("'{path}' is not readable CSV at line {line}: {reason}")]
    Csv {
        /// The file.
        path: String,
        /// The line (1-based, the header is line 1) where the record starts.
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A column named on the command line is not in the file.
    #[error("column '{column}' not found in '{path}' (columns: {available})")]
    MissingColumn {
        /// The missing column.
        column: String,
        /// The file searched.
        path: String,
        /// The columns the file has, comma separated.
        available: String,
    },
    /// A feature or target column is not numeric.
    #[error("column '{column}' in '{path}' has type {dtype}, which is not numeric; choose numeric features with --features")]
    NonNumericColumn {
        /// The column.
        column: String,
        /// The file.
        path: String,
        /// The Arrow type found.
        dtype: String,
    },
    /// A categorical column has more distinct training values than allowed.
    #[error("column '{column}' in '{path}' has {count} distinct values, more than --max-categories ({max}); group by it with --by, or leave it out of --features")]
    TooManyCategories {
        /// The column.
        column: String,
        /// The file.
        path: String,
        /// Distinct values found.
        count: usize,
        /// The cap.
        max: usize,
    },
    /// A column's type differs from the training column's.
    #[error("column '{column}' in '{path}' holds {found}, but it held {expected} in training")]
    ColumnType {
        /// The column.
        column: String,
        /// The file.
        path: String,
        /// What training saw: "text", "integers" or "numbers".
        expected: String,
        /// What it holds now, with the Arrow type: "text (Utf8)".
        found: String,
    },
    /// A feature or target holds +/- infinity.
    #[error("column '{column}' in '{path}' has an infinite value at row {row}")]
    InfiniteValue {
        /// The column.
        column: String,
        /// The file.
        path: String,
        /// Zero-based row index in the file.
        row: usize,
    },
    /// No usable rows.
    #[error("'{path}' has no usable rows{detail}")]
    EmptyInput {
        /// The file.
        path: String,
        /// Why, e.g. ": all 12 rows have a missing target".
        detail: String,
    },
    /// A binary target holds a value other than 0 or 1.
    #[error("target '{column}' in '{path}' has value {value} at row {row}; a binary target must be 0 or 1")]
    BadBinaryTarget {
        /// The target column.
        column: String,
        /// The file.
        path: String,
        /// The offending value.
        value: f64,
        /// Zero-based row index in the file.
        row: usize,
    },
    /// The training target has a single class, so not even the global model can be fitted.
    #[error("target '{column}' in '{path}' has one class only ({value}){split}; binary training needs both 0 and 1")]
    SingleClass {
        /// The target column.
        column: String,
        /// The file.
        path: String,
        /// The only value seen.
        value: f64,
        /// Empty when the file has one class; else where the other class
        /// went (` in its N training rows; the rest were held out by
        /// --valid-fraction F`).
        split: String,
    },
    /// A hyper-parameter or grid is invalid.
    #[error("invalid parameter '{name}': {reason}")]
    InvalidParam {
        /// The parameter.
        name: String,
        /// Why it is invalid.
        reason: String,
    },
    /// Any other invalid argument (conflicting options, a bad name ...).
    #[error("{reason}")]
    InvalidArgument {
        /// The message.
        reason: String,
    },
    /// A training job whose estimated peak memory is more than the memory
    /// available (or `--max-memory`): refused before the features are read.
    #[error("training '{path}' needs about {needed}, more than the {available}; {advice}")]
    MemoryLimit {
        /// The training input.
        path: String,
        /// The estimated peak and its largest parts, for people
        /// (`1.8 GB of memory (layout 1.0 GB, ...)`).
        needed: String,
        /// The limit and where it comes from, for people
        /// (`1.0 GB it may use (--max-memory)`).
        available: String,
        /// What to change.
        advice: String,
    },
    /// A model file failed its integrity checks.
    #[error("model file '{path}' is corrupt or truncated: {reason}")]
    CorruptModel {
        /// The file.
        path: String,
        /// Which check failed.
        reason: String,
    },
    /// Rows to predict whose group has no model: the group has none of its
    /// own (unseen in training, or it fell back) and the model file has no
    /// global model (trained with `--no-global`).
    #[error("group {group} in '{path}' has no model: {reason}, and the model file has no global model (trained with --no-global); {rows} rows to predict have none")]
    NoModel {
        /// The first such row's group (displayed key).
        group: String,
        /// The input.
        path: String,
        /// Why the group has no model of its own.
        reason: String,
        /// How many input rows have no model.
        rows: usize,
    },
    /// A model file written by a newer (or unknown) format version.
    #[error("model file '{path}' has format version {found}; this groupfit reads versions 1 to {supported}")]
    UnsupportedVersion {
        /// The file.
        path: String,
        /// The version found in the header.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
}

/// The engine's result type.
pub type Result<T, E = GroupfitError> = std::result::Result<T, E>;

impl GroupfitError {
    /// An I/O error on `path`.
    pub fn io(action: &'static str, path: &std::path::Path, err: impl std::fmt::Display) -> Self {
        GroupfitError::Io {
            action,
            path: path.display().to_string(),
            reason: err.to_string(),
        }
    }

    /// An invalid-argument error.
    pub fn arg(reason: impl Into<String>) -> Self {
        GroupfitError::InvalidArgument {
            reason: reason.into(),
        }
    }

    /// An invalid-parameter error.
    pub fn param(name: impl Into<String>, reason: impl Into<String>) -> Self {
        GroupfitError::InvalidParam {
            name: name.into(),
            reason: reason.into(),
        }
    }
}
