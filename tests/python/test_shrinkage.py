"""Partial pooling (``shrinkage=``): scikit-lego's modes against scikit-lego
itself on the same per-level models, ``auto`` against a numpy reference of
its blend, and what the model reports of it."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import groupfit
import groupfit as gf
import groupfit.exceptions as gfe

sklego = pytest.importorskip("sklego.meta")
from sklearn.linear_model import LinearRegression  # noqa: E402

# Region -> (store, rows) and each store's slope; plain least squares in
# both libraries (C huge: no penalty worth the name).
STORES = {"r0": [("s0", 120, 1.0), ("s1", 15, 1.6), ("s2", 40, 0.4)],
          "r1": [("s3", 90, -2.0), ("s4", 12, -1.2)]}
OLS = {"C": [1e12]}


def frame(seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    parts = []
    for region, stores in STORES.items():
        for store, n, slope in stores:
            x1, x2 = rng.normal(size=n), rng.normal(size=n)
            y = slope * x1 - 0.5 * x2 + (1.0 if region == "r0" else -1.0) + scale * rng.normal(size=n)
            parts.append(pd.DataFrame({"region": region, "store": store, "x1": x1, "x2": x2, "y": y}))
    return pd.concat(parts, ignore_index=True)


def probe():
    # Known stores, a new store of a known region, a new region.
    rng = np.random.default_rng(9)
    keys = [("r0", "s0"), ("r0", "s1"), ("r0", "s2"), ("r1", "s3"), ("r1", "s4"), ("r0", "new"), ("r9", "new")]
    rows = [dict(region=r, store=s, x1=float(a), x2=float(b))
            for (r, s) in keys for a, b in rng.normal(size=(3, 2))]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("ours,theirs,kwargs", [
    ("equal", "equal", None),
    ("relative", "relative", None),
    ("constant:0.3", "constant", {"alpha": 0.3}),
    ("min_n_obs:50", "min_n_obs", {"min_n_obs": 50}),
    ("none", None, None),
])
def test_modes_match_scikit_lego(ours, theirs, kwargs):
    train, test = frame(), probe()
    m = gf.fit(train, by=["region", "store"], target="y", valid=0.0, min_rows=1,
               params=OLS, hierarchy=True, shrinkage=ours)
    ref = sklego.HierarchicalRegressor(LinearRegression(), groups=["region", "store"],
                                      shrinkage=theirs, shrinkage_kwargs=kwargs)
    ref.fit(train[["region", "store", "x1", "x2"]], train["y"])
    want = ref.predict(test[["region", "store", "x1", "x2"]])
    np.testing.assert_allclose(m.predict(test), want, rtol=1e-7, atol=1e-7)


def test_shrinkage_without_hierarchy_blends_with_the_global_model_as_scikit_lego():
    train, test = frame(), probe()
    m = gf.fit(train, by="store", target="y", valid=0.0, min_rows=1, params=OLS,
               features=["x1", "x2"], shrinkage="relative")
    ref = sklego.HierarchicalRegressor(LinearRegression(), groups=["store"], shrinkage="relative")
    ref.fit(train[["store", "x1", "x2"]], train["y"])
    want = ref.predict(test[["store", "x1", "x2"]])
    np.testing.assert_allclose(m.predict(test), want, rtol=1e-7, atol=1e-7)


def level_predictions(train, valid, test):
    """Each level's own predictions of ``test``: the global model's, the
    region's and the store's, fitted apart (grouped equals looped)."""
    kw = dict(target="y", valid=valid, min_rows=1, params=OLS, features=["x1", "x2"])
    unseen = test.assign(region="nowhere", store="nowhere")
    region = gf.fit(train, by="region", **kw)
    store = gf.fit(train, by=["region", "store"], **kw)
    return region.predict(unseen), region.predict(test), store.predict(test)


def test_auto_is_the_chained_n_over_n_plus_k_blend():
    train, valid, test = frame(1, scale=3.0), frame(2, scale=3.0), probe()[:15]
    m = gf.fit(train, by=["region", "store"], target="y", valid=valid, min_rows=1,
               params=OLS, hierarchy=True)
    pooling = m.summary["pooling"]
    assert pooling["mode"] == "auto" and pooling["metric"] == "rmse"
    k = {lv["key"]: lv["k"] for lv in pooling["levels"]}
    assert set(k) == {"region", "region/store"} and min(k.values()) > 0
    glob, region, store = level_predictions(train, valid, test)
    scores = m.scores.to_pandas()
    n = {(r.region, r.store if isinstance(r.store, str) else None): r.rows for r in scores.itertuples()}
    want = []
    for i, (r, s) in enumerate(zip(test.region, test.store)):
        w_r = n[(r, None)] / (n[(r, None)] + k["region"])
        w_s = n[(r, s)] / (n[(r, s)] + k["region/store"])
        want.append(w_s * store[i] + (1 - w_s) * (w_r * region[i] + (1 - w_r) * glob[i]))
    np.testing.assert_allclose(m.predict(test), want, rtol=1e-7, atol=1e-7)
    # The loss it reports is the blend's on the validation rows.
    g, r_, s_ = level_predictions(train, valid, valid)
    w_r = np.array([n[(r, None)] for r in valid.region], float)
    w_r = w_r / (w_r + k["region"])
    w_s = np.array([n[(r, s)] for r, s in zip(valid.region, valid.store)], float)
    w_s = w_s / (w_s + k["region/store"])
    blend = w_s * s_ + (1 - w_s) * (w_r * r_ + (1 - w_r) * g)
    rmse = lambda p: float(np.sqrt(np.mean((valid.y.to_numpy() - p) ** 2)))  # noqa: E731
    assert pooling["loss"] == pytest.approx(rmse(blend), rel=1e-9)
    assert pooling["loss_none"] == pytest.approx(rmse(s_), rel=1e-9)
    assert pooling["loss"] <= pooling["loss_none"]
    assert pooling["levels"][1]["loss"] <= pooling["levels"][1]["loss_none"]


def test_binary_tasks_blend_log_odds():
    train, test = frame(3), probe()
    train = train.assign(y=(train.y > 0).astype(float))
    kw = dict(target="y", valid=0.0, min_rows=1, features=["x1", "x2"])
    m = gf.fit(train, by=["region", "store"], hierarchy=True, shrinkage="equal", **kw)
    region = gf.fit(train, by="region", **kw)
    store = gf.fit(train, by=["region", "store"], **kw)
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    known = test[test.store != "new"]
    z = (logit(region.predict(known.assign(region="nowhere"))) + logit(region.predict(known))
         + logit(store.predict(known))) / 3
    np.testing.assert_allclose(m.predict(known), 1 / (1 + np.exp(-z)), rtol=1e-9)


def test_scores_show_level_weight_and_parent():
    m = gf.fit(frame(), by=["region", "store"], target="y", valid=0.0, min_rows=1,
               hierarchy=True, shrinkage="constant:0.5")
    s = m.scores.to_pandas()
    assert list(s.columns[:3]) == ["region", "store", "level"]
    assert {"weight", "parent"} <= set(s.columns)
    s0 = s[(s.store == "s0")].iloc[0]
    assert (s0.level, s0.parent, s0.weight) == ("region/store", "r0", 0.5)
    r0 = s[(s.region == "r0") & s.store.isna()].iloc[0]
    # Path global, r0: alpha 0.5 leaves r0 weight 0.5.
    assert (r0.level, r0.parent, r0.weight) == ("region", "global", 0.5)
    assert len(s) == 5 + 2


def test_bad_shrinkage_names_it():
    t = pa.Table.from_pandas(frame())
    for bad, says in [("median", "the modes are"), ("constant:2", "alpha must be in"),
                      ("min_n_obs:x", "'x' is not a number")]:
        with pytest.raises(gfe.ArgumentError, match=f"--shrinkage '{bad}'"):
            gf.fit(t, by=["region", "store"], target="y", hierarchy=True, shrinkage=bad)
    with pytest.raises(gfe.ArgumentError, match="min_n_obs:100000: no group has"):
        gf.fit(t, by=["region", "store"], target="y", hierarchy=True, shrinkage="min_n_obs:100000")
    with pytest.raises(gfe.ArgumentError, match="cannot go with --no-global"):
        gf.fit(t, by="store", target="y", shrinkage="equal", global_model=False)


def test_estimator_stands_in_for_hierarchical_regressor():
    train, test = frame(), probe()
    cols = ["region", "store", "x1", "x2"]
    est = gf.GroupedEstimator(by=["region", "store"], valid=0.0, min_rows=1, params=OLS,
                              hierarchy=True, shrinkage="equal")
    est.fit(train[cols], train["y"])
    ref = sklego.HierarchicalRegressor(LinearRegression(), groups=["region", "store"], shrinkage="equal")
    ref.fit(train[cols], train["y"])
    np.testing.assert_allclose(est.predict(test[cols]), ref.predict(test[cols]), rtol=1e-7, atol=1e-7)
    assert est.get_params()["shrinkage"] == "equal"


def test_cli_trains_pools_reports_and_predicts_as_python(gf, tmp_path):
    train, test = frame(1, scale=3.0), probe()
    data = gf.write_parquet(tmp_path / "t.parquet", pa.Table.from_pandas(train))
    rows = gf.write_parquet(tmp_path / "p.parquet", pa.Table.from_pandas(test))
    model, preds = tmp_path / "m.gfm", tmp_path / "p.out.parquet"
    rc, _, err = gf.run("train", "--data", data, "--by", "region,store", "--target", "y",
                        "--hierarchy", "--min-rows", "1", "--param", "C=1e12", "--out", model)
    assert rc == 0, err
    line = next(ln for ln in err.splitlines() if ln.startswith("shrinkage auto (k: region "))
    assert "without pooling" in line
    rc, out, err = gf.run("inspect", model)
    assert rc == 0, err
    assert "pooling      auto, k: region " in out
    assert "weight  parent" in out
    rc, _, err = gf.run("predict", "--model", model, "--data", rows, "--out", preds, "--with-route")
    assert rc == 0, err
    got = gf.read_parquet(preds)
    m = groupfit.load(model)
    np.testing.assert_allclose(got.column("prediction").to_numpy(), m.predict(test), rtol=1e-12)
    assert set(got.column("route").to_pylist()) == {"own", "level:region", "unseen"}



@pytest.mark.parametrize("model,params", [
    ("gbdt", {"rounds": [20], "num_leaves": [4], "min_data_in_leaf": [5]}),
    ("mlp", {"hidden": [4], "epochs": [3], "batch_size": [16]}),
])
def test_every_family_blends_its_levels(model, params):
    train, test = frame(4, scale=2.0), probe()
    known = test[test.store != "new"].reset_index(drop=True)
    kw = dict(target="y", valid=0.0, min_rows=1, model=model, params=params, features=["x1", "x2"])
    m = gf.fit(train, by=["region", "store"], hierarchy=True, shrinkage="equal", **kw)
    region = gf.fit(train, by="region", **kw)
    store = gf.fit(train, by=["region", "store"], **kw)
    want = (region.predict(known.assign(region="nowhere")) + region.predict(known) + store.predict(known)) / 3
    np.testing.assert_allclose(m.predict(known), want, rtol=1e-6, atol=1e-9)
