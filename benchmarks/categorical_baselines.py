#!/usr/bin/env python3
"""Per-group baselines with categorical features, timed like ../shared/bench/baselines.py.

Reads DIR/train.parquet and DIR/valid.parquet (from categorical_data.py):
numeric f* columns, text columns c*, a group key and a binary label. Uses the
shared baselines' grids, rounds, scoring and JSON line, so the figures compare
with benchmarks/categorical.sh's groupfit runs.

Systems (joblib, 2 processes, one model library thread each):
  lightgbm-joblib-cat : LightGBM per group with categorical_feature (the c*
                        columns as integer codes of one global dictionary)
  sklearn-joblib-onehot: per group, ColumnTransformer(f* passed through,
                        OneHotEncoder(handle_unknown="ignore") on c*) fitted
                        once, then LogisticRegression per C of the grid (the
                        linear family's objective: L2 on raw coefficients)

  categorical_baselines.py --data bench-out/cat-1000000-1000 --system lightgbm-joblib-cat
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("GROUPFIT_SHARED", os.path.join(HERE, "..", "..", "shared"))
sys.path.insert(0, os.path.join(SHARED, "bench"))
import baselines as base  # noqa: E402  (the shared grids, rounds and scoring)


def load(path, dictionaries):
    """Group keys, X (numeric columns then category codes, float64) and y."""
    t = pq.read_table(path)
    num = [c for c in t.column_names if c.startswith("f")]
    cat = [c for c in t.column_names if c.startswith("c")]
    cols = [t.column(c).to_numpy().astype(np.float64) for c in num]
    for c in cat:
        levels = dictionaries.setdefault(c, pc.unique(t.column(c)).sort())
        codes = pc.index_in(t.column(c), value_set=levels).to_numpy(zero_copy_only=False)
        cols.append(np.where(np.isnan(codes.astype(np.float64)), -1.0, codes).astype(np.float64))
    X = np.column_stack(cols)
    y = t.column("label").to_numpy().astype(np.float64)
    g = t.column("group").to_numpy(zero_copy_only=False)
    return g, X, y, len(num), len(cat)


def fit_lightgbm_cat(n_num, n_cat, task, Xtr, ytr, Xva, yva):
    import lightgbm as lgb
    cats = list(range(n_num, n_num + n_cat))
    out = []
    for cfg in base.GRIDS["gbdt"]:
        params = dict(objective="binary" if task == "binary" else "regression",
                      num_leaves=cfg["num_leaves"], learning_rate=cfg["learning_rate"],
                      min_data_in_leaf=20, num_threads=1, verbose=-1)
        params.update(base.lgb_extra())
        ds = lgb.Dataset(Xtr, ytr, categorical_feature=cats)
        b = lgb.train(params, ds, num_boost_round=base.GBDT_ROUNDS)
        out.append(base.scores(task, yva, b.predict(Xva)))
    return out


def fit_onehot_linear(n_num, n_cat, task, Xtr, ytr, Xva, yva):
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.preprocessing import OneHotEncoder
    enc = ColumnTransformer([
        ("num", "passthrough", list(range(n_num))),
        ("cat", OneHotEncoder(handle_unknown="ignore"), list(range(n_num, n_num + n_cat))),
    ])
    Ztr = enc.fit_transform(Xtr)
    Zva = enc.transform(Xva)
    out = []
    for cfg in base.GRIDS["linear"]:
        if task == "regression":
            p = Ridge(alpha=1.0 / cfg["C"]).fit(Ztr, ytr).predict(Zva)
        elif len(np.unique(ytr)) < 2:
            p = np.full(len(yva), ytr.mean() if len(ytr) else 0.5)
        else:
            m = LogisticRegression(C=cfg["C"], max_iter=200).fit(Ztr, ytr)
            p = m.predict_proba(Zva)[:, 1]
        out.append(base.scores(task, yva, p))
    return out


SYSTEMS = {
    "lightgbm-joblib-cat": ("gbdt", fit_lightgbm_cat),
    "sklearn-joblib-onehot": ("linear", fit_onehot_linear),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--system", choices=sorted(SYSTEMS), required=True)
    ap.add_argument("--task", choices=["binary", "regression"], default="binary")
    a = ap.parse_args()
    family, fn = SYSTEMS[a.system]
    t0 = time.perf_counter()
    dictionaries = {}
    g, X, y, n_num, n_cat = load(os.path.join(a.data, "train.parquet"), dictionaries)
    train = base.split_by_group(g, X, y)
    g, X, y, _, _ = load(os.path.join(a.data, "valid.parquet"), dictionaries)
    valid = base.split_by_group(g, X, y)
    t1 = time.perf_counter()
    from joblib import Parallel, delayed
    groups = [k for k in train if k in valid]
    per_group = Parallel(n_jobs=2)(
        delayed(fn)(n_num, n_cat, a.task, *train[k], *valid[k]) for k in groups)
    t2 = time.perf_counter()
    bests = [base.best(a.task, r) for r in per_group]
    rec = {"system": a.system, "family": family, "groups": len(bests),
           "models": len(bests) * len(base.GRIDS[family]),
           "load_s": round(t1 - t0, 3), "train_s": round(t2 - t1, 3),
           "wall_s": round(t2 - t0, 3)}
    rec.update(base.summarize(a.task, bests))
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
