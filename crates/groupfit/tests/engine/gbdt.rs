//! The gbdt family: grouped == looped, strategies x threads, the planner's
//! pilot rounds, round trip.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::{Array, Float64Array, RecordBatch};
use groupfit::data::Task;
use groupfit::gbdt::GbdtModel;
use groupfit::job::{predict_batch, train, Progress, TrainOutput, TrainSpec};
use groupfit::plan::Strategy;
use groupfit::store::{FittedModel, ModelBundle};

use crate::common::*;

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
    let out = train(&spec, &mut |_e: Progress| {}).unwrap();
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

/// GBDT_GRID with quantized gradients (LightGBM's defaults otherwise).
const QUANTIZED_GRID: &[&str] = &[
    "rounds=25",
    "num_leaves=4,15",
    "learning_rate=0.3",
    "min_data_in_leaf=5",
    "early_stopping_rounds=5",
    "use_quantized_grad=true",
];

fn gbdt_grouped_equals_looped(task: Task, grid: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [30, 97, 300, 1100, 2500];
    let table = with_nans(Table::synth(&sizes, 4, task, 21));
    let vtable = with_nans(Table::synth(&sizes, 4, task, 22));
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let out = fit_gbdt(&all, &vall, task, Strategy::Auto, 2, grid);
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
        let b = fit_gbdt(&alone, &valone, task, Strategy::Auto, 2, grid).bundle;
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
        // Quantized: the global model rounds with its own stream, not the
        // group's.
        if grid == GBDT_GRID {
            assert_trees_close(
                m,
                gbdt(&b.global.as_ref().unwrap().model),
                1e-9,
                &format!("{key} vs its global model"),
            );
        }
    }
}

#[test]
fn gbdt_grouped_equals_looped_binary() {
    gbdt_grouped_equals_looped(Task::Binary, GBDT_GRID);
}

#[test]
fn gbdt_grouped_equals_looped_regression() {
    gbdt_grouped_equals_looped(Task::Regression, GBDT_GRID);
}

#[test]
fn gbdt_quantized_grouped_equals_looped() {
    gbdt_grouped_equals_looped(Task::Binary, QUANTIZED_GRID);
}

/// Quantized gradients change the trees, stochastic rounding is seeded:
/// the same run twice is the same model, another `--seed` another one.
#[test]
fn gbdt_quantized_trees_differ_and_are_seeded() {
    let dir = tempfile::tempdir().unwrap();
    let table = Table::synth(&[400, 900], 4, Task::Binary, 31);
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = Table::synth(&[400, 900], 4, Task::Binary, 32).write(&dir.path().join("v.parquet"));
    let grid = ["rounds=10", "use_quantized_grad=1"];
    let fit = |params: &[&str], seed: u64| {
        let spec = TrainSpec {
            params: params.iter().map(|s| s.to_string()).collect(),
            model: "gbdt".into(),
            valid: Some(vall.clone()),
            seed,
            task: Some(Task::Binary),
            ..TrainSpec::new(&all, vec!["g".into()], "y")
        };
        gbdt_models(&train(&spec, &mut |_e: Progress| {}).unwrap().bundle)
    };
    let (a, again) = (fit(&grid, 0), fit(&grid, 0));
    let (plain, other) = (fit(&grid[..1], 0), fit(&grid, 1));
    for (k, m) in &a {
        assert_trees_close(m, &again[k], 0.0, &format!("{k}: the same run"));
        assert_ne!(m, &plain[k], "{k}: quantized against plain");
        assert_ne!(m, &other[k], "{k}: another seed");
    }
}

fn gbdt_strategies_and_threads_agree(task: Task, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    // One dominant group (cut over workers by `fused`) and small ones.
    let sizes = [6000, 700, 300, 120, 60, 45, 40];
    let table = with_nans(Table::synth(&sizes, 5, task, 5));
    let vtable = Table::synth(&sizes, 5, task, 6);
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let mut params = vec![
        "rounds=15",
        "num_leaves=7,31",
        "learning_rate=0.2",
        "early_stopping_rounds=4",
    ];
    params.extend(extra);
    let params = &params;
    let reference = fit_gbdt(&all, &vall, task, Strategy::Tp, 1, params).bundle;
    let ref_models = gbdt_models(&reference);
    for strategy in [
        Strategy::Tp,
        Strategy::Fused,
        Strategy::Dp,
        Strategy::Hybrid,
    ] {
        for threads in [1, 2, 3] {
            let out = fit_gbdt(&all, &vall, task, strategy, threads, params);
            let what = format!("{task:?} {strategy:?} x {threads}");
            assert_cuts(strategy, threads, out.summary.cut_groups, &what);
            let b = out.bundle;
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
    gbdt_strategies_and_threads_agree(Task::Binary, &[]);
}

#[test]
fn gbdt_strategies_and_threads_agree_regression() {
    gbdt_strategies_and_threads_agree(Task::Regression, &[]);
}

/// Quantized histograms sum multiples of one scale: exact in any order.
#[test]
fn gbdt_quantized_strategies_and_threads_agree() {
    gbdt_strategies_and_threads_agree(Task::Binary, &["use_quantized_grad=true"]);
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
    let out = train(&spec, &mut |_e: Progress| {}).unwrap();
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

// ---------------------------------------------------------------------------
// gbdt: categorical features
// ---------------------------------------------------------------------------

/// The categorical features of [`CatTable`] and their levels: few (split
/// one-vs-rest), some, and more than a byte holds (a wide feature, `u16`
/// bins).
const CAT_LEVELS: [(&str, usize); 3] = [("c3", 3), ("c40", 40), ("c600", 600)];

/// A table with a string key `g`, a numeric feature `x`, the text features
/// of [`CAT_LEVELS`] (some nulls) and a target `y`; each group has its own
/// effect of every level.
#[derive(Debug, Clone)]
struct CatTable {
    keys: Vec<String>,
    x: Vec<f32>,
    cats: Vec<Vec<Option<String>>>,
    y: Vec<f64>,
}

impl CatTable {
    /// Training and validation rows of groups of the given sizes (each
    /// group's effects shared by both), rows interleaved; some validation
    /// values are a level the training rows do not have.
    fn synth(sizes: &[usize], task: Task, seed: u64) -> (CatTable, CatTable) {
        let mut rng = Rng::new(seed);
        let mut rows: [Vec<(usize, f32, Vec<Option<String>>, f64)>; 2] = [Vec::new(), Vec::new()];
        for (g, &n) in sizes.iter().enumerate() {
            let effects: Vec<Vec<f64>> = CAT_LEVELS
                .iter()
                .map(|&(_, l)| (0..l).map(|_| rng.normal()).collect())
                .collect();
            let w = 0.5 * rng.normal();
            for (part, out) in rows.iter_mut().enumerate() {
                let first = out.len();
                for _ in 0..n {
                    let x = rng.normal();
                    let mut margin = w * x;
                    let mut vals = Vec::new();
                    for (f, &(name, levels)) in CAT_LEVELS.iter().enumerate() {
                        // Low levels frequent, a long tail of rare ones (the
                        // large groups still have more than 256 categories
                        // of c600 with 3 rows or more).
                        let u = rng.unit();
                        let l = ((levels as f64 * u * u) as usize).min(levels - 1);
                        let v = rng.unit();
                        vals.push(if v < 0.05 {
                            margin += 0.8;
                            None
                        } else if part == 1 && v < 0.08 {
                            Some(format!("{name}_unseen"))
                        } else {
                            margin += effects[f][l];
                            Some(format!("{name}_{l:03}"))
                        });
                    }
                    let y = match task {
                        Task::Regression => margin + 0.3 * rng.normal(),
                        Task::Binary => {
                            f64::from(u8::from(rng.unit() < 1.0 / (1.0 + (-margin).exp())))
                        }
                    };
                    out.push((g, x as f32, vals, y));
                }
                if task == Task::Binary && n >= 2 {
                    out[first].3 = 0.0;
                    out[first + 1].3 = 1.0;
                }
            }
        }
        let [train, valid] = rows.map(|mut rows| {
            for i in (1..rows.len()).rev() {
                let j = rng.below(i + 1);
                rows.swap(i, j);
            }
            let mut t = CatTable {
                keys: Vec::new(),
                x: Vec::new(),
                cats: vec![Vec::new(); CAT_LEVELS.len()],
                y: Vec::new(),
            };
            for (g, x, vals, y) in rows {
                t.keys.push(format!("g{g:05}"));
                t.x.push(x);
                for (c, v) in t.cats.iter_mut().zip(vals) {
                    c.push(v);
                }
                t.y.push(y);
            }
            t
        });
        (train, valid)
    }

    /// The rows of one group, in their original order.
    fn only(&self, key: &str) -> CatTable {
        let idx: Vec<usize> = (0..self.y.len()).filter(|&i| self.keys[i] == key).collect();
        CatTable {
            keys: idx.iter().map(|&i| self.keys[i].clone()).collect(),
            x: idx.iter().map(|&i| self.x[i]).collect(),
            cats: self
                .cats
                .iter()
                .map(|c| idx.iter().map(|&i| c[i].clone()).collect())
                .collect(),
            y: idx.iter().map(|&i| self.y[i]).collect(),
        }
    }

    fn batch(&self) -> RecordBatch {
        use arrow_array::{ArrayRef, Float32Array, StringArray};
        use arrow_schema::{DataType, Field, Schema};
        let mut fields = vec![
            Field::new("g", DataType::Utf8, false),
            Field::new("x", DataType::Float32, false),
        ];
        let mut cols: Vec<ArrayRef> = vec![
            std::sync::Arc::new(StringArray::from(self.keys.clone())),
            std::sync::Arc::new(Float32Array::from(self.x.clone())),
        ];
        for (&(name, _), c) in CAT_LEVELS.iter().zip(&self.cats) {
            fields.push(Field::new(name, DataType::Utf8, true));
            cols.push(std::sync::Arc::new(StringArray::from(c.clone())));
        }
        fields.push(Field::new("y", DataType::Float64, false));
        cols.push(std::sync::Arc::new(Float64Array::from(self.y.clone())));
        RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), cols).unwrap()
    }

    fn write(&self, path: &Path) -> std::path::PathBuf {
        groupfit::job::write_parquet(path, &self.batch()).unwrap();
        path.to_path_buf()
    }
}

/// Each categorical node's set as level text, through the bundle's
/// dictionaries (a group trained alone codes its levels differently).
fn cat_sets(b: &ModelBundle, m: &GbdtModel) -> Vec<Vec<Vec<String>>> {
    m.trees
        .iter()
        .map(|t| {
            t.cat_left
                .iter()
                .enumerate()
                .map(|(n, codes)| {
                    if codes.is_empty() {
                        return Vec::new();
                    }
                    let name = &b.features[t.split_feature[n] as usize];
                    let dict = b.categorical.iter().find(|d| &d.feature == name).unwrap();
                    codes
                        .iter()
                        .map(|&c| dict.level(c as f64).to_string())
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// [`assert_trees_close`], and the same category sets (as text).
fn assert_cat_trees_close(
    (ba, a): (&ModelBundle, &GbdtModel),
    (bb, b): (&ModelBundle, &GbdtModel),
    rel: f64,
    what: &str,
) {
    assert_trees_close(a, b, rel, what);
    assert_eq!(cat_sets(ba, a), cat_sets(bb, b), "{what}: category sets");
}

const CAT_GRID: &[&str] = &[
    "rounds=20",
    "num_leaves=4,15",
    "learning_rate=0.3",
    "min_data_in_leaf=5",
    "min_data_per_group=20",
    "cat_smooth=5",
    "early_stopping_rounds=5",
];

/// A group trained among others equals the group trained alone (whose
/// dictionaries hold only its own levels, in the same order), with every
/// kind of categorical split, nulls, and unseen values in the validation
/// rows that early stopping scores.
fn gbdt_categorical_grouped_equals_looped(task: Task) {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [40, 300, 1200, 3500];
    let (table, vtable) = CatTable::synth(&sizes, task, 31);
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let out = fit_gbdt(&all, &vall, task, Strategy::Auto, 2, CAT_GRID);
    assert_eq!(
        out.bundle.categorical.len(),
        3,
        "three categorical features"
    );
    let together = gbdt_models(&out.bundle);
    let sets = cat_sets(&out.bundle, &together["g00003"]);
    let on = |f: &str| {
        let j = out.bundle.features.iter().position(|x| x == f).unwrap();
        together["g00003"].trees.iter().any(|t| {
            t.split_feature
                .iter()
                .zip(t.cat_left.iter().chain(std::iter::repeat(&Vec::new())))
                .any(|(&s, c)| s as usize == j && !c.is_empty())
        })
    };
    for f in ["c3", "c40", "c600"] {
        assert!(on(f), "{task:?}: no split on {f}");
    }
    // The largest group's c600 has more category bins than a byte holds.
    assert!(
        together["g00003"].bins[3] > 256,
        "{:?}",
        together["g00003"].bins
    );
    assert!(
        sets.iter().flatten().any(|s| s.len() > 1),
        "a sorted split with several categories left"
    );
    for g in 0..sizes.len() {
        let key = format!("g{g:05}");
        let alone = table
            .only(&key)
            .write(&dir.path().join(format!("{key}.parquet")));
        let valone = vtable
            .only(&key)
            .write(&dir.path().join(format!("v{key}.parquet")));
        let b = fit_gbdt(&alone, &valone, task, Strategy::Auto, 2, CAT_GRID).bundle;
        let m = gbdt(b.groups[0].model.as_ref().unwrap());
        let what = format!("{task:?} group {key}");
        assert_cat_trees_close((&out.bundle, &together[&key]), (&b, m), 1e-9, &what);
        let same = out
            .bundle
            .groups
            .iter()
            .find(|e| e.key[0].as_deref() == Some(key.as_str()))
            .unwrap();
        assert_eq!(b.groups[0].config, same.config, "{key}: chosen config");
        assert_eq!(b.groups[0].iterations, same.iterations, "{key}: rounds");
        assert_eq!(
            b.groups[0].valid_by_config, same.valid_by_config,
            "{key}: scores"
        );
    }
}

#[test]
fn gbdt_categorical_grouped_equals_looped_binary() {
    gbdt_categorical_grouped_equals_looped(Task::Binary);
}

#[test]
fn gbdt_categorical_grouped_equals_looped_regression() {
    gbdt_categorical_grouped_equals_looped(Task::Regression);
}

/// Every strategy and thread count grows the same trees with categorical
/// features (a dominant group cut over workers builds its histograms,
/// the wide feature's included, in parts).
#[test]
fn gbdt_categorical_strategies_and_threads_agree() {
    let dir = tempfile::tempdir().unwrap();
    let task = Task::Binary;
    let sizes = [6000, 700, 120, 45];
    let (table, vtable) = CatTable::synth(&sizes, task, 41);
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let params = &[
        "rounds=12",
        "num_leaves=7,31",
        "learning_rate=0.2",
        "early_stopping_rounds=4",
    ];
    let reference = fit_gbdt(&all, &vall, task, Strategy::Tp, 1, params).bundle;
    let ref_models = gbdt_models(&reference);
    for (strategy, threads) in [
        (Strategy::Tp, 2),
        (Strategy::Fused, 3),
        (Strategy::Dp, 2),
        (Strategy::Hybrid, 3),
    ] {
        let out = fit_gbdt(&all, &vall, task, strategy, threads, params);
        let what = format!("{strategy:?} x {threads}");
        assert_cuts(strategy, threads, out.summary.cut_groups, &what);
        let ms = gbdt_models(&out.bundle);
        for (k, m) in &ref_models {
            let w = format!("{what}, group {k}");
            assert_cat_trees_close((&reference, m), (&out.bundle, &ms[k]), 1e-9, &w);
        }
        let chosen = |b: &ModelBundle| b.groups.iter().map(|g| g.config).collect::<Vec<_>>();
        assert_eq!(
            chosen(&reference),
            chosen(&out.bundle),
            "{what}: chosen configs"
        );
    }
}

/// A saved and loaded model predicts the same; a null and a value unseen in
/// training go the same way (right at every categorical node), and the
/// categorical features have gain importance.
#[test]
fn gbdt_categorical_round_trip_null_and_unseen_go_right() {
    let dir = tempfile::tempdir().unwrap();
    let task = Task::Regression;
    let (table, mut vtable) = CatTable::synth(&[2000, 800], task, 51);
    let all = table.write(&dir.path().join("all.parquet"));
    let vall = vtable.write(&dir.path().join("vall.parquet"));
    let spec = TrainSpec {
        params: vec!["rounds=30".into(), "num_leaves=15".into()],
        model: "gbdt".into(),
        valid: Some(vall.clone()),
        task: Some(task),
        ..TrainSpec::new(&all, vec!["g".into()], "y")
    };
    let out = train(&spec, &mut |_e: Progress| {}).unwrap();
    let path = dir.path().join("m.gfm");
    out.bundle.save(&path).unwrap();
    let loaded = ModelBundle::load(&path).unwrap();
    assert_eq!(loaded, out.bundle);
    let preds = |b: &ModelBundle, p: &Path| -> Vec<f64> {
        let (r, _) = predict_batch(b, p, true).unwrap();
        let c = r.column_by_name("prediction").unwrap();
        c.as_any()
            .downcast_ref::<Float64Array>()
            .unwrap()
            .values()
            .to_vec()
    };
    assert_eq!(preds(&out.bundle, &vall), preds(&loaded, &vall));
    let models = gbdt_models(&out.bundle);
    for f in ["c3", "c40", "c600"] {
        let j = out.bundle.features.iter().position(|x| x == f).unwrap();
        assert!(
            models.values().any(|m| m.importance[j] > 0.0),
            "no gain on {f}"
        );
    }
    // Every categorical value null, then every one unseen: the same
    // predictions, row by row.
    let n = vtable.y.len();
    for c in vtable.cats.iter_mut() {
        *c = vec![None; n];
    }
    let nulls = preds(
        &out.bundle,
        &vtable.write(&dir.path().join("nulls.parquet")),
    );
    for (c, &(name, _)) in vtable.cats.iter_mut().zip(&CAT_LEVELS) {
        *c = vec![Some(format!("{name}_never")); n];
    }
    let unseen = preds(
        &out.bundle,
        &vtable.write(&dir.path().join("unseen.parquet")),
    );
    assert_eq!(nulls, unseen);
}

// ---------------------------------------------------------------------------
// gbdt: the golden file of a model with categorical features
// ---------------------------------------------------------------------------

/// Groups of the categorical golden table: three with their own models,
/// `tiny` (4 rows < min_rows 10) and `solo` (one class) falling back.
const GOLDEN_CAT_GROUPS: [(&str, usize); 5] = [
    ("alpha", 160),
    ("beta", 120),
    ("gamma", 100),
    ("tiny", 4),
    ("solo", 30),
];

/// A table of keys `g`, a numeric `f0` and the text features `color` (3
/// levels: one-vs-rest splits) and `shape` (12 levels: sorted splits), some
/// null; every group has its own effect of each level.
fn golden_cat_batch(
    rows: &[(&str, f32, Option<&str>, Option<String>)],
    y: Option<&[f64]>,
) -> RecordBatch {
    use arrow_array::{ArrayRef, Float32Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let mut fields = vec![
        Field::new("g", DataType::Utf8, false),
        Field::new("f0", DataType::Float32, true),
        Field::new("color", DataType::Utf8, true),
        Field::new("shape", DataType::Utf8, true),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        std::sync::Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        std::sync::Arc::new(Float32Array::from_iter(
            rows.iter().map(|r| (!r.1.is_nan()).then_some(r.1)),
        )),
        std::sync::Arc::new(StringArray::from_iter(rows.iter().map(|r| r.2))),
        std::sync::Arc::new(StringArray::from_iter(rows.iter().map(|r| r.3.as_deref()))),
    ];
    if let Some(y) = y {
        fields.push(Field::new("y", DataType::Float64, false));
        cols.push(std::sync::Arc::new(Float64Array::from(y.to_vec())));
    }
    RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), cols).unwrap()
}

fn golden_cat_table(path: &Path) -> std::path::PathBuf {
    let colors = ["blue", "green", "red"];
    let mut rng = Rng::new(606);
    let mut rows = Vec::new();
    let mut y = Vec::new();
    for &(key, n) in &GOLDEN_CAT_GROUPS {
        let ec: Vec<f64> = (0..3).map(|_| 1.5 * rng.normal()).collect();
        let es: Vec<f64> = (0..12).map(|_| 1.5 * rng.normal()).collect();
        for i in 0..n {
            let f0 = rng.normal();
            let (c, s) = (rng.below(3), rng.below(12));
            let color = (rng.unit() >= 0.1).then_some(colors[c]);
            let shape = (rng.unit() >= 0.05).then(|| format!("s{s:02}"));
            let margin =
                0.5 * f0 + color.map_or(1.0, |_| ec[c]) + shape.as_ref().map_or(-1.0, |_| es[s]);
            let label = match (key, i) {
                ("solo", _) => 1.0,
                (_, 0) => 0.0,
                (_, 1) => 1.0,
                _ => f64::from(u8::from(rng.unit() < 1.0 / (1.0 + (-margin).exp()))),
            };
            rows.push((key, f0 as f32, color, shape));
            y.push(label);
        }
    }
    groupfit::job::write_parquet(path, &golden_cat_batch(&rows, Some(&y))).unwrap();
    path.to_path_buf()
}

/// The rows the categorical golden model predicts: own-model groups with
/// seen levels, a null color, an unseen shape and a missing `f0`; both
/// fallback groups; an unseen group.
fn golden_cat_rows() -> RecordBatch {
    let s = |v: &str| Some(v.to_string());
    let rows = [
        ("alpha", 0.5f32, Some("red"), s("s03")),
        ("alpha", -1.25, None, s("s07")),
        ("beta", 2.0, Some("blue"), s("s99")),
        ("beta", 0.0, Some("green"), None),
        ("gamma", -0.75, Some("green"), s("s11")),
        ("gamma", 1.5, Some("purple"), s("s00")),
        ("tiny", 0.25, Some("red"), s("s05")),
        ("solo", 1.0, Some("blue"), s("s02")),
        ("unseen", -2.0, Some("red"), s("s04")),
        ("alpha", f32::NAN, Some("blue"), s("s10")),
    ];
    golden_cat_batch(&rows, None)
}

/// `tests/golden/gbdt_v6_categorical.gfm` (format 6: dictionaries in the
/// bundle, category sets in the trees) still loads and predicts its
/// recorded values on `rows_gbdt_categorical.parquet`. `GROUPFIT_BLESS=1`
/// trains it afresh while 6 is the current format (see
/// tests/golden/README.md).
#[test]
fn gbdt_golden_categorical_model_file_still_loads_and_predicts() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden");
    let stem = "gbdt_v6_categorical";
    let (version, path) = (6, dir.join(format!("{stem}.gfm")));
    let rows = dir.join("rows_gbdt_categorical.parquet");
    let expected_path = dir.join(format!("{stem}.expected.json"));
    let bless = std::env::var_os("GROUPFIT_BLESS").is_some_and(|v| v == "1");
    if bless && version == groupfit::store::FORMAT_VERSION {
        let tmp = tempfile::tempdir().unwrap();
        let spec = TrainSpec {
            model: "gbdt".into(),
            params: [
                "rounds=8",
                "num_leaves=4,8",
                "min_data_in_leaf=5",
                "min_data_per_group=10",
                "cat_smooth=2",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            threads: 1,
            valid_fraction: 0.25,
            min_rows: 10,
            task: Some(Task::Binary),
            ..TrainSpec::new(
                golden_cat_table(&tmp.path().join("train.parquet")),
                vec!["g".into()],
                "y",
            )
        };
        let out = train(&spec, &mut |_e: Progress| {}).unwrap();
        out.bundle.save(&path).unwrap();
        groupfit::job::write_parquet(&rows, &golden_cat_rows()).unwrap();
        bless_expected(&path, &rows, &expected_path, stem, version);
    }
    let bundle = load_golden(&path, stem);
    assert_eq!(bundle.format_version, version);
    assert_eq!(bundle.features, vec!["f0", "color", "shape"]);
    let models = gbdt_models(&bundle);
    let sets: Vec<&Vec<u32>> = models
        .values()
        .flat_map(|m| m.trees.iter().flat_map(|t| t.cat_left.iter()))
        .filter(|c| !c.is_empty())
        .collect();
    assert!(
        sets.iter().any(|c| c.len() == 1) && sets.iter().any(|c| c.len() > 1),
        "the golden model has categorical nodes of one and of several categories"
    );
    let routes = check_expected(&bundle, &rows, &expected_path, stem);
    for r in ["own", "fallback", "unseen"] {
        assert!(routes.iter().any(|x| x == r), "golden rows lack a {r} row");
    }
}
