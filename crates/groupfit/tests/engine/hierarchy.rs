//! `--hierarchy`: every level's models equal a run of that level alone
//! (grouped equals looped, per level), and rows without a model of their
//! own group go to the nearest level above that has one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use groupfit::data::keys::display_key;
use groupfit::data::Task;
use groupfit::job::{train, write_parquet, Progress, TrainSpec};
use groupfit::linear::LinearModel;
use groupfit::plan::Strategy;
use groupfit::store::{GroupEntry, ModelBundle};

use crate::common::{assert_models_close, linear, predictions, Table, TIGHT};

/// Stores `g00000`... of the sizes given, in regions `r0` to `r2` (store
/// `i` in region `i % 3`), with a region column first.
fn regions_table(sizes: &[usize], seed: u64) -> (Table, Vec<String>) {
    let t = Table::synth(sizes, 3, Task::Regression, seed);
    let regions = t
        .keys
        .iter()
        .map(|k| format!("r{}", k[1..].parse::<usize>().unwrap() % 3))
        .collect();
    (t, regions)
}

fn write(t: &Table, regions: &[String], path: &Path) -> PathBuf {
    let base = t.batch();
    let mut fields = vec![Field::new("region", DataType::Utf8, false)];
    let mut cols: Vec<ArrayRef> = vec![Arc::new(StringArray::from(regions.to_vec()))];
    for (f, c) in base.schema().fields().iter().zip(base.columns()) {
        fields.push(f.as_ref().clone());
        cols.push(c.clone());
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
    write_parquet(path, &batch).unwrap();
    path.to_path_buf()
}

fn spec(path: &Path, by: &[&str], hierarchy: bool, strategy: Strategy) -> TrainSpec {
    TrainSpec {
        params: TIGHT.iter().map(|s| s.to_string()).collect(),
        valid_fraction: 0.0,
        min_rows: 5,
        task: Some(Task::Regression),
        threads: 2,
        strategy,
        hierarchy,
        features: Some(vec!["f0".into(), "f1".into(), "f2".into()]),
        ..TrainSpec::new(path, by.iter().map(|s| s.to_string()).collect(), "y")
    }
}

fn own_models(groups: &[GroupEntry]) -> BTreeMap<String, LinearModel> {
    groups
        .iter()
        .filter_map(|g| {
            g.model
                .as_ref()
                .map(|m| (display_key(&g.key), linear(m).clone()))
        })
        .collect()
}

fn assert_same(a: &BTreeMap<String, LinearModel>, b: &BTreeMap<String, LinearModel>, what: &str) {
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}"
    );
    for (k, m) in a {
        assert_models_close(m, &b[k], 1e-6, &format!("{what}, group {k}"));
    }
}

fn global(b: &ModelBundle) -> LinearModel {
    linear(&b.global.as_ref().unwrap().model).clone()
}

#[test]
fn every_level_equals_its_own_run_under_every_strategy() {
    let dir = tempfile::tempdir().unwrap();
    // Stores of 3 rows fall back (min_rows 5).
    let sizes = [300, 40, 3, 120, 8, 60, 3, 25, 500];
    let (t, regions) = regions_table(&sizes, 11);
    let path = write(&t, &regions, &dir.path().join("t.parquet"));
    let stores = train(
        &spec(&path, &["region", "g"], false, Strategy::Auto),
        &mut |_: Progress| {},
    )
    .unwrap()
    .bundle;
    let alone = train(
        &spec(&path, &["region"], false, Strategy::Auto),
        &mut |_: Progress| {},
    )
    .unwrap()
    .bundle;
    for strategy in [
        Strategy::Tp,
        Strategy::Dp,
        Strategy::Fused,
        Strategy::Hybrid,
    ] {
        let what = format!("{strategy:?}");
        let h = train(
            &spec(&path, &["region", "g"], true, strategy),
            &mut |_: Progress| {},
        )
        .unwrap()
        .bundle;
        assert_eq!(h.levels.len(), 1, "{what}: one level above the stores");
        assert_eq!(h.levels[0].key_columns, ["region"]);
        assert_same(&own_models(&h.groups), &own_models(&stores.groups), &what);
        assert_same(
            &own_models(&h.levels[0].groups),
            &own_models(&alone.groups),
            &format!("{what}, regions"),
        );
        assert_models_close(
            &global(&h),
            &global(&stores),
            1e-6,
            &format!("{what}, global"),
        );
        assert_eq!(h.groups.len(), 9);
        assert_eq!(h.levels[0].groups.len(), 3);
    }
}

#[test]
fn rows_without_their_own_model_go_to_the_nearest_level_with_one() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [200, 3, 150, 90, 60];
    let (t, regions) = regions_table(&sizes, 5);
    let path = write(&t, &regions, &dir.path().join("t.parquet"));
    let out = train(
        &spec(&path, &["region", "g"], true, Strategy::Auto),
        &mut |_: Progress| {},
    )
    .unwrap();
    let b = &out.bundle;
    // Rows: own store; a store that fell back (g00001, region r1); a store
    // unseen in region r0; an unseen region.
    let probe = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("region", DataType::Utf8, false),
            Field::new("g", DataType::Utf8, false),
            Field::new("f0", DataType::Float64, false),
            Field::new("f1", DataType::Float64, false),
            Field::new("f2", DataType::Float64, false),
        ])),
        vec![
            Arc::new(StringArray::from(vec!["r0", "r1", "r0", "r9"])) as ArrayRef,
            Arc::new(StringArray::from(vec!["g00000", "g00001", "new", "new"])),
            Arc::new(Float64Array::from(vec![0.5, 0.5, 0.5, 0.5])),
            Arc::new(Float64Array::from(vec![1.0, 1.0, 1.0, 1.0])),
            Arc::new(Float64Array::from(vec![-1.0, -1.0, -1.0, -1.0])),
        ],
    )
    .unwrap();
    let probe_path = dir.path().join("probe.parquet");
    write_parquet(&probe_path, &probe).unwrap();
    let (p, routes) = predictions(b, &probe_path);
    assert_eq!(routes, ["own", "level:region", "level:region", "unseen"]);
    let x = [0.5, 1.0, -1.0];
    let level = |key: &str| {
        let g = b.levels[0]
            .groups
            .iter()
            .find(|g| g.key[0].as_deref() == Some(key))
            .unwrap();
        linear(g.model.as_ref().unwrap()).predict_row(Task::Regression, &x)
    };
    let store0 = linear(b.groups[0].model.as_ref().unwrap()).predict_row(Task::Regression, &x);
    assert_eq!(b.groups[0].key[1].as_deref(), Some("g00000"));
    let want = [
        store0,
        level("r1"),
        level("r0"),
        global(b).predict_row(Task::Regression, &x),
    ];
    for (got, want) in p.iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
    // The model file keeps the levels.
    let file = dir.path().join("m.gfm");
    b.save(&file).unwrap();
    let back = ModelBundle::load(&file).unwrap();
    assert_eq!(back.levels, b.levels);
    assert_eq!(predictions(&back, &probe_path).0, p);
}

#[test]
fn hierarchy_needs_two_key_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (t, regions) = regions_table(&[20, 20], 1);
    let path = write(&t, &regions, &dir.path().join("t.parquet"));
    let e = train(
        &spec(&path, &["g"], true, Strategy::Auto),
        &mut |_: Progress| {},
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "--hierarchy needs two or more key columns (--by a,b), got 1"
    );
}

/// `tests/golden/linear_v7_hierarchy.gfm` (format 7: the levels of a
/// hierarchy) keeps loading and predicting `rows_hierarchy.parquet` as
/// recorded: rows served by their store, by their region (their store fell
/// back or is new) and by the global model (a new region).
#[test]
fn golden_hierarchy_file_still_loads_and_predicts() {
    let dir = crate::common::golden_dir();
    let stem = "linear_v7_hierarchy";
    let path = dir.join(format!("{stem}.gfm"));
    let rows = dir.join("rows_hierarchy.parquet");
    let expected_path = dir.join(format!("{stem}.expected.json"));
    let bless = std::env::var_os("GROUPFIT_BLESS").is_some_and(|v| v == "1");
    if bless && groupfit::store::FORMAT_VERSION == 7 {
        let tmp = tempfile::tempdir().unwrap();
        let (t, regions) = regions_table(&[200, 3, 150, 90, 60], 5);
        let data = write(&t, &regions, &tmp.path().join("t.parquet"));
        let bundle = train(
            &spec(&data, &["region", "g"], true, Strategy::Auto),
            &mut |_: Progress| {},
        )
        .unwrap()
        .bundle;
        bundle.save(&path).unwrap();
        let (probe, probe_regions) = regions_table(&[4, 4, 4, 4, 4, 4], 9);
        // Stores g00005 (region r2) and up were not trained; region r2 has
        // g00002; "r9" is a region of its own, unseen.
        let mut probe_regions = probe_regions;
        probe_regions[0] = "r9".into();
        write(&probe, &probe_regions, &rows);
        crate::common::bless_expected(&path, &rows, &expected_path, stem, 7);
    }
    let bundle = crate::common::load_golden(&path, stem);
    assert_eq!(bundle.format_version, 7);
    assert_eq!(bundle.levels.len(), 1);
    let routes = crate::common::check_expected(&bundle, &rows, &expected_path, stem);
    for r in ["own", "level:region", "unseen"] {
        assert!(routes.iter().any(|x| x == r), "golden rows lack a {r} row");
    }
}

/// A row's prediction by hand: the models on its path (global, region,
/// store) blended by `auto`'s chain `w = n / (n + k)`.
fn auto_by_hand(b: &ModelBundle, region: &str, store: &str, x: &[f64]) -> f64 {
    let pooling = b.pooling.as_ref().expect("pooling");
    let find = |groups: &[GroupEntry], key: &[&str]| {
        groups
            .iter()
            .find(|g| {
                g.key
                    .iter()
                    .map(|p| p.as_deref().unwrap())
                    .eq(key.iter().copied())
            })
            .filter(|g| g.model.is_some())
            .cloned()
    };
    let mut z = global(b).predict_row(Task::Regression, x);
    let path = [
        find(&b.levels[0].groups, &[region]),
        find(&b.groups, &[region, store]),
    ];
    for (d, node) in path.iter().enumerate() {
        if let Some(g) = node {
            let own = linear(g.model.as_ref().unwrap()).predict_row(Task::Regression, x);
            let w = g.n_train as f64 / (g.n_train as f64 + pooling.k[d]);
            z = w * own + (1.0 - w) * z;
        }
    }
    z
}

/// `--shrinkage auto` (the default with `--hierarchy`): every strategy and
/// thread count chooses the same `k` per level and predicts the same blend,
/// which is the chain of the path's models by hand.
#[test]
fn auto_pooling_is_the_same_blend_under_every_strategy() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [300, 40, 3, 120, 8, 60, 3, 25, 500, 12, 18];
    let (mut t, regions) = regions_table(&sizes, 12);
    // Noise well above the stores' differences: pooling pays.
    for (i, y) in t.y.iter_mut().enumerate() {
        *y += 6.0 * ((i as f64 * 12.9898).sin() * 43_758.545).fract();
    }
    let path = write(&t, &regions, &dir.path().join("t.parquet"));
    let (probe, probe_regions) = regions_table(&[5; 12], 13);
    let rows = write(&probe, &probe_regions, &dir.path().join("p.parquet"));
    let mut first: Option<(Vec<f64>, Vec<f64>)> = None;
    let runs = [
        (Strategy::Tp, 2),
        (Strategy::Dp, 2),
        (Strategy::Fused, 2),
        (Strategy::Hybrid, 2),
        (Strategy::Auto, 1),
    ];
    for (strategy, threads) in runs {
        let what = format!("{strategy:?}, {threads} threads");
        let s = TrainSpec {
            valid_fraction: 0.3,
            threads,
            ..spec(&path, &["region", "g"], true, strategy)
        };
        let out = train(&s, &mut |_: Progress| {}).unwrap();
        let b = out.bundle;
        let pooling = b.pooling.clone().expect("auto by default");
        assert_eq!(pooling.mode, groupfit::tune::shrinkage::Shrinkage::Auto);
        let summary = out.summary.pooling.expect("a pooling summary");
        assert!(
            summary.loss.unwrap() <= summary.loss_none.unwrap(),
            "{what}"
        );
        let (p, _) = predictions(&b, &rows);
        for i in 0..probe.keys.len() {
            let x: Vec<f64> = probe.x.iter().map(|c| f64::from(c[i])).collect();
            let want = auto_by_hand(&b, &probe_regions[i], &probe.keys[i], &x);
            assert!(
                (p[i] - want).abs() < 1e-9,
                "{what}, row {i}: {} vs {want}",
                p[i]
            );
        }
        match &first {
            None => first = Some((pooling.k.clone(), p)),
            Some((k, p0)) => {
                assert_eq!(&pooling.k, k, "{what}: the same k per level");
                for (a, b) in p.iter().zip(p0) {
                    assert!((a - b).abs() < 1e-6, "{what}: {a} vs {b}");
                }
            }
        }
    }
    let (k, _) = first.unwrap();
    assert!(
        k.iter().any(|&k| k > 0.0),
        "the data calls for pooling: {k:?}"
    );
}

/// `tests/golden/linear_v8_pooling.gfm` (format 8: pooling, `auto` with a
/// `k` per level) keeps loading and predicting `rows_hierarchy.parquet`
/// as recorded.
#[test]
fn golden_pooling_file_still_loads_and_predicts() {
    let dir = crate::common::golden_dir();
    let stem = "linear_v8_pooling";
    let path = dir.join(format!("{stem}.gfm"));
    let rows = dir.join("rows_hierarchy.parquet");
    let expected_path = dir.join(format!("{stem}.expected.json"));
    let bless = std::env::var_os("GROUPFIT_BLESS").is_some_and(|v| v == "1");
    if bless && groupfit::store::FORMAT_VERSION == 8 {
        let tmp = tempfile::tempdir().unwrap();
        let (mut t, regions) = regions_table(&[200, 3, 150, 90, 60, 30, 20], 5);
        for (i, y) in t.y.iter_mut().enumerate() {
            *y += 6.0 * ((i as f64 * 12.9898).sin() * 43_758.545).fract();
        }
        let data = write(&t, &regions, &tmp.path().join("t.parquet"));
        let s = TrainSpec {
            valid_fraction: 0.3,
            ..spec(&data, &["region", "g"], true, Strategy::Auto)
        };
        let bundle = train(&s, &mut |_: Progress| {}).unwrap().bundle;
        bundle.save(&path).unwrap();
        crate::common::bless_expected(&path, &rows, &expected_path, stem, 8);
    }
    let bundle = crate::common::load_golden(&path, stem);
    assert_eq!(bundle.format_version, 8);
    let pooling = bundle.pooling.as_ref().expect("pooling");
    assert!(pooling.k.iter().any(|&k| k > 0.0), "{:?}", pooling.k);
    let routes = crate::common::check_expected(&bundle, &rows, &expected_path, stem);
    for r in ["own", "level:region", "unseen"] {
        assert!(routes.iter().any(|x| x == r), "golden rows lack a {r} row");
    }
}
