//! `groupfit._native`: the PyO3 bindings of the groupfit engine.
//!
//! All PyO3 code of the project lives in this crate. Tables cross the
//! boundary through the Arrow C data interface (`__arrow_c_stream__`, via
//! `arrow-pyarrow`), so no row is touched by Python. Engine errors become the
//! exception classes of `groupfit.exceptions` (created here, re-exported
//! there) with the engine's one-line message, the same text the CLI prints
//! after `error: `.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::ffi_stream::RecordBatchStreamReader;
use arrow_array::{
    ArrayRef, Float64Array, RecordBatch, RecordBatchReader, StringArray, UInt64Array,
};
use arrow_pyarrow::{PyArrowType, ToPyArrow};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use groupfit::data::keys::display_key;
use groupfit::data::Task;
use groupfit::error::GroupfitError as EngineError;
use groupfit::job;
use groupfit::report::Report;
use groupfit::store::{GroupEntry, GroupPool, KeyIndex, ModelBundle};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

mod remote;
mod training;

create_exception!(
    _native,
    GroupfitError,
    PyException,
    "Base class of every groupfit engine error."
);
create_exception!(groupfit.exceptions, DataError, GroupfitError, "The input data cannot be used (missing or non-numeric column, infinite value, no usable rows, bad target).");
create_exception!(
    _native,
    MissingColumnError,
    DataError,
    "A named column is not in the table or file."
);
create_exception!(
    _native,
    NonNumericColumnError,
    DataError,
    "A feature or target column is not numeric."
);
create_exception!(
    _native,
    ColumnTypeError,
    DataError,
    "A column's type differs from the training column's (numbers where text was, or the reverse)."
);
create_exception!(
    _native,
    TooManyCategoriesError,
    DataError,
    "A categorical column has more distinct values than max_categories allows."
);
create_exception!(
    _native,
    InfiniteValueError,
    DataError,
    "A feature or target holds +/- infinity."
);
create_exception!(
    groupfit.exceptions,
    EmptyInputError,
    DataError,
    "No usable rows."
);
create_exception!(
    _native,
    TargetError,
    DataError,
    "A binary target holds a value other than 0/1, or one class only."
);
create_exception!(
    _native,
    NoModelError,
    DataError,
    "Rows to predict whose group has no model (no model of its own, and the model was trained without a global model)."
);
create_exception!(
    _native,
    ParamError,
    GroupfitError,
    "An invalid hyper-parameter or grid."
);
create_exception!(
    _native,
    ArgumentError,
    GroupfitError,
    "An invalid or conflicting argument."
);
create_exception!(
    _native,
    ModelFileError,
    GroupfitError,
    "A model file is corrupt, truncated or of an unsupported format version."
);
create_exception!(
    _native,
    FileError,
    GroupfitError,
    "A file cannot be read or written, or is not readable Parquet or CSV."
);
create_exception!(
    _native,
    MemoryLimitError,
    GroupfitError,
    "A training job's estimated peak memory is more than the memory available or max_memory; nothing was read past the keys and the target."
);
create_exception!(
    _native,
    RunnerError,
    GroupfitError,
    "A distributed runner failed (a worker failed repeatedly, or a protocol error)."
);

/// Maps an engine error to its Python exception class, message unchanged.
pub(crate) fn to_py(e: EngineError) -> PyErr {
    let msg = e.to_string();
    match e {
        EngineError::Io { .. } | EngineError::Parquet { .. } | EngineError::Csv { .. } => {
            FileError::new_err(msg)
        }
        EngineError::MissingColumn { .. } => MissingColumnError::new_err(msg),
        EngineError::NonNumericColumn { .. } => NonNumericColumnError::new_err(msg),
        EngineError::InfiniteValue { .. } => InfiniteValueError::new_err(msg),
        EngineError::ColumnType { .. } => ColumnTypeError::new_err(msg),
        EngineError::TooManyCategories { .. } => TooManyCategoriesError::new_err(msg),
        EngineError::EmptyInput { .. } => EmptyInputError::new_err(msg),
        EngineError::BadBinaryTarget { .. } | EngineError::SingleClass { .. } => {
            TargetError::new_err(msg)
        }
        EngineError::NoModel { .. } => NoModelError::new_err(msg),
        EngineError::InvalidParam { .. } => ParamError::new_err(msg),
        EngineError::InvalidArgument { .. } => ArgumentError::new_err(msg),
        EngineError::CorruptModel { .. } | EngineError::UnsupportedVersion { .. } => {
            ModelFileError::new_err(msg)
        }
        EngineError::MemoryLimit { .. } => MemoryLimitError::new_err(msg),
    }
}

fn arrow_err(e: ArrowError) -> PyErr {
    ArgumentError::new_err(format!("cannot read the Arrow table: {e}"))
}

/// Training or prediction input: a Parquet or CSV path, or an Arrow stream
/// (any object with `__arrow_c_stream__`: pyarrow Table, polars DataFrame, ...).
#[derive(FromPyObject)]
pub(crate) enum Input {
    /// A Parquet or CSV file.
    Path(PathBuf),
    /// An Arrow table.
    Table(PyArrowType<RecordBatchStreamReader>),
}

/// Reads an Arrow stream into one batch (columns concatenated, buffers shared when there is one chunk).
pub(crate) fn collect(reader: RecordBatchStreamReader) -> PyResult<RecordBatch> {
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().map_err(arrow_err)?;
    match batches.len() {
        1 => Ok(batches.into_iter().next().unwrap()),
        _ => arrow_select::concat::concat_batches(&schema, &batches).map_err(arrow_err),
    }
}

/// Label of in-memory training data in messages.
pub(crate) const TABLE: &str = "<table>";

/// A training or prediction source after conversion from Python.
pub(crate) enum Source {
    Path(PathBuf),
    Batch(RecordBatch),
}

impl Source {
    pub(crate) fn from_input(i: Input) -> PyResult<Source> {
        Ok(match i {
            Input::Path(p) => Source::Path(p),
            Input::Table(t) => Source::Batch(collect(t.0)?),
        })
    }

    /// The source as one batch (a path is read whole).
    pub(crate) fn batch(&self, _label: &std::path::Path) -> Result<RecordBatch, EngineError> {
        match self {
            Source::Batch(b) => Ok(b.clone()),
            Source::Path(p) => {
                let schema = groupfit::data::table_schema(p)?;
                let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
                groupfit::data::read_table(p, &names, groupfit::util::par::resolve_threads(0))
            }
        }
    }
}

/// A trained model bundle: every group's chosen model, the global model and the summary.
#[pyclass(module = "groupfit._native", frozen)]
pub struct Bundle {
    pub(crate) inner: ModelBundle,
    /// The index of group keys, built by the first prediction and kept for
    /// the next ones.
    index: std::sync::OnceLock<KeyIndex>,
}

impl Bundle {
    pub(crate) fn new(inner: ModelBundle) -> Bundle {
        Bundle {
            inner,
            index: std::sync::OnceLock::new(),
        }
    }

    fn index(&self) -> &KeyIndex {
        self.index.get_or_init(|| self.inner.key_index())
    }
}

#[pymethods]
impl Bundle {
    /// Loads a model file written by `save` or the CLI.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Bundle> {
        Ok(Bundle::new(ModelBundle::load(&path).map_err(to_py)?))
    }

    /// Parses the bytes of a model file (`name` only appears in errors).
    #[staticmethod]
    #[pyo3(signature = (data, name="<bytes>".to_string()))]
    fn from_bytes(data: &[u8], name: String) -> PyResult<Bundle> {
        Ok(Bundle::new(
            ModelBundle::from_bytes(data, std::path::Path::new(&name)).map_err(to_py)?,
        ))
    }

    /// The model file's bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.inner.to_bytes().map_err(to_py)?;
        Ok(PyBytes::new(py, &b))
    }

    /// Writes the model file atomically.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.save(&path)).map_err(to_py)
    }

    /// The training summary as JSON (`groupfit train --json`).
    fn summary_json(&self) -> String {
        serde_json::to_string(&self.inner.summary).expect("summary serialises")
    }

    /// The key column names.
    #[getter]
    fn key_columns(&self) -> Vec<String> {
        self.inner.key_columns.clone()
    }

    /// The feature column names, in model order.
    #[getter]
    fn features(&self) -> Vec<String> {
        self.inner.features.clone()
    }

    /// The target column name.
    #[getter]
    fn target(&self) -> String {
        self.inner.target.clone()
    }

    /// `binary` or `regression`.
    #[getter]
    fn task(&self) -> &'static str {
        self.inner.task.name()
    }

    /// Predictions for `data` (path or Arrow): a pyarrow RecordBatch with the
    /// key columns, `prediction` and, with `with_route`, `route`.
    #[pyo3(signature = (data, with_route=false))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        data: Input,
        with_route: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let source = Source::from_input(data)?;
        let (batch, _report) = py
            .detach(|| match &source {
                Source::Path(p) => job::read_for(&self.inner, p).and_then(|b| {
                    job::predict_indexed(&self.inner, self.index(), &b, p, with_route)
                }),
                Source::Batch(b) => job::predict_indexed(
                    &self.inner,
                    self.index(),
                    b,
                    std::path::Path::new(TABLE),
                    with_route,
                ),
            })
            .map_err(to_py)?;
        batch.to_pyarrow(py)
    }

    /// The predictions of a Parquet or CSV file as an iterator of record
    /// batches (65,536 input rows each, in row order): memory is bounded by
    /// a batch, not the file.
    fn predict_batches(
        slf: Bound<'_, Self>,
        path: PathBuf,
        with_route: bool,
    ) -> PyResult<PredictBatches> {
        let batches = job::input_batches(&slf.get().inner, &path).map_err(to_py)?;
        Ok(PredictBatches {
            bundle: slf.unbind(),
            path,
            with_route,
            batches: std::sync::Mutex::new(batches),
        })
    }

    /// Writes the HTML report of the model to `out` atomically; with
    /// `valid` (path or Arrow), the scores on its rows too. Returns what
    /// was written, as JSON.
    #[pyo3(signature = (out, valid=None, name="model".to_string()))]
    fn report(
        &self,
        py: Python<'_>,
        out: PathBuf,
        valid: Option<Input>,
        name: String,
    ) -> PyResult<String> {
        let valid = valid.map(Source::from_input).transpose()?;
        let info = py
            .detach(|| {
                let report = Report::new(&self.inner, name);
                let report = match &valid {
                    None => report,
                    Some(Source::Path(p)) => report.with_valid(p, 0)?,
                    Some(Source::Batch(b)) => {
                        report.with_valid_batch(b, std::path::Path::new("the valid table"), 0)?
                    }
                };
                report.write(&out)
            })
            .map_err(to_py)?;
        Ok(serde_json::to_string(&info).expect("report info serialises"))
    }

    /// The report's compact view, for notebooks.
    fn report_inline(&self, name: String) -> PyResult<String> {
        Report::new(&self.inner, name).inline_html().map_err(to_py)
    }

    /// One row per group: key columns (as strings, null for a null key part),
    /// `rows` (training), `valid_rows`, `config` (chosen, null when the group
    /// uses the global model), the validation metrics of the model that serves
    /// the group, `route` (`own` / `global`) and `fallback` (the reason, or null).
    fn scores<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        scores_batch(&self.inner).map_err(arrow_err)?.to_pyarrow(py)
    }
}

/// One row per group: the finest groups, then (with `--hierarchy`) each
/// level's, coarsest first, their finer key columns null. A bundle with
/// levels or pooling adds `level`, `weight` (the own model's in the blend)
/// and `parent`.
fn scores_batch(b: &ModelBundle) -> Result<RecordBatch, ArrowError> {
    let pooled = !b.levels.is_empty() || b.pooling.is_some();
    let pools = b.pool_info();
    let depths: Vec<usize> = std::iter::once(b.depth()).chain(1..b.depth()).collect();
    let rows: Vec<(&GroupEntry, &GroupPool)> = depths
        .iter()
        .flat_map(|&d| b.entries(d).iter().zip(&pools[d - 1]))
        .collect();
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for (j, name) in b.key_columns.iter().enumerate() {
        fields.push(Field::new(name, DataType::Utf8, true));
        cols.push(Arc::new(StringArray::from_iter(
            rows.iter().map(|(g, _)| g.key.get(j).cloned().flatten()),
        )));
    }
    if pooled {
        fields.push(Field::new("level", DataType::Utf8, false));
        cols.push(Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(_, p)| p.level.clone()),
        )));
    }
    fields.push(Field::new("rows", DataType::UInt64, false));
    cols.push(Arc::new(UInt64Array::from_iter_values(
        rows.iter().map(|(g, _)| g.n_train as u64),
    )));
    fields.push(Field::new("valid_rows", DataType::UInt64, false));
    cols.push(Arc::new(UInt64Array::from_iter_values(
        rows.iter().map(|(g, _)| g.n_valid as u64),
    )));
    fields.push(Field::new("config", DataType::Utf8, true));
    cols.push(Arc::new(StringArray::from_iter(
        rows.iter()
            .map(|(g, _)| g.config.map(|k| b.configs[k].name.clone())),
    )));
    let metrics: &[(&str, fn(&groupfit::store::Scores) -> Option<f64>)] = match b.task {
        Task::Binary => &[("valid_logloss", |s| s.logloss), ("valid_auc", |s| s.auc)],
        Task::Regression => &[("valid_rmse", |s| s.rmse)],
    };
    for (name, get) in metrics {
        fields.push(Field::new(*name, DataType::Float64, true));
        cols.push(Arc::new(Float64Array::from_iter(
            rows.iter().map(|(g, _)| get(&g.valid)),
        )));
    }
    fields.push(Field::new("route", DataType::Utf8, false));
    cols.push(Arc::new(StringArray::from_iter_values(
        rows.iter().map(|(g, _)| g.route.name()),
    )));
    fields.push(Field::new("fallback", DataType::Utf8, true));
    cols.push(Arc::new(StringArray::from_iter(
        rows.iter().map(|(g, _)| g.fallback.clone()),
    )));
    if pooled {
        fields.push(Field::new("weight", DataType::Float64, true));
        cols.push(Arc::new(Float64Array::from_iter(
            rows.iter().map(|(_, p)| p.weight),
        )));
        fields.push(Field::new("parent", DataType::Utf8, false));
        cols.push(Arc::new(StringArray::from_iter_values(rows.iter().map(
            |(_, p)| p.parent.as_deref().map_or("global".into(), display_key),
        ))));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
}

/// What `Bundle.predict_batches` returns: each `next` reads a batch of the
/// file and predicts it, with the GIL released.
#[pyclass(module = "groupfit._native")]
pub struct PredictBatches {
    bundle: Py<Bundle>,
    path: PathBuf,
    with_route: bool,
    batches: std::sync::Mutex<groupfit::data::Batches>,
}

#[pymethods]
impl PredictBatches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let bundle = self.bundle.get();
        let next = py.detach(|| {
            let batch = self.batches.lock().unwrap().next()?;
            Some(batch.and_then(|b| {
                job::predict_indexed(
                    &bundle.inner,
                    bundle.index(),
                    &b,
                    &self.path,
                    self.with_route,
                )
            }))
        });
        match next {
            None => Ok(None),
            Some(out) => Ok(Some(out.map_err(to_py)?.0.to_pyarrow(py)?)),
        }
    }
}

/// The engine's version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Model families the engine knows.
#[pyfunction]
fn models() -> Vec<String> {
    groupfit::registry::MODELS
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(training::train, m)?)?;
    m.add_function(wrap_pyfunction!(training::explain, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(models, m)?)?;
    m.add_class::<Bundle>()?;
    m.add_class::<PredictBatches>()?;
    m.add_class::<remote::WorkerSession>()?;
    m.add_class::<remote::Coordinator>()?;
    m.add_function(wrap_pyfunction!(remote::fit_whole, m)?)?;
    m.add("GroupfitError", py.get_type::<GroupfitError>())?;
    m.add("DataError", py.get_type::<DataError>())?;
    m.add("MissingColumnError", py.get_type::<MissingColumnError>())?;
    m.add(
        "NonNumericColumnError",
        py.get_type::<NonNumericColumnError>(),
    )?;
    m.add("InfiniteValueError", py.get_type::<InfiniteValueError>())?;
    m.add("ColumnTypeError", py.get_type::<ColumnTypeError>())?;
    m.add(
        "TooManyCategoriesError",
        py.get_type::<TooManyCategoriesError>(),
    )?;
    m.add("EmptyInputError", py.get_type::<EmptyInputError>())?;
    m.add("TargetError", py.get_type::<TargetError>())?;
    m.add("NoModelError", py.get_type::<NoModelError>())?;
    m.add("ParamError", py.get_type::<ParamError>())?;
    m.add("ArgumentError", py.get_type::<ArgumentError>())?;
    m.add("ModelFileError", py.get_type::<ModelFileError>())?;
    m.add("MemoryLimitError", py.get_type::<MemoryLimitError>())?;
    m.add("FileError", py.get_type::<FileError>())?;
    m.add("RunnerError", py.get_type::<RunnerError>())?;
    Ok(())
}
