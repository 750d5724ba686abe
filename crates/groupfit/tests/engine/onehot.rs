//! Categorical features one-hot encoded per group (linear and MLP): every
//! strategy and thread count agree, a group trained among others equals the
//! group trained alone, the cap folds rare categories into "other", a grid
//! over the cap, the MLP gains from a category that matters, and the golden
//! files of models with a categorical feature.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use groupfit::data::categorical::NULL_CODE;
use groupfit::data::Task;
use groupfit::job::{train, write_parquet, Progress, TrainOutput, TrainSpec};
use groupfit::linear::LinearModel;
use groupfit::mlp::MlpModel;
use groupfit::plan::Strategy;
use groupfit::store::{FittedModel, ModelBundle, FORMAT_VERSION};

use crate::common::*;

// ---------------------------------------------------------------------------
// Data: numeric and categorical features, group-dependent category effects
// ---------------------------------------------------------------------------

/// A table: key `g`, `Float32` features `f0..`, nullable text features
/// `c0..` (levels `c{i}_L000`, ...), `Float64` target `y`.
#[derive(Debug, Clone)]
struct CatTable {
    keys: Vec<String>,
    x: Vec<Vec<f32>>,
    cats: Vec<Vec<Option<String>>>,
    y: Vec<f64>,
}

impl CatTable {
    /// Groups of the given sizes (keys `g00000`, ...). Categorical feature
    /// `i` has `levels[i]` levels, drawn with skewed frequencies (low levels
    /// more often), null 5% of the time; every group has its own numeric
    /// weights and its own effect of every level (and of null), of size
    /// `effect`.
    fn synth(
        sizes: &[usize],
        d: usize,
        levels: &[usize],
        effect: f64,
        task: Task,
        seed: u64,
    ) -> CatTable {
        let mut rng = Rng::new(seed);
        let mut rows: Vec<(usize, Vec<f32>, Vec<Option<usize>>, f64)> = Vec::new();
        for (g, &n) in sizes.iter().enumerate() {
            let w: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
            let b = 0.3 * rng.normal();
            let fx: Vec<Vec<f64>> = levels
                .iter()
                .map(|&l| (0..=l).map(|_| effect * rng.normal()).collect())
                .collect();
            let first = rows.len();
            for _ in 0..n {
                let x: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
                let c: Vec<Option<usize>> = levels
                    .iter()
                    .map(|&l| {
                        if rng.unit() < 0.05 {
                            None
                        } else {
                            let u = rng.unit();
                            Some(((u * u * l as f64) as usize).min(l - 1))
                        }
                    })
                    .collect();
                let mut margin = b + w.iter().zip(&x).map(|(a, b)| a * b).sum::<f64>();
                for (i, ci) in c.iter().enumerate() {
                    margin += fx[i][ci.map_or(levels[i], |v| v)];
                }
                let y = match task {
                    Task::Regression => margin + 0.3 * rng.normal(),
                    Task::Binary => f64::from(u8::from(rng.unit() < 1.0 / (1.0 + (-margin).exp()))),
                };
                rows.push((g, x.iter().map(|&v| v as f32).collect(), c, y));
            }
            if task == Task::Binary && n >= 2 {
                rows[first].3 = 0.0;
                rows[first + 1].3 = 1.0;
            }
        }
        for i in (1..rows.len()).rev() {
            let j = rng.below(i + 1);
            rows.swap(i, j);
        }
        let mut t = CatTable {
            keys: Vec::new(),
            x: vec![Vec::new(); d],
            cats: vec![Vec::new(); levels.len()],
            y: Vec::new(),
        };
        for (g, x, c, y) in rows {
            t.keys.push(format!("g{g:05}"));
            for (col, v) in t.x.iter_mut().zip(x) {
                col.push(v);
            }
            for (i, (col, v)) in t.cats.iter_mut().zip(c).enumerate() {
                col.push(v.map(|l| format!("c{i}_L{l:03}")));
            }
            t.y.push(y);
        }
        t
    }

    fn select(&self, idx: &[usize]) -> CatTable {
        CatTable {
            keys: idx.iter().map(|&i| self.keys[i].clone()).collect(),
            x: self
                .x
                .iter()
                .map(|c| idx.iter().map(|&i| c[i]).collect())
                .collect(),
            cats: self
                .cats
                .iter()
                .map(|c| idx.iter().map(|&i| c[i].clone()).collect())
                .collect(),
            y: idx.iter().map(|&i| self.y[i]).collect(),
        }
    }

    /// The rows of one group, in their order.
    fn only(&self, key: &str) -> CatTable {
        let idx: Vec<usize> = (0..self.y.len()).filter(|&i| self.keys[i] == key).collect();
        self.select(&idx)
    }

    /// Every row, keyed `key`.
    fn keyed(&self, key: &str) -> CatTable {
        let mut t = self.clone();
        t.keys.iter_mut().for_each(|k| *k = key.to_string());
        t
    }

    /// The table without its categorical features.
    fn numeric_only(&self) -> CatTable {
        CatTable {
            cats: Vec::new(),
            ..self.clone()
        }
    }

    fn batch(&self) -> RecordBatch {
        let mut fields = vec![Field::new("g", DataType::Utf8, false)];
        let mut cols: Vec<ArrayRef> = vec![Arc::new(StringArray::from(self.keys.clone()))];
        for (j, c) in self.x.iter().enumerate() {
            fields.push(Field::new(format!("f{j}"), DataType::Float32, true));
            cols.push(Arc::new(Float32Array::from(c.clone())));
        }
        for (i, c) in self.cats.iter().enumerate() {
            fields.push(Field::new(format!("c{i}"), DataType::Utf8, true));
            cols.push(Arc::new(StringArray::from(c.clone())));
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

struct CatRun<'a> {
    model: &'a str,
    task: Task,
    strategy: Strategy,
    threads: usize,
    params: &'a [&'a str],
    valid_fraction: f64,
    min_rows: usize,
}

impl Default for CatRun<'_> {
    fn default() -> Self {
        CatRun {
            model: "linear",
            task: Task::Regression,
            strategy: Strategy::Auto,
            threads: 2,
            params: TIGHT,
            valid_fraction: 0.0,
            min_rows: 1,
        }
    }
}

fn cat_fit(path: &Path, r: &CatRun) -> TrainOutput {
    let spec = TrainSpec {
        model: r.model.into(),
        params: r.params.iter().map(|s| s.to_string()).collect(),
        strategy: r.strategy,
        threads: r.threads,
        valid_fraction: r.valid_fraction,
        min_rows: r.min_rows,
        task: Some(r.task),
        ..TrainSpec::new(path, vec!["g".into()], "y")
    };
    let out = train(&spec, &mut |_e: Progress| {}).unwrap();
    if r.model == "linear" {
        assert_eq!(out.summary.not_converged, 0, "every unit converges");
    }
    out
}

/// Coefficients, intercept, encodings and category coefficients agree.
fn assert_linear_close(a: &LinearModel, b: &LinearModel, rel: f64, what: &str) {
    assert_models_close(a, b, rel, what);
    assert_eq!(
        a.onehot.len(),
        b.onehot.len(),
        "{what}: categorical features"
    );
    for (x, y) in a.onehot.iter().zip(&b.onehot) {
        assert_eq!(x.map, y.map, "{what}: encodings");
        for (i, (p, q)) in x.coef.iter().zip(&y.coef).enumerate() {
            assert!(
                close(*p, *q, rel),
                "{what}: feature {} column {i}: {p} vs {q}",
                x.map.feature
            );
        }
    }
}

/// Predictions of two bundles on the same rows agree.
fn assert_predictions_close(a: &ModelBundle, b: &ModelBundle, rows: &Path, tol: f64, what: &str) {
    let (pa, ra) = predictions(a, rows);
    let (pb, rb) = predictions(b, rows);
    assert_eq!(ra, rb, "{what}: routes");
    for (i, (x, y)) in pa.iter().zip(&pb).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())),
            "{what}: row {i}: {x} vs {y}"
        );
    }
}

// ---------------------------------------------------------------------------
// linear: strategies x threads, grouped == looped
// ---------------------------------------------------------------------------

fn linear_strategies_and_threads_agree(task: Task) {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [6000, 700, 300, 120, 40, 25, 4];
    let table = CatTable::synth(&sizes, 3, &[4, 30], 0.8, task, 31);
    let path = table.write(&dir.path().join("t.parquet"));
    let params = ["C=0.1,1", "max_cat=8", "tol=1e-10", "max_iter=200"];
    let mut reference: Option<ModelBundle> = None;
    for strategy in [
        Strategy::Tp,
        Strategy::Dp,
        Strategy::Fused,
        Strategy::Hybrid,
        Strategy::Auto,
    ] {
        for threads in [1, 2, 3] {
            let out = cat_fit(
                &path,
                &CatRun {
                    task,
                    strategy,
                    threads,
                    params: &params,
                    valid_fraction: 0.2,
                    min_rows: 10,
                    ..CatRun::default()
                },
            );
            let what = format!("{task:?} {} x {threads} threads", strategy.name());
            assert_cuts(strategy, threads, out.summary.cut_groups, &what);
            match &reference {
                None => reference = Some(out.bundle),
                Some(r) => {
                    let (ma, mb) = (models(r), models(&out.bundle));
                    assert_eq!(ma.keys().collect::<Vec<_>>(), mb.keys().collect::<Vec<_>>());
                    for (k, m) in &ma {
                        assert!(!m.onehot.is_empty(), "{what}: group {k} has no encodings");
                        assert_linear_close(m, &mb[k], 1e-5, &format!("{what}, group {k}"));
                    }
                }
            }
        }
    }
}

#[test]
fn linear_onehot_strategies_and_threads_agree_binary() {
    linear_strategies_and_threads_agree(Task::Binary);
}

#[test]
fn linear_onehot_strategies_and_threads_agree_regression() {
    linear_strategies_and_threads_agree(Task::Regression);
}

fn linear_grouped_equals_looped(task: Task) {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [40, 97, 300, 1100, 3000];
    let table = CatTable::synth(&sizes, 3, &[4, 30, 200], 0.8, task, 12);
    let all = table.write(&dir.path().join("all.parquet"));
    let run = CatRun {
        task,
        ..CatRun::default()
    };
    let together = cat_fit(&all, &run).bundle;
    for g in 0..sizes.len() {
        let key = format!("g{g:05}");
        let alone = cat_fit(
            &table
                .only(&key)
                .write(&dir.path().join(format!("{key}.parquet"))),
            &run,
        )
        .bundle;
        // Every row of the table as this group's: its own categories, the
        // other groups' (which it never saw) and nulls.
        let rows = table
            .keyed(&key)
            .write(&dir.path().join(format!("{key}-rows.parquet")));
        assert_predictions_close(
            &together,
            &alone,
            &rows,
            1e-6,
            &format!("{task:?} group {key}"),
        );
        let m = linear(alone.groups[0].model.as_ref().unwrap());
        assert_eq!(m.onehot.len(), 3);
    }
}

#[test]
fn linear_onehot_grouped_equals_looped_binary() {
    linear_grouped_equals_looped(Task::Binary);
}

#[test]
fn linear_onehot_grouped_equals_looped_regression() {
    linear_grouped_equals_looped(Task::Regression);
}

// ---------------------------------------------------------------------------
// the cap, and a grid over it
// ---------------------------------------------------------------------------

#[test]
fn the_cap_folds_rare_categories_into_other() {
    let dir = tempfile::tempdir().unwrap();
    // One group; c0 has 12 levels, skewed: low levels are the frequent ones.
    let table = CatTable::synth(&[2000], 2, &[12], 1.0, Task::Regression, 5);
    let path = table.write(&dir.path().join("t.parquet"));
    let mut counts: BTreeMap<Option<String>, usize> = BTreeMap::new();
    for c in &table.cats[0] {
        *counts.entry(c.clone()).or_default() += 1;
    }
    let mut by_freq: Vec<(usize, Option<String>)> =
        counts.iter().map(|(k, &n)| (n, k.clone())).collect();
    by_freq.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let run = |params: &[&str]| {
        let out = cat_fit(
            &path,
            &CatRun {
                params,
                ..CatRun::default()
            },
        );
        out.bundle
    };
    let b = run(&["max_cat=3", "tol=1e-10"]);
    let dict = &b.categorical[0];
    let name = |code: f64| (code != NULL_CODE).then(|| dict.levels[code as usize].clone());
    let m = linear(b.groups[0].model.as_ref().unwrap()).clone();
    let enc = &m.onehot[0].map;
    let kept: Vec<Option<String>> = enc.codes.iter().map(|&c| name(c)).collect();
    let mut want: Vec<Option<String>> = by_freq[..3].iter().map(|x| x.1.clone()).collect();
    want.sort_by_key(|l| {
        l.as_ref()
            .map(|s| dict.levels.iter().position(|x| x == s).unwrap() as i64)
            .unwrap_or(-1)
    });
    assert_eq!(
        kept, want,
        "the three most frequent categories keep columns"
    );
    assert_eq!(enc.other.len(), counts.len() - 3);
    assert_eq!(m.onehot[0].coef.len(), 4);
    // Every folded category predicts with the one "other" coefficient.
    let other = m.onehot[0].coef[3];
    for &c in &enc.other {
        assert_eq!(m.onehot[0].of(c), other);
    }
    // min_cat_rows: categories rarer than it fold too.
    let threshold = by_freq[4].0 + 1;
    let spec = format!("min_cat_rows={threshold}");
    let b = run(&[spec.as_str(), "tol=1e-10"]);
    let m = linear(b.groups[0].model.as_ref().unwrap());
    let enc = &m.onehot[0].map;
    assert_eq!(
        enc.codes.len(),
        by_freq.iter().filter(|x| x.0 >= threshold).count()
    );
    assert!(enc.codes.len() >= 4 && enc.codes.len() < counts.len());
    // Without a cap in play, every category has its column.
    let b = run(&["tol=1e-10"]);
    let m = linear(b.groups[0].model.as_ref().unwrap());
    assert_eq!(
        (m.onehot[0].map.codes.len(), m.onehot[0].map.other.len()),
        (counts.len(), 0)
    );
}

#[test]
fn a_grid_over_the_cap_fits_each_config_on_its_own_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let table = CatTable::synth(&[800, 500, 300], 2, &[10, 40], 0.8, Task::Binary, 9);
    let path = table.write(&dir.path().join("t.parquet"));
    let fit = |params: &[&str]| {
        cat_fit(
            &path,
            &CatRun {
                task: Task::Binary,
                params,
                valid_fraction: 0.25,
                ..CatRun::default()
            },
        )
        .bundle
    };
    let grid = fit(&["max_cat=3,64", "C=0.5,2", "tol=1e-10", "max_iter=200"]);
    assert_eq!(grid.configs.len(), 4);
    for (k, cfg) in grid.configs.iter().enumerate() {
        let (mc, c) = (cfg.params["max_cat"], cfg.params["C"]);
        let alone = fit(&[
            &format!("max_cat={mc}"),
            &format!("C={c}"),
            "tol=1e-10",
            "max_iter=200",
        ]);
        for (g, a) in grid.groups.iter().zip(&alone.groups) {
            let (x, y) = (g.valid_by_config[k], a.valid_by_config[0]);
            assert!(
                close(x, y, 1e-6),
                "config {} group {:?}: {x} vs {y}",
                cfg.name,
                g.key
            );
        }
    }
}

// ---------------------------------------------------------------------------
// mlp
// ---------------------------------------------------------------------------

fn mlp(m: &FittedModel) -> &MlpModel {
    match m {
        FittedModel::Mlp(m) => m,
        other => panic!("not an mlp: {other:?}"),
    }
}

#[test]
fn mlp_onehot_grouped_equals_looped() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [40, 97, 300, 1100];
    let table = CatTable::synth(&sizes, 2, &[4, 12], 0.8, Task::Binary, 14);
    let all = table.write(&dir.path().join("all.parquet"));
    let params = ["hidden=8", "epochs=3", "batch_size=32", "lr=0.01"];
    let run = CatRun {
        model: "mlp",
        task: Task::Binary,
        params: &params,
        ..CatRun::default()
    };
    let together = cat_fit(&all, &run).bundle;
    for g in 0..sizes.len() {
        let key = format!("g{g:05}");
        let alone = cat_fit(
            &table
                .only(&key)
                .write(&dir.path().join(format!("{key}.parquet"))),
            &run,
        )
        .bundle;
        let rows = table
            .keyed(&key)
            .write(&dir.path().join(format!("{key}-rows.parquet")));
        assert_predictions_close(&together, &alone, &rows, 1e-5, &format!("mlp group {key}"));
        let (a, b) = (
            mlp(alone.groups[0].model.as_ref().unwrap()),
            mlp(together.groups[g].model.as_ref().unwrap()),
        );
        assert_eq!(a.layers[0].n_in, b.layers[0].n_in, "group {key}: inputs");
        assert_eq!(a.onehot.len(), 2);
    }
}

#[test]
fn mlp_onehot_strategies_agree() {
    let dir = tempfile::tempdir().unwrap();
    let table = CatTable::synth(&[3000, 300, 40], 2, &[5, 20], 0.8, Task::Regression, 15);
    let path = table.write(&dir.path().join("t.parquet"));
    let params = ["hidden=8", "epochs=2", "batch_size=64", "lr=0.01"];
    let mut reference: Option<ModelBundle> = None;
    for strategy in [Strategy::Tp, Strategy::Dp, Strategy::Fused] {
        for threads in [1, 3] {
            let b = cat_fit(
                &path,
                &CatRun {
                    model: "mlp",
                    params: &params,
                    strategy,
                    threads,
                    ..CatRun::default()
                },
            )
            .bundle;
            match &reference {
                None => reference = Some(b),
                Some(r) => assert_predictions_close(r, &b, &path, 1e-4, strategy.name()),
            }
        }
    }
}

#[test]
fn mlp_gains_from_a_category_that_matters() {
    let dir = tempfile::tempdir().unwrap();
    // Category effects of size 2 against numeric effects of size 1.
    let table = CatTable::synth(&[1500, 1500], 2, &[6], 2.0, Task::Regression, 16);
    let with = table.write(&dir.path().join("with.parquet"));
    let without = table
        .numeric_only()
        .write(&dir.path().join("without.parquet"));
    let params = ["hidden=16", "epochs=30", "lr=0.01", "batch_size=64"];
    let rmse = |path: &Path| {
        let b = cat_fit(
            path,
            &CatRun {
                model: "mlp",
                params: &params,
                valid_fraction: 0.25,
                ..CatRun::default()
            },
        )
        .bundle;
        b.groups.iter().map(|g| g.valid.rmse.unwrap()).sum::<f64>() / b.groups.len() as f64
    };
    let (a, b) = (rmse(&with), rmse(&without));
    assert!(
        a < 0.6 * b,
        "validation RMSE with the category {a}, without {b}"
    );
}

#[test]
fn models_with_categorical_features_round_trip_through_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let table = CatTable::synth(&[300, 200, 50], 2, &[5, 40], 0.8, Task::Binary, 17);
    let path = table.write(&dir.path().join("t.parquet"));
    for (model, params) in [
        ("linear", &["max_cat=8"][..]),
        ("mlp", &["hidden=4", "max_cat=8"][..]),
    ] {
        let b = cat_fit(
            &path,
            &CatRun {
                model,
                task: Task::Binary,
                params,
                ..CatRun::default()
            },
        )
        .bundle;
        assert!(b
            .groups
            .iter()
            .all(|g| !g.model.as_ref().unwrap().onehot().is_empty()));
        let file = dir.path().join(format!("{model}.gfm"));
        b.save(&file).unwrap();
        assert_eq!(ModelBundle::load(&file).unwrap(), b, "{model}");
    }
}

// ---------------------------------------------------------------------------
// golden files
// ---------------------------------------------------------------------------

/// The training table of the categorical golden files: binary; `f0`, `f1`
/// numeric, `c0` text with five levels and nulls; groups `alpha`, `beta`,
/// `gamma` with their own models, `tiny` (4 rows) falling back.
fn golden_table() -> CatTable {
    let mut t = CatTable::synth(&[120, 90, 70, 4], 2, &[5], 1.0, Task::Binary, 2026);
    for k in &mut t.keys {
        *k = match k.as_str() {
            "g00000" => "alpha",
            "g00001" => "beta",
            "g00002" => "gamma",
            _ => "tiny",
        }
        .into();
    }
    t
}

/// Rows to predict: own groups with kept categories, null, a level the
/// group has not seen, a value unseen in training, a missing numeric value;
/// the fallback group and an unseen group.
fn golden_rows() -> CatTable {
    let c = |s: Option<&str>| s.map(String::from);
    CatTable {
        keys: [
            "alpha", "alpha", "alpha", "beta", "beta", "gamma", "gamma", "tiny", "unseen", "alpha",
        ]
        .map(String::from)
        .to_vec(),
        x: vec![
            vec![0.5, -1.25, 2.0, 0.0, -0.75, 1.5, 0.25, 1.0, -2.0, f32::NAN],
            vec![1.0, -0.5, 0.25, 3.0, -1.0, 0.0, 2.5, -0.25, 0.75, 0.1],
        ],
        cats: vec![vec![
            c(Some("c0_L000")),
            c(None),
            c(Some("c0_L004")),
            c(Some("c0_L001")),
            c(Some("zzz")),
            c(Some("c0_L002")),
            c(None),
            c(Some("c0_L000")),
            c(Some("c0_L003")),
            c(Some("c0_L001")),
        ]],
        y: vec![0.0; 10],
    }
}

/// Loads `tests/golden/{stem}.gfm` and checks its predictions on
/// `rows_categorical.parquet` against `{stem}.expected.json`; with
/// `GROUPFIT_BLESS=1` trains and writes them first (format 6 is current).
fn golden_categorical(stem: &str, model: &str, params: &[&str]) {
    let dir = golden_dir();
    let path = dir.join(format!("{stem}.gfm"));
    let rows = dir.join("rows_categorical.parquet");
    let expected_path = dir.join(format!("{stem}.expected.json"));
    let bless = std::env::var_os("GROUPFIT_BLESS").is_some_and(|v| v == "1");
    if bless && FORMAT_VERSION == 6 {
        let tmp = tempfile::tempdir().unwrap();
        let train_path = golden_table().write(&tmp.path().join("train.parquet"));
        let spec = TrainSpec {
            model: model.into(),
            params: params.iter().map(|s| s.to_string()).collect(),
            threads: 1,
            valid_fraction: 0.25,
            min_rows: 10,
            task: Some(Task::Binary),
            ..TrainSpec::new(train_path, vec!["g".into()], "y")
        };
        let bundle = train(&spec, &mut |_e: Progress| {}).unwrap().bundle;
        bundle.save(&path).unwrap();
        golden_rows().write(&rows);
        bless_expected(&path, &rows, &expected_path, stem, 6);
    }
    let bundle = load_golden(&path, stem);
    assert_eq!((bundle.format_version, bundle.family.as_str()), (6, model));
    assert_eq!(bundle.features, vec!["f0", "f1", "c0"]);
    assert_eq!(bundle.categorical.len(), 1);
    let own = bundle.groups.iter().find(|g| g.model.is_some()).unwrap();
    assert!(
        !own.model.as_ref().unwrap().onehot().is_empty(),
        "{stem}: no encodings"
    );
    check_expected(&bundle, &rows, &expected_path, stem);
}

#[test]
fn golden_categorical_model_files_still_load_and_predict() {
    golden_categorical("linear_v6_categorical", "linear", &["C=0.1,1"]);
    golden_categorical(
        "mlp_v6_categorical",
        "mlp",
        &["hidden=4", "epochs=3", "batch_size=16", "lr=0.01,0.1"],
    );
}
