//! The model file: round trip and damage, golden files of every format
//! version, and `--no-global` bundles.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Float32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use groupfit::data::Task;
use groupfit::gbdt::GbdtModel;
use groupfit::job::{predict_batch, train, write_parquet, Progress, TrainSpec};
use groupfit::store::{FittedModel, ModelBundle, FORMAT_VERSION};
use groupfit::GroupfitError;

use crate::common::*;

// ---------------------------------------------------------------------------
// model file round trip and damage
// ---------------------------------------------------------------------------

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
        cat_left: Vec::new(),
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
    let out = train(&spec, &mut |_e: Progress| {}).unwrap();
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
        bless_expected(&path, &rows, &expected_path, stem, FORMAT_VERSION);
    }

    let bundle = load_golden(&path, stem);
    assert_eq!(bundle.format_version, version);
    assert_eq!(bundle.family, model);
    assert_eq!(bundle.key_columns, vec!["g".to_string()]);
    assert_eq!(bundle.features, vec!["f0", "f1", "f2"]);
    assert_eq!(bundle.task, Task::Binary);
    let routes = check_expected(&bundle, &rows, &expected_path, stem);
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
    // Format 9: each group's training time and the global model's score
    // on its validation rows.
    golden_case(
        "mlp_v9",
        9,
        "mlp",
        &["hidden=4", "epochs=3", "batch_size=16", "lr=0.01,0.1"],
    );
    let v9 = load_golden(&golden_dir().join("mlp_v9.gfm"), "mlp_v9");
    let own: Vec<_> = v9.groups.iter().filter(|g| g.model.is_some()).collect();
    assert!(!own.is_empty());
    for g in own {
        assert!(g.train_s.is_some_and(|s| s > 0.0), "{:?}", g.key);
        assert!(g.valid_global.is_some_and(f64::is_finite), "{:?}", g.key);
    }
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
        let with = train(&spec(true), &mut |_e: Progress| {}).unwrap();
        let without = train(&spec(false), &mut |_e: Progress| {}).unwrap();
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
