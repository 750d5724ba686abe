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

from conftest import TIGHT, features_of, make_grouped, sigmoid

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


def test_regression_is_exact_after_one_newton_step(gf, tmp_path):
    """Ridge is quadratic: one Newton step lands on the optimum, so even max_iter=1
    must match sklearn, and nothing is reported as not converged."""
    cols, _ = make_grouped(seed=31, sizes={"a": 400, "b": 700}, d=5, task="regression")
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    s = gf.train(data, tmp_path / "m.gfm", "g", "y", "--task", "regression", "--param", "C=0.3",
                 "--param", "max_iter=1", "--valid-fraction", "0")
    assert s["not_converged"] == 0
    ins = gf.inspect(tmp_path / "m.gfm")
    x, y, g = features_of(cols), np.asarray(cols["y"]), np.asarray(cols["g"])
    groups = gf.groups_by_key(ins)
    for key in ["a", "b"]:
        rows = g == key
        assert_matches(f"group {key}", gf.coef(groups[key]), sk_fit("regression", 0.3, x[rows], y[rows]))


def test_binary_iteration_limit_is_reported(gf, tmp_path):
    cols, _ = make_grouped(seed=32, sizes={"a": 400, "b": 700}, d=5, task="binary")
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    limit = ["--param", "max_iter=1", "--valid-fraction", "0"]
    s = gf.train(data, tmp_path / "m.gfm", "g", "y", *limit)
    assert s["not_converged"] == s["models"] == 3
    rc, stdout, stderr = gf.run("train", "--data", data, "--by", "g", "--target", "y", *limit, "--out", tmp_path / "m2.gfm")
    assert rc == 0 and stdout == ""
    assert "warning: 3 models stopped at their iteration limit" in stderr
    # With the default limit every model converges.
    s = gf.train(data, tmp_path / "m3.gfm", "g", "y", "--valid-fraction", "0")
    assert s["not_converged"] == 0


def test_validation_file_does_not_leak_into_fit_or_imputation(gf, tmp_path):
    """With --valid, models and imputation values come from the training file only."""
    cols, _ = make_grouped(seed=41, sizes={"a": 500, "b": 800}, d=3, task="binary")
    f1 = np.array(cols["f1"], dtype=np.float32)
    f1[::9] = np.nan
    cols["f1"] = f1
    vcols, _ = make_grouped(seed=42, sizes={"a": 300, "b": 300}, d=3, task="binary")
    vcols["f1"] = (np.asarray(vcols["f1"]) * 100 + 1000).astype(np.float32)  # far from training values
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    valid = gf.write_parquet(tmp_path / "v.parquet", vcols)
    c = 0.7
    s = gf.train(data, tmp_path / "m.gfm", "g", "y", "--valid", valid, "--param", f"C={c}", *TIGHT)
    assert s["rows_train"] == 1300 and s["rows_valid"] == 600
    ins = gf.inspect(tmp_path / "m.gfm")
    x, y, g = features_of(cols), np.asarray(cols["y"]), np.asarray(cols["g"])
    means = np.nanmean(x, axis=0)
    np.testing.assert_allclose(ins["impute"], means, rtol=1e-12)
    xi = np.where(np.isnan(x), means, x)
    groups = gf.groups_by_key(ins)
    for key in ["a", "b"]:
        rows = g == key
        assert groups[key]["n_valid"] == 300
        assert_matches(f"group {key}", gf.coef(groups[key]), sk_fit("binary", c, xi[rows], y[rows]))
    assert_matches("global", gf.coef(ins["global"]), sk_fit("binary", c, xi, y))


def test_many_row_groups_in_the_parquet_file(gf, tmp_path):
    """A file written in many small row groups gives the same models as one row group."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols, _ = make_grouped(seed=51, sizes={"a": 900, "b": 1100}, d=5, task="binary")
    table = pa.table(cols)
    pq.write_table(table, tmp_path / "one.parquet")
    pq.write_table(table, tmp_path / "many.parquet", row_group_size=97)
    assert pq.ParquetFile(tmp_path / "many.parquet").num_row_groups > 10
    out = {}
    for name in ["one", "many"]:
        gf.train(tmp_path / f"{name}.parquet", tmp_path / f"{name}.gfm", "g", "y", "--valid-fraction", "0")
        out[name] = gf.inspect(tmp_path / f"{name}.gfm")
        for g in out[name]["groups"]:
            g.pop("train_s")  # each group's training time
    assert out["one"]["groups"] == out["many"]["groups"]
    assert out["one"]["global"] == out["many"]["global"]


BOUNDARY_SIZES = {f"n{n}": n for n in [10, 11, 15, 16, 17, 31, 32, 33, 255, 256, 257, 511, 512, 513, 1000]}


@pytest.mark.parametrize("task", ["binary", "regression"])
@pytest.mark.parametrize("d", [1, 3, 8, 9, 13])
def test_block_and_padding_boundaries(gf, tmp_path, task, d):
    """Group sizes around the SIMD-lane (16) and block (256) boundaries and feature
    counts around the padding unit (4), split across threads by the fused strategy."""
    cols, _ = make_grouped(seed=100 + d, sizes=BOUNDARY_SIZES, d=d, task=task)
    c = 0.5
    _, ins = train_one_config(gf, tmp_path, cols, task, c,
                              extra=("--min-rows", "1", "--strategy", "fused", "--threads", "2"))
    x, y, g = features_of(cols), np.asarray(cols["y"]), np.asarray(cols["g"])
    groups = gf.groups_by_key(ins)
    for key, n in BOUNDARY_SIZES.items():
        assert groups[key]["route"] == "own" and groups[key]["n_train"] == n
        rows = g == key
        assert_matches(f"group {key}, d={d}", gf.coef(groups[key]), sk_fit(task, c, x[rows], y[rows]))
    assert_matches(f"global, d={d}", gf.coef(ins["global"]), sk_fit(task, c, x, y))


# ---------------------------------------------------------------------------
# Categorical features: one-hot per group
# ---------------------------------------------------------------------------
#
# Each group's model (and the global model, over every row) must predict as
# sklearn's pipeline does on that group's rows: the numeric features as they
# are (the linear family's coefficients are in raw feature space, as above),
# the categorical ones through OneHotEncoder(handle_unknown="ignore") (raw
# 0/1 columns, null a category of its own, a category unseen in the group's
# rows all zeros), then LogisticRegression(C) / Ridge(alpha=1/C).

NULL = "<null>"  # sklearn's stand-in for a null category


def make_categorical(seed, sizes, task, levels=(4, 9), d=3, null_frac=0.06):
    """make_grouped data plus text columns c0.. (levels c{i}_{l}, skewed
    frequencies, nulls) whose levels shift the margin by group-dependent effects."""
    cols, _ = make_grouped(seed=seed, sizes=sizes, d=d, task="regression")
    rng = np.random.default_rng(seed + 1)
    g = np.asarray(cols["g"])
    x = features_of(cols)
    keys = list(sizes)
    w = rng.normal(0.0, 0.8, size=(len(keys), d))
    margin = np.zeros(len(g))
    for k, key in enumerate(keys):
        rows = g == key
        margin[rows] = x[rows] @ w[k]
    for i, n in enumerate(levels):
        lv = np.minimum((rng.random(len(g)) ** 2 * n).astype(int), n - 1)
        null = rng.random(len(g)) < null_frac
        effect = rng.normal(0.0, 1.0, size=(len(keys), n + 1))
        for k, key in enumerate(keys):
            rows = g == key
            margin[rows] += effect[k, np.where(null[rows], n, lv[rows])]
        cols[f"c{i}"] = [None if z else f"c{i}_{v}" for v, z in zip(lv, null)]
    if task == "binary":
        cols["y"] = (rng.random(len(g)) < sigmoid(margin)).astype(np.float64)
    else:
        cols["y"] = margin + 0.3 * rng.standard_normal(len(g))
    return cols


def cat_matrix(cols, names):
    return np.array([[NULL if v is None else v for v in cols[n]] for n in names], dtype=object).T


def sk_pipeline(task, c, n_num, n_cat, num_transform="passthrough"):
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    ct = ColumnTransformer([
        ("num", num_transform, list(range(n_num))),
        ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), list(range(n_num, n_num + n_cat))),
    ])
    if task == "binary":
        est = LogisticRegression(C=c, tol=1e-12, max_iter=10000)
    else:
        est = Ridge(alpha=1.0 / c, tol=1e-12)
    return make_pipeline(ct, est)


def sk_predict(model, task, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.predict_proba(x)[:, 1] if task == "binary" else model.predict(x)


def sk_fit_pipeline(task, c, x_num, x_cat, y, num_transform="passthrough"):
    model = sk_pipeline(task, c, x_num.shape[1], x_cat.shape[1], num_transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(np.hstack([x_num, x_cat]), y)
    return model


CAT_SIZES = {"a": 400, "b": 900, "c": 1500}


def check_onehot_oracle(gf, tmp_path, task, c, cols, num_transform="passthrough"):
    """Trains groupfit on `cols`, then predicts every training row and a set of
    new rows (an unseen category, nulls, every group's key and an unseen key) and
    compares with sklearn per group; returns the largest absolute difference."""
    cat_names = sorted(k for k in cols if k.startswith("c") and k[1:].isdigit())
    data = gf.write_parquet(tmp_path / "train.parquet", cols)
    model = tmp_path / "model.gfm"
    summary = gf.train(data, model, "g", "y", "--task", task, "--param", f"C={c}", *TIGHT,
                       "--valid-fraction", "0")
    assert summary["not_converged"] == 0
    x, y, g = features_of(cols), np.asarray(cols["y"]), np.asarray(cols["g"])
    xc = cat_matrix(cols, cat_names)
    # New rows: each training row again, under every key, with c0 replaced by an
    # unseen value on every third row and by null on every fifth.
    new = {k: [] for k in ["g", *[f"f{j}" for j in range(x.shape[1])], *cat_names]}
    keys = [*CAT_SIZES, "zz_unseen"]
    pick = np.arange(0, len(y), 7)
    for key in keys:
        for i, r in enumerate(pick):
            new["g"].append(key)
            for j in range(x.shape[1]):
                new[f"f{j}"].append(np.float32(x[r, j]))
            for name in cat_names:
                v = cols[name][r]
                if name == "c0" and i % 3 == 0:
                    v = "never_seen"
                elif name == "c0" and i % 5 == 0:
                    v = None
                new[name].append(v)
    for j in range(x.shape[1]):
        new[f"f{j}"] = np.asarray(new[f"f{j}"], dtype=np.float32)
    new_path = gf.write_parquet(tmp_path / "new.parquet", new)
    out = tmp_path / "p.parquet"
    gf.predict(model, new_path, out)
    got = gf.read_parquet(out).column("prediction").to_numpy()
    nx, ng = features_of(new), np.asarray(new["g"])
    nxc = cat_matrix(new, cat_names)
    worst = 0.0
    for key in keys:
        rows = g == key if key in CAT_SIZES else np.ones(len(g), dtype=bool)
        sk = sk_fit_pipeline(task, c, x[rows], xc[rows], y[rows], num_transform)
        at = ng == key
        want = sk_predict(sk, task, np.hstack([nx[at], nxc[at]]))
        diff = float(np.max(np.abs(got[at] - want)))
        assert diff < 1e-4, f"{task} C={c} group {key}: max abs prediction difference {diff}"
        worst = max(worst, diff)
    return worst


@pytest.mark.parametrize("task", ["binary", "regression"])
@pytest.mark.parametrize("c", [0.1, 1.0, 10.0])
def test_onehot_groups_and_global_match_the_sklearn_pipeline(gf, tmp_path, task, c):
    cols = make_categorical(seed=61, sizes=CAT_SIZES, task=task)
    worst = check_onehot_oracle(gf, tmp_path, task, c, cols)
    print(f"{task} C={c}: max abs prediction difference {worst:.2e}")


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_onehot_matches_the_pipeline_with_a_scaler_when_scaling_is_the_identity(gf, tmp_path, task):
    """With StandardScaler on the numeric columns, sklearn penalises standardised
    coefficients where the linear family penalises raw ones; on numeric columns
    standardised in every group (so also over all rows) the two problems are the
    same, and the one-hot part must still match the pipeline."""
    from sklearn.preprocessing import StandardScaler

    cols = make_categorical(seed=62, sizes=CAT_SIZES, task=task)
    g = np.asarray(cols["g"])
    for j in range(3):
        f = np.asarray(cols[f"f{j}"], dtype=np.float64)
        for key in CAT_SIZES:
            rows = g == key
            f[rows] = (f[rows] - f[rows].mean()) / f[rows].std()
        cols[f"f{j}"] = f.astype(np.float32)
    check_onehot_oracle(gf, tmp_path, task, 1.0, cols, StandardScaler())


def test_onehot_cap_folds_rare_categories_into_other(gf, tmp_path):
    """max_cat: the most frequent categories keep columns, the rest share "other";
    min_cat_rows: rarer categories fold too. Matches sklearn on the folded data."""
    sizes = {"a": 1500}
    cols = make_categorical(seed=63, sizes=sizes, task="regression", levels=(12,))
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    counts = {}
    for v in cols["c0"]:
        counts[v] = counts.get(v, 0) + 1
    # Most frequent first, ties by level order (null first, then sorted text).
    order = sorted(counts, key=lambda v: (-counts[v], v is not None, v or ""))
    for params, kept in [
        (["--param", "max_cat=4"], set(order[:4])),
        (["--param", f"min_cat_rows={counts[order[5]] + 1}"], {v for v in counts if counts[v] > counts[order[5]]}),
    ]:
        model = tmp_path / "m.gfm"
        gf.train(data, model, "g", "y", "--task", "regression", *TIGHT, "--valid-fraction", "0", *params)
        ins = gf.inspect(model)
        cats = ins["groups"][0]["categories"]
        with_column = {e["level"] for e in cats if "level" in e}
        other = [e for e in cats if "other" in e]
        assert with_column == kept
        assert len(other) == 1 and set(other[0]["other"]) == set(counts) - kept
        # The same model as sklearn's on the data with the folded levels merged.
        folded = {k: list(v) if isinstance(v, list) else v for k, v in cols.items()}
        folded["c0"] = [v if v in kept else "<other>" for v in cols["c0"]]
        x, y = features_of(cols), np.asarray(cols["y"])
        sk = sk_fit_pipeline("regression", 1.0, x, cat_matrix(folded, ["c0"]), y)
        p = tmp_path / "p.parquet"
        gf.predict(model, data, p)
        got = gf.read_parquet(p).column("prediction").to_numpy()
        want = sk_predict(sk, "regression", np.hstack([x, cat_matrix(folded, ["c0"])]))
        assert np.max(np.abs(got - want)) < 1e-4
        assert len(kept) < len(counts)


def test_inspect_names_each_category_and_its_coefficient(gf, tmp_path):
    cols = make_categorical(seed=64, sizes={"a": 600, "b": 600}, task="binary", levels=(3,))
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    model = tmp_path / "m.gfm"
    gf.train(data, model, "g", "y", "--valid-fraction", "0", "--param", "max_cat=2")
    ins = gf.inspect(model)
    cats = ins["global"]["categories"]
    assert {e["feature"] for e in cats} == {"c0"}
    assert [e["level"] for e in cats if "level" in e] == ["c0_0", "c0_1"]
    assert set(next(e for e in cats if "other" in e)["other"]) == {None, "c0_2"}
    text = gf.ok("inspect", model)
    assert "category coefficients, global model:" in text
    assert "category coefficients, group a:" in text
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("c0 "))
    assert "c0_0 " in line and "other (2 levels) " in line
