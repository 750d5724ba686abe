"""The gbdt family against LightGBM as an oracle.

Single groups of a few thousand rows, the same parameters on both sides
(LightGBM's names and defaults); groupfit's validation score must be within
0.005 log-loss (binary) of LightGBM's, and its RMSE at most 2% above
LightGBM's (regression), with and
without missing values. Predictions written by `predict` must equal the
probabilities the validation score was computed from (same model, saved and
loaded).
"""

import json

import lightgbm as lgb
import numpy as np
import pytest

N_TRAIN, N_VALID, D = 5000, 5000, 6


def make(seed, task, nan_frac=0.0):
    rng = np.random.default_rng(seed)
    n = N_TRAIN + N_VALID
    x = rng.standard_normal((n, D)).astype(np.float32)
    z = 1.2 * x[:, 0] - 0.8 * x[:, 1] + 1.0 * x[:, 2] * x[:, 3] + 0.7 * np.sin(2 * x[:, 4])
    if nan_frac > 0:
        # Missing values that carry information: rows missing f0 lean positive.
        miss = rng.random(n) < nan_frac
        z = np.where(miss, z + 1.0, z)
        x[miss, 0] = np.nan
        x[rng.random(n) < nan_frac, 5] = np.nan
    if task == "binary":
        y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.float64)
    else:
        y = z + 0.5 * rng.standard_normal(n)
    return x, y


def cols(x, y):
    out = {"g": ["a"] * len(y)}
    for j in range(D):
        out[f"f{j}"] = x[:, j]
    out["y"] = y
    return out


def lgb_score(task, params, xt, yt, xv, yv):
    p = dict(objective="binary" if task == "binary" else "regression", num_threads=1,
             verbose=-1, deterministic=True, **params)
    rounds = p.pop("rounds")
    b = lgb.train(p, lgb.Dataset(xt, yt), num_boost_round=rounds)
    pred = b.predict(xv)
    if task == "binary":
        pc = np.clip(pred, 1e-7, 1 - 1e-7)
        return float(-np.mean(yv * np.log(pc) + (1 - yv) * np.log(1 - pc)))
    return float(np.sqrt(np.mean((yv - pred) ** 2)))


CASES = [
    ("binary", 0.0, dict(rounds=100, num_leaves=15, learning_rate=0.1)),
    ("binary", 0.0, dict(rounds=60, num_leaves=31, learning_rate=0.05, lambda_l2=1.0)),
    ("binary", 0.15, dict(rounds=100, num_leaves=31, learning_rate=0.1)),
    ("regression", 0.0, dict(rounds=100, num_leaves=31, learning_rate=0.1)),
    ("regression", 0.15, dict(rounds=80, num_leaves=15, learning_rate=0.1, max_depth=4)),
    # Quantized gradients (LightGBM 4's use_quantized_grad) against LightGBM's.
    ("binary", 0.0, dict(rounds=100, num_leaves=15, learning_rate=0.1, use_quantized_grad=True)),
    ("binary", 0.15, dict(rounds=100, num_leaves=31, learning_rate=0.1, use_quantized_grad=True,
                          num_grad_quant_bins=8, quant_train_renew_leaf=True)),
    ("binary", 0.0, dict(rounds=60, num_leaves=31, learning_rate=0.1, use_quantized_grad=True,
                         stochastic_rounding=False)),
    ("regression", 0.0, dict(rounds=100, num_leaves=31, learning_rate=0.1, use_quantized_grad=True)),
]


@pytest.mark.parametrize("task,nan_frac,params", CASES)
def test_matches_lightgbm(gf, tmp_path, task, nan_frac, params):
    x, y = make(7, task, nan_frac)
    xt, yt, xv, yv = x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]
    train = gf.write_parquet(tmp_path / "train.parquet", cols(xt, yt))
    valid = gf.write_parquet(tmp_path / "valid.parquet", cols(xv, yv))
    model = tmp_path / "m.gfm"
    args = []
    for k, v in params.items():
        args += ["--param", f"{k}={v}"]
    s = gf.train(train, model, "g", "y", "--valid", valid, "--task", task,
                 "--model", "gbdt", *args)
    assert s["model"] == "gbdt" and s["groups"] == 1 and s["routes"]["groups_own"] == 1
    want = lgb_score(task, params, xt, yt, xv, yv)
    if task == "binary":
        got = s["valid_logloss"]
        assert abs(got - want) <= 0.005, f"groupfit {got:.5f} vs LightGBM {want:.5f}"
    else:
        got = s["valid_rmse"]
        # No worse than LightGBM by more than 2% (on this data groupfit's
        # RMSE is often lower: bin bounds differ slightly).
        assert got <= 1.02 * want, f"groupfit {got:.5f} vs LightGBM {want:.5f}"

    # The saved model predicts exactly what was scored.
    out = tmp_path / "p.parquet"
    gf.predict(model, valid, out)
    pred = gf.read_parquet(out).column("prediction").to_numpy()
    if task == "binary":
        pc = np.clip(pred, 1e-7, 1 - 1e-7)
        again = float(-np.mean(yv * np.log(pc) + (1 - yv) * np.log(1 - pc)))
    else:
        again = float(np.sqrt(np.mean((yv - pred) ** 2)))
    assert again == pytest.approx(got, rel=1e-9, abs=1e-12)


def test_early_stopping_keeps_best_round_and_inspect_shows_importance(gf, tmp_path):
    x, y = make(3, "binary")
    xt, yt, xv, yv = x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]
    train = gf.write_parquet(tmp_path / "train.parquet", cols(xt, yt))
    valid = gf.write_parquet(tmp_path / "valid.parquet", cols(xv, yv))
    model = tmp_path / "m.gfm"
    # A learning rate this high overfits quickly: early stopping must cut the rounds.
    s = gf.train(train, model, "g", "y", "--valid", valid, "--model", "gbdt",
                 "--param", "rounds=300", "--param", "learning_rate=0.5",
                 "--param", "early_stopping_rounds=10")
    ins = gf.inspect(model)
    g = ins["groups"][0]
    assert 1 <= g["iterations"] < 300
    imp = g["importance"]
    assert set(imp) == {f"f{j}" for j in range(D)}
    # f0 drives the target most; f5 is noise.
    assert imp["f0"] > imp["f5"]
    assert s["valid_logloss"] < 0.6


def test_quantized_groups_each_match_lightgbm(tmp_path):
    # Through the Python API (a switch given as a bool), three groups in one
    # run: each group's validation log-loss within 0.005 of LightGBM's with
    # the same setting on that group alone.
    import pyarrow as pa

    import groupfit

    params = dict(rounds=80, num_leaves=15, learning_rate=0.1, use_quantized_grad=True)
    train, valid, want = {}, {}, {}
    for g, seed in [("a", 3), ("b", 4), ("c", 5)]:
        x, y = make(seed, "binary")
        xt, yt, xv, yv = x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]
        for part, (xx, yy) in [(train, (xt, yt)), (valid, (xv, yv))]:
            c = cols(xx, yy)
            c["g"] = [g] * len(yy)
            for k, v in c.items():
                part.setdefault(k, []).extend(list(v))
        want[g] = lgb_score("binary", params, xt, yt, xv, yv)
    m = groupfit.fit(pa.table(train), by="g", target="y", model="gbdt", valid=pa.table(valid),
                     params={k: [v] for k, v in params.items()}, global_model=False)
    assert m.summary["chosen_configs"] == {
        "rounds=80,num_leaves=15,learning_rate=0.1,use_quantized_grad=true": 3}
    scores = m.scores.to_pydict()
    for g, got in zip(scores["g"], scores["valid_logloss"]):
        assert abs(got - want[g]) <= 0.005, f"group {g}: groupfit {got:.5f} vs LightGBM {want[g]:.5f}"
