"""Flights benchmark for the gbdt family: per-route (origin, dest) models of
arr_delay, groupfit against a per-route LightGBM loop (joblib, 2 processes)
with the same grid (100 rounds, num_leaves 15/31 x learning_rate 0.05/0.1),
on the same train/valid split; prints wall times and the mean over routes
of the chosen config's validation RMSE.

Routes with fewer than MIN_ROWS training rows are left out of the data, so
every route gets its own model on both sides. Rows without arr_delay are
dropped; missing feature values stay NaN (both systems handle them natively).

  python benchmarks/gbdt_flights.py --bin target/release/groupfit \
      --data data/flights.parquet --out bench-out/flights
"""
import argparse
import json
import os
import subprocess
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FEATURES = ["month", "day", "dep_time", "sched_dep_time", "dep_delay", "sched_arr_time",
            "distance", "hour", "minute"]
GRID = [{"num_leaves": nl, "learning_rate": lr} for nl in (15, 31) for lr in (0.05, 0.1)]
MIN_ROWS = 200


def prepare(data, out):
    t = pq.read_table(data).to_pandas()
    t = t[t["arr_delay"].notna()]
    t = t[["origin", "dest", *FEATURES, "arr_delay"]].copy()
    for f in FEATURES:
        t[f] = t[f].astype("float64")
    rng = np.random.default_rng(0)
    valid = rng.random(len(t)) < 0.2
    tr, va = t[~valid], t[valid]
    counts = tr.groupby(["origin", "dest"]).size()
    keep = set(counts[counts >= MIN_ROWS].index)
    tr = tr[[k in keep for k in zip(tr["origin"], tr["dest"])]]
    va = va[[k in keep for k in zip(va["origin"], va["dest"])]]
    os.makedirs(out, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(tr, preserve_index=False), f"{out}/train.parquet")
    pq.write_table(pa.Table.from_pandas(va, preserve_index=False), f"{out}/valid.parquet")
    return tr, va


def fit_route(xt, yt, xv, yv):
    import lightgbm as lgb
    best = np.inf
    for cfg in GRID:
        params = dict(objective="regression", min_data_in_leaf=20, num_threads=1, verbose=-1, **cfg)
        b = lgb.train(params, lgb.Dataset(xt, yt), num_boost_round=100)
        best = min(best, float(np.sqrt(np.mean((yv - b.predict(xv)) ** 2))))
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    tr, va = prepare(a.data, a.out)
    cmd = [a.bin, "train", "--data", f"{a.out}/train.parquet", "--valid", f"{a.out}/valid.parquet",
           "--by", "origin,dest", "--target", "arr_delay", "--task", "regression",
           "--features", ",".join(FEATURES), "--model", "gbdt", "--param", "rounds=100",
           "--param", "num_leaves=15,31", "--param", "learning_rate=0.05,0.1",
           "--out", f"{a.out}/flights-gbdt.gfm", "--json"]
    ours = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)

    from joblib import Parallel, delayed
    t0 = time.perf_counter()
    gt = {k: g for k, g in tr.groupby(["origin", "dest"])}
    gv = {k: g for k, g in va.groupby(["origin", "dest"])}
    keys = [k for k in gt if k in gv]
    jobs = [(gt[k][FEATURES].to_numpy(), gt[k]["arr_delay"].to_numpy(),
             gv[k][FEATURES].to_numpy(), gv[k]["arr_delay"].to_numpy()) for k in keys]
    rmses = Parallel(n_jobs=2)(delayed(fit_route)(*j) for j in jobs)
    lgb_wall = time.perf_counter() - t0
    lgb_rmse = float(np.mean(rmses))
    print(f"flights: {len(tr)} training rows, {len(va)} validation rows, {ours['groups']} routes "
          f"(>= {MIN_ROWS} training rows), features {', '.join(FEATURES)}")
    print(f"{'system':<18}{'wall_s':>9}{'x groupfit':>11}{'valid_rmse':>12}{'rmse vs lightgbm':>18}")
    print(f"{'groupfit':<18}{ours['wall_s']:>9.3f}{1.0:>10.1f}x{ours['valid_rmse']:>12.4f}"
          f"{100 * (ours['valid_rmse'] / lgb_rmse - 1):>+17.2f}%")
    print(f"{'lightgbm-joblib':<18}{lgb_wall:>9.3f}{lgb_wall / ours['wall_s']:>10.1f}x{lgb_rmse:>12.4f}"
          f"{0.0:>+17.2f}%")
    print(f"(mean over {len(keys)} routes of the best config's validation RMSE; "
          f"groupfit scored {ours['groups_scored']} routes)")


if __name__ == "__main__":
    main()
