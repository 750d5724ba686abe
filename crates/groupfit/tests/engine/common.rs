//! Deterministic synthetic data, training runs and model comparisons shared
//! by the family modules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float32Array, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use groupfit::data::Task;
use groupfit::job::{predict_batch, train, write_parquet, Progress, TrainOutput, TrainSpec};
use groupfit::linear::LinearModel;
use groupfit::plan::Strategy;
use groupfit::store::{FittedModel, ModelBundle};

// ---------------------------------------------------------------------------
// Deterministic synthetic data
// ---------------------------------------------------------------------------

/// SplitMix64: a small deterministic generator (no RNG crate needed).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// Uniform index in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize
    }
}

/// A table: string key `g`, `Float32` features `f0..`, `Float64` target `y`.
#[derive(Debug, Clone)]
pub struct Table {
    pub keys: Vec<String>,
    pub x: Vec<Vec<f32>>,
    pub y: Vec<f64>,
}

impl Table {
    /// Rows of groups with the given sizes (keys `g00000`, `g00001`, ...), each
    /// group with its own coefficients and its own feature location and
    /// scale; rows of different groups are interleaved.
    pub fn synth(sizes: &[usize], d: usize, task: Task, seed: u64) -> Table {
        let mut rng = Rng::new(seed);
        let mut rows: Vec<(usize, Vec<f32>, f64)> = Vec::new();
        for (g, &n) in sizes.iter().enumerate() {
            let w: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
            let b = 0.5 * rng.normal();
            let mu: Vec<f64> = (0..d).map(|_| rng.range(-2.0, 2.0)).collect();
            let s: Vec<f64> = (0..d).map(|_| rng.range(0.5, 3.0)).collect();
            let first = rows.len();
            for _ in 0..n {
                let z: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
                let x: Vec<f32> = (0..d).map(|j| (mu[j] + s[j] * z[j]) as f32).collect();
                let margin = b + w.iter().zip(&z).map(|(a, b)| a * b).sum::<f64>();
                let y = match task {
                    Task::Regression => margin + 0.5 * rng.normal(),
                    Task::Binary => f64::from(u8::from(rng.unit() < 1.0 / (1.0 + (-margin).exp()))),
                };
                rows.push((g, x, y));
            }
            if task == Task::Binary && n >= 2 {
                // Every binary group gets both classes.
                rows[first].2 = 0.0;
                rows[first + 1].2 = 1.0;
            }
        }
        // Interleave the groups (Fisher-Yates).
        for i in (1..rows.len()).rev() {
            let j = rng.below(i + 1);
            rows.swap(i, j);
        }
        let mut t = Table {
            keys: Vec::with_capacity(rows.len()),
            x: vec![Vec::with_capacity(rows.len()); d],
            y: Vec::with_capacity(rows.len()),
        };
        for (g, x, y) in rows {
            t.keys.push(format!("g{g:05}"));
            for (col, v) in t.x.iter_mut().zip(x) {
                col.push(v);
            }
            t.y.push(y);
        }
        t
    }

    /// The rows of one group, in their original order.
    pub fn only(&self, key: &str) -> Table {
        let idx: Vec<usize> = (0..self.y.len()).filter(|&i| self.keys[i] == key).collect();
        Table {
            keys: idx.iter().map(|&i| self.keys[i].clone()).collect(),
            x: self
                .x
                .iter()
                .map(|c| idx.iter().map(|&i| c[i]).collect())
                .collect(),
            y: idx.iter().map(|&i| self.y[i]).collect(),
        }
    }

    pub fn batch(&self) -> RecordBatch {
        let mut fields = vec![Field::new("g", DataType::Utf8, false)];
        let mut cols: Vec<ArrayRef> = vec![Arc::new(StringArray::from(self.keys.clone()))];
        for (j, c) in self.x.iter().enumerate() {
            fields.push(Field::new(format!("f{j}"), DataType::Float32, false));
            cols.push(Arc::new(Float32Array::from(c.clone())));
        }
        fields.push(Field::new("y", DataType::Float64, false));
        cols.push(Arc::new(Float64Array::from(self.y.clone())));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
    }

    pub fn write(&self, path: &Path) -> PathBuf {
        write_parquet(path, &self.batch()).unwrap();
        path.to_path_buf()
    }
}

// ---------------------------------------------------------------------------
// Training and comparing
// ---------------------------------------------------------------------------

/// Solver settings far below the comparison tolerance.
pub const TIGHT: &[&str] = &["tol=1e-10", "max_iter=200"];

pub struct Run<'a> {
    pub task: Task,
    pub strategy: Strategy,
    pub threads: usize,
    pub min_rows: usize,
    pub params: &'a [&'a str],
    pub valid_fraction: f64,
}

impl Default for Run<'_> {
    fn default() -> Self {
        Run {
            task: Task::Regression,
            strategy: Strategy::Auto,
            threads: 2,
            min_rows: 1,
            params: TIGHT,
            valid_fraction: 0.0,
        }
    }
}

pub fn fit(path: &Path, r: &Run) -> TrainOutput {
    let spec = TrainSpec {
        params: r.params.iter().map(|s| s.to_string()).collect(),
        strategy: r.strategy,
        threads: r.threads,
        valid_fraction: r.valid_fraction,
        min_rows: r.min_rows,
        task: Some(r.task),
        ..TrainSpec::new(path, vec!["g".into()], "y")
    };
    let out = train(&spec, &mut |_e: Progress| {}).unwrap();
    assert_eq!(out.summary.not_converged, 0, "every unit converges");
    if r.strategy != Strategy::Auto {
        assert_eq!(out.summary.strategy, r.strategy.name());
    }
    assert_eq!(out.summary.threads, r.threads);
    out
}

/// Checks a run's `cut_groups` (the most groups one plan cut over two or
/// more workers): one thread and tp never cut; dp on 2+ threads cuts every
/// group of more than one aligned block. So a planner that stopped cutting
/// fails the strategy-agreement tests instead of passing them trivially.
/// Whether fused, hybrid or auto cut a group is priced from a pilot timed on
/// this run, so it varies with the machine's load: nothing is asserted (the
/// planner's unit tests check their cuts on fixed costs).
pub fn assert_cuts(strategy: Strategy, threads: usize, cut_groups: usize, what: &str) {
    if threads == 1 || strategy == Strategy::Tp {
        assert_eq!(cut_groups, 0, "{what}: a group was cut");
    } else if strategy == Strategy::Dp {
        assert!(cut_groups >= 1, "{what}: the plan cut no group");
    }
}

pub fn linear(m: &FittedModel) -> &LinearModel {
    match m {
        FittedModel::Linear(l) => l,
        other => panic!("not a linear model: {other:?}"),
    }
}

/// Every own model by displayed key, plus the global model as `<global>`.
pub fn models(b: &ModelBundle) -> BTreeMap<String, LinearModel> {
    let mut out: BTreeMap<String, LinearModel> = b
        .groups
        .iter()
        .filter_map(|g| {
            g.model
                .as_ref()
                .map(|m| (g.key[0].clone().unwrap(), linear(m).clone()))
        })
        .collect();
    out.insert(
        "<global>".into(),
        linear(&b.global.as_ref().unwrap().model).clone(),
    );
    out
}

/// `|a - b| <= rel * max(|a|, |b|)`, with a tiny absolute floor for entries
/// that are zero up to rounding.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()) + 1e-9
}

pub fn assert_models_close(a: &LinearModel, b: &LinearModel, rel: f64, what: &str) {
    assert_eq!(a.coef.len(), b.coef.len(), "{what}: feature count");
    for (j, (x, y)) in a.coef.iter().zip(&b.coef).enumerate() {
        assert!(close(*x, *y, rel), "{what}: coef[{j}] {x} vs {y}");
    }
    assert!(
        close(a.intercept, b.intercept, rel),
        "{what}: intercept {} vs {}",
        a.intercept,
        b.intercept
    );
}

pub fn assert_bundles_close(a: &ModelBundle, b: &ModelBundle, rel: f64, what: &str) {
    let (ma, mb) = (models(a), models(b));
    assert_eq!(
        ma.keys().collect::<Vec<_>>(),
        mb.keys().collect::<Vec<_>>(),
        "{what}: same groups with own models"
    );
    for (k, m) in &ma {
        assert_models_close(m, &mb[k], rel, &format!("{what}, group {k}"));
    }
    let chosen = |b: &ModelBundle| -> Vec<(String, Option<usize>)> {
        b.groups
            .iter()
            .map(|g| (g.key[0].clone().unwrap(), g.config))
            .collect()
    };
    assert_eq!(chosen(a), chosen(b), "{what}: chosen configs");
    assert_eq!(
        a.global.as_ref().unwrap().config,
        b.global.as_ref().unwrap().config,
        "{what}: global config"
    );
}

pub fn predictions(bundle: &ModelBundle, data: &Path) -> (Vec<f64>, Vec<String>) {
    let (batch, _) = predict_batch(bundle, data, true).unwrap();
    let p = batch
        .column_by_name("prediction")
        .unwrap()
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap()
        .values()
        .to_vec();
    let r = batch
        .column_by_name("route")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .iter()
        .map(|s| s.unwrap().to_string())
        .collect();
    (p, r)
}

/// The committed golden files: `tests/golden/` at the workspace root.
pub fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

/// Writes `{stem}.expected.json` beside the golden model at `model`: its
/// predictions and routes on `rows` (`GROUPFIT_BLESS=1`).
pub fn bless_expected(model: &Path, rows: &Path, expected: &Path, stem: &str, version: u32) {
    let (p, r) = predictions(&ModelBundle::load(model).unwrap(), rows);
    let rows_name = rows.file_name().unwrap().to_string_lossy();
    let json = serde_json::json!({
        "comment": format!("predictions of {stem}.gfm on {rows_name}; regenerate with GROUPFIT_BLESS=1 (see README.md)"),
        "format_version": version,
        "predictions": p,
        "routes": r,
    });
    std::fs::write(
        expected,
        serde_json::to_string_pretty(&json).unwrap() + "\n",
    )
    .unwrap();
    eprintln!(
        "blessed {stem} golden files in {}",
        model.parent().unwrap().display()
    );
}

/// Loads the committed golden model `stem` at `path`.
pub fn load_golden(path: &Path, stem: &str) -> ModelBundle {
    ModelBundle::load(path).unwrap_or_else(|e| {
        panic!(
            "the committed golden model {stem} no longer loads: {e}\n(see tests/golden/README.md)"
        )
    })
}

/// Checks `bundle`'s predictions (to 1e-12) and routes on `rows` against
/// the golden `expected` file; returns the routes.
pub fn check_expected(
    bundle: &ModelBundle,
    rows: &Path,
    expected: &Path,
    stem: &str,
) -> Vec<String> {
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(expected).unwrap()).unwrap();
    let want: Vec<f64> = expected["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let want_routes: Vec<String> = expected["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let (got, routes) = predictions(bundle, rows);
    assert_eq!(routes, want_routes, "{stem} routes");
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12,
            "{stem} row {i}: predicted {g}, golden {w} (see tests/golden/README.md)"
        );
    }
    routes
}
