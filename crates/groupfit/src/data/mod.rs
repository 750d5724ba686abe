//! Data ingest: Parquet/Arrow in, numeric columns, group encoding and the
//! group-sorted layout the solvers scan.
//!
//! * [`read_parquet`] reads the projected columns of a file into one Arrow batch;
//!   [`read_parquet_rows`] only some of its rows (a Ray actor reading its shard).
//! * [`table_schema`] and [`read_table`] do the same for Parquet or CSV
//!   ([`csv`]), by the file's extension.
//! * [`numeric_column`] turns one column into `f64` (nulls become NaN) and
//!   rejects non-numeric types and infinities with a message naming the column.
//! * [`keys::GroupEncoder`] maps key tuples (one or more key columns) to dense
//!   group ids; nulls in a key column form their own group.
//! * [`layout::GroupedMatrix`] holds the features of every row, standardised
//!   per group, as `f32` with the rows of one group contiguous.

pub mod categorical;
pub mod csv;
pub mod hierarchy;
pub mod keys;
pub mod layout;
pub mod onehot;
pub mod stats;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Schema};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection};
use parquet::arrow::ProjectionMask;
use serde::{Deserialize, Serialize};

use crate::error::{GroupfitError, Result};

/// A zeroed `f32` buffer of `n` values for a large layout that is written
/// once and then scanned on every pass (the linear and MLP layouts). On
/// Linux its memory is advised to be backed by 2 MiB pages before the first
/// write: the layout is written in one go right after allocation, and with
/// 4 KiB pages that first write costs one page fault per 4 KiB (on a virtual
/// machine about as much time as the copy itself). Only a hint: without
/// transparent huge pages the buffer is an ordinary zeroed vector.
pub(crate) fn zeroed_f32_large(n: usize) -> Vec<f32> {
    let v = vec![0.0f32; n];
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_ptr() as usize;
        let end = start + n * std::mem::size_of::<f32>();
        let lo = start.next_multiple_of(HUGE);
        let hi = end / HUGE * HUGE;
        if hi > lo {
            // SAFETY: the range lies inside `v`'s allocation; MADV_HUGEPAGE
            // changes no contents, only how untouched pages are backed.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
            }
        }
    }
    v
}

/// What the target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// A 0/1 target: models output the probability of 1, scored by log-loss.
    Binary,
    /// A real target: models output the value, scored by RMSE.
    Regression,
}

impl Task {
    /// The lower-case name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Task::Binary => "binary",
            Task::Regression => "regression",
        }
    }

    /// The name of the metric groupfit selects configs by: `log-loss`
    /// (binary) or `RMSE` (regression).
    pub fn metric_name(self) -> &'static str {
        match self {
            Task::Binary => "log-loss",
            Task::Regression => "RMSE",
        }
    }

    /// A model's output from its margin: the probability of class 1
    /// (binary, the sigmoid of the log-odds) or the value (regression).
    pub fn link(self, margin: f64) -> f64 {
        match self {
            Task::Binary => crate::math::sigmoid(margin),
            Task::Regression => margin,
        }
    }

    /// Parses `binary` / `regression`.
    pub fn parse(s: &str) -> Result<Task> {
        match s {
            "binary" => Ok(Task::Binary),
            "regression" => Ok(Task::Regression),
            other => Err(GroupfitError::arg(format!(
                "unknown task '{other}' (expected binary or regression)"
            ))),
        }
    }
}

/// A reader of a Parquet file, its footer read.
fn parquet_footer(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>> {
    let file = File::open(path).map_err(|e| GroupfitError::io("read", path, e))?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| GroupfitError::Parquet {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// The schema of a Parquet file, without reading its data.
pub fn parquet_schema(path: &Path) -> Result<Arc<Schema>> {
    Ok(parquet_footer(path)?.schema().clone())
}

/// The row count of a Parquet file's footer, without reading its data.
pub fn parquet_rows(path: &Path) -> Result<usize> {
    Ok(parquet_footer(path)?
        .metadata()
        .file_metadata()
        .num_rows()
        .max(0) as usize)
}

/// Reads the named columns of a Parquet file into one record batch, in the
/// order given, decoding disjoint column subsets on up to `threads` threads.
/// A name the file lacks is a [`GroupfitError::MissingColumn`].
pub fn read_parquet(path: &Path, columns: &[String], threads: usize) -> Result<RecordBatch> {
    read_selected(path, columns, threads, None)
}

/// The schema of a table file: a CSV file's ([`csv::is_csv`]) inferred
/// from its values, a Parquet file's from its footer.
pub fn table_schema(path: &Path) -> Result<Arc<Schema>> {
    if self::csv::is_csv(path) {
        self::csv::csv_schema(path)
    } else {
        parquet_schema(path)
    }
}

/// [`read_parquet`] for a Parquet or CSV file ([`csv::is_csv`]); a CSV file
/// is read on one thread.
pub fn read_table(path: &Path, columns: &[String], threads: usize) -> Result<RecordBatch> {
    if !self::csv::is_csv(path) {
        return read_parquet(path, columns, threads);
    }
    let schema = self::csv::csv_schema(path)?;
    self::csv::read_csv(path, &column_indices(&schema, columns, path)?)
}

/// The index in `schema` of each of `columns`; a name it lacks is a
/// [`GroupfitError::MissingColumn`] naming `path`.
pub fn column_indices(schema: &Schema, columns: &[String], path: &Path) -> Result<Vec<usize>> {
    columns
        .iter()
        .map(|name| {
            schema
                .index_of(name)
                .map_err(|_| missing_column(name, path, schema))
        })
        .collect()
}

/// Record batches read one after another; the first error ends them.
pub type Batches = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// Rows a streaming reader ([`table_batches`]) reads at a time.
pub const STREAM_ROWS: usize = 1 << 16;

/// The named columns of a Parquet or CSV file ([`csv::is_csv`]), `rows`
/// rows at a time, in file order: memory is bounded by a batch, not the
/// file. The columns come in the file's order, not the order given. A
/// name the file lacks is a [`GroupfitError::MissingColumn`].
pub fn table_batches(path: &Path, columns: &[String], rows: usize) -> Result<Batches> {
    let mut indices = column_indices(&*table_schema(path)?, columns, path)?;
    indices.sort_unstable();
    indices.dedup();
    if self::csv::is_csv(path) {
        return Ok(Box::new(self::csv::csv_batches(path, &indices, rows)?));
    }
    let pq_err = |path: &Path, e: &dyn std::fmt::Display| GroupfitError::Parquet {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let file = File::open(path).map_err(|e| GroupfitError::io("read", path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| pq_err(path, &e))?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(rows.max(1))
        .build()
        .map_err(|e| pq_err(path, &e))?;
    let path = path.to_path_buf();
    Ok(Box::new(
        reader.map(move |b| b.map_err(|e| pq_err(&path, &e))),
    ))
}

/// Reads file rows `rows` (any order, repeats allowed) of the named columns:
/// row `i` of the batch is row `rows[i]` of the file. Pages holding none of
/// the rows are skipped. A row past the file's end is a
/// [`GroupfitError::Parquet`] error naming the file.
pub fn read_parquet_rows(
    path: &Path,
    columns: &[String],
    rows: &[u32],
    threads: usize,
) -> Result<RecordBatch> {
    let mut uniq = rows.to_vec();
    uniq.sort_unstable();
    uniq.dedup();
    let batch = read_selected(path, columns, threads, Some(&uniq))?;
    if uniq.len() == rows.len() && uniq.as_slice() == rows {
        return Ok(batch);
    }
    let take: arrow_array::UInt32Array = rows
        .iter()
        .map(|r| uniq.binary_search(r).expect("row was selected") as u32)
        .collect();
    let cols = batch
        .columns()
        .iter()
        .map(|c| arrow_select::take::take(c.as_ref(), &take, None))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| GroupfitError::Parquet {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows.len()));
    RecordBatch::try_new_with_options(batch.schema(), cols, &options).map_err(|e| {
        GroupfitError::Parquet {
            path: path.display().to_string(),
            reason: e.to_string(),
        }
    })
}

/// [`read_parquet`], of the sorted distinct file rows `rows` only when given.
fn read_selected(
    path: &Path,
    columns: &[String],
    threads: usize,
    rows: Option<&[u32]>,
) -> Result<RecordBatch> {
    let pq_err = |e: &dyn std::fmt::Display| GroupfitError::Parquet {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let schema = parquet_schema(path)?;
    for name in columns {
        if schema.index_of(name).is_err() {
            return Err(missing_column(name, path, &schema));
        }
    }
    let threads = threads.clamp(1, columns.len().max(1));
    let parts: Vec<Vec<String>> = (0..threads)
        .map(|t| columns.iter().skip(t).step_by(threads).cloned().collect())
        .collect();
    let batches: Vec<Result<RecordBatch>> = if threads == 1 {
        vec![read_projected(path, &parts[0], rows)]
    } else {
        std::thread::scope(|s| {
            let hs: Vec<_> = parts
                .iter()
                .map(|p| s.spawn(move || read_projected(path, p, rows)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("reader thread panicked"))
                .collect()
        })
    };
    let batches = batches.into_iter().collect::<Result<Vec<_>>>()?;
    let mut cols = Vec::with_capacity(columns.len());
    let mut fields = Vec::with_capacity(columns.len());
    for name in columns {
        let b = batches
            .iter()
            .find(|b| b.schema().index_of(name).is_ok())
            .expect("column was projected");
        let i = b.schema().index_of(name).map_err(|e| pq_err(&e))?;
        cols.push(b.column(i).clone());
        fields.push(b.schema().field(i).clone());
    }
    let n_rows = batches.first().map_or(0, |b| b.num_rows());
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(n_rows));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), cols, &options)
        .map_err(|e| pq_err(&e))
}

/// Reads one projection of a file into one batch (of the sorted distinct
/// `rows` only, when given).
fn read_projected(path: &Path, columns: &[String], rows: Option<&[u32]>) -> Result<RecordBatch> {
    let pq_err = |e: &dyn std::fmt::Display| GroupfitError::Parquet {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let builder = parquet_footer(path)?;
    let schema = builder.schema().clone();
    let indices: Vec<usize> = columns
        .iter()
        .map(|n| {
            schema
                .index_of(n)
                .map_err(|_| missing_column(n, path, &schema))
        })
        .collect::<Result<_>>()?;
    let total = builder.metadata().file_metadata().num_rows().max(0) as usize;
    let mask = ProjectionMask::roots(builder.parquet_schema(), indices.iter().copied());
    // One batch of what is read: the reader sizes its buffers by the batch,
    // so a selection's batch is the selection's rows, not the file's.
    let batch = rows.map_or(total, <[u32]>::len).max(1);
    let mut builder = builder.with_projection(mask).with_batch_size(batch);
    if let Some(rows) = rows {
        if let Some(&last) = rows.last() {
            if last as usize >= total {
                return Err(pq_err(&format!(
                    "row {last} asked for, but the file has {total} rows"
                )));
            }
        }
        builder = builder.with_row_selection(row_selection(rows, total));
    }
    let reader = builder.build().map_err(|e| pq_err(&e))?;
    let mut batches = Vec::new();
    for b in reader {
        batches.push(b.map_err(|e| pq_err(&e))?);
    }
    let projected = match batches.first() {
        Some(b) => b.schema(),
        None => Arc::new(Schema::new(
            indices
                .iter()
                .map(|&i| schema.field(i).clone())
                .collect::<Vec<_>>(),
        )),
    };
    arrow_select_concat(&projected, &batches).map_err(|e| pq_err(&e))
}

/// The selection of the sorted distinct `rows` of a file of `total` rows.
fn row_selection(rows: &[u32], total: usize) -> RowSelection {
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for &r in rows {
        let r = r as usize;
        match runs.last_mut() {
            Some(run) if run.end == r => run.end = r + 1,
            _ => runs.push(r..r + 1),
        }
    }
    RowSelection::from_consecutive_ranges(runs.into_iter(), total)
}

fn arrow_select_concat(
    schema: &Arc<Schema>,
    batches: &[RecordBatch],
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    match batches.len() {
        0 => Ok(RecordBatch::new_empty(schema.clone())),
        1 => Ok(batches[0].clone()),
        _ => arrow_select::concat::concat_batches(schema, batches),
    }
}

/// The error for a column the file does not have.
pub fn missing_column(name: &str, path: &Path, schema: &Schema) -> GroupfitError {
    let available: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    GroupfitError::MissingColumn {
        column: name.to_string(),
        path: path.display().to_string(),
        available: available.join(", "),
    }
}

/// Whether an Arrow type can serve as a feature or target.
pub fn is_numeric(dt: &DataType) -> bool {
    dt.is_numeric() || matches!(dt, DataType::Boolean)
}

/// A numeric column read as `f64` values: Arrow's own buffer when the column
/// is `f32` or `f64` without nulls, otherwise a converted copy (nulls as NaN).
#[derive(Debug, Clone)]
pub enum Column {
    /// Borrowed `f32` values.
    F32(arrow_array::Float32Array),
    /// Borrowed `f64` values.
    F64(arrow_array::Float64Array),
    /// Converted values.
    Owned(Vec<f64>),
}

/// The values of a [`Column`] as a slice of its own type.
#[derive(Debug, Clone, Copy)]
pub enum ColumnValues<'a> {
    /// `f32` values.
    F32(&'a [f32]),
    /// `f64` values.
    F64(&'a [f64]),
}

/// Runs `$body` with `$v` bound to the column's value slice, whatever its
/// element type (`$v[i] as f64` reads a value).
#[macro_export]
macro_rules! with_values {
    ($col:expr, |$v:ident| $body:expr) => {
        match $col.values() {
            $crate::data::ColumnValues::F32($v) => $body,
            $crate::data::ColumnValues::F64($v) => $body,
        }
    };
}

impl Column {
    /// Views (or converts) an Arrow array. Non-numeric types are a
    /// [`GroupfitError::NonNumericColumn`]; with `reject_inf`, an infinite value
    /// is a [`GroupfitError::InfiniteValue`] naming the row.
    pub fn from_array(
        array: &ArrayRef,
        name: &str,
        path: &Path,
        reject_inf: bool,
    ) -> Result<Column> {
        if !is_numeric(array.data_type()) {
            return Err(GroupfitError::NonNumericColumn {
                column: name.to_string(),
                path: path.display().to_string(),
                dtype: array.data_type().to_string(),
            });
        }
        let col = match array.data_type() {
            DataType::Float32 if array.null_count() == 0 => {
                Column::F32(array.as_primitive::<Float32Type>().clone())
            }
            DataType::Float64 if array.null_count() == 0 => {
                Column::F64(array.as_primitive::<Float64Type>().clone())
            }
            _ => {
                let cast = arrow_cast::cast(array, &DataType::Float64).map_err(|e| {
                    GroupfitError::Parquet {
                        path: path.display().to_string(),
                        reason: format!("column '{name}': {e}"),
                    }
                })?;
                let prim = cast.as_primitive::<Float64Type>();
                let mut out: Vec<f64> = prim.values().to_vec();
                if let Some(nulls) = prim.nulls() {
                    for (i, v) in out.iter_mut().enumerate() {
                        if nulls.is_null(i) {
                            *v = f64::NAN;
                        }
                    }
                }
                Column::Owned(out)
            }
        };
        if reject_inf {
            // A branch-free scan per chunk (it vectorises), then the row.
            let bad = with_values!(col, |v| v.chunks(1024).enumerate().find_map(|(c, ch)| {
                if ch.iter().fold(false, |a, x| a | x.is_infinite()) {
                    ch.iter()
                        .position(|x| x.is_infinite())
                        .map(|i| c * 1024 + i)
                } else {
                    None
                }
            }));
            if let Some(row) = bad {
                return Err(GroupfitError::InfiniteValue {
                    column: name.to_string(),
                    path: path.display().to_string(),
                    row,
                });
            }
        }
        Ok(col)
    }

    /// The value slice.
    pub fn values(&self) -> ColumnValues<'_> {
        match self {
            Column::F32(a) => ColumnValues::F32(a.values()),
            Column::F64(a) => ColumnValues::F64(a.values()),
            Column::Owned(v) => ColumnValues::F64(v),
        }
    }

    /// Value `i` as `f64` (NaN for missing).
    #[inline]
    pub fn get(&self, i: usize) -> f64 {
        match self.values() {
            ColumnValues::F32(v) => v[i] as f64,
            ColumnValues::F64(v) => v[i],
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        with_values!(self, |v| v.len())
    }

    /// Whether the column is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Converts one column to `f64`, nulls as NaN (see [`Column::from_array`]).
pub fn numeric_column(
    array: &ArrayRef,
    name: &str,
    path: &Path,
    reject_inf: bool,
) -> Result<Vec<f64>> {
    Ok(match Column::from_array(array, name, path, reject_inf)? {
        Column::Owned(v) => v,
        c => with_values!(c, |v| v.iter().map(|&x| x as f64).collect()),
    })
}

/// Rows per group from each training row's group id (`group_of`), then, as
/// the last of the `n_groups + 1` entries, every row: the global model's
/// pseudo-group.
pub fn rows_per_group(group_of: &[u32], n_groups: usize) -> Vec<usize> {
    let mut counts = vec![0usize; n_groups + 1];
    for &g in group_of {
        counts[g as usize] += 1;
    }
    counts[n_groups] = group_of.len();
    counts
}

/// Positions `0..` of `keys` sorted by key (a stable counting sort), and
/// each key's range in that order: positions of key `g` are
/// `pos[starts[g]..starts[g + 1]]`, ascending. Keys are below `k`.
pub(crate) fn bucket(
    keys: impl Iterator<Item = usize> + Clone,
    k: usize,
) -> (Vec<u32>, Vec<usize>) {
    let mut starts = vec![0usize; k + 1];
    for g in keys.clone() {
        starts[g + 1] += 1;
    }
    for g in 0..k {
        starts[g + 1] += starts[g];
    }
    let mut cur = starts.clone();
    let mut pos = vec![0u32; starts[k]];
    for (i, g) in keys.enumerate() {
        pos[cur[g]] = i as u32;
        cur[g] += 1;
    }
    (pos, starts)
}

/// Rows `rows` of `columns` as column-major `f64` columns (in the order of
/// `rows`), a missing value replaced by `impute[j]` where there is one
/// (families that take NaN natively have none). Columns spread over
/// `threads` threads.
pub(crate) fn imputed_columns(
    columns: &[Column],
    rows: &[u32],
    impute: &[f64],
    threads: usize,
) -> Vec<Vec<f64>> {
    crate::util::par::par_map(columns.len(), threads, &|_| 1, &|j| {
        let fill = impute.get(j).copied().unwrap_or(f64::NAN);
        with_values!(columns[j], |v| rows
            .iter()
            .map(|&r| {
                let x: f64 = v[r as usize].into();
                if x.is_nan() {
                    fill
                } else {
                    x
                }
            })
            .collect())
    })
}

/// Training mean of each feature over `rows` (NaN skipped; 0 if none): the
/// value that replaces a missing feature.
pub fn training_means(columns: &[Column], rows: &[u32]) -> Vec<f64> {
    columns
        .iter()
        .map(|c| {
            let (s, n) = with_values!(c, |v| rows.iter().fold((0.0, 0usize), |(s, n), &r| {
                let a = v[r as usize] as f64;
                if a.is_nan() {
                    (s, n)
                } else {
                    (s + a, n + 1)
                }
            }));
            if n > 0 {
                s / n as f64
            } else {
                0.0
            }
        })
        .collect()
}

/// The default feature list: every numeric column that is neither a key nor the target.
pub fn default_features(schema: &Schema, keys: &[String], target: Option<&str>) -> Vec<String> {
    schema
        .fields()
        .iter()
        .filter(|f| is_numeric(f.data_type()))
        .map(|f| f.name().clone())
        .filter(|n| !keys.contains(n) && Some(n.as_str()) != target)
        .collect()
}

/// Deterministic pseudo-random number in [0, 1) for row `i` under `seed`
/// (SplitMix64), used for the validation split so that it does not depend on
/// threads or on the order of work.
pub fn row_uniform(seed: u64, i: u64) -> f64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i)
        .wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};

    #[test]
    fn rows_per_group_counts_every_row_again_for_the_global_model() {
        // groups 2, 0, 2, 2 of 3 (group 1 has no row)
        assert_eq!(rows_per_group(&[2, 0, 2, 2], 3), vec![1, 0, 3, 4]);
        assert_eq!(rows_per_group(&[], 2), vec![0, 0, 0]);
    }

    #[test]
    fn read_parquet_rows_takes_rows_in_the_order_asked_across_row_groups() {
        use arrow_array::Float32Array;
        use parquet::arrow::ArrowWriter;
        use parquet::file::properties::WriterProperties;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let a: ArrayRef = Arc::new(Int64Array::from_iter_values(0..10));
        let b: ArrayRef = Arc::new(Float32Array::from_iter_values(
            (0..10).map(|i| i as f32 * 0.5),
        ));
        let batch = RecordBatch::try_from_iter([("a", a), ("b", b)]).unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(3))
            .build();
        let mut w = ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), Some(props))
            .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let cols = vec!["b".to_string(), "a".to_string()];
        for threads in [1, 2] {
            let got = read_parquet_rows(&path, &cols, &[7, 2, 2, 9, 0], threads).unwrap();
            assert_eq!(got.schema().field(0).name(), "b");
            let a: Vec<i64> = got
                .column(1)
                .as_primitive::<arrow_array::types::Int64Type>()
                .values()
                .to_vec();
            assert_eq!(a, vec![7, 2, 2, 9, 0]);
            let b: Vec<f32> = got
                .column(0)
                .as_primitive::<Float32Type>()
                .values()
                .to_vec();
            assert_eq!(b, vec![3.5, 1.0, 1.0, 4.5, 0.0]);
        }
        // Sorted distinct rows come back as they are; no rows is an empty batch.
        let got = read_parquet_rows(&path, &cols, &[1, 4, 5], 1).unwrap();
        assert_eq!(got.num_rows(), 3);
        assert_eq!(
            read_parquet_rows(&path, &cols, &[], 1).unwrap().num_rows(),
            0
        );
        let e = read_parquet_rows(&path, &cols, &[3, 10], 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("row 10 asked for, but the file has 10 rows"),
            "{e}"
        );
        assert!(e.contains("t.parquet"), "{e}");
    }

    #[test]
    fn numeric_column_casts_and_maps_nulls_to_nan() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(3), None, Some(-1)]));
        let v = numeric_column(&a, "x", Path::new("f.parquet"), true).unwrap();
        assert_eq!(v[0], 3.0);
        assert!(v[1].is_nan());
        assert_eq!(v[2], -1.0);
    }

    #[test]
    fn numeric_column_rejects_strings_naming_the_column() {
        let a: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        let e = numeric_column(&a, "carrier", Path::new("f.parquet"), true).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("'carrier'") && msg.contains("not numeric"),
            "{msg}"
        );
    }

    #[test]
    fn numeric_column_rejects_infinity_with_row() {
        let a: ArrayRef = Arc::new(arrow_array::Float64Array::from(vec![1.0, f64::INFINITY]));
        let e = numeric_column(&a, "f3", Path::new("f.parquet"), true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "column 'f3' in 'f.parquet' has an infinite value at row 1"
        );
    }

    #[test]
    fn row_uniform_is_deterministic_and_spread() {
        assert_eq!(row_uniform(1, 5), row_uniform(1, 5));
        assert_ne!(row_uniform(1, 5), row_uniform(2, 5));
        let n = 10_000;
        let below = (0..n).filter(|&i| row_uniform(0, i) < 0.2).count();
        assert!((1800..2200).contains(&below), "{below}");
    }
}
