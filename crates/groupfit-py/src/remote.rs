//! Bindings of `groupfit::remote` for the Ray runner: the worker session
//! an actor holds, the driver's coordinator, and [`RemoteFamily`], the family
//! `job::train_*_with` calls when `runner="ray"`: it cuts the prepared data
//! into shards and hands them to the Python driver (`groupfit.ray_runner`).

use std::sync::{Arc, Mutex};

use arrow_array::{Array, ArrayRef, Float32Array, Float64Array, RecordBatch, UInt32Array};
use arrow_pyarrow::{PyArrowType, ToPyArrow};
use arrow_schema::{DataType, Field, Schema};
use groupfit::data::{rows_per_group, training_means};
use groupfit::data::{Column, ColumnValues};
use groupfit::error::{GroupfitError, Result};
use groupfit::exec::{OnProgress, RunReport};
use groupfit::family::{Family, FamilyFit, TrainData};
use groupfit::plan::{Network, Strategy};
use groupfit::registry::AnyFamily;
use groupfit::remote::whole;
use groupfit::remote::{self, AnyCoordinator, AnySession};
use groupfit::shard::{Piece, ShardRows, ShardSpec};
use groupfit::store::FittedModel;
use groupfit::tune::ConfigEntry;
use groupfit::tune::ParamWords;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::{to_py, RunnerError};

/// `f64` values as little-endian bytes.
fn to_bytes<'py>(py: Python<'py>, v: &[f64]) -> Bound<'py, PyBytes> {
    let mut b = Vec::with_capacity(v.len() * 8);
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    PyBytes::new(py, &b)
}

/// `u32` values as little-endian bytes.
fn u32_bytes<'py>(py: Python<'py>, v: &[u32]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, 4 * v.len(), |b| {
        for (out, r) in b.chunks_exact_mut(4).zip(v) {
            out.copy_from_slice(&r.to_le_bytes());
        }
        Ok(())
    })
}

/// Little-endian bytes as `u32` values.
fn u32_values(b: &[u8]) -> PyResult<Vec<u32>> {
    if b.len() % 4 != 0 {
        return Err(RunnerError::new_err(
            "remote worker protocol: a row list is not a whole number of u32 values",
        ));
    }
    Ok(b.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

/// Little-endian bytes as `f64` values.
fn from_bytes(b: &[u8]) -> PyResult<Vec<f64>> {
    if b.len() % 8 != 0 {
        return Err(RunnerError::new_err(
            "remote worker protocol: a message is not a whole number of f64 values",
        ));
    }
    Ok(b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

fn spec_from_json(s: &str) -> PyResult<ShardSpec> {
    serde_json::from_str(s)
        .map_err(|e| RunnerError::new_err(format!("remote worker protocol: bad shard spec: {e}")))
}

/// A batch's `u32` column `i`, or `None` when it is not one.
fn u32s(batch: &RecordBatch, i: usize) -> Result<Vec<u32>> {
    let a = batch
        .column(i)
        .as_any()
        .downcast_ref::<UInt32Array>()
        .ok_or_else(|| GroupfitError::arg("remote worker protocol: bad row-number column"))?;
    Ok(a.values().to_vec())
}

/// A batch of `n` (a `u32` column: table rows or pieces), `y`, then the
/// features: the three, after checking the width.
fn split_batch(spec: &ShardSpec, batch: &RecordBatch) -> Result<(Vec<u32>, Vec<f64>, Vec<Column>)> {
    let label = std::path::Path::new("shard");
    if batch.num_columns() != spec.d + 2 {
        return Err(GroupfitError::arg(format!(
            "remote worker protocol: shard has {} columns, expected {}",
            batch.num_columns(),
            spec.d + 2
        )));
    }
    let y = Column::from_array(batch.column(1), "y", label, false)?;
    let target: Vec<f64> = (0..y.len()).map(|i| y.get(i)).collect();
    let columns = batch.columns()[2..]
        .iter()
        .enumerate()
        .map(|(j, a)| Column::from_array(a, &format!("f{j}"), label, false))
        .collect::<Result<Vec<_>>>()?;
    Ok((u32s(batch, 0)?, target, columns))
}

/// A worker's validation features: given in a batch, or file rows of a
/// Parquet file to read.
enum ValidColumns {
    Given(Vec<Column>),
    File(std::path::PathBuf, Vec<u32>),
}

/// Columns `names` at file rows `rows` of the Parquet file `path`; an
/// infinite feature value is an error naming its file row (with
/// `target_first`, the first column is the target, checked by the driver).
fn file_columns(
    path: &std::path::Path,
    names: &[String],
    rows: &[u32],
    threads: usize,
    target_first: bool,
) -> Result<Vec<Column>> {
    let batch = groupfit::data::read_parquet_rows(path, names, rows, threads)?;
    names
        .iter()
        .enumerate()
        .map(|(j, name)| {
            let reject_inf = !(target_first && j == 0);
            Column::from_array(batch.column(j), name, path, reject_inf)
        })
        .collect::<Result<Vec<_>>>()
        .map_err(|e| match e {
            GroupfitError::InfiniteValue { column, path, row } => GroupfitError::InfiniteValue {
                column,
                path,
                row: rows[row] as usize,
            },
            e => e,
        })
}

/// A shard's rows from its batches: `train` (`row`, `y`, features) and
/// `valid` (`piece`, `y`, features).
fn batch_rows(spec: &ShardSpec, train: &RecordBatch, valid: &RecordBatch) -> Result<ShardRows> {
    let (ids, target, columns) = split_batch(spec, train)?;
    let (valid_piece, valid_target, valid_columns) = split_batch(spec, valid)?;
    Ok(ShardRows {
        columns,
        target,
        ids,
        valid_columns,
        valid_target,
        valid_piece,
    })
}

/// One actor's session: its shard of the data and its units, for the
/// family its spec names.
#[pyclass(module = "groupfit._native", name = "WorkerSession")]
pub struct WorkerSession {
    // A lock makes the session `Sync`, so calls can release the GIL.
    inner: Mutex<Box<dyn AnySession>>,
}

#[pymethods]
impl WorkerSession {
    /// A session over the shard `spec` (JSON) whose rows are `data` (the
    /// table row numbers, the target `y` and the features, in spec order)
    /// and the validation rows `valid` (each row's piece, `y`, features).
    #[new]
    fn new(
        spec: &str,
        data: PyArrowType<RecordBatch>,
        valid: PyArrowType<RecordBatch>,
    ) -> PyResult<Self> {
        let spec = spec_from_json(spec)?;
        let rows = batch_rows(&spec, &data.0, &valid.0).map_err(to_py)?;
        Ok(WorkerSession {
            inner: Mutex::new(remote::session(spec, rows).map_err(to_py)?),
        })
    }

    /// A session over the shard `spec` (JSON) whose rows are file rows
    /// `rows` (little-endian `u32` bytes, in shard order) of the Parquet file
    /// `path`: the actor reads the target and the features itself, so the
    /// driver never holds them. An infinite feature value is an error naming
    /// the column, the file and the file row. `valid`: a batch as for a
    /// batch shard, or, from a Parquet file, a dict of its `path` and the
    /// rows' file `rows`, `piece` (`u32` bytes) and `target` (`f64` bytes).
    #[staticmethod]
    #[pyo3(signature = (spec, path, target, features, rows, valid, threads=1))]
    #[allow(clippy::too_many_arguments)]
    fn from_parquet(
        py: Python<'_>,
        spec: &str,
        path: std::path::PathBuf,
        target: String,
        features: Vec<String>,
        rows: &[u8],
        valid: &Bound<'_, PyAny>,
        threads: usize,
    ) -> PyResult<Self> {
        let spec = spec_from_json(spec)?;
        if features.len() != spec.d {
            return Err(RunnerError::new_err(format!(
                "remote worker protocol: {} feature names, expected {}",
                features.len(),
                spec.d
            )));
        }
        let rows = u32_values(rows)?;
        let threads = threads.max(1);
        // Validation rows: a batch, or where to read their features.
        let (valid_piece, valid_target, valid_file) = match valid.cast::<PyDict>() {
            Ok(d) => {
                let item = |k: &str| -> PyResult<Bound<'_, PyAny>> {
                    d.get_item(k)?.ok_or_else(|| {
                        RunnerError::new_err(format!("remote worker protocol: valid lacks '{k}'"))
                    })
                };
                let vpath: std::path::PathBuf = item("path")?.extract()?;
                let vrows = u32_values(item("rows")?.cast::<PyBytes>()?.as_bytes())?;
                let piece = u32_values(item("piece")?.cast::<PyBytes>()?.as_bytes())?;
                let target = from_bytes(item("target")?.cast::<PyBytes>()?.as_bytes())?;
                (piece, target, ValidColumns::File(vpath, vrows))
            }
            Err(_) => {
                let batch: PyArrowType<RecordBatch> = valid.extract()?;
                let (piece, target, columns) = split_batch(&spec, &batch.0).map_err(to_py)?;
                (piece, target, ValidColumns::Given(columns))
            }
        };
        let inner = py
            .detach(|| -> Result<Box<dyn AnySession>> {
                let mut names = vec![target.clone()];
                names.extend(features.iter().cloned());
                let mut cols = file_columns(&path, &names, &rows, threads, true)?;
                let y = cols.remove(0);
                let valid_columns = match valid_file {
                    ValidColumns::Given(columns) => columns,
                    ValidColumns::File(vpath, vrows) => {
                        file_columns(&vpath, &features, &vrows, threads, false)?
                    }
                };
                remote::session(
                    spec,
                    ShardRows {
                        columns: cols,
                        target: (0..y.len()).map(|i| y.get(i)).collect(),
                        ids: rows,
                        valid_columns,
                        valid_target,
                        valid_piece,
                    },
                )
            })
            .map_err(to_py)?;
        Ok(WorkerSession {
            inner: Mutex::new(inner),
        })
    }

    /// Statistics rounds before `prepare`.
    #[getter]
    fn rounds(&self) -> usize {
        self.inner.lock().unwrap().rounds()
    }

    /// This worker's statistics of round `round`, given the coordinator's
    /// reduction of the round before (empty bytes for round 0).
    fn statistics<'py>(
        &self,
        py: Python<'py>,
        round: usize,
        agreed: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let a = from_bytes(agreed)?;
        let v = py
            .detach(|| self.inner.lock().unwrap().statistics(round, &a))
            .map_err(to_py)?;
        Ok(to_bytes(py, &v))
    }

    /// Builds the layout from the last reduction (drops the raw shard).
    fn prepare(&mut self, py: Python<'_>, agreed: &[u8]) -> PyResult<()> {
        let a = from_bytes(agreed)?;
        py.detach(|| self.inner.lock().unwrap().prepare(&a))
            .map_err(to_py)
    }

    /// One pass; returns the partial statistics of shared groups (bytes).
    fn step<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = py
            .detach(|| self.inner.lock().unwrap().step())
            .map_err(to_py)?;
        Ok(to_bytes(py, &v))
    }

    /// Applies combined statistics; returns the units still active here.
    fn apply(&mut self, py: Python<'_>, combined: &[u8]) -> PyResult<usize> {
        let c = from_bytes(combined)?;
        py.detach(|| self.inner.lock().unwrap().apply(&c))
            .map_err(to_py)
    }

    /// Units still active here.
    fn active(&self) -> usize {
        self.inner.lock().unwrap().active()
    }

    /// The units' states (bytes).
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.inner.lock().unwrap().snapshot().map_err(to_py)?;
        Ok(PyBytes::new(py, &v))
    }

    /// Restores a snapshot of a session over the same shard.
    fn restore(&mut self, snapshot: &[u8]) -> PyResult<()> {
        self.inner.lock().unwrap().restore(snapshot).map_err(to_py)
    }

    /// The fitted models this worker reports (bytes).
    fn models<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.inner.lock().unwrap().models().map_err(to_py)?;
        Ok(PyBytes::new(py, &v))
    }
}

/// The driver's reductions, for the family the specs name.
#[pyclass(module = "groupfit._native", name = "Coordinator")]
pub struct Coordinator {
    inner: Mutex<Box<dyn AnyCoordinator>>,
}

fn all_bytes(parts: Vec<Vec<u8>>) -> PyResult<Vec<Vec<f64>>> {
    parts.iter().map(|b| from_bytes(b)).collect()
}

impl Coordinator {
    /// One message from every worker's (little-endian `f64` bytes), merged
    /// by `op` into the message for every worker.
    fn merge<'py>(
        &self,
        py: Python<'py>,
        parts: Vec<Vec<u8>>,
        op: impl FnOnce(&mut dyn AnyCoordinator, &[Vec<f64>]) -> Result<Vec<f64>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let parts = all_bytes(parts)?;
        let v = op(self.inner.lock().unwrap().as_mut(), &parts).map_err(to_py)?;
        Ok(to_bytes(py, &v))
    }
}

#[pymethods]
impl Coordinator {
    /// A coordinator for the workers' shard specs (JSON, in worker order).
    #[new]
    fn new(specs: Vec<String>) -> PyResult<Self> {
        let specs = specs
            .iter()
            .map(|s| spec_from_json(s))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Coordinator {
            inner: Mutex::new(remote::coordinator(specs).map_err(to_py)?),
        })
    }

    /// Statistics rounds before the passes.
    #[getter]
    fn rounds(&self) -> usize {
        self.inner.lock().unwrap().rounds()
    }

    /// Reduces the workers' statistics of the next round; returns the
    /// message for every worker.
    fn reduce<'py>(
        &mut self,
        py: Python<'py>,
        parts: Vec<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.merge(py, parts, |c, p| c.reduce(p))
    }

    /// Combines the workers' partial statistics (in worker order).
    fn combine<'py>(
        &mut self,
        py: Python<'py>,
        parts: Vec<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.merge(py, parts, |c, p| c.combine(p))
    }

    /// The values replacing a missing feature (bytes).
    fn impute<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        to_bytes(py, &self.inner.lock().unwrap().impute())
    }

    /// Passes combined so far.
    #[getter]
    fn passes(&self) -> usize {
        self.inner.lock().unwrap().passes()
    }
}

/// Fits a whole-group shard on an actor (see `remote::whole`): `spec` (JSON),
/// the `train` and `valid` batches the driver made (`g`, `y`, features), on
/// `threads` threads. Returns the `WholeFit` as JSON bytes.
#[pyfunction]
#[pyo3(signature = (spec, train, valid, threads=1))]
pub fn fit_whole<'py>(
    py: Python<'py>,
    spec: &str,
    train: PyArrowType<RecordBatch>,
    valid: PyArrowType<RecordBatch>,
    threads: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let spec: whole::WholeSpec = serde_json::from_str(spec).map_err(|e| {
        RunnerError::new_err(format!("remote worker protocol: bad shard spec: {e}"))
    })?;
    let (train, valid) = (train.0, valid.0);
    let out = py
        .detach(|| -> Result<Vec<u8>> {
            let label = std::path::Path::new("shard");
            let parts = |b: &RecordBatch| -> Result<(Vec<Option<u32>>, Vec<f64>, Vec<Column>)> {
                if b.num_columns() != spec.d + 2 {
                    return Err(GroupfitError::arg(format!(
                        "remote worker protocol: shard has {} columns, expected {}",
                        b.num_columns(),
                        spec.d + 2
                    )));
                }
                let g = b
                    .column(0)
                    .as_any()
                    .downcast_ref::<UInt32Array>()
                    .ok_or_else(|| {
                        GroupfitError::arg("remote worker protocol: bad group column")
                    })?;
                let y = Column::from_array(b.column(1), "y", label, false)?;
                let y = (0..y.len()).map(|i| y.get(i)).collect();
                let cols = b.columns()[2..]
                    .iter()
                    .enumerate()
                    .map(|(j, a)| Column::from_array(a, &format!("f{j}"), label, false))
                    .collect::<Result<Vec<_>>>()?;
                Ok((g.iter().collect(), y, cols))
            };
            let (tg, ty, tc) = parts(&train)?;
            let tg = tg
                .into_iter()
                .map(|g| {
                    g.ok_or_else(|| {
                        GroupfitError::arg("remote worker protocol: a training row has no group")
                    })
                })
                .collect::<Result<Vec<u32>>>()?;
            let (vg, vy, vc) = parts(&valid)?;
            let fit = whole::fit_whole(
                &spec,
                whole::WholeRows {
                    columns: &tc,
                    target: &ty,
                    group: &tg,
                },
                whole::WholeRows {
                    columns: &vc,
                    target: &vy,
                    group: &vg,
                },
                threads,
            )?;
            groupfit::codec::to_packed(&fit).map_err(GroupfitError::arg)
        })
        .map_err(to_py)?;
    Ok(PyBytes::new(py, &out))
}

/// A registered family fitted by a Python driver on remote workers: a
/// sharded family through the generic protocol (`remote`, groups cut
/// across workers), the others with whole groups per worker (`remote::whole`).
pub struct RemoteFamily {
    /// The registered family.
    pub inner: Box<dyn AnyFamily>,
    /// Sharded families: `driver(shards) -> dict(models=[bytes], impute=bytes, passes=int, passes_s=float)`
    /// where `shards` is a list of `(spec_json, shard)`: `shard` is a
    /// `pyarrow.RecordBatch` (target, then features) when the training data
    /// is in memory, and a dict `{path, target, features, rows}` (rows: file
    /// row numbers as little-endian `u32` bytes) when it is a Parquet file,
    /// which the actor reads itself (`WorkerSession.from_parquet`).
    /// Other families: `driver.fit_whole(shards) -> [bytes]`, `shards` a list
    /// of `(spec_json, train, valid)` record batches (`g`: local group, `y`,
    /// then the features), each result a `WholeFit` as JSON.
    pub driver: Py<PyAny>,
    /// Workers.
    pub workers: usize,
    /// The Python error that ended a fit, re-raised by the caller.
    pub error: Arc<Mutex<Option<PyErr>>>,
}

impl RemoteFamily {
    /// The network to the workers, as the driver measures it
    /// (`driver.network() -> (round trip in microseconds, bytes per second)`).
    fn network(&self) -> Result<Network> {
        let (rtt_us, bytes_per_s) = Python::attach(|py| -> PyResult<(f64, f64)> {
            self.driver.bind(py).call_method0("network")?.extract()
        })
        .map_err(|e| self.fail(e))?;
        Ok(Network {
            rtt_us,
            bytes_per_s,
        })
    }

    fn fail(&self, e: PyErr) -> GroupfitError {
        let msg = Python::attach(|py| e.value(py).to_string());
        *self.error.lock().unwrap() = Some(e);
        GroupfitError::arg(msg)
    }
}

/// What an actor gets of its shard: the rows themselves, or where to read them.
enum Shard<'a> {
    /// Target, then features.
    Batch(RecordBatch),
    /// File rows of the training file, in shard order.
    File(groupfit::family::FeatureSource<'a>, Vec<u32>),
}

/// The rows `rows` of `col`, as an Arrow array of the column's own type.
fn gather(col: &Column, rows: &[u32]) -> ArrayRef {
    match col.values() {
        ColumnValues::F32(v) => Arc::new(Float32Array::from_iter_values(
            rows.iter().map(|&r| v[r as usize]),
        )),
        ColumnValues::F64(v) => Arc::new(Float64Array::from_iter_values(
            rows.iter().map(|&r| v[r as usize]),
        )),
    }
}

/// A whole-group shard's rows as a batch: `g` (local group, null for a
/// group not in the training data), `y`, then the features.
fn whole_batch(
    columns: &[Column],
    target: &[f64],
    rows: &[u32],
    group: impl Iterator<Item = Option<u32>>,
) -> Result<RecordBatch> {
    let mut fields = vec![
        Field::new("g", DataType::UInt32, true),
        Field::new("y", DataType::Float64, false),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from_iter(group)),
        Arc::new(Float64Array::from_iter_values(
            rows.iter().map(|&r| target[r as usize]),
        )),
    ];
    for (j, c) in columns.iter().enumerate() {
        let a = gather(c, rows);
        fields.push(Field::new(format!("f{j}"), a.data_type().clone(), false));
        cols.push(a);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .map_err(|e| GroupfitError::arg(format!("cannot assemble a shard: {e}")))
}

impl RemoteFamily {
    /// Whole groups per worker (families without a remote partial step).
    fn fit_whole(
        &self,
        data: &TrainData<'_>,
        configs: &[ConfigEntry],
    ) -> Result<FamilyFit<FittedModel>> {
        let d = data.columns.len();
        let ng = data.n_groups;
        let overhead = self.inner.model_overhead_rows(configs);
        let weights: Vec<usize> = rows_per_group(data.group_of, ng)
            .into_iter()
            .map(|r| r + overhead)
            .collect();
        let placement = whole::place_whole(&weights, data.fit, self.workers);
        let impute = training_means(data.columns, data.rows);
        let mut shards = Vec::with_capacity(placement.len());
        for (groups, global) in placement {
            let mut local = vec![u32::MAX; ng];
            for (i, &g) in groups.iter().enumerate() {
                local[g] = i as u32;
            }
            let other = groups.len() as u32;
            // Table order: every row of the shard's groups, and all rows for the global model.
            let (rows, gl): (Vec<u32>, Vec<u32>) = data
                .rows
                .iter()
                .zip(data.group_of)
                .filter_map(|(&r, &g)| match local[g as usize] {
                    u32::MAX if global => Some((r, other)),
                    u32::MAX => None,
                    l => Some((r, l)),
                })
                .unzip();
            let (vrows, vgl): (Vec<u32>, Vec<Option<u32>>) = data
                .valid
                .rows
                .iter()
                .zip(data.valid.groups)
                .filter_map(|(&r, &g)| match g.map(|g| local[g as usize]) {
                    Some(u32::MAX) | None if global => Some((r, g.map(|_| other))),
                    Some(u32::MAX) | None => None,
                    Some(l) => Some((r, Some(l))),
                })
                .unzip();
            let spec = whole::WholeSpec {
                model: self.inner.name().to_string(),
                task: data.task,
                configs: configs.to_vec(),
                seed: data.seed,
                keys: groups.iter().map(|&g| data.keys[g].clone()).collect(),
                groups,
                global,
                impute: impute.clone(),
                d,
                kinds: data.kinds.to_vec(),
            };
            let train = whole_batch(data.columns, data.target, &rows, gl.into_iter().map(Some))?;
            let valid = whole_batch(
                data.valid.columns,
                data.valid.target,
                &vrows,
                vgl.into_iter(),
            )?;
            let json = serde_json::to_string(&spec).expect("spec serialises");
            shards.push((spec, json, train, valid));
        }
        let results = Python::attach(|py| -> PyResult<Vec<Vec<u8>>> {
            let list = PyList::empty(py);
            for (_, json, train, valid) in &shards {
                list.append((json.as_str(), train.to_pyarrow(py)?, valid.to_pyarrow(py)?))?;
            }
            self.driver
                .bind(py)
                .call_method1("fit_whole", (list,))?
                .extract()
        })
        .map_err(|e| self.fail(e))?;
        if results.len() != shards.len() {
            return Err(GroupfitError::arg(
                "remote worker protocol: one result per shard expected",
            ));
        }
        let mut units = vec![Vec::new(); ng + 1];
        let mut report = RunReport {
            strategy: Strategy::Tp,
            passes: 0,
            passes_s: 0.0,
            cut_groups: 0,
            group_s: Vec::new(),
        };
        let mut family_impute = Vec::new();
        for ((spec, ..), bytes) in shards.iter().zip(&results) {
            let wf: whole::WholeFit = groupfit::codec::from_packed(bytes).map_err(|e| {
                GroupfitError::arg(format!("remote worker protocol: bad result: {e}"))
            })?;
            if wf.groups.len() != spec.groups.len() || wf.global.is_empty() == spec.global {
                return Err(GroupfitError::arg(
                    "remote worker protocol: a result does not match its shard",
                ));
            }
            for (&g, us) in spec.groups.iter().zip(wf.groups) {
                units[g] = us;
            }
            if spec.global {
                units[ng] = wf.global;
            }
            family_impute = wf.impute;
            report.passes = report.passes.max(wf.passes);
            report.passes_s = report.passes_s.max(wf.passes_s);
            report.cut_groups = report.cut_groups.max(wf.cut_groups);
        }
        Ok(FamilyFit {
            units,
            impute: family_impute,
            report,
        })
    }
}

impl Family for RemoteFamily {
    type Model = FittedModel;

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn words(&self) -> &dyn ParamWords {
        self.inner.words()
    }

    fn check(&self, configs: &[ConfigEntry]) -> Result<()> {
        self.inner.check(configs)
    }

    fn features_from_file(&self, configs: &[ConfigEntry]) -> bool {
        // Whole-group shards are gathered by the driver.
        self.inner.sharded() && !self.inner.shard_needs(configs).whole_groups
    }

    fn fit(
        &self,
        data: &TrainData<'_>,
        configs: &[ConfigEntry],
        _on: &mut OnProgress<'_>,
    ) -> Result<FamilyFit<FittedModel>> {
        // Categorical features travel as codes in whole-group shards (the
        // driver read and coded them; the sharded protocol takes numbers).
        // Quantized gradients take their scale from every row of a group.
        let categorical = data.kinds.iter().any(|k| k.levels().is_some());
        if !self.inner.sharded() || categorical || self.inner.shard_needs(configs).whole_groups {
            return self.fit_whole(data, configs);
        }
        let ng = data.n_groups;
        // The planner's one-stage plan, priced with the pilot on a sample
        // and the network the driver measures.
        let t = std::time::Instant::now();
        let network = self.network()?;
        if groupfit::util::trace::trace() {
            eprintln!(
                "[groupfit]   network measured in {:.1} ms: {:.0} us round trip, {:.0} MB/s",
                t.elapsed().as_secs_f64() * 1e3,
                network.rtt_us,
                network.bytes_per_s / 1e6
            );
        }
        groupfit::remote::price::remember(network);
        let pricing =
            remote::price::price(self.inner.as_ref(), data, configs, self.workers, network)?;
        let plan = pricing.plan(data.strategy, self.workers)?;
        let mut placement = remote::pieces(&plan, &pricing.loads);
        let (order, start) = remote::group_sorted(data.rows, data.group_of, ng);
        let group_rows: Vec<usize> = pricing.loads.iter().map(|l| l.rows.len()).collect();
        // A family may need every training row in its statistics (linear,
        // mlp: the imputation values; the driver does not read the
        // features): without the global model, the groups without models
        // are placed for their statistics only.
        let needs = self.inner.shard_needs(configs);
        if needs.global_rows && !data.fit[ng] {
            remote::place_statistics_only(&mut placement, &group_rows, data.fit);
        }
        let shards = shards(
            (self.inner.name(), needs),
            data,
            configs,
            placement,
            (&order, &start),
        )?;
        drop((order, start));
        // The driver's peak is what it holds, not what the stages before held.
        groupfit::util::mem::release_freed();
        let (specs, (impute, passes, passes_s)) = self.run_driver(shards)?;
        let cut_groups = shared_groups(&specs);
        // Each worker's models are fetched and parsed in turn.
        let mut models = (0..specs.len()).map(|i| {
            Python::attach(|py| -> PyResult<Vec<u8>> {
                self.driver.bind(py).call_method1("models", (i,))?.extract()
            })
            .map_err(|e| self.fail(e))
        });
        let units = remote::coordinator(specs)?.finish(&mut models)?;
        groupfit::util::mem::release_freed();
        Ok(FamilyFit {
            units,
            impute: from_bytes(&impute).map_err(|e| self.fail(e))?,
            report: RunReport {
                strategy: plan.strategy,
                passes,
                passes_s,
                cut_groups,
                group_s: Vec::new(),
            },
        })
    }
}

/// A shard as the driver ships it: its spec, the spec as JSON, its rows
/// (or where the actor reads them), and its pieces' validation rows.
type ShippedShard<'a> = (ShardSpec, String, Shard<'a>, ValidShard<'a>);

/// What an actor gets of its pieces' validation rows.
enum ValidShard<'a> {
    /// `piece`, `y`, then the features.
    Batch(RecordBatch),
    /// The rows' pieces and targets, and their file rows of the Parquet
    /// file `path`: the actor reads the features itself.
    File {
        path: &'a std::path::Path,
        rows: Vec<u32>,
        piece: Vec<u32>,
        target: Vec<f64>,
    },
}

/// A batch of `first` (a `u32` column named `name`), the target at `rows`
/// and the features at `rows`.
fn rows_batch(
    (name, first): (&str, Vec<u32>),
    columns: &[Column],
    target: &[f64],
    rows: &[u32],
) -> Result<RecordBatch> {
    let mut fields = vec![
        Field::new(name, DataType::UInt32, false),
        Field::new("y", DataType::Float64, false),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(first)),
        Arc::new(Float64Array::from_iter_values(
            rows.iter().map(|&r| target[r as usize]),
        )),
    ];
    for (j, c) in columns.iter().enumerate() {
        let a = gather(c, rows);
        fields.push(Field::new(format!("f{j}"), a.data_type().clone(), false));
        cols.push(a);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .map_err(|e| GroupfitError::arg(format!("cannot assemble a shard: {e}")))
}

/// One shard per worker of `placement`: the rows of its pieces in
/// group-sorted order (`sorted`: the order and each group's start in it),
/// and, where the family needs them, the validation rows of its pieces'
/// groups (all of them for the global model's pieces).
fn shards<'a>(
    (model, needs): (&str, groupfit::family::ShardNeeds),
    data: &TrainData<'a>,
    configs: &[ConfigEntry],
    placement: Vec<Vec<Piece>>,
    sorted: (&[u32], &[usize]),
) -> Result<Vec<ShippedShard<'a>>> {
    let (order, start) = sorted;
    let d = data.source.map_or(data.columns.len(), |s| s.features.len());
    let ng = data.n_groups;
    // Validation rows by group.
    let mut valid_of: Vec<Vec<u32>> = vec![Vec::new(); ng];
    for (&r, g) in data.valid.rows.iter().zip(data.valid.groups) {
        if let Some(g) = g {
            valid_of[*g as usize].push(r);
        }
    }
    let mut out = Vec::with_capacity(placement.len());
    for pieces in placement {
        let keys = pieces
            .iter()
            .map(|p| data.keys.get(p.group).cloned().unwrap_or_default())
            .collect();
        let (mut vrows, mut vpiece) = (Vec::new(), Vec::new());
        for (i, p) in pieces.iter().enumerate().filter(|_| needs.validation) {
            let rows = valid_of.get(p.group).map_or(data.valid.rows, |v| &v[..]);
            vrows.extend_from_slice(rows);
            vpiece.extend(std::iter::repeat_n(i as u32, rows.len()));
        }
        // A worker reading its training rows from the file reads its
        // validation rows' features from theirs.
        let valid = match (data.source, data.valid.file) {
            (Some(_), Some(file)) => ValidShard::File {
                path: file.path,
                rows: vrows
                    .iter()
                    .map(|&r| file.file_rows.map_or(r, |f| f[r as usize]))
                    .collect(),
                piece: vpiece,
                target: vrows
                    .iter()
                    .map(|&r| data.valid.target[r as usize])
                    .collect(),
            },
            _ => ValidShard::Batch(rows_batch(
                ("piece", vpiece),
                data.valid.columns,
                data.valid.target,
                &vrows,
            )?),
        };
        let spec = ShardSpec {
            model: model.to_string(),
            task: data.task,
            d,
            kinds: data.kinds.to_vec(),
            configs: configs.to_vec(),
            seed: data.seed,
            groups: ng + 1,
            pieces,
            keys,
        };
        let global = if needs.global_in_table_order {
            data.rows
        } else {
            order
        };
        let rows = remote::shard_rows(&spec.pieces, order, start, global);
        let json = serde_json::to_string(&spec).expect("spec serialises");
        if let Some(src) = data.source {
            out.push((spec, json, Shard::File(src, rows), valid));
            continue;
        }
        let batch = rows_batch(("row", rows.clone()), data.columns, data.target, &rows)?;
        out.push((spec, json, Shard::Batch(batch), valid));
    }
    Ok(out)
}

/// Groups whose pieces lie with several workers (the placement is the
/// run's one plan).
fn shared_groups(specs: &[ShardSpec]) -> usize {
    let mut shared: Vec<usize> = specs
        .iter()
        .flat_map(|s| &s.pieces)
        .filter(|p| p.shared)
        .map(|p| p.group)
        .collect();
    shared.sort_unstable();
    shared.dedup();
    shared.len()
}

impl RemoteFamily {
    /// Hands the shards to the Python driver; returns the specs and what
    /// the driver returns. Each shard's rows are freed once they are Python objects, and those
    /// once the driver has put them in the object store.
    fn run_driver(&self, shards: Vec<ShippedShard<'_>>) -> Result<(Vec<ShardSpec>, DriverResult)> {
        let mut specs = Vec::with_capacity(shards.len());
        let result = Python::attach(|py| -> PyResult<DriverResult> {
            let list = PyList::empty(py);
            for (spec, json, shard, valid) in shards {
                specs.push(spec);
                let item = match shard {
                    Shard::Batch(batch) => batch.to_pyarrow(py)?,
                    Shard::File(src, rows) => {
                        let d = PyDict::new(py);
                        d.set_item("path", src.path)?;
                        d.set_item("target", src.target)?;
                        d.set_item("features", src.features)?;
                        d.set_item("rows", u32_bytes(py, &rows)?)?;
                        d.into_any()
                    }
                };
                let valid = match valid {
                    ValidShard::Batch(batch) => batch.to_pyarrow(py)?,
                    ValidShard::File {
                        path,
                        rows,
                        piece,
                        target,
                    } => {
                        let d = PyDict::new(py);
                        d.set_item("path", path)?;
                        d.set_item("rows", u32_bytes(py, &rows)?)?;
                        d.set_item("piece", u32_bytes(py, &piece)?)?;
                        d.set_item("target", to_bytes(py, &target))?;
                        d.into_any()
                    }
                };
                list.append((json.as_str(), item, valid))?;
            }
            let out = self.driver.bind(py).call1((list,))?;
            let out = out.cast::<PyDict>()?;
            let get = |k: &str| {
                out.get_item(k)?
                    .ok_or_else(|| RunnerError::new_err(format!("driver result lacks '{k}'")))
            };
            Ok((
                get("impute")?.extract()?,
                get("passes")?.extract()?,
                get("passes_s")?.extract()?,
            ))
        });
        Ok((specs, result.map_err(|e| self.fail(e))?))
    }
}

/// What the Python driver returns: the imputation values, the passes and
/// the seconds inside them (the models are fetched worker by worker).
type DriverResult = (Vec<u8>, usize, f64);
