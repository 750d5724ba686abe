//! The MLP family: grouped == looped, strategies x threads, round trip.

use std::collections::BTreeMap;
use std::path::Path;

use groupfit::data::Task;
use groupfit::job::{train, Progress, TrainOutput, TrainSpec};
use groupfit::mlp::MlpModel;
use groupfit::plan::Strategy;
use groupfit::store::{FittedModel, ModelBundle};

use crate::common::*;

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
    mlp_train(task, params, strategy, threads, path, valid_fraction).bundle
}

/// [`mlp_run`], with the summary.
fn mlp_train(
    task: Task,
    params: &[&str],
    strategy: Strategy,
    threads: usize,
    path: &Path,
    valid_fraction: f64,
) -> TrainOutput {
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
    let out = train(&spec, &mut |_e: Progress| {}).unwrap();
    if strategy != Strategy::Auto {
        assert_eq!(out.summary.strategy, strategy.name());
    }
    out
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
            let out = mlp_train(task, &params, strategy, threads, &path, 0.2);
            let what = format!("{task:?} mlp {} x {threads} threads", strategy.name());
            assert_cuts(strategy, threads, out.summary.cut_groups, &what);
            let b = out.bundle;
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
