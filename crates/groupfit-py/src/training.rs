//! The training job's bindings: `train` (the native runner's and the Ray
//! driver's) and `explain` (the plans, priced, nothing trained).

use std::path::PathBuf;

use groupfit::data::Task;
use groupfit::error::GroupfitError as EngineError;
use groupfit::job::{self, RemoteWorkers, TrainSpec};
use groupfit::plan::{Network, Strategy};
use groupfit::registry::{family, AnyFamily};
use groupfit::tune::shrinkage::Shrinkage;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{remote, to_py, Bundle, Input, Source, TABLE};

/// Label of in-memory validation data in messages.
const VALID_TABLE: &str = "<valid table>";

/// The option names `train` and `explain` take besides the data, keys and
/// target: the CLI's `train` options.
const OPTIONS: [&str; 17] = [
    "valid",
    "valid_fraction",
    "features",
    "categorical",
    "max_categories",
    "task",
    "model",
    "params",
    "min_rows",
    "threads",
    "seed",
    "strategy",
    "global_model",
    "hierarchy",
    "shrinkage",
    "max_memory",
    "command",
];

/// `max_memory`: bytes, or a size as people write it (`"4G"`).
#[derive(FromPyObject)]
enum Size {
    Bytes(u64),
    Text(String),
}

impl Size {
    fn bytes(self) -> PyResult<u64> {
        let bytes = match &self {
            Size::Bytes(b) => Some(*b).filter(|&b| b > 0),
            Size::Text(t) => groupfit::util::mem::parse_size(t),
        };
        bytes.ok_or_else(|| {
            let shown = match self {
                Size::Bytes(b) => b.to_string(),
                Size::Text(t) => format!("'{t}'"),
            };
            to_py(EngineError::arg(format!(
                "max_memory: cannot read {shown} as a size (bytes, or like \"4G\", \"512M\")"
            )))
        })
    }
}

/// Option `key` of `options`, or `default` when it is not given.
fn option<'py, T: FromPyObjectOwned<'py>>(
    options: Option<&Bound<'py, PyDict>>,
    key: &str,
    default: T,
) -> PyResult<T> {
    match options.map(|d| d.get_item(key)).transpose()?.flatten() {
        Some(v) => v.extract::<T>().map_err(|e| {
            let e: PyErr = e.into();
            PyTypeError::new_err(format!("{key}: {}", e.value(v.py())))
        }),
        None => Ok(default),
    }
}

/// A job read from Python: its spec and its input.
struct PyJob {
    spec: TrainSpec,
    train: Source,
    valid: Option<Source>,
}

impl PyJob {
    /// The job `function` (its name, for messages) was called with.
    fn new(
        function: &str,
        data: Input,
        by: Vec<String>,
        target: String,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyJob> {
        for key in options.iter().flat_map(|d| d.keys()) {
            let k: String = key.extract()?;
            if !OPTIONS.contains(&k.as_str()) {
                return Err(PyTypeError::new_err(format!(
                    "{function}() got an unexpected keyword argument '{k}'"
                )));
            }
        }
        let o = options;
        let task: Option<String> = option(o, "task", None)?;
        let strategy: String = option(o, "strategy", "auto".to_string())?;
        let shrinkage: Option<String> = option(o, "shrinkage", None)?;
        let max_memory: Option<Size> = option(o, "max_memory", None)?;
        let valid: Option<Input> = option(o, "valid", None)?;
        let task = task
            .as_deref()
            .map(Task::parse)
            .transpose()
            .map_err(to_py)?;
        let strategy = Strategy::parse(&strategy).map_err(to_py)?;
        let shrinkage = shrinkage
            .as_deref()
            .map(Shrinkage::parse)
            .transpose()
            .map_err(to_py)?;
        let train = Source::from_input(data)?;
        let valid = valid.map(Source::from_input).transpose()?;
        let label = |s: &Source, table: &str| match s {
            Source::Path(p) => p.clone(),
            Source::Batch(_) => PathBuf::from(table),
        };
        let spec = TrainSpec {
            valid: valid.as_ref().map(|v| label(v, VALID_TABLE)),
            valid_fraction: option(o, "valid_fraction", 0.2)?,
            features: option(o, "features", None)?,
            categorical: option(o, "categorical", None)?,
            max_categories: option(
                o,
                "max_categories",
                groupfit::data::categorical::DEFAULT_MAX_CATEGORIES,
            )?,
            task,
            model: option(o, "model", "linear".to_string())?,
            params: option(o, "params", Vec::new())?,
            min_rows: option(o, "min_rows", 10)?,
            threads: option(o, "threads", 0)?,
            seed: option(o, "seed", 0)?,
            strategy,
            global_model: option(o, "global_model", true)?,
            hierarchy: option(o, "hierarchy", false)?,
            shrinkage,
            max_memory: max_memory.map(Size::bytes).transpose()?,
            command: option(o, "command", None)?,
            ..TrainSpec::new(label(&train, TABLE), by, target)
        };
        Ok(PyJob { spec, train, valid })
    }

    /// The input as batches when any of it is in memory (`None`: files only).
    #[allow(clippy::type_complexity)]
    fn batches(
        &self,
    ) -> Result<Option<(arrow_array::RecordBatch, Option<arrow_array::RecordBatch>)>, EngineError>
    {
        if let (Source::Path(_), None | Some(Source::Path(_))) = (&self.train, &self.valid) {
            return Ok(None);
        }
        let tb = self.train.batch(self.spec.data.as_path())?;
        let vb = match &self.valid {
            Some(v) => Some(v.batch(self.spec.valid.as_deref().unwrap())?),
            None => None,
        };
        Ok(Some((tb, vb)))
    }
}

/// Trains on `data` (path or Arrow) and returns the bundle with its summary
/// (`wall_s` and the bundle's stored summary filled in as the CLI does).
/// With `remote` (the Ray runner's driver), the units are fitted by it on
/// `remote_workers` workers (see `remote::RemoteFamily`). `progress` is
/// called with `(stage, done, total, models_done, models)` as the job goes
/// (from the engine's threads, at most every 100 ms while training); the
/// first exception it raises is raised when training ends.
#[pyfunction]
#[pyo3(signature = (data, by, target, *, remote=None, remote_workers=2, progress=None, **options))]
#[allow(clippy::too_many_arguments)]
pub fn train(
    py: Python<'_>,
    data: Input,
    by: Vec<String>,
    target: String,
    remote: Option<Py<PyAny>>,
    remote_workers: usize,
    progress: Option<Py<PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Bundle> {
    let start = std::time::Instant::now();
    let job = PyJob::new("train", data, by, target, options)?;
    let remote = match remote {
        Some(driver) => Some(remote::RemoteFamily {
            inner: family(&job.spec.model).map_err(to_py)?,
            driver,
            workers: remote_workers.max(1),
            error: Default::default(),
        }),
        None => None,
    };
    let mut failed: Option<PyErr> = None;
    let mut on = |p: job::Progress| {
        let Some(cb) = &progress else {
            return;
        };
        if failed.is_some() {
            return;
        }
        let args = (p.stage.name(), p.done, p.total, p.models_done, p.models);
        if let Err(e) = Python::attach(|py| cb.call1(py, args)) {
            failed = Some(e);
        }
    };
    let out = py.detach(|| -> Result<job::TrainOutput, EngineError> {
        let registered;
        let fam: &dyn AnyFamily = match &remote {
            Some(r) => r,
            None => {
                registered = family(&job.spec.model)?;
                registered.as_ref()
            }
        };
        match job.batches()? {
            None => job::train_with(&job.spec, fam, &mut on),
            Some((tb, vb)) => job::train_table_with(&job.spec, fam, &tb, vb.as_ref(), &mut on),
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some(r) = &remote {
        if let Some(e) = r.error.lock().unwrap().take() {
            return Err(e);
        }
    }
    let mut out = out.map_err(to_py)?;
    out.summary.wall_s = start.elapsed().as_secs_f64();
    out.bundle.summary = serde_json::to_value(&out.summary).expect("summary serialises");
    Ok(Bundle::new(out.bundle))
}

/// The plans of `data`'s job, priced, nothing trained: `groupfit explain
/// --json` as a JSON string. With `network` (`(round trip in
/// microseconds, bytes per second)`, the Ray runner's measurement), the
/// one-stage plans of `remote_workers` remote workers.
#[pyfunction]
#[pyo3(signature = (data, by, target, *, network=None, remote_workers=2, **options))]
pub fn explain(
    py: Python<'_>,
    data: Input,
    by: Vec<String>,
    target: String,
    network: Option<(f64, f64)>,
    remote_workers: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let job = PyJob::new("explain", data, by, target, options)?;
    let remote = network.map(|(rtt_us, bytes_per_s)| RemoteWorkers {
        workers: remote_workers.max(1),
        network: Network {
            rtt_us,
            bytes_per_s,
        },
        source: "measured".to_string(),
    });
    let out = py
        .detach(|| match job.batches()? {
            None => job::explain_on(&job.spec, remote.as_ref()),
            Some((tb, vb)) => job::explain_table(&job.spec, &tb, vb.as_ref(), remote.as_ref()),
        })
        .map_err(to_py)?;
    Ok(serde_json::to_string(&out).expect("the plan serialises"))
}
