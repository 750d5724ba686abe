//! The linear family: grouped == looped, strategies x threads, and a
//! proptest over group-size distributions.

use groupfit::data::Task;
use groupfit::plan::Strategy;
use groupfit::store::ModelBundle;
use proptest::prelude::*;

use crate::common::*;

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
            assert_cuts(strategy, threads, out.summary.cut_groups, &what);
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
    // dp cuts exactly the groups of more than one 256-row block (the global
    // pseudo-group holds every row); tp cuts none.
    let blocks_of = |n: usize| n.div_ceil(256);
    let must_cut = sizes.iter().filter(|&&n| blocks_of(n) > 1).count()
        + usize::from(blocks_of(sizes.iter().sum()) > 1);
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
        match strategy {
            Strategy::Tp => prop_assert_eq!(out.summary.cut_groups, 0),
            Strategy::Dp => prop_assert_eq!(out.summary.cut_groups, must_cut),
            _ => {}
        }
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
/// `tests/engine/linear.proptest-regressions` and replayed first.
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
