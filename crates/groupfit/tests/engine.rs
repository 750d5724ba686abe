//! The engine's integration tests (one test binary for the crate).
//!
//! * grouped == looped: groups trained together give the models each group
//!   gets when trained alone from its own file;
//! * every strategy and thread count gives the same models, also under a
//!   proptest over group-size distributions (one dominant group, thousands of
//!   3-row groups, ...);
//! * the model file round-trips bit for bit (serde_json with `float_roundtrip`)
//!   and damage is reported as `GroupfitError::CorruptModel`;
//! * golden files: committed model files (format v1: linear; v2: MLP,
//!   weights as base64 text; v3: GBDT; v4: MLP, weights in the binary
//!   section; v5: linear and GBDT, `f64` arrays in the binary section too)
//!   must keep loading and predicting the committed rows as recorded.
//!
//! Golden files live in `tests/golden/` at the workspace root. To (re)generate
//! the current format version's files deliberately, run
//!
//! ```text
//! GROUPFIT_BLESS=1 cargo test --release -p groupfit --test engine golden
//! ```
//!
//! which trains fresh models and overwrites the current version's files
//! (`linear_v5.*`, `gbdt_v5.*`) and `rows.parquet` instead of comparing (older versions' files are
//! frozen). Do that only when a change of the file format or of the
//! predictions is intended (see `tests/golden/README.md`): if the golden test
//! fails after a format change, either keep old files loadable or bump
//! `FORMAT_VERSION` deliberately and add files for the new version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float32Array, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use groupfit::data::Task;
use groupfit::gbdt::GbdtModel;
use groupfit::job::{predict_batch, train, write_parquet, Event, TrainOutput, TrainSpec};
use groupfit::linear::LinearModel;
use groupfit::mlp::MlpModel;
use groupfit::plan::Strategy;
use groupfit::store::{FittedModel, ModelBundle, FORMAT_VERSION};
use groupfit::GroupfitError;
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Deterministic synthetic data
// ---------------------------------------------------------------------------

/// SplitMix64: a small deterministic generator (no RNG crate needed).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// Uniform index in 0..n.
    fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize
    }
}

/// A table: string key `g`, `Float32` features `f0..`, `Float64` target `y`.
#[derive(Debug, Clone)]
struct Table {
    keys: Vec<String>,
    x: Vec<Vec<f32>>,
    y: Vec<f64>,
}

impl Table {
    /// Rows of groups with the given sizes (keys `g00000`, `g00001`, ...), each
    /// group with its own coefficients and its own feature location and
    /// scale; rows of different groups are interleaved.
    fn synth(sizes: &[usize], d: usize, task: Task, seed: u64) -> Table {
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
    fn only(&self, key: &str) -> Table {
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

    fn batch(&self) -> RecordBatch {
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

    fn write(&self, path: &Path) -> PathBuf {
        write_parquet(path, &self.batch()).unwrap();
        path.to_path_buf()
    }
}

// ---------------------------------------------------------------------------
// Training and comparing
// ---------------------------------------------------------------------------

/// Solver settings far below the comparison tolerance.
const TIGHT: &[&str] = &["tol=1e-10", "max_iter=200"];

struct Run<'a> {
    task: Task,
    strategy: Strategy,
    threads: usize,
    min_rows: usize,
    params: &'a [&'a str],
    valid_fraction: f64,
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

fn fit(path: &Path, r: &Run) -> TrainOutput {
    let spec = TrainSpec {
        params: r.params.iter().map(|s| s.to_string()).collect(),
        strategy: r.strategy,
        threads: r.threads,
        valid_fraction: r.valid_fraction,
        min_rows: r.min_rows,
        task: Some(r.task),
        ..TrainSpec::new(path, vec!["g".into()], "y")
    };
    let out = train(&spec, &mut |_e: Event| {}).unwrap();
    assert_eq!(out.summary.not_converged, 0, "every unit converges");
    if r.strategy != Strategy::Auto {
        assert_eq!(out.summary.strategy, r.strategy.name());
    }
    assert_eq!(out.summary.threads, r.threads);
    out
}

fn linear(m: &FittedModel) -> &LinearModel {
    match m {
        FittedModel::Linear(l) => l,
        other => panic!("not a linear model: {other:?}"),
    }
}

/// Every own model by displayed key, plus the global model as `<global>`.
fn models(b: &ModelBundle) -> BTreeMap<String, LinearModel> {
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
fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()) + 1e-9
}

fn assert_models_close(a: &LinearModel, b: &LinearModel, rel: f64, what: &str) {
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

fn assert_bundles_close(a: &ModelBundle, b: &ModelBundle, rel: f64, what: &str) {
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

// ---------------------------------------------------------------------------
// grouped == looped
// ---------------------------------------------------------------------------

fn grouped_equals_looped(task: Task) {
    let dir = tempfile::tempdir().unwrap();
    // Sizes around the 256-row block and up to several blocks.
    let sizes = [40, 97, 255, 257, 1100, 3000];
    let table = Table::synth(&sizes, 4, task, 11);
    let all = table.write(&dir.path().join("all.parquet"));
    let run = Run {
        task,
        ..Run::default()
    };
    let together = models(&fit(&all, &run).bundle);
    assert_eq!(together.len(), sizes.len() + 1);
    for (g, &size) in sizes.iter().enumerate() {
        let key = format!("g{g:05}");
        let part = table.only(&key);
        assert_eq!(part.y.len(), size);
        let alone_path = part.write(&dir.path().join(format!("{key}.parquet")));
        let alone = fit(&alone_path, &run).bundle;
        assert_eq!(alone.groups.len(), 1);
        let m = linear(alone.groups[0].model.as_ref().unwrap());
        assert_models_close(&together[&key], m, 1e-5, &format!("{task:?} group {key}"));
        // Alone, the global model is the group's model again.
        assert_models_close(
            m,
            linear(&alone.global.as_ref().unwrap().model),
            1e-5,
            &format!("{task:?} group {key} vs its global model"),
        );
    }
}

#[test]
fn grouped_equals_looped_binary() {
    grouped_equals_looped(Task::Binary);
}

#[test]
fn grouped_equals_looped_regression() {
    grouped_equals_looped(Task::Regression);
}

// ---------------------------------------------------------------------------
// strategies x threads
// ---------------------------------------------------------------------------

fn strategies_and_threads_agree(task: Task) {
    let dir = tempfile::tempdir().unwrap();
    // One group large enough to be cut by fused plans, a few mid-sized and
    // small ones; a 4-row group that falls back (min_rows 10).
    let sizes = [6000, 700, 300, 120, 40, 40, 25, 4];
    let table = Table::synth(&sizes, 4, task, 23);
    let path = table.write(&dir.path().join("t.parquet"));
    let params = ["C=0.1,1", "tol=1e-10", "max_iter=200"];
    let mut reference: Option<ModelBundle> = None;
    for strategy in [
        Strategy::Tp,
        Strategy::Dp,
        Strategy::Fused,
        Strategy::Hybrid,
        Strategy::Auto,
    ] {
        for threads in [1, 2, 3] {
            let out = fit(
                &path,
                &Run {
                    task,
                    strategy,
                    threads,
                    min_rows: 10,
                    params: &params,
                    valid_fraction: 0.2,
                },
            );
            assert_eq!(out.summary.fallback.few_rows, 1);
            let what = format!("{task:?} {} x {threads} threads", strategy.name());
            match &reference {
                None => reference = Some(out.bundle),
                Some(r) => assert_bundles_close(r, &out.bundle, 1e-5, &what),
            }
        }
    }
}

#[test]
fn strategies_and_threads_agree_binary() {
    strategies_and_threads_agree(Task::Binary);
}

#[test]
fn strategies_and_threads_agree_regression() {
    strategies_and_threads_agree(Task::Regression);
}

// ---------------------------------------------------------------------------
// MLP family: grouped == looped, strategies x threads
// ---------------------------------------------------------------------------

fn mlp(m: &FittedModel) -> &MlpModel {
    match m {
        FittedModel::Mlp(n) => n,
        other => panic!("expected an MLP, got {other:?}"),
    }
}

fn mlp_models(b: &ModelBundle) -> BTreeMap<String, MlpModel> {
    let mut out: BTreeMap<String, MlpModel> = b
        .groups
        .iter()
        .filter_map(|g| {
            g.model
                .as_ref()
                .map(|m| (g.key[0].clone().unwrap(), mlp(m).clone()))
        })
        .collect();
    out.insert(
        "<global>".into(),
        mlp(&b.global.as_ref().unwrap().model).clone(),
    );
    out
}

/// Every weight, bias, standardisation value and epoch loss within `tol`
/// (absolute, plus `tol` relative).
fn assert_mlps_close(a: &MlpModel, b: &MlpModel, tol: f64, what: &str) {
    let num = |m: &MlpModel| -> Vec<f64> {
        let mut v: Vec<f64> = m.mean.iter().chain(&m.std).copied().collect();
        for l in &m.layers {
            v.extend(l.w.iter().chain(&l.b).map(|&x| x as f64));
        }
        v.extend(&m.epoch_loss);
        v
    };
    let (x, y) = (num(a), num(b));
    assert_eq!(x.len(), y.len(), "{what}: shape");
    assert_eq!(a.epoch_loss.len(), b.epoch_loss.len(), "{what}: epochs");
    for (i, (p, q)) in x.iter().zip(&y).enumerate() {
        assert!(
            (p - q).abs() <= tol * (1.0 + p.abs().max(q.abs())),
            "{what}: number {i}: {p} vs {q}"
        );
    }
}

/// Trains the MLP family; `valid_fraction` 0 (the training file also serves
/// as validation file) when a test compares runs on different files, since
/// held-out rows are drawn by file row index.
fn mlp_run(
    task: Task,
    params: &[&str],
    strategy: Strategy,
    threads: usize,
    path: &Path,
    valid_fraction: f64,
) -> ModelBundle {
    let spec = TrainSpec {
        params: params.iter().map(|s| s.to_string()).collect(),
        model: "mlp".into(),
        strategy,
        threads,
        valid_fraction,
        valid: (valid_fraction == 0.0).then(|| path.to_path_buf()),
        min_rows: 10,
        task: Some(task),
        ..TrainSpec::new(path, vec!["g".into()], "y")
    };
    let out = train(&spec, &mut |_e: Event| {}).unwrap();
    if strategy != Strategy::Auto {
        assert_eq!(out.summary.strategy, strategy.name());
    }
    out.bundle
}

fn mlp_grouped_equals_looped(task: Task, params: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [40, 97, 300, 1100];
    let table = Table::synth(&sizes, 3, task, 5);
    let all = table.write(&dir.path().join("all.parquet"));
    let together = mlp_models(&mlp_run(task, params, Strategy::Auto, 2, &all, 0.0));
    assert_eq!(together.len(), sizes.len() + 1);
    for g in 0..sizes.len() {
        let key = format!("g{g:05}");
        let alone_path = table
            .only(&key)
            .write(&dir.path().join(format!("{key}.parquet")));
        let alone = mlp_run(task, params, Strategy::Auto, 1, &alone_path, 0.0);
        let m = mlp(alone.groups[0].model.as_ref().unwrap());
        assert_mlps_close(
            &together[&key],
            m,
            1e-5,
            &format!("{task:?} mlp group {key}"),
        );
        assert!(m.epoch_loss.iter().all(|l| l.is_finite()));
    }
}

#[test]
fn mlp_grouped_equals_looped_binary() {
    mlp_grouped_equals_looped(
        Task::Binary,
        &["hidden=8", "lr=0.01,0.001", "epochs=3", "batch_size=32"],
    );
}

#[test]
fn mlp_grouped_equals_looped_regression_two_layers_sgd() {
    mlp_grouped_equals_looped(
        Task::Regression,
        &[
            "layers=8x4",
            "optimizer=sgd,adam",
            "lr=0.01",
            "epochs=2",
            "batch_size=50",
            "weight_decay=0.01",
        ],
    );
}

fn mlp_strategies_and_threads_agree(task: Task) {
    let dir = tempfile::tempdir().unwrap();
    // One group large enough to be cut inside its batches by fused plans.
    let sizes = [3000, 700, 120, 40, 25, 4];
    let table = Table::synth(&sizes, 4, task, 29);
    let path = table.write(&dir.path().join("t.parquet"));
    let params = ["hidden=16", "lr=0.003,0.03", "epochs=3", "batch_size=128"];
    let mut reference: Option<ModelBundle> = None;
    for strategy in [
        Strategy::Tp,
        Strategy::Dp,
        Strategy::Fused,
        Strategy::Hybrid,
        Strategy::Auto,
    ] {
        for threads in [1, 2, 3] {
            let b = mlp_run(task, &params, strategy, threads, &path, 0.2);
            let what = format!("{task:?} mlp {} x {threads} threads", strategy.name());
            match &reference {
                None => reference = Some(b),
                Some(r) => {
                    let (ma, mb) = (mlp_models(r), mlp_models(&b));
                    assert_eq!(ma.keys().collect::<Vec<_>>(), mb.keys().collect::<Vec<_>>());
                    for (k, m) in &ma {
                        assert_mlps_close(m, &mb[k], 1e-4, &format!("{what}, group {k}"));
                    }
                    assert_eq!(
                        r.global.as_ref().unwrap().config,
                        b.global.as_ref().unwrap().config,
                        "{what}: global config"
                    );
                }
            }
        }
    }
}

#[test]
fn mlp_strategies_and_threads_agree_binary() {
    mlp_strategies_and_threads_agree(Task::Binary);
}

#[test]
fn mlp_strategies_and_threads_agree_regression() {
    mlp_strategies_and_threads_agree(Task::Regression);
}

#[test]
fn mlp_bundle_round_trips_and_predicts() {
    let dir = tempfile::tempdir().unwrap();
    let table = Table::synth(&[300, 200], 3, Task::Binary, 3);
    let path = table.write(&dir.path().join("t.parquet"));
    let b = mlp_run(
        Task::Binary,
        &["hidden=8", "epochs=2"],
        Strategy::Auto,
        2,
        &path,
        0.2,
    );
    let file = dir.path().join("m.gfm");
    b.save(&file).unwrap();
    let back = ModelBundle::load(&file).unwrap();
    assert_eq!(back, b);
    assert_eq!(back.family, "mlp");
    let (p, routes) = predictions(&back, &path);
    assert_eq!(p.len(), 500);
    assert!(p.iter().all(|v| (0.0..=1.0).contains(v)));
    assert!(routes.iter().all(|r| r == "own"));
}

// ---------------------------------------------------------------------------
// proptest over group-size distributions
// ---------------------------------------------------------------------------

/// Trains `sizes` (regression, so 3-row groups are fittable) with tp on one
/// thread, then with other strategies and thread counts: same models.
fn check_plans_agree(sizes: &[usize], task: Task, seed: u64) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let table = Table::synth(sizes, 3, task, seed);
    let path = table.write(&dir.path().join("t.parquet"));
    let base = Run {
        task,
        min_rows: 3,
        ..Run::default()
    };
    let reference = fit(
        &path,
        &Run {
            strategy: Strategy::Tp,
            threads: 1,
            ..base
        },
    );
    prop_assert_eq!(reference.summary.groups, sizes.len());
    prop_assert_eq!(reference.summary.routes.groups_own, sizes.len());
    for (strategy, threads) in [
        (Strategy::Tp, 3),
        (Strategy::Dp, 2),
        (Strategy::Fused, 2),
        (Strategy::Fused, 3),
        (Strategy::Hybrid, 2),
        (Strategy::Hybrid, 3),
        (Strategy::Auto, 2),
    ] {
        let out = fit(
            &path,
            &Run {
                strategy,
                threads,
                ..base
            },
        );
        assert_bundles_close(
            &reference.bundle,
            &out.bundle,
            1e-5,
            &format!(
                "{} groups, {} x {threads} threads",
                sizes.len(),
                strategy.name()
            ),
        );
    }
    Ok(())
}

/// One group holds 90 % of `total` rows, at position `at`; `others` groups
/// share the rest (at least `min` rows each).
fn dominant(total: usize, others: usize, at: prop::sample::Index, min: usize) -> Vec<usize> {
    let big = total * 9 / 10;
    let small = ((total - big) / others).max(min);
    let mut v = vec![small; others];
    v.insert(at.index(others + 1), big);
    v
}

/// Three cases per regime (12 in all), so that every run covers every regime;
/// `PROPTEST_CASES=200` explores more. Failing cases are kept in
/// `tests/engine.proptest-regressions` and replayed first.
fn proptest_config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(proptest_config())]

    /// A handful to a few dozen groups of mixed sizes.
    #[test]
    fn plans_agree_mixed_sizes(sizes in prop::collection::vec(3usize..700, 1..40), seed in any::<u64>()) {
        check_plans_agree(&sizes, Task::Regression, seed)?;
    }

    /// One group holds 90 % of the rows.
    #[test]
    fn plans_agree_one_dominant_group(
        total in 2_000usize..20_000,
        others in 1usize..30,
        at in any::<prop::sample::Index>(),
        seed in any::<u64>(),
    ) {
        check_plans_agree(&dominant(total, others, at, 3), Task::Regression, seed)?;
    }

    /// Thousands of 3-row groups.
    #[test]
    fn plans_agree_thousands_of_tiny_groups(n in 2_000usize..=5_000, seed in any::<u64>()) {
        check_plans_agree(&vec![3; n], Task::Regression, seed)?;
    }

    /// Binary, one dominant group large enough (> 96 blocks of 256 rows) for
    /// the sub-sampled Newton Hessian, cut by fused plans.
    #[test]
    fn plans_agree_binary_dominant_group(
        total in 28_000usize..40_000,
        others in 1usize..12,
        at in any::<prop::sample::Index>(),
        seed in any::<u64>(),
    ) {
        check_plans_agree(&dominant(total, others, at, 20), Task::Binary, seed)?;
    }
}

// ---------------------------------------------------------------------------
// model file round trip and damage
// ---------------------------------------------------------------------------

fn predictions(bundle: &ModelBundle, data: &Path) -> (Vec<f64>, Vec<String>) {
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

/// A trained binary bundle (own-model, fallback groups), the same bundle
/// saved and loaded again, and rows of every route to predict.
struct RoundTrip {
    dir: tempfile::TempDir,
    original: ModelBundle,
    loaded: ModelBundle,
    rows: PathBuf,
}

fn round_trip() -> RoundTrip {
    let dir = tempfile::tempdir().unwrap();
    let table = Table::synth(&[400, 150, 60, 5], 4, Task::Binary, 5);
    let path = table.write(&dir.path().join("t.parquet"));
    let out = fit(
        &path,
        &Run {
            task: Task::Binary,
            min_rows: 10,
            params: &["C=0.1,1,10"],
            valid_fraction: 0.25,
            ..Run::default()
        },
    );
    let model = dir.path().join("m.gfm");
    out.bundle.save(&model).unwrap();
    let loaded = ModelBundle::load(&model).unwrap();
    // Rows of every group plus an unseen one.
    let mut rows = Table::synth(&[30, 30, 30, 30, 30], 4, Task::Binary, 99);
    rows.keys.iter_mut().for_each(|k| {
        if k == "g00004" {
            *k = "never-seen".into();
        }
    });
    let rows = rows.write(&dir.path().join("rows.parquet"));
    RoundTrip {
        dir,
        original: out.bundle,
        loaded,
        rows,
    }
}

/// Every number a bundle predicts with: imputation values, the global model,
/// each own model (coefficients, then intercept).
fn model_numbers(b: &ModelBundle) -> Vec<f64> {
    let mut v = b.impute.clone();
    let mut push = |m: &FittedModel| {
        let m = linear(m);
        v.extend(&m.coef);
        v.push(m.intercept);
    };
    push(&b.global.as_ref().unwrap().model);
    for g in &b.groups {
        if let Some(m) = &g.model {
            push(m);
        }
    }
    v
}

/// Distance in units in the last place between two finite doubles of the same sign.
fn ulps(a: f64, b: f64) -> u64 {
    assert_eq!(a.is_sign_negative(), b.is_sign_negative(), "{a} vs {b}");
    a.to_bits().abs_diff(b.to_bits())
}

#[test]
fn model_file_round_trip() {
    let rt = round_trip();
    let (a, b) = (&rt.original, &rt.loaded);
    assert_eq!(b.format_version, FORMAT_VERSION);
    assert_eq!(a.key_columns, b.key_columns);
    assert_eq!(a.features, b.features);
    assert_eq!(a.configs, b.configs);
    assert_eq!(
        a.global.as_ref().unwrap().config,
        b.global.as_ref().unwrap().config
    );
    let routing = |x: &ModelBundle| -> Vec<_> {
        x.groups
            .iter()
            .map(|g| (g.key.clone(), g.route, g.config, g.n_train, g.n_valid))
            .collect()
    };
    assert_eq!(routing(a), routing(b));

    // Every number comes back within one unit in the last place (see
    // `model_file_round_trip_is_bitwise` for why not exactly).
    let (na, nb) = (model_numbers(a), model_numbers(b));
    assert_eq!(na.len(), nb.len());
    for (i, (x, y)) in na.iter().zip(&nb).enumerate() {
        assert!(ulps(*x, *y) <= 1, "number {i}: {x} vs {y}");
    }
    let (before, routes) = predictions(a, &rt.rows);
    let (after, routes_after) = predictions(b, &rt.rows);
    assert_eq!(routes, routes_after);
    for r in ["own", "fallback", "unseen"] {
        assert!(routes.iter().any(|x| x == r), "no {r} row");
    }
    for (i, (p, q)) in before.iter().zip(&after).enumerate() {
        assert!(
            (p - q).abs() <= 1e-14 * p.abs().max(1e-300),
            "row {i}: {p} vs {q}"
        );
    }

    // A loaded bundle saved again loads to the same numbers and predictions:
    // the drift does not accumulate over save/load cycles.
    let again = rt.dir.path().join("again.gfm");
    b.save(&again).unwrap();
    let c = ModelBundle::load(&again).unwrap();
    let nc = model_numbers(&c);
    for (i, (y, z)) in nb.iter().zip(&nc).enumerate() {
        assert_eq!(y.to_bits(), z.to_bits(), "number {i}: {y} vs {z}");
    }
    let (third, _) = predictions(&c, &rt.rows);
    for (i, (p, q)) in after.iter().zip(&third).enumerate() {
        assert_eq!(p.to_bits(), q.to_bits(), "row {i}: {p} vs {q}");
    }
}

/// Save, load: identical model numbers and predictions, bit for bit. (Without
/// serde_json's `float_roundtrip` feature about one double in eight came back
/// one unit in the last place off, e.g. `-0.00024284368427968762`.)
#[test]
fn model_file_round_trip_is_bitwise() {
    let rt = round_trip();
    let (na, nb) = (model_numbers(&rt.original), model_numbers(&rt.loaded));
    let changed: Vec<String> = na
        .iter()
        .zip(&nb)
        .filter(|(x, y)| x.to_bits() != y.to_bits())
        .map(|(x, y)| format!("{x:e} -> {y:e}"))
        .collect();
    assert!(
        changed.is_empty(),
        "{} of {} model numbers changed in a save/load round trip: {}",
        changed.len(),
        na.len(),
        changed.join(", ")
    );
    let (before, _) = predictions(&rt.original, &rt.rows);
    let (after, _) = predictions(&rt.loaded, &rt.rows);
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        assert_eq!(a.to_bits(), b.to_bits(), "row {i}: {a} vs {b}");
    }
}

#[test]
fn damaged_model_files_are_corrupt_model_errors() {
    let dir = tempfile::tempdir().unwrap();
    let table = Table::synth(&[80, 60], 2, Task::Regression, 3);
    let path = table.write(&dir.path().join("t.parquet"));
    let bytes = fit(&path, &Run::default()).bundle.to_bytes().unwrap();
    let p = dir.path().join("bad.gfm");
    let n = bytes.len();
    for cut in [0, 7, 8, 12, 23, 24, 25, n / 2, n - 1] {
        std::fs::write(&p, &bytes[..cut]).unwrap();
        match ModelBundle::load(&p) {
            Err(GroupfitError::CorruptModel { path, .. }) => {
                assert_eq!(path, p.display().to_string(), "cut at {cut}")
            }
            other => panic!("cut at {cut}: expected CorruptModel, got {other:?}"),
        }
        assert!(matches!(
            ModelBundle::from_bytes(&bytes[..cut], &p),
            Err(GroupfitError::CorruptModel { .. })
        ));
    }
    // A flipped payload byte fails the checksum, bad magic is named as such.
    let mut flipped = bytes.clone();
    flipped[n - 10] ^= 0x20;
    let e = ModelBundle::from_bytes(&flipped, &p).unwrap_err();
    assert!(
        matches!(&e, GroupfitError::CorruptModel { reason, .. } if reason.contains("checksum")),
        "{e}"
    );
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert!(matches!(
        ModelBundle::from_bytes(&magic, &p),
        Err(GroupfitError::CorruptModel { .. })
    ));
    // Bytes appended after the payload are damage too.
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        ModelBundle::from_bytes(&longer, &p),
        Err(GroupfitError::CorruptModel { .. })
    ));
}

// ---------------------------------------------------------------------------
// golden files
// ---------------------------------------------------------------------------

/// A file with a valid checksum whose contents disagree with themselves
/// (written by hand or by a buggy tool) is a corrupt model naming what is
/// wrong and where, not a panic or an endless tree walk at predict time.
#[test]
fn crafted_model_files_with_a_valid_checksum_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let table = Table::synth(&[80, 60], 2, Task::Regression, 3);
    let path = table.write(&dir.path().join("t.parquet"));
    let good = fit(&path, &Run::default()).bundle;
    let p = dir.path().join("crafted.gfm");
    let tree = |left: Vec<i32>, right: Vec<i32>, feature: u32| groupfit::gbdt::tree::Tree {
        split_feature: vec![feature; left.len()],
        threshold: vec![0.0; left.len()],
        default_left: vec![true; left.len()],
        left: left.clone(),
        right,
        leaf_value: vec![0.0; left.len() + 1],
    };
    let gbdt = |t: groupfit::gbdt::tree::Tree| {
        FittedModel::Gbdt(GbdtModel {
            init: 0.0,
            trees: vec![t],
            importance: vec![],
            bins: vec![],
        })
    };
    type Edit = Box<dyn Fn(&mut ModelBundle)>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|b| b.groups[0].config = Some(7)),
            "group g00000: config 7 of 1 configs",
        ),
        (
            Box::new(|b| b.global.as_mut().unwrap().config = 3),
            "global model: config 3 of 1 configs",
        ),
        (
            Box::new(|b| match b.groups[0].model.as_mut().unwrap() {
                FittedModel::Linear(m) => {
                    m.coef.pop();
                }
                _ => unreachable!(),
            }),
            "group g00000: 1 coefficients for 2 features",
        ),
        (
            Box::new(|b| b.impute.push(1.0)),
            "3 impute values for 2 features",
        ),
        (
            Box::new(|b| b.groups[0].key.push(None)),
            "group g00000/null: 2 key parts for 1 key columns",
        ),
        (
            Box::new(|b| b.groups[0].valid_by_config = vec![0.1, 0.2]),
            "group g00000: 2 validation scores for 1 configs",
        ),
        (
            // Node 1's left child is node 0: a walk would never end.
            Box::new(move |b| b.groups[0].model = Some(gbdt(tree(vec![1, 0], vec![-1, -2], 0)))),
            "group g00000: tree 0: node 1 has child 0 out of range",
        ),
        (
            Box::new(move |b| b.groups[0].model = Some(gbdt(tree(vec![-1], vec![-2], 5)))),
            "group g00000: tree 0: node 0 splits feature 5 of 2",
        ),
        (
            Box::new(move |b| b.groups[0].model = Some(gbdt(tree(vec![-1], vec![-4], 0)))),
            "group g00000: tree 0: node 0 has child -4 out of range",
        ),
    ];
    let first = good.groups[0].key[0].clone().unwrap();
    for (edit, want) in cases {
        let want = want.replace("g00000", &first);
        let want = want.as_str();
        let mut b = good.clone();
        edit(&mut b);
        std::fs::write(&p, b.to_bytes().unwrap()).unwrap();
        match ModelBundle::load(&p) {
            Err(e @ GroupfitError::CorruptModel { .. }) => {
                assert!(e.to_string().contains(want), "{e} (wanted {want})")
            }
            other => panic!("{want}: expected CorruptModel, got {other:?}"),
        }
    }
    // The untouched bundle, and a valid tree, load.
    let mut b = good.clone();
    b.groups[0].model = Some(gbdt(tree(vec![1, -1], vec![-2, -3], 1)));
    std::fs::write(&p, b.to_bytes().unwrap()).unwrap();
    assert_eq!(ModelBundle::load(&p).unwrap(), b);
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

/// The rows the golden model predicts: two rows each of the own-model groups,
/// one of a fallback group per reason, one unseen group, and one row with a
/// missing feature (imputed).
fn golden_rows() -> RecordBatch {
    let keys = [
        "alpha", "alpha", "beta", "beta", "gamma", "gamma", "tiny", "solo", "unseen", "alpha",
    ];
    let f0 = [0.5f32, -1.25, 2.0, 0.0, -0.75, 1.5, 0.25, 1.0, -2.0, 0.1];
    let f1 = [
        Some(1.0f32),
        Some(-0.5),
        Some(0.25),
        Some(3.0),
        Some(-1.0),
        Some(0.0),
        Some(2.5),
        Some(-0.25),
        Some(0.75),
        None,
    ];
    let f2 = [-0.3f32, 0.8, 1.1, -2.2, 0.0, 0.6, -1.4, 0.9, 1.3, -0.2];
    let schema = Schema::new(vec![
        Field::new("g", DataType::Utf8, false),
        Field::new("f0", DataType::Float32, false),
        Field::new("f1", DataType::Float32, true),
        Field::new("f2", DataType::Float32, false),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(StringArray::from(keys.to_vec())),
            Arc::new(Float32Array::from(f0.to_vec())),
            Arc::new(Float32Array::from(f1.to_vec())),
            Arc::new(Float32Array::from(f2.to_vec())),
        ],
    )
    .unwrap()
}

/// The golden training table: binary, three features, three own-model
/// groups, `tiny` (4 rows < min_rows 10) and `solo` (one class) falling back
/// to the global model.
fn golden_table(dir: &Path) -> PathBuf {
    let mut t = Table::synth(&[80, 60, 50, 4, 30], 3, Task::Binary, 2024);
    for (k, y) in t.keys.iter_mut().zip(t.y.iter_mut()) {
        *k = match k.as_str() {
            "g00000" => "alpha",
            "g00001" => "beta",
            "g00002" => "gamma",
            "g00003" => "tiny",
            _ => {
                *y = 1.0;
                "solo"
            }
        }
        .to_string();
    }
    t.write(&dir.join("golden-train.parquet"))
}

/// Trains a golden model of `model` with `params` on [`golden_table`].
fn golden_train(dir: &Path, model: &str, params: &[&str]) -> ModelBundle {
    let spec = TrainSpec {
        model: model.into(),
        params: params.iter().map(|s| s.to_string()).collect(),
        threads: 1,
        valid_fraction: 0.25,
        min_rows: 10,
        task: Some(Task::Binary),
        ..TrainSpec::new(golden_table(dir), vec!["g".into()], "y")
    };
    let out = train(&spec, &mut |_e: Event| {}).unwrap();
    assert_eq!(out.summary.fallback.few_rows, 1);
    assert_eq!(out.summary.fallback.one_class, 1);
    out.bundle
}

/// Loads `tests/golden/{stem}.gfm` (format `version`) and checks its
/// predictions on `rows.parquet` against `{stem}.expected.json`. With
/// `GROUPFIT_BLESS=1`, files of the current format version are first
/// trained afresh and overwritten; older versions' files are frozen (this
/// build cannot write them).
fn golden_case(stem: &str, version: u32, model: &str, params: &[&str]) {
    let dir = golden_dir();
    let path = dir.join(format!("{stem}.gfm"));
    let rows = dir.join("rows.parquet");
    let expected_path = dir.join(format!("{stem}.expected.json"));
    let bless = std::env::var_os("GROUPFIT_BLESS").is_some_and(|v| v == "1");
    if bless && version == FORMAT_VERSION {
        let tmp = tempfile::tempdir().unwrap();
        let bundle = golden_train(tmp.path(), model, params);
        std::fs::create_dir_all(&dir).unwrap();
        bundle.save(&path).unwrap();
        write_parquet(&rows, &golden_rows()).unwrap();
        let (p, r) = predictions(&ModelBundle::load(&path).unwrap(), &rows);
        let json = serde_json::json!({
            "comment": format!("predictions of {stem}.gfm on rows.parquet; regenerate with GROUPFIT_BLESS=1 (see README.md)"),
            "format_version": FORMAT_VERSION,
            "predictions": p,
            "routes": r,
        });
        std::fs::write(
            &expected_path,
            serde_json::to_string_pretty(&json).unwrap() + "\n",
        )
        .unwrap();
        eprintln!("blessed {stem} golden files in {}", dir.display());
    }

    let bundle = ModelBundle::load(&path).unwrap_or_else(|e| {
        panic!(
            "the committed golden model {stem} no longer loads: {e}\n(see tests/golden/README.md)"
        )
    });
    assert_eq!(bundle.format_version, version);
    assert_eq!(bundle.family, model);
    assert_eq!(bundle.key_columns, vec!["g".to_string()]);
    assert_eq!(bundle.features, vec!["f0", "f1", "f2"]);
    assert_eq!(bundle.task, Task::Binary);
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&expected_path).unwrap()).unwrap();
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
    let (got, routes) = predictions(&bundle, &rows);
    assert_eq!(routes, want_routes, "{stem} routes");
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12,
            "{stem} row {i}: predicted {g}, golden {w} (see tests/golden/README.md)"
        );
    }
    for r in ["own", "fallback", "unseen"] {
        assert!(routes.iter().any(|x| x == r), "golden rows lack a {r} row");
    }
}

#[test]
fn golden_model_file_still_loads_and_predicts() {
    // Format 1 (frozen): a linear model.
    golden_case("linear_v1", 1, "linear", &["C=0.1,1"]);
    // Format 2 (frozen): MLP weights as base64 text.
    golden_case(
        "mlp_v2",
        2,
        "mlp",
        &["hidden=4", "epochs=3", "batch_size=16", "lr=0.01,0.1"],
    );
    // Format 3 (frozen): the global model may be absent (this one has it).
    golden_case("gbdt_v3", 3, "gbdt", &["rounds=8", "num_leaves=4,8"]);
    // Format 4 (frozen): MLP weights in the binary section.
    golden_case(
        "mlp_v4",
        4,
        "mlp",
        &["hidden=4", "epochs=3", "batch_size=16", "lr=0.01,0.1"],
    );
    // Format 5: every f64 array in the binary section too.
    golden_case("linear_v5", 5, "linear", &["C=0.1,1"]);
    golden_case("gbdt_v5", 5, "gbdt", &["rounds=8", "num_leaves=4,8"]);
}

// ---------------------------------------------------------------------------
// --no-global
// ---------------------------------------------------------------------------

#[test]
fn without_the_global_model_groups_keep_their_models_and_predict_names_a_group_without_one() {
    let dir = tempfile::tempdir().unwrap();
    // g00002 has 5 rows (< min_rows 10): it falls back, to nothing here.
    let table = Table::synth(&[300, 200, 5], 3, Task::Binary, 21);
    let path = table.write(&dir.path().join("t.parquet"));
    let own_rows =
        Table::synth(&[40, 40], 3, Task::Binary, 22).write(&dir.path().join("own.parquet"));
    let fallback_rows = Table::synth(&[10, 10, 10], 3, Task::Binary, 23)
        .write(&dir.path().join("fallback.parquet"));
    let mut unseen = Table::synth(&[10, 10], 3, Task::Binary, 24);
    unseen.keys.iter_mut().for_each(|k| {
        if k == "g00001" {
            *k = "never-seen".into();
        }
    });
    let unseen_rows = unseen.write(&dir.path().join("unseen.parquet"));
    for (model, params) in [
        ("linear", &["C=0.1,1"][..]),
        ("gbdt", &["rounds=5", "num_leaves=4,8"][..]),
        ("mlp", &["hidden=4", "epochs=2", "batch_size=16"][..]),
    ] {
        let spec = |global_model: bool| TrainSpec {
            model: model.into(),
            params: params.iter().map(|s| s.to_string()).collect(),
            threads: 2,
            valid_fraction: 0.25,
            min_rows: 10,
            task: Some(Task::Binary),
            global_model,
            ..TrainSpec::new(&path, vec!["g".into()], "y")
        };
        let with = train(&spec(true), &mut |_e: Event| {}).unwrap();
        let without = train(&spec(false), &mut |_e: Event| {}).unwrap();
        let (s, b) = (&without.summary, &without.bundle);
        assert!(b.global.is_none(), "{model}");
        assert_eq!(s.global_config, None, "{model}");
        assert_eq!(
            s.models,
            2 * with.summary.configs,
            "{model}: no global units"
        );
        assert_eq!(with.summary.models, 3 * with.summary.configs, "{model}");
        assert_eq!(s.routes.groups_own, 2, "{model}");
        assert_eq!(s.routes.groups_none, 1, "{model}");
        assert_eq!(s.routes.groups_global, 0, "{model}");
        let g2 = &b.groups[b
            .groups
            .iter()
            .position(|g| g.key[0].as_deref() == Some("g00002"))
            .unwrap()];
        assert_eq!(g2.route, groupfit::store::Route::None, "{model}");
        assert!(g2.model.is_none() && g2.fallback.is_some(), "{model}");
        // The groups' own models do not depend on the global model.
        let (p_with, r_with) = predictions(&with.bundle, &own_rows);
        let (p_without, r_without) = predictions(b, &own_rows);
        assert_eq!(r_with, r_without, "{model}");
        for (a, c) in p_with.iter().zip(&p_without) {
            assert!(close(*a, *c, 1e-9), "{model}: {a} vs {c}");
        }
        assert_eq!(s.chosen_configs, with.summary.chosen_configs, "{model}");
        // The file keeps the absence (since format 3).
        let file = dir.path().join(format!("{model}.gfm"));
        b.save(&file).unwrap();
        let loaded = ModelBundle::load(&file).unwrap();
        assert_eq!(loaded.format_version, FORMAT_VERSION);
        assert!(loaded.global.is_none());
        assert_eq!(predictions(&loaded, &own_rows).0, p_without, "{model}");
        // Rows without a model: an error naming the group and why.
        for (rows, group, why) in [
            (
                &fallback_rows,
                "g00002",
                "it fell back in training (4 training rows < --min-rows 10)",
            ),
            (&unseen_rows, "never-seen", "it was not seen in training"),
        ] {
            let err = predict_batch(&loaded, rows, false).unwrap_err();
            match &err {
                GroupfitError::NoModel {
                    group: g, rows: n, ..
                } => {
                    assert_eq!(g, group, "{model}");
                    assert_eq!(*n, 10, "{model}");
                }
                other => panic!("{model}: expected NoModel, got {other:?}"),
            }
            let msg = err.to_string();
            assert!(msg.contains(why), "{model}: {msg}");
            assert!(msg.contains("--no-global"), "{model}: {msg}");
        }
    }
}

// ---------------------------------------------------------------------------
// gbdt: grouped == looped, strategies x threads, round trip
// ---------------------------------------------------------------------------

fn gbdt(m: &FittedModel) -> &GbdtModel {
    match m {
        FittedModel::Gbdt(g) => g,
        other => panic!("not a gbdt model: {other:?}"),
    }
}

fn gbdt_models(b: &ModelBundle) -> BTreeMap<String, GbdtModel> {
    let mut out: BTreeMap<String, GbdtModel> = b
        .groups
        .iter()
        .filter_map(|g| {
            g.model
                .as_ref()
                .map(|m| (g.key[0].clone().unwrap(), gbdt(m).clone()))
        })
        .collect();
    out.insert(
        "<global>".into(),
        gbdt(&b.global.as_ref().unwrap().model).clone(),
    );
    out
}

/// Same trees (structure and thresholds exactly), leaf values within `rel`.
fn assert_trees_close(a: &GbdtModel, b: &GbdtModel, rel: f64, what: &str) {
    assert!(
        close(a.init, b.init, rel),
        "{what}: init {} vs {}",
        a.init,
        b.init
    );
    assert_eq!(a.trees.len(), b.trees.len(), "{what}: rounds");
    for (i, (x, y)) in a.trees.iter().zip(&b.trees).enumerate() {
        assert_eq!(
            x.split_feature, y.split_feature,
            "{what}: tree {i} features"
        );
        assert_eq!(x.threshold, y.threshold, "{what}: tree {i} thresholds");
        assert_eq!(
            x.default_left, y.default_left,
            "{what}: tree {i} missing sides"
        );
        assert_eq!(
            (&x.left, &x.right),
            (&y.left, &y.right),
            "{what}: tree {i} shape"
        );
        for (u, v) in x.leaf_value.iter().zip(&y.leaf_value) {
            assert!(close(*u, *v, rel), "{what}: tree {i} leaf {u} vs {v}");
        }
    }
}

fn fit_gbdt(
    path: &Path,
    valid: &Path,
    task: Task,
    strategy: Strategy,
    threads: usize,
    params: &[&str],
) -> TrainOutput {
    let spec = TrainSpec {
        params: params.iter().map(|s| s.to_string()).collect(),
        model: "gbdt".into(),
        strategy,
        threads,
        valid: Some(valid.to_path_buf()),
        min_rows: 1,
        task: Some(task),
        ..TrainSpec::new(path, vec!["g".into()], "y")
    };
    let out = train(&spec, &mut |_e: Event| {}).unwrap();
    if strategy != Strategy::Auto {
        assert_eq!(out.summary.strategy, strategy.name());
    }
    out
}

/// Missing values in feature 0 of every 7th row and feature 2 of every 11th.
fn with_nans(mut t: Table) -> Table {
    for i in (0..t.y.len()).step_by(7) {
        t.x[0][i] = f32::NAN;
    }
    for i in (3..t.y.len()).step_by(11) {
        t.x[2][i] = f32::NAN;
    }
    t
}

const GBDT_GRID: &[&str] = &[
    "rounds=25",
    "num_leaves=4,15",
    "learning_rate=0.3",
    "min_data_in_leaf=5",
    "early_stopping_rounds=5",
];

fn gbdt_grouped_equals_looped(task: Task) {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [30, 97, 300, 1100, 2500];
    let table = with_nans(Table::synth(&sizes, 4, task, 21));
    let vtable = with_nans(Table::synth(&sizes, 4, task, 22));
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let out = fit_gbdt(&all, &vall, task, Strategy::Auto, 2, GBDT_GRID);
    let together = gbdt_models(&out.bundle);
    assert_eq!(together.len(), sizes.len() + 1);
    assert!(
        out.bundle.groups.iter().any(|g| g.iterations < 25),
        "early stopping cut some booster short"
    );
    for g in 0..sizes.len() {
        let key = format!("g{g:05}");
        let alone = table
            .only(&key)
            .write(&dir.path().join(format!("{key}.parquet")));
        let valone = vtable
            .only(&key)
            .write(&dir.path().join(format!("v{key}.parquet")));
        let b = fit_gbdt(&alone, &valone, task, Strategy::Auto, 2, GBDT_GRID).bundle;
        let m = gbdt(b.groups[0].model.as_ref().unwrap());
        assert_trees_close(&together[&key], m, 1e-9, &format!("{task:?} group {key}"));
        let same = out
            .bundle
            .groups
            .iter()
            .find(|e| e.key[0].as_deref() == Some(key.as_str()))
            .unwrap();
        assert_eq!(b.groups[0].config, same.config, "{key}: chosen config");
        assert_eq!(
            b.groups[0].valid_by_config, same.valid_by_config,
            "{key}: scores"
        );
        assert_trees_close(
            m,
            gbdt(&b.global.as_ref().unwrap().model),
            1e-9,
            &format!("{key} vs its global model"),
        );
    }
}

#[test]
fn gbdt_grouped_equals_looped_binary() {
    gbdt_grouped_equals_looped(Task::Binary);
}

#[test]
fn gbdt_grouped_equals_looped_regression() {
    gbdt_grouped_equals_looped(Task::Regression);
}

fn gbdt_strategies_and_threads_agree(task: Task) {
    let dir = tempfile::tempdir().unwrap();
    // One dominant group (cut over workers by `fused`) and small ones.
    let sizes = [6000, 700, 300, 120, 60, 45, 40];
    let table = with_nans(Table::synth(&sizes, 5, task, 5));
    let vtable = Table::synth(&sizes, 5, task, 6);
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let params = &[
        "rounds=15",
        "num_leaves=7,31",
        "learning_rate=0.2",
        "early_stopping_rounds=4",
    ];
    let reference = fit_gbdt(&all, &vall, task, Strategy::Tp, 1, params).bundle;
    let ref_models = gbdt_models(&reference);
    for strategy in [
        Strategy::Tp,
        Strategy::Fused,
        Strategy::Dp,
        Strategy::Hybrid,
    ] {
        for threads in [1, 2, 3] {
            let b = fit_gbdt(&all, &vall, task, strategy, threads, params).bundle;
            let what = format!("{task:?} {strategy:?} x {threads}");
            let ms = gbdt_models(&b);
            for (k, m) in &ref_models {
                assert_trees_close(m, &ms[k], 1e-9, &format!("{what}, group {k}"));
            }
            let chosen = |b: &ModelBundle| b.groups.iter().map(|g| g.config).collect::<Vec<_>>();
            assert_eq!(chosen(&reference), chosen(&b), "{what}: chosen configs");
        }
    }
}

/// The planner's pilot runs one real round of three boosters (the median
/// group's, a small one's, the largest one's) to price rounds by group size:
/// with groups in the largest one's histogram class and at most 1/64 of its
/// rows, the curve is measured (explain shows it), and the models equal a
/// one-thread run's, which has no pilot.
#[test]
fn gbdt_pilot_rounds_price_by_size_and_change_no_model() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [60_000, 900, 850, 800];
    let task = Task::Binary;
    let table = with_nans(Table::synth(&sizes, 3, task, 7));
    let vtable = Table::synth(&sizes, 3, task, 8);
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let params = &["rounds=6", "num_leaves=7", "early_stopping_rounds=2"];
    let spec = TrainSpec {
        params: params.iter().map(|s| s.to_string()).collect(),
        model: "gbdt".into(),
        strategy: Strategy::Auto,
        threads: 2,
        valid: Some(vall.clone()),
        min_rows: 1,
        task: Some(task),
        ..TrainSpec::new(&all, vec!["g".into()], "y")
    };
    let e = groupfit::job::explain(&spec).unwrap();
    let curve = e.calibration.by_size.expect("a size curve for gbdt");
    let rows: Vec<usize> = curve.points.iter().map(|p| p.0).collect();
    assert!(rows[0] <= rows[1] && rows[1] * 64 <= rows[2], "{rows:?}");
    assert!(curve.points.iter().all(|p| p.1 > 0.0), "{curve:?}");
    let reference = gbdt_models(&fit_gbdt(&all, &vall, task, Strategy::Tp, 1, params).bundle);
    for strategy in [
        Strategy::Auto,
        Strategy::Tp,
        Strategy::Fused,
        Strategy::Hybrid,
    ] {
        let ms = gbdt_models(&fit_gbdt(&all, &vall, task, strategy, 2, params).bundle);
        for (k, m) in &reference {
            assert_trees_close(m, &ms[k], 1e-9, &format!("{strategy:?} x 2, group {k}"));
        }
    }
}

/// A group of at most 32 rows, alone in its histogram class, is a whole
/// pilot block: the planner's pilot runs its boosters' real rounds, and with
/// few rounds they end there. The passes then skip them (this once panicked on a booster
/// whose state had been freed), and the models equal a one-thread run's.
#[test]
fn gbdt_boosters_ended_by_the_pilot_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [5000, 30];
    let task = Task::Binary;
    let table = Table::synth(&sizes, 3, task, 9);
    let vtable = Table::synth(&sizes, 3, task, 10);
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let params = &["rounds=2", "num_leaves=4", "min_data_in_leaf=5"];
    let reference = fit_gbdt(&all, &vall, task, Strategy::Tp, 1, params).bundle;
    assert!(
        reference.groups.iter().all(|g| g.iterations == 2),
        "both groups boost their two rounds"
    );
    let reference = gbdt_models(&reference);
    for strategy in [
        Strategy::Auto,
        Strategy::Tp,
        Strategy::Dp,
        Strategy::Fused,
        Strategy::Hybrid,
    ] {
        let ms = gbdt_models(&fit_gbdt(&all, &vall, task, strategy, 2, params).bundle);
        for (k, m) in &reference {
            assert_trees_close(m, &ms[k], 1e-9, &format!("{strategy:?} x 2, group {k}"));
        }
    }
}

#[test]
fn gbdt_strategies_and_threads_agree_binary() {
    gbdt_strategies_and_threads_agree(Task::Binary);
}

#[test]
fn gbdt_strategies_and_threads_agree_regression() {
    gbdt_strategies_and_threads_agree(Task::Regression);
}

#[test]
fn gbdt_model_file_round_trip_predicts_identically() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [400, 150, 8];
    let table = with_nans(Table::synth(&sizes, 3, Task::Binary, 9));
    let vtable = with_nans(Table::synth(&sizes, 3, Task::Binary, 10));
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let spec = TrainSpec {
        params: vec!["rounds=30".into(), "num_leaves=7".into()],
        model: "gbdt".into(),
        valid: Some(vall.clone()),
        min_rows: 10,
        task: Some(Task::Binary),
        ..TrainSpec::new(&all, vec!["g".into()], "y")
    };
    let out = train(&spec, &mut |_e: Event| {}).unwrap();
    assert_eq!(out.bundle.family, "gbdt");
    assert!(
        out.bundle.impute.is_empty(),
        "no imputation: NaN reaches the trees"
    );
    assert_eq!(out.summary.fallback.few_rows, 1);
    let path = dir.path().join("m.gfm");
    out.bundle.save(&path).unwrap();
    let loaded = ModelBundle::load(&path).unwrap();
    assert_eq!(loaded, out.bundle);
    let (a, _) = predict_batch(&out.bundle, &vall, true).unwrap();
    let (b, _) = predict_batch(&loaded, &vall, true).unwrap();
    let col = |r: &RecordBatch| -> Vec<u64> {
        let c = r.column_by_name("prediction").unwrap();
        let c = c.as_any().downcast_ref::<Float64Array>().unwrap();
        c.values().iter().map(|v| v.to_bits()).collect()
    };
    assert_eq!(col(&a), col(&b));
    // The validation score in the summary is the one of these predictions.
    let p: Vec<f64> = col(&a).into_iter().map(f64::from_bits).collect();
    assert!(p.iter().all(|v| (0.0..=1.0).contains(v)));
}
