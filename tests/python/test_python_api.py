"""The Python package: gf.fit / GroupedModel / gf.load / GroupedEstimator, its
inputs (pyarrow, pandas, polars, Parquet paths), its errors, and agreement with
the CLI (same summary keys, same model file, same predictions)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
import pytest

import groupfit as gf
from groupfit import exceptions as gfe
from conftest import assert_cli_error, make_grouped, run, sigmoid

SIZES = {"a": 400, "b": 150, "c": 60, "d": 5, "e": 230}
GRID = {"C": [0.1, 1.0], "tol": [1e-8]}
CLI_GRID = ["--param", "C=0.1,1", "--param", "tol=1e-8"]


@pytest.fixture(scope="module")
def tables():
    cols, _ = make_grouped(11, SIZES, d=4, task="binary")
    cols["f1"] = np.where(np.arange(len(cols["y"])) % 17 == 0, np.nan, cols["f1"])
    train = pa.table(cols)
    vcols, _ = make_grouped(12, {**SIZES, "unseen": 30}, d=4, task="binary")
    valid = pa.table(vcols)
    return train, valid


@pytest.fixture(scope="module")
def files(tables, tmp_path_factory):
    d = tmp_path_factory.mktemp("api")
    pq.write_table(tables[0], d / "train.parquet")
    pq.write_table(tables[1], d / "valid.parquet")
    return d


def test_fit_matches_the_cli(gf_bin, tables, files, tmp_path):
    train, valid = tables
    model = gf.fit(train, by="g", target="y", params=GRID, valid=valid)
    rc, out, err = run(
        "train", "--data", files / "train.parquet", "--valid", files / "valid.parquet",
        "--by", "g", "--target", "y", *CLI_GRID, "--out", tmp_path / "cli.gfm", "--json",
    )
    assert rc == 0, err
    cli = json.loads(out)
    assert set(model.summary) == set(cli)
    for k in ("valid_logloss", "valid_auc"):
        assert model.summary[k] == pytest.approx(cli[k], rel=1e-12), k
    for k in ("groups", "models", "configs", "rows_train", "rows_valid", "routes", "fallback",
              "chosen_configs", "global_config", "passes", "task", "features", "strategy"):
        assert model.summary[k] == cli[k], k
    # The CLI's model file loads in Python and predicts what the Python model predicts.
    cli_model = gf.load(tmp_path / "cli.gfm")
    np.testing.assert_allclose(cli_model.predict(valid), model.predict(valid), rtol=1e-12, atol=0)
    # A model saved from Python is a file the CLI reads.
    model.save(tmp_path / "py.gfm")
    rc, out, err = run("predict", "--model", tmp_path / "py.gfm", "--data", files / "valid.parquet",
                       "--out", tmp_path / "p.parquet", "--json")
    assert rc == 0, err
    cli_pred = pq.read_table(tmp_path / "p.parquet").column("prediction").to_numpy()
    np.testing.assert_array_equal(cli_pred, model.predict(valid))


def test_every_input_kind_gives_the_same_model(tables, files):
    train, valid = tables
    ref = gf.fit(train, by=["g"], target="y", params=GRID, valid=valid)
    want = ref.predict(valid)
    inputs = [
        (str(files / "train.parquet"), str(files / "valid.parquet")),
        (files / "train.parquet", valid),
        (train.to_pandas(), valid.to_pandas()),
        (pl.from_arrow(train), pl.from_arrow(valid)),
        (pa.RecordBatch.from_pandas(train.to_pandas(), preserve_index=False), valid),
    ]
    for data, v in inputs:
        m = gf.fit(data, by="g", target="y", params=GRID, valid=v)
        np.testing.assert_allclose(m.predict(v), want, rtol=1e-12, atol=0)
        for p in (m.predict(valid.to_pandas()), m.predict(pl.from_arrow(valid)), m.predict(str(files / "valid.parquet"))):
            np.testing.assert_allclose(p, want, rtol=1e-12, atol=0)


def test_pandas_index_is_not_a_feature(tables):
    df = tables[0].to_pandas()
    df.index = df.index * 3 + 7  # a non-default index would become a column via from_pandas(preserve_index=True)
    m = gf.fit(df, by="g", target="y")
    assert m.features == ["f0", "f1", "f2", "f3"]


def test_summary_scores_and_routes(tables):
    train, valid = tables
    m = gf.fit(train, by="g", target="y", params=GRID, valid=valid, min_rows=10)
    s = m.summary
    assert s["groups"] == 5 and s["configs"] == 2 and s["task"] == "binary"
    assert s["fallback"]["few_rows"] == 1  # group d: 5 rows
    sc = m.scores
    assert sc.column_names == ["g", "rows", "valid_rows", "config", "valid_logloss", "valid_auc", "route", "fallback"]
    by = {r["g"]: r for r in sc.to_pylist()}
    assert set(by) == set(SIZES)
    assert by["d"]["route"] == "global" and by["d"]["config"] is None and "min-rows" in by["d"]["fallback"]
    assert by["a"]["route"] == "own" and by["a"]["config"] in m.summary["chosen_configs"]
    assert by["a"]["rows"] == SIZES["a"] and by["a"]["valid_rows"] == SIZES["a"]
    mean_ll = np.mean([r["valid_logloss"] for r in by.values() if r["valid_rows"] > 0])
    assert mean_ll == pytest.approx(s["valid_logloss"], rel=1e-12)
    # predict: rows in input order; unseen groups and fallbacks via the global model
    t = m.predict_table(valid)
    assert t.column("g").to_pylist() == valid.column("g").to_pylist()
    routes = dict(zip(t.column("g").to_pylist(), t.column("route").to_pylist()))
    assert routes["unseen"] == "unseen" and routes["d"] == "fallback" and routes["a"] == "own"
    p = m.predict(valid)
    assert isinstance(p, np.ndarray) and p.dtype == np.float64 and p.shape == (valid.num_rows,)
    np.testing.assert_array_equal(p, t.column("prediction").to_numpy())


def test_without_the_global_model(gf_bin, tables, files, tmp_path):
    # global_model=False (the CLI's --no-global): no global model; the 5-row
    # group d gets no model, its and unseen rows cannot be predicted; the
    # other groups' models are those trained with the global model.
    train, valid = tables
    kw = dict(by="g", target="y", params=GRID, valid=valid, min_rows=10)
    with_global = gf.fit(train, **kw)
    m = gf.fit(train, global_model=False, **kw)
    s = m.summary
    assert s["global_config"] is None and with_global.summary["global_config"] is not None
    assert s["models"] == 4 * 2 and with_global.summary["models"] == 5 * 2
    assert s["routes"]["groups_none"] == 1 and s["routes"]["groups_global"] == 0
    assert s["routes"]["valid_rows_none"] == SIZES["d"] + 30  # group d and the unseen group
    by = {r["g"]: r for r in m.scores.to_pylist()}
    assert by["d"]["route"] == "none" and by["d"]["valid_logloss"] is None and "min-rows" in by["d"]["fallback"]
    own = valid.filter(pa.compute.is_in(valid["g"], pa.array(["a", "b", "c", "e"])))
    np.testing.assert_allclose(m.predict(own), with_global.predict(own), rtol=1e-12)
    for group, why in (("d", "fell back in training"), ("unseen", "not seen in training")):
        rows = valid.filter(pa.compute.equal(valid["g"], group))
        with pytest.raises(gfe.NoModelError, match=f"group {group} in '<table>' has no model: it.*{why}"):
            m.predict(rows)
    assert issubclass(gfe.NoModelError, gfe.DataError)
    # The same from the CLI: --no-global, then predict fails and writes nothing.
    out = tmp_path / "m.gfm"
    rc, _, err = run("train", "--data", files / "train.parquet", "--valid", files / "valid.parquet",
              "--by", "g", "--target", "y", *CLI_GRID, "--no-global", "--out", out)
    assert rc == 0, err
    assert "no model (no global model to fall back to): 1 groups" in err
    rc, stdout, _ = run("inspect", out)
    assert "global       none (trained with --no-global)" in stdout
    preds = tmp_path / "p.parquet"
    rc, _, err = run("predict", "--model", out, "--data", files / "valid.parquet", "--out", preds)
    assert_cli_error(rc, err, "has no model", "--no-global", str(files / "valid.parquet"))
    assert not preds.exists() and not list(tmp_path.glob("*.tmp*"))


def test_regression_matches_a_numpy_recomputation(tmp_path):
    cols, _ = make_grouped(5, {"x": 300, "y2": 200}, d=3, task="regression")
    m = gf.fit(pa.table(cols), by="g", target="y", valid=0.25, seed=3)
    assert m.task == "regression" and "valid_rmse" in m.summary and "valid_logloss" not in m.summary
    m.save(tmp_path / "m.gfm")
    rc, out, err = run("inspect", tmp_path / "m.gfm", "--json", "--top", "0")
    ins = json.loads(out)
    x = np.column_stack([cols[f"f{j}"] for j in range(3)]).astype(np.float64)
    coef = {g["key"]: (np.asarray(g["model"]["coef"]), g["model"]["intercept"]) for g in ins["groups"]}
    want = np.array([x[i] @ coef[k][0] + coef[k][1] for i, k in enumerate(cols["g"])])
    np.testing.assert_allclose(m.predict(pa.table(cols)), want, rtol=1e-10, atol=1e-10)
    assert "valid_rmse" in m.scores.column_names


def test_load_save_pickle_round_trip(tables, tmp_path):
    train, valid = tables
    m = gf.fit(train, by="g", target="y")
    m.save(tmp_path / "m.gfm")
    back = gf.load(tmp_path / "m.gfm")
    np.testing.assert_array_equal(back.predict(valid), m.predict(valid))
    assert back.summary == m.summary
    again = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(again.predict(valid), m.predict(valid))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gfm"]


def cli_error_line(*args) -> str:
    rc, _, err = run(*args)
    return assert_cli_error(rc, err)[len("error: "):]


def test_errors_are_the_cli_messages(files, tmp_path):
    data = files / "train.parquet"
    cases = [
        (dict(by="nope", target="y"), ["--by", "nope", "--target", "y"], gfe.MissingColumnError),
        (dict(by="g", target="y", params={"C": [-1]}), ["--by", "g", "--target", "y", "--param", "C=-1"], gfe.ParamError),
        (dict(by="g", target="y", params={"alpha": [1]}), ["--by", "g", "--target", "y", "--param", "alpha=1"], gfe.ParamError),
        (dict(by="g", target="y", model="forest"), ["--by", "g", "--target", "y", "--model", "forest"], gfe.ArgumentError),
        (dict(by="g", target="y", valid=1.5), ["--by", "g", "--target", "y", "--valid-fraction", "1.5"], gfe.ArgumentError),
        (dict(by="g", target="y", features=["f0", "y"]), ["--by", "g", "--target", "y", "--features", "f0,y"], gfe.ArgumentError),
        (dict(by="g", target="y", features=["f0", "g"]), ["--by", "g", "--target", "y", "--features", "f0,g"], gfe.ArgumentError),
    ]
    for kw, cli, cls in cases:
        with pytest.raises(cls) as e:
            gf.fit(str(data), **kw)
        assert str(e.value) == cli_error_line("train", "--data", data, *cli, "--out", tmp_path / "x.gfm"), kw
        assert isinstance(e.value, gfe.GroupfitError)
    assert not (tmp_path / "x.gfm").exists()


def test_table_errors(tmp_path):
    n = 40
    base = {"g": ["a"] * n, "f0": np.arange(n, dtype=np.float64), "y": (np.arange(n) % 2).astype(np.float64)}
    with pytest.raises(gfe.MissingColumnError, match=r"column 'h' not found in '<table>'"):
        gf.fit(pa.table(base), by="h", target="y")
    with pytest.raises(gfe.NonNumericColumnError, match="'s'"):
        gf.fit(pa.table({**base, "s": [["x"]] * n}), by="g", target="y", features=["f0", "s"])
    with pytest.raises(gfe.InfiniteValueError, match="column 'f0' in '<table>' has an infinite value at row 3"):
        gf.fit(pa.table({**base, "f0": np.where(np.arange(n) == 3, np.inf, base["f0"])}), by="g", target="y")
    with pytest.raises(gfe.TargetError, match="binary target must be 0 or 1"):
        gf.fit(pa.table({**base, "y": base["y"] * 2}), by="g", target="y", task="binary")
    with pytest.raises(gfe.TargetError, match="one class only"):
        gf.fit(pa.table({**base, "y": np.zeros(n)}), by="g", target="y", task="binary")
    with pytest.raises(gfe.EmptyInputError):
        gf.fit(pa.table(base).slice(0, 0), by="g", target="y")
    assert issubclass(gfe.DataError, gfe.GroupfitError)
    # an engine error pickles as its own class (it crosses process
    # boundaries: Ray actors, joblib workers)
    with pytest.raises(gfe.InfiniteValueError) as e:
        gf.fit(pa.table({**base, "f0": np.where(np.arange(n) == 3, -np.inf, base["f0"])}), by="g", target="y")
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is gfe.InfiniteValueError and str(again) == str(e.value)
    (tmp_path / "bad.gfm").write_bytes(b"GROUPFIT garbage")
    with pytest.raises(gfe.ModelFileError, match="corrupt or truncated"):
        gf.load(tmp_path / "bad.gfm")
    with pytest.raises(gfe.FileError, match="cannot read"):
        gf.load(tmp_path / "missing.gfm")
    with pytest.raises(TypeError, match="expected a Parquet or CSV path"):
        gf.fit([1, 2, 3], by="g", target="y")
    with pytest.raises(gfe.ArgumentError, match=r"^unknown runner 'spark' \(available: native, ray\)$"):
        gf.fit(pa.table(base), by="g", target="y", runner="spark")
    # integers the engine takes as unsigned: a clear error, not OverflowError
    for kw, msg in [
        (dict(threads=-1), "threads must be a non-negative integer, got -1"),
        (dict(seed=-1), "seed must be a non-negative integer, got -1"),
        (dict(min_rows=2**70), "min_rows must be a non-negative integer"),
        (dict(threads=2**40), "--threads must be at most 1024"),
    ]:
        with pytest.raises(gfe.ArgumentError, match=msg):
            gf.fit(pa.table(base), by="g", target="y", **kw)
    with pytest.raises(gfe.ArgumentError, match="--features names no column"):
        gf.fit(pa.table(base), by="g", target="y", features=[])
    with pytest.raises(gfe.ArgumentError, match="cannot be both a key"):
        gf.fit(pa.table(base), by="y", target="y")
    with pytest.raises(gfe.ParamError, match="'rmsprop' is not valid: expected adam or sgd"):
        gf.fit(pa.table(base), by="g", target="y", model="mlp", params={"optimizer": ["rmsprop"]})


def test_runner_from_environment(tables, monkeypatch):
    monkeypatch.setenv("GROUPFIT_RUNNER", "nosuch")
    with pytest.raises(gfe.ArgumentError, match="unknown runner 'nosuch' in GROUPFIT_RUNNER"):
        gf.fit(tables[0], by="g", target="y")
    monkeypatch.setenv("GROUPFIT_RUNNER", "native")
    m = gf.fit(tables[0], by="g", target="y", runner=None)
    m2 = gf.fit(tables[0], by="g", target="y", runner=gf.NativeRunner())
    np.testing.assert_array_equal(m.predict(tables[1]), m2.predict(tables[1]))


def test_grouped_estimator_is_sklearn_compatible(tables):
    from sklearn.base import clone

    train, valid = tables
    X = train.drop_columns(["y"]).to_pandas()
    y = train.column("y").to_numpy()
    est = gf.GroupedEstimator(model="linear", by="g", params=GRID, valid=0.2, seed=1)
    assert est.get_params()["params"] == GRID and est.get_params()["by"] == "g"
    est.set_params(min_rows=20)
    assert est.min_rows == 20
    c = clone(est)
    assert c.get_params() == est.get_params() and not hasattr(c, "model_")
    from sklearn.exceptions import NotFittedError

    for method in (c.predict, c.predict_proba):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            method(X)
    est.fit(X, y)
    # scikit-learn's meaning: the columns of X seen in fit, keys included
    assert est.n_features_in_ == X.shape[1]
    assert list(est.feature_names_in_) == list(X.columns)
    ref = gf.fit(train.rename_columns([*train.column_names[:-1], "__groupfit_target__"]), by="g",
                 target="__groupfit_target__", params=GRID, valid=0.2, seed=1, min_rows=20)
    Xv = valid.drop_columns(["y"]).to_pandas()
    p = ref.predict(Xv)
    np.testing.assert_array_equal(est.predict_proba(Xv)[:, 1], p)
    np.testing.assert_array_equal(est.predict(Xv), (p > 0.5).astype(int))
    assert list(est.classes_) == [0, 1]
    assert 0.5 < est.score(Xv, valid.column("y").to_numpy()) <= 1.0
    # polars X, and regression returns values
    cols, _ = make_grouped(9, {"p": 200, "q": 120}, d=2, task="regression")
    Xr = pl.DataFrame({k: v for k, v in cols.items() if k != "y"})
    reg = gf.GroupedEstimator(by=["g"]).fit(Xr, cols["y"])
    assert reg.predict(Xr).dtype == np.float64
    with pytest.raises(AttributeError):
        reg.predict_proba(Xr)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        gf.GroupedEstimator(by="g").fit(Xr, cols["y"][:-1])


def test_gbdt_with_a_tiny_group_beside_a_large_one_trains_on_two_threads():
    # The 20-row group is alone in its histogram class; the planner's pilot
    # ends its boosters (two rounds) before the passes run. This once raised
    # pyo3_runtime.PanicException.
    rng = np.random.default_rng(0)
    sizes = {"big": 5000, "tiny": 20}
    g = np.repeat(list(sizes), list(sizes.values()))
    x = rng.normal(size=len(g))
    y = (x + rng.normal(size=len(g)) > 0).astype(np.float64)
    t = pa.table({"g": g, "x": x, "y": y})
    models = {
        strategy: gf.fit(t, by="g", target="y", model="gbdt", params={"rounds": [2]},
                         threads=2, strategy=strategy)
        for strategy in ["auto", "tp", "dp", "fused", "hybrid"]
    }
    one = gf.fit(t, by="g", target="y", model="gbdt", params={"rounds": [2]}, threads=1)
    # Not an agreement of whole groups only: one thread and tp cut nothing,
    # dp cuts the big group's and the global model's boosters over both threads.
    assert models["tp"].summary["cut_groups"] == 0 and one.summary["cut_groups"] == 0
    assert models["dp"].summary["cut_groups"] >= 1
    want = one.predict(t)
    assert np.isfinite(want).all()
    for strategy, m in models.items():
        np.testing.assert_allclose(m.predict(t), want, rtol=1e-12, err_msg=strategy)


def test_convenient_argument_forms_match_the_explicit_ones(tables):
    train, valid = tables
    # one feature as a string is that feature, not its characters
    a = gf.fit(train, by="g", target="y", features="f1")
    b = gf.fit(train, by="g", target="y", features=["f1"])
    assert a.features == ["f1"]
    np.testing.assert_array_equal(a.predict(valid), b.predict(valid))
    # word values of the MLP grid, as the CLI takes them
    kw = dict(by="g", target="y", model="mlp", threads=1)
    w = gf.fit(train, params={"optimizer": ["sgd"], "layers": ["8x4"], "epochs": [3]}, **kw)
    s = gf.fit(train, params={"optimizer": "sgd", "layers": "8x4", "epochs": 3}, **kw)
    assert w.summary["global_config"] == "optimizer=sgd,layers=8x4,epochs=3"
    np.testing.assert_array_equal(w.predict(valid), s.predict(valid))
    with pytest.raises(gfe.ParamError, match="'1x2x3x4' is not valid"):
        gf.fit(train, params={"layers": ["1x2x3x4"]}, **kw)
    with pytest.raises(ValueError, match="empty list"):
        gf.fit(train, by="g", target="y", params={"C": []})


def test_a_diverged_config_never_wins_over_a_finite_one():
    # lr=1e5 with plain SGD overflows to NaN; listed first, it once won
    # (NaN compares false) and every prediction was NaN.
    cols, _ = make_grouped(3, {"a": 300, "b": 200}, d=3, task="regression")
    t = pa.table(cols)
    m = gf.fit(t, by="g", target="y", model="mlp", threads=1,
               params={"lr": [1e5, 0.01], "optimizer": ["sgd"], "epochs": [5]})
    scores = m.summary["chosen_configs"]
    assert scores == {"lr=0.01,optimizer=sgd,epochs=5": 2}, scores
    assert m.summary["global_config"] == "lr=0.01,optimizer=sgd,epochs=5"
    assert np.isfinite(m.predict(t)).all()


def test_a_float_key_column_finds_the_groups_of_an_integer_one():
    cols, _ = make_grouped(4, {"1": 150, "2": 90}, d=2, task="regression")
    ints = pa.table({**cols, "g": pa.array(np.asarray(cols["g"]).astype(np.int64))})
    m = gf.fit(ints, by="g", target="y")
    i = ints.column_names.index("g")
    floats = ints.set_column(i, "g", pa.array(np.asarray(cols["g"]).astype(np.float64)))
    strings = ints.set_column(i, "g", pa.array(np.asarray(cols["g"]).astype(str)))
    want = m.predict_table(ints)
    for t in (floats, strings):
        got = m.predict_table(t)
        assert got.column("route").to_pylist() == ["own"] * t.num_rows
        np.testing.assert_array_equal(got.column("prediction"), want.column("prediction"))


def test_mlp_standardises_features_whose_squares_overflow():
    # Features near 1e160 (their squares pass f64's range) standardise to
    # what the same features near 1 give: the same network, finite output.
    cols, _ = make_grouped(5, {"a": 300, "b": 200}, d=2, task="regression")
    t = pa.table(cols)
    big = t.set_column(t.column_names.index("f0"), "f0",
                       pa.array(np.asarray(cols["f0"], dtype=np.float64) * 1e160))
    kw = dict(by="g", target="y", model="mlp", params={"epochs": [3]}, threads=1)
    small = gf.fit(t, **kw).predict(t)
    huge = gf.fit(big, **kw).predict(big)
    assert np.isfinite(huge).all()
    np.testing.assert_allclose(huge, small, rtol=1e-4, atol=1e-5)


def test_hierarchy_routes_small_and_new_stores_to_their_region():
    rng = np.random.default_rng(3)
    rows = []
    # Region r0: stores s0 (200 rows), s1 (4 rows: falls back); r1: s2 (150).
    for region, store, n, slope in [("r0", "s0", 200, 1.0), ("r0", "s1", 4, 1.5), ("r1", "s2", 150, -2.0)]:
        x = rng.normal(size=n)
        rows += [(region, store, float(v), slope * float(v) + 0.1 * rng.normal()) for v in x]
    t = pa.table({k: [r[i] for r in rows] for i, k in enumerate(["region", "store", "x", "y"])})
    m = gf.fit(t, by=["region", "store"], target="y", valid=0.0, min_rows=10, hierarchy=True)
    assert m.summary["levels"] == [{"key": "region", "groups": 2, "own_models": 2}]
    region_only = gf.fit(t, by="region", target="y", valid=0.0, min_rows=10, features=["x"])
    probe = pa.table({"region": ["r0", "r0", "r0", "r9"], "store": ["s0", "s1", "new", "new"],
                      "x": [0.5, 0.5, 0.5, 0.5]})
    p = m.predict_table(probe)
    assert p.column("route").to_pylist() == ["own", "level:region", "level:region", "unseen"]
    want = region_only.predict(pa.table({"region": ["r0"], "x": [0.5]}))[0]
    np.testing.assert_allclose(p.column("prediction").to_numpy()[1:3], [want, want], rtol=1e-6)
    with pytest.raises(gfe.ArgumentError, match="two or more key columns"):
        gf.fit(t, by="region", target="y", hierarchy=True)
