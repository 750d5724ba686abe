//! The gbdt family: grouped == looped, strategies x threads, the planner's
//! pilot rounds, round trip.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::{Array, Float64Array, RecordBatch};
use groupfit::data::Task;
use groupfit::gbdt::GbdtModel;
use groupfit::job::{predict_batch, train, Event, TrainOutput, TrainSpec};
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
