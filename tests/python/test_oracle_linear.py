"""The linear family against scikit-learn as an oracle.

Objective per group (and for the global model): C * sum_i loss_i + 0.5 * ||w||^2,
intercept unpenalised, i.e. LogisticRegression(C=C) for a binary target and
Ridge(alpha=1/C) for regression. Coefficients are compared in raw feature space.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge

from conftest import TIGHT, features_of, make_grouped

SIZES = {"a": 300, "b": 800, "c": 1300, "d": 2000}
RTOL = 1e-4
ATOL = 1e-6


def sk_fit(task: str, c: float, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    if task == "binary":
        m = LogisticRegression(C=c, tol=1e-12, max_iter=10000)
    else:
        m = Ridge(alpha=1.0 / c, tol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(x, y)
    coef = np.ravel(m.coef_)
    return coef, float(np.ravel(m.intercept_)[0])


def train_one_config(gf, tmp_path, cols, task, c, extra=()):
    data = gf.write_parquet(tmp_path / "train.parquet", cols)
    model = tmp_path / "model.gfm"
    summary = gf.train(
        data, model, "g", "y",
        "--task", task, "--param", f"C={c}", *TIGHT, "--valid-fraction", "0", *extra,
    )
    return summary, gf.inspect(model)


def assert_matches(name, got, want):
    (gc, gi), (wc, wi) = got, want
    np.testing.assert_allclose(gc, wc, rtol=RTOL, atol=ATOL, err_msg=f"{name}: coef")
    np.testing.assert_allclose(gi, wi, rtol=RTOL, atol=ATOL, err_msg=f"{name}: intercept")


@pytest.mark.parametrize("task", ["binary", "regression"])
@pytest.mark.parametrize("c", [0.01, 1.0, 10.0])
def test_groups_and_global_match_sklearn(gf, tmp_path, task, c):
    cols, _ = make_grouped(seed=11, sizes=SIZES, d=5, task=task)
    summary, ins = train_one_config(gf, tmp_path, cols, task, c)

    assert summary["task"] == task and summary["task_inferred"] is False
    assert summary["groups"] == 4 and summary["configs"] == 1 and summary["models"] == 5
    assert summary["rows_train"] == sum(SIZES.values()) and summary["rows_valid"] == 0
    assert summary["not_converged"] == 0
    assert ins["features"] == [f"f{j}" for j in range(5)]

    x = features_of(cols)
    y = np.asarray(cols["y"])
    g = np.asarray(cols["g"])
    groups = gf.groups_by_key(ins)
    assert sorted(groups) == sorted(SIZES)
    for key, n in SIZES.items():
        entry = groups[key]
        assert entry["route"] == "own" and entry["n_train"] == n and entry["n_valid"] == 0
        assert entry["config"] == f"C={c:g},tol=0.0000000001,max_iter=200"
        rows = g == key
        assert_matches(f"group {key}, C={c}", gf.coef(entry), sk_fit(task, c, x[rows], y[rows]))
    assert_matches(f"global, C={c}", gf.coef(ins["global"]), sk_fit(task, c, x, y))


def test_groups_differ_from_each_other(gf, tmp_path):
    """Guard against a vacuous oracle: per-group models must follow per-group truths."""
    cols, true_w = make_grouped(seed=3, sizes={"p": 2000, "q": 2000}, d=5, task="regression", noise=0.1)
    _, ins = train_one_config(gf, tmp_path, cols, "regression", 100.0)
    groups = gf.groups_by_key(ins)
    for k, key in enumerate(["p", "q"]):
        coef, intercept = gf.coef(groups[key])
        np.testing.assert_allclose(coef, true_w[k, :5], atol=0.02)
        np.testing.assert_allclose(intercept, true_w[k, 5], atol=0.02)


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_shifted_and_scaled_features_match_sklearn(gf, tmp_path, task):
    """Raw-space coefficients when features have large means and very different scales
    (the engine standardises internally and must map back exactly)."""
    cols, _ = make_grouped(seed=5, sizes={"a": 600, "b": 900}, d=4, task=task)
    shift = np.array([100.0, -3.0, 0.0, 7.5], dtype=np.float32)
    scale = np.array([0.01, 1.0, 50.0, 3.0], dtype=np.float32)
    for j in range(4):
        cols[f"f{j}"] = (cols[f"f{j}"] * scale[j] + shift[j]).astype(np.float32)
    c = 0.5
    _, ins = train_one_config(gf, tmp_path, cols, task, c)
    x, y, g = features_of(cols), np.asarray(cols["y"]), np.asarray(cols["g"])
    groups = gf.groups_by_key(ins)
    for key in ["a", "b"]:
        rows = g == key
        assert_matches(f"group {key}", gf.coef(groups[key]), sk_fit(task, c, x[rows], y[rows]))
    assert_matches("global", gf.coef(ins["global"]), sk_fit(task, c, x, y))


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_feature_constant_within_a_group(gf, tmp_path, task):
    """A column constant inside one group: its coefficient there is 0 (an L2-penalised
    direction the intercept already covers) and the rest still matches sklearn."""
    cols, _ = make_grouped(seed=8, sizes={"a": 500, "b": 700}, d=4, task=task)
    g = np.asarray(cols["g"])
    f3 = np.array(cols["f3"], dtype=np.float32)
    f3[g == "a"] = 2.5
    cols["f3"] = f3
    c = 1.0
    _, ins = train_one_config(gf, tmp_path, cols, task, c)
    x, y = features_of(cols), np.asarray(cols["y"])
    groups = gf.groups_by_key(ins)
    coef_a, _ = gf.coef(groups["a"])
    assert abs(coef_a[3]) < 1e-9
    for key in ["a", "b"]:
        rows = g == key
        assert_matches(f"group {key}", gf.coef(groups[key]), sk_fit(task, c, x[rows], y[rows]))
    assert_matches("global", gf.coef(ins["global"]), sk_fit(task, c, x, y))


def test_missing_feature_values_are_imputed_with_training_mean(gf, tmp_path):
    """NaN features: the bundle's impute is the training mean of the column, and each
    model equals sklearn fitted on the data with NaN replaced by that mean."""
    cols, _ = make_grouped(seed=21, sizes={"a": 700, "b": 900}, d=3, task="binary")
    rng = np.random.default_rng(0)
    for j in range(3):
        f = np.array(cols[f"f{j}"], dtype=np.float32)
        f[rng.random(len(f)) < 0.1 * (j + 1)] = np.nan
        cols[f"f{j}"] = f
    c = 1.0
    _, ins = train_one_config(gf, tmp_path, cols, "binary", c)
    x = features_of(cols)
    means = np.nanmean(x, axis=0)
    np.testing.assert_allclose(ins["impute"], means, rtol=1e-12, atol=1e-12)
    xi = np.where(np.isnan(x), means, x)
    y, g = np.asarray(cols["y"]), np.asarray(cols["g"])
    groups = gf.groups_by_key(ins)
    for key in ["a", "b"]:
        rows = g == key
        assert_matches(f"group {key}", gf.coef(groups[key]), sk_fit("binary", c, xi[rows], y[rows]))
    assert_matches("global", gf.coef(ins["global"]), sk_fit("binary", c, xi, y))


def test_rows_with_missing_target_are_dropped(gf, tmp_path):
    cols, _ = make_grouped(seed=4, sizes={"a": 600, "b": 600}, d=3, task="regression")
    y = np.array(cols["y"], dtype=np.float64)
    drop = np.zeros(len(y), dtype=bool)
    drop[::7] = True
    y_with_nulls = [None if d else float(v) for v, d in zip(y, drop)]
    cols["y"] = y_with_nulls
    c = 2.0
    summary, ins = train_one_config(gf, tmp_path, cols, "regression", c)
    assert summary["rows_dropped_missing_target"] == int(drop.sum())
    assert summary["rows_train"] == len(y) - int(drop.sum())
    x, g = features_of(cols), np.asarray(cols["g"])
    keep = ~drop
    groups = gf.groups_by_key(ins)
    for key in ["a", "b"]:
        rows = (g == key) & keep
        assert groups[key]["n_train"] == int(rows.sum())
        assert_matches(f"group {key}", gf.coef(groups[key]), sk_fit("regression", c, x[rows], y[rows]))
    assert_matches("global", gf.coef(ins["global"]), sk_fit("regression", c, x[keep], y[keep]))
