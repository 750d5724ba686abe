"""The gbdt family's categorical features against LightGBM as an oracle.

Three groups of 4,000 training and 4,000 validation rows, each group with
its own effect of every category. Categorical features: one of 3 levels
(one-vs-rest), one of 30 and one of 300 levels (sorted splits; the first
given as integers named categorical, on both sides), with nulls, and
values unseen in training among the validation rows. groupfit trains every
group in one run from a Parquet file (text columns dictionary-coded by the
engine); LightGBM trains each group alone on a pandas frame (the text
columns as `category` with the training levels, the integer column named in
`categorical_feature`), with the same parameters. Per group, groupfit's
validation log-loss (binary) or RMSE (regression) must be within 1% of
LightGBM's.

Both build the same category bins and search the same splits, so on
categorical features alone the scores agree to many digits. A numeric
feature (integers 0..19, binned alike by both) joins the regression cases;
there LightGBM breaks an exact tie between thresholds around an empty bin
upwards and groupfit downwards, a difference far below the bound.
"""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

lgb = pytest.importorskip("lightgbm")

GROUPS = ["north", "south", "west"]
N_TRAIN, N_VALID = 4000, 4000
LEVELS3 = ["a", "b", "c"]
INTS30 = [100 + 7 * i for i in range(30)]
LEVELS300 = [f"h{i:03d}" for i in range(300)]


def make(seed, task):
    """Training and validation frames of every group (`g`, `c3`, `c30`
    (integers), `c300`, `x`, `y`)."""
    rng = np.random.default_rng(seed)
    # Frequent and rare levels of c300, a different order in each group.
    p300 = 1.0 / np.arange(1, 301) ** 0.8
    p300 /= p300.sum()
    parts = ([], [])
    for g in GROUPS:
        e3 = rng.normal(0, 1.0, 3)
        e30 = rng.normal(0, 0.8, 30)
        e300 = rng.normal(0, 0.8, 300)
        w = rng.normal(0, 0.7)
        perm = rng.permutation(300)
        for part, n in zip(parts, (N_TRAIN, N_VALID)):
            c3 = rng.integers(0, 3, n)
            c30 = rng.integers(0, 30, n)
            c300 = perm[rng.choice(300, n, p=p300)]
            x = rng.integers(0, 20, n).astype(np.float64)
            z = e3[c3] + e30[c30] + e300[c300] + w * (x - 10) / 5
            if task == "binary":
                y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.float64)
            else:
                y = z + 0.5 * rng.standard_normal(n)
            s3 = np.array(LEVELS3, dtype=object)[c3]
            i30 = pd.array(np.array(INTS30)[c30], dtype="Int64")
            s300 = np.array(LEVELS300, dtype=object)[c300]
            # Nulls that carry information: their rows lean positive.
            for s, frac in ((s3, 0.05), (s300, 0.03)):
                miss = rng.random(n) < frac
                s[miss] = None
            i30[rng.random(n) < 0.05] = pd.NA
            if part is parts[1]:
                s300[rng.random(n) < 0.02] = "unseen"
                i30[rng.random(n) < 0.02] = 999
            part.append(pd.DataFrame(dict(g=g, c3=s3, c30=i30, c300=s300, x=x, y=y)))
    return tuple(pd.concat(p, ignore_index=True) for p in parts)


def parquet(gf, path, df, feats):
    cols = {"g": pa.array(df.g, pa.string())}
    for f in feats:
        if f == "c30":
            cols[f] = pa.array(df[f], pa.int64())
        elif f == "x":
            cols[f] = pa.array(df[f], pa.float64())
        else:
            cols[f] = pa.array(df[f], pa.string())
    cols["y"] = pa.array(df.y, pa.float64())
    return gf.write_parquet(path, pa.table(cols))


def metric(task, y, p):
    if task == "binary":
        p = np.clip(p, 1e-15, 1 - 1e-15)
        return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    return float(np.sqrt(np.mean((y - p) ** 2)))


def lgb_frame(df, feats, dtypes):
    """The features as LightGBM gets them: text as `category` with the
    training levels (unseen values become NaN), integers as floats (NaN for
    null)."""
    out = pd.DataFrame(index=df.index)
    for f in feats:
        if f in dtypes:
            out[f] = pd.Categorical(df[f].where(df[f].isin(dtypes[f].categories)), dtype=dtypes[f])
        else:
            out[f] = df[f].astype("float64")
    return out


CAT_PARAMS = dict(max_cat_to_onehot=8, cat_smooth=5, cat_l2=1, max_cat_threshold=8,
                  min_data_per_group=50)

CASES = [
    ("binary", ["c3", "c30", "c300"], dict(rounds=100, num_leaves=31, learning_rate=0.1)),
    ("regression", ["c3", "c30", "c300", "x"], dict(rounds=100, num_leaves=31, learning_rate=0.1)),
    ("binary", ["c3", "c30", "c300"],
     dict(rounds=60, num_leaves=15, learning_rate=0.1, min_data_in_leaf=10, **CAT_PARAMS)),
    ("regression", ["c3", "c30", "c300", "x"],
     dict(rounds=60, num_leaves=15, learning_rate=0.1, lambda_l2=1.0, **CAT_PARAMS)),
]


@pytest.mark.parametrize("task,feats,params", CASES)
def test_categorical_matches_lightgbm(gf, tmp_path, task, feats, params):
    tr, va = make(11 if task == "binary" else 12, task)
    train = parquet(gf, tmp_path / "train.parquet", tr, feats)
    valid = parquet(gf, tmp_path / "valid.parquet", va, feats)
    model = tmp_path / "m.gfm"
    args = ["--features", ",".join(feats), "--categorical", "c30"]
    for k, v in params.items():
        args += ["--param", f"{k}={v}"]
    s = gf.train(train, model, "g", "y", "--valid", valid, "--task", task,
                 "--model", "gbdt", "--no-global", *args)
    assert s["routes"]["groups_own"] == len(GROUPS)
    out = tmp_path / "p.parquet"
    gf.predict(model, valid, out)
    pred = gf.read_parquet(out).column("prediction").to_numpy()

    texts = [f for f in feats if f in ("c3", "c300")]
    dtypes = {f: pd.CategoricalDtype(sorted(tr[f].dropna().unique())) for f in texts}
    lgb_params = dict(objective="binary" if task == "binary" else "regression",
                      num_threads=1, verbose=-1, deterministic=True, **params)
    rounds = lgb_params.pop("rounds")
    for g in GROUPS:
        t, v = tr[tr.g == g], va[va.g == g]
        data = lgb.Dataset(lgb_frame(t, feats, dtypes), t.y.to_numpy(),
                           categorical_feature=[f for f in feats if f != "x"])
        booster = lgb.train(lgb_params, data, num_boost_round=rounds)
        want = metric(task, v.y.to_numpy(), booster.predict(lgb_frame(v, feats, dtypes)))
        got = metric(task, v.y.to_numpy(), pred[(va.g == g).to_numpy()])
        print(f"{task} {g}: groupfit {got:.6f}, LightGBM {want:.6f}")
        assert abs(got - want) <= 0.01 * want, f"{g}: groupfit {got:.6f} vs LightGBM {want:.6f}"


def test_categorical_splits_show_their_levels_and_importance(gf, tmp_path):
    """inspect --json shows each categorical node's codes; the features that
    drive the target have gain importance."""
    tr, va = make(5, "binary")
    feats = ["c3", "c30", "c300", "x"]
    train = parquet(gf, tmp_path / "train.parquet", tr, feats)
    valid = parquet(gf, tmp_path / "valid.parquet", va, feats)
    model = tmp_path / "m.gfm"
    gf.train(train, model, "g", "y", "--valid", valid, "--model", "gbdt",
             "--categorical", "c30", "--param", "rounds=20")
    ins = gf.inspect(model)
    for grp in ins["groups"]:
        m = grp["model"]
        sets = [c for t in m["trees"] for c in t.get("cat_left", []) if c]
        assert sets, "categorical splits"
        assert all(c == sorted(c) for c in sets)
        assert any(len(c) > 1 for c in sets), "a sorted split with several categories left"
        imp = grp["importance"]
        assert imp["c300"] > 0 and imp["c30"] > 0
