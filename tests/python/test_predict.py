"""`predict` routing and output, and the `train --json` summary, checked against a
numpy recomputation from the coefficients that `inspect --json` reports."""

import zlib

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import roc_auc_score

from conftest import sigmoid

D = 4
FEATURES = [f"f{j}" for j in range(D)]
# With `--by origin` alone, `hour` would be a (numeric) default feature.
FEAT_ARGS = ["--features", ",".join(FEATURES)]


def make_two_key_data(seed: int, task: str, groups: dict, truth_seed: int = 0) -> dict:
    """Keys `origin` (string) and `hour` (int64); groups maps (origin, hour) -> rows.
    A group's true weights depend only on (truth_seed, key), so two calls with
    different `seed`s draw independent rows from the same per-group truths."""
    rng = np.random.default_rng(seed)
    origin, hour, xs, ys = [], [], [], []
    for (o, h), n in groups.items():
        w = np.random.default_rng([truth_seed, zlib.crc32(o.encode()), h]).normal(0, 1, D + 1)
        x = rng.standard_normal((n, D))
        z = x @ w[:D] + w[D]
        y = (rng.random(n) < sigmoid(z)).astype(np.float64) if task == "binary" else z + 0.3 * rng.standard_normal(n)
        origin += [o] * n
        hour += [h] * n
        xs.append(x)
        ys.append(y)
    x = np.concatenate(xs)
    y = np.concatenate(ys)
    perm = rng.permutation(len(y))
    cols = {
        "origin": [origin[i] for i in perm],
        "hour": np.asarray(hour, dtype=np.int64)[perm],
    }
    for j in range(D):
        cols[f"f{j}"] = x[perm, j]
    cols["y"] = y[perm]
    # a timestamp: not a feature by default, so it is left out
    cols["when"] = np.arange(len(y)).astype("datetime64[s]")
    return cols


def expected_predictions(gf, ins: dict, keys: list, x: np.ndarray):
    """Route each row as documented and apply the served model's formula in numpy.
    Returns (predictions, own, global, unseen)."""
    groups = gf.groups_by_key(ins)
    gcoef, gint = gf.coef(ins["global"])
    impute = np.asarray(ins["impute"])
    x = np.where(np.isnan(x), impute, x)
    pred = np.empty(len(keys))
    own = unseen = 0
    for i, key in enumerate(keys):
        entry = groups.get(key)
        if entry is not None and entry["route"] == "own":
            coef, intercept = gf.coef(entry)
            own += 1
        else:
            coef, intercept = gcoef, gint
            unseen += entry is None
        pred[i] = x[i] @ coef + intercept
    if ins["task"] == "binary":
        pred = sigmoid(pred)
    return pred, own, len(keys) - own, unseen


TRAIN_GROUPS = {
    ("JFK", 6): 400, ("JFK", 7): 250, ("LAX", 6): 600, ("SFO", 9): 180,
    ("BOS", 6): 5,  # fewer than --min-rows: global
}
NEW_GROUPS = {
    ("JFK", 6): 50, ("JFK", 7): 40, ("LAX", 6): 30, ("SFO", 9): 20, ("BOS", 6): 10,
    ("JFK", 9): 25,  # unseen combination of seen values
    ("ORD", 1): 15,  # unseen values
}


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_predict_routes_rows_and_keeps_order(gf, tmp_path, task):
    train = gf.write_parquet(tmp_path / "train.parquet", make_two_key_data(1, task, TRAIN_GROUPS))
    model = tmp_path / "m.gfm"
    s = gf.train(train, model, ["origin", "hour"], "y", "--task", task, "--param", "C=0.1,1,10")
    assert s["fallback"]["few_rows"] == 1
    ins = gf.inspect(model)
    assert ins["key_columns"] == ["origin", "hour"] and ins["features"] == FEATURES

    new_cols = make_two_key_data(2, task, NEW_GROUPS)
    del new_cols["y"]  # the target is not needed to predict
    rng = np.random.default_rng(3)
    x = np.column_stack([new_cols[f] for f in FEATURES])
    x[rng.random(x.shape) < 0.05] = np.nan  # missing features: imputed with training means
    for j, f in enumerate(FEATURES):
        new_cols[f] = x[:, j]
    new = gf.write_parquet(tmp_path / "new.parquet", new_cols)
    out = tmp_path / "preds.parquet"
    report = gf.predict(model, new, out)

    keys = [f"{o}/{h}" for o, h in zip(new_cols["origin"], new_cols["hour"])]
    want, own, glob, unseen = expected_predictions(gf, ins, keys, x)
    n = len(keys)
    assert report == {"rows": n, "own": own, "global": glob, "unseen": unseen}
    assert own == 140 and unseen == 40 and glob == 50  # 40 unseen + 10 BOS/6 fallback rows

    table = gf.read_parquet(out)
    assert table.column_names == ["origin", "hour", "prediction"]
    assert table.schema.field("hour").type == pa.int64()
    assert table.column("origin").to_pylist() == new_cols["origin"]
    assert table.column("hour").to_pylist() == new_cols["hour"].tolist()
    got = table.column("prediction").to_numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    if task == "binary":
        assert np.all((got > 0) & (got < 1))

    # Sanity of the recomputation itself: own models differ from the global model.
    gpred, *_ = expected_predictions(gf, {**ins, "groups": []}, keys, x)
    assert np.max(np.abs(gpred - got)) > 1e-3


def test_predict_on_training_rows_matches_each_groups_model(gf, tmp_path):
    """Simple single-key case, predictions on the training file itself."""
    cols = make_two_key_data(5, "regression", {("a", 0): 300, ("b", 0): 300, ("c", 0): 300})
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    gf.train(data, tmp_path / "m.gfm", "origin", "y", "--valid-fraction", "0", *FEAT_ARGS)
    ins = gf.inspect(tmp_path / "m.gfm")
    report = gf.predict(tmp_path / "m.gfm", data, tmp_path / "p.parquet")
    assert report == {"rows": 900, "own": 900, "global": 0, "unseen": 0}
    table = gf.read_parquet(tmp_path / "p.parquet")
    assert table.column_names == ["origin", "prediction"]
    x = np.column_stack([cols[f] for f in FEATURES])
    want, *_ = expected_predictions(gf, ins, cols["origin"], x)
    np.testing.assert_allclose(table.column("prediction").to_numpy(), want, rtol=1e-12, atol=1e-14)
    # A regression fit on its own training rows: residuals are small relative to y.
    resid = table.column("prediction").to_numpy() - cols["y"]
    assert np.sqrt(np.mean(resid**2)) < 0.5 * np.std(cols["y"])


def test_key_type_change_between_train_and_predict(gf, tmp_path):
    """Keys are compared by their string rendering: an int64 key at training and a
    string key at prediction route to the same groups."""
    cols = make_two_key_data(6, "binary", {("a", 1): 300, ("a", 2): 300, ("a", 30): 300})
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    gf.train(data, tmp_path / "m.gfm", "hour", "y", *FEAT_ARGS)
    new = dict(cols)
    new["hour"] = [str(h) for h in cols["hour"]]
    newp = gf.write_parquet(tmp_path / "new.parquet", new)
    r1 = gf.predict(tmp_path / "m.gfm", data, tmp_path / "p1.parquet")
    r2 = gf.predict(tmp_path / "m.gfm", newp, tmp_path / "p2.parquet")
    assert r1 == r2 == {"rows": 900, "own": 900, "global": 0, "unseen": 0}
    p1 = gf.read_parquet(tmp_path / "p1.parquet")
    p2 = gf.read_parquet(tmp_path / "p2.parquet")
    assert p2.column("hour").to_pylist() == new["hour"]
    np.testing.assert_array_equal(p1.column("prediction").to_numpy(), p2.column("prediction").to_numpy())


def test_predict_empty_input(gf, tmp_path):
    cols = make_two_key_data(7, "binary", {("a", 1): 200, ("b", 1): 200})
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    gf.train(data, tmp_path / "m.gfm", "origin", "y", *FEAT_ARGS)
    empty = pa.table({"origin": pa.array([], pa.string()), **{f: pa.array([], pa.float64()) for f in FEATURES}})
    e = gf.write_parquet(tmp_path / "empty.parquet", empty)
    report = gf.predict(tmp_path / "m.gfm", e, tmp_path / "p.parquet")
    assert report == {"rows": 0, "own": 0, "global": 0, "unseen": 0}
    t = gf.read_parquet(tmp_path / "p.parquet")
    assert t.num_rows == 0 and t.column_names == ["origin", "prediction"]


def test_predict_without_json_keeps_stdout_empty(gf, tmp_path):
    cols = make_two_key_data(8, "binary", {("a", 1): 200, ("b", 1): 200})
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    rc, stdout, stderr = gf.run("train", "--data", data, "--by", "origin", "--target", "y", "--out", tmp_path / "m.gfm")
    assert rc == 0 and stdout == "" and "wrote" in stderr
    rc, stdout, stderr = gf.run("predict", "--model", tmp_path / "m.gfm", "--data", data, "--out", tmp_path / "p.parquet")
    assert rc == 0 and stdout == "" and "predicted 400 rows" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gfm", "p.parquet", "t.parquet"]


# ---------------------------------------------------------------- train --json summary


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_train_summary_matches_recomputation(gf, tmp_path, task):
    train_groups = {("a", 0): 500, ("b", 0): 350, ("c", 0): 200, ("d", 0): 4, ("e", 0): 120}
    valid_groups = {("a", 0): 150, ("b", 0): 100, ("c", 0): 60, ("d", 0): 30, ("zz", 0): 25}
    tr = make_two_key_data(10, task, train_groups)
    va = make_two_key_data(11, task, valid_groups)  # fresh rows, same per-group truths
    # Three validation rows of group a lose their target (dropped and counted) and 5 % of
    # the validation features are missing (imputed with the training means).
    drop_idx = np.flatnonzero(np.asarray(va["origin"]) == "a")[:3]
    va["y"] = np.asarray(va["y"], dtype=float).copy()
    va["y"][drop_idx] = np.nan
    rng = np.random.default_rng(1)
    for f in FEATURES:
        v = np.asarray(va[f], dtype=float).copy()
        v[rng.random(len(v)) < 0.05] = np.nan
        va[f] = v
    n_valid = {**valid_groups, ("a", 0): valid_groups[("a", 0)] - 3}
    configs = ["0.01", "0.1", "1", "10"]
    model = tmp_path / "m.gfm"
    s = gf.train(
        gf.write_parquet(tmp_path / "t.parquet", tr), model, "origin", "y",
        "--valid", gf.write_parquet(tmp_path / "v.parquet", va),
        "--task", task, "--param", "C=" + ",".join(configs), "--min-rows", "10", *FEAT_ARGS,
    )
    ins = gf.inspect(model)
    groups = gf.groups_by_key(ins)

    n_own = sum(1 for e in groups.values() if e["route"] == "own")
    assert n_own == 4 and set(groups) == {"a", "b", "c", "d", "e"}
    assert s["groups"] == 5 and s["configs"] == 4
    assert s["models"] == (n_own + 1) * 4
    assert s["task"] == task and s["task_inferred"] is False
    assert s["features"] == FEATURES
    assert s["rows_train"] == sum(train_groups.values())
    assert s["rows_valid"] == sum(n_valid.values())
    assert s["rows_dropped_missing_target"] == 3
    assert s["routes"] == {
        "groups_own": 4,
        "groups_global": 1,
        "groups_none": 0,
        "valid_rows_own": 147 + 100 + 60,
        "valid_rows_global": 30 + 25,
        "valid_rows_none": 0,
        "valid_rows_unseen": 25,
    }
    assert s["fallback"] == {"min_rows": 10, "few_rows": 1, "one_class": 0}
    assert sum(s["chosen_configs"].values()) == n_own
    assert s["global_config"] == ins["global"]["config"]
    assert s["groups_scored"] == 4  # groups with validation rows: a, b, c, d (e has none)
    for load_key in ["load_s", "train_s", "wall_s"]:
        assert 0 <= s[load_key] < 60
    assert s["wall_s"] >= s["train_s"]
    assert ins["summary"]["groups"] == s["groups"] and ins["summary"]["models"] == s["models"]

    # Per-group selection: the chosen config minimises the validation metric.
    for key, e in groups.items():
        assert e["n_valid"] == n_valid.get((key, 0), 0)
        assert e["n_train"] == train_groups[(key, 0)]
        if e["route"] == "own" and e["n_valid"] > 0:
            by = e["valid_by_config"]
            assert len(by) == 4
            assert e["config"] == f"C={configs[int(np.argmin(by))]}"

    # Metrics recomputed in numpy from inspect's coefficients.
    has_y = ~np.isnan(va["y"])
    x = np.column_stack([np.asarray(va[f], dtype=float) for f in FEATURES])[has_y]
    y = va["y"][has_y]
    keys = [k for k, h in zip(va["origin"], has_y) if h]
    assert np.isnan(x).any()
    pred, *_ = expected_predictions(gf, ins, keys, x)
    metric = "logloss" if task == "binary" else "rmse"
    per_group = []
    aucs = []
    for key in ["a", "b", "c", "d"]:
        m = np.array([k == key for k in keys])
        if task == "binary":
            p = np.clip(pred[m], 1e-7, 1 - 1e-7)
            v = float(np.mean(-(y[m] * np.log(p) + (1 - y[m]) * np.log(1 - p))))
            if 0 < y[m].sum() < m.sum():
                aucs.append(roc_auc_score(y[m], pred[m]))
        else:
            v = float(np.sqrt(np.mean((pred[m] - y[m]) ** 2)))
        per_group.append(v)
        np.testing.assert_allclose(groups[key]["valid"][metric], v, rtol=1e-9, err_msg=key)
    np.testing.assert_allclose(s[f"valid_{metric}"], np.mean(per_group), rtol=1e-9)
    if task == "binary":
        assert "valid_rmse" not in s
        np.testing.assert_allclose(s["valid_auc"], np.mean(aucs), rtol=1e-9)
    else:
        assert "valid_logloss" not in s and "valid_auc" not in s

    # The global model is chosen and scored on all validation rows pooled (unseen included).
    gpred, *_ = expected_predictions(gf, {**ins, "groups": []}, keys, x)
    if task == "binary":
        p = np.clip(gpred, 1e-7, 1 - 1e-7)
        gv = float(np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p))))
    else:
        gv = float(np.sqrt(np.mean((gpred - y) ** 2)))
    np.testing.assert_allclose(ins["global"]["valid"][metric], gv, rtol=1e-9)


def test_valid_fraction_split_accounting(gf, tmp_path):
    cols = make_two_key_data(12, "binary", {("a", 0): 700, ("b", 0): 500, ("c", 0): 300})
    y = np.asarray(cols["y"], dtype=float)
    y[::50] = np.nan
    cols["y"] = y
    s = gf.train(gf.write_parquet(tmp_path / "t.parquet", cols), tmp_path / "m.gfm", "origin", "y",
                 "--valid-fraction", "0.25", "--seed", "3")
    dropped = int(np.isnan(y).sum())
    assert s["rows_dropped_missing_target"] == dropped
    assert s["rows_train"] + s["rows_valid"] == 1500 - dropped
    assert 0.2 < s["rows_valid"] / (1500 - dropped) < 0.3
    groups = gf.inspect(tmp_path / "m.gfm")["groups"]
    assert sum(g["n_train"] for g in groups) == s["rows_train"]
    assert sum(g["n_valid"] for g in groups) == s["rows_valid"]
    assert s["routes"]["valid_rows_own"] == s["rows_valid"] and s["routes"]["valid_rows_unseen"] == 0
    # Same seed, same split; another seed, another split.
    s2 = gf.train(tmp_path / "t.parquet", tmp_path / "m2.gfm", "origin", "y", "--valid-fraction", "0.25", "--seed", "3")
    s3 = gf.train(tmp_path / "t.parquet", tmp_path / "m3.gfm", "origin", "y", "--valid-fraction", "0.25", "--seed", "4")
    assert s2["valid_logloss"] == s["valid_logloss"]
    assert s3["valid_logloss"] != s["valid_logloss"]
