"""Partial pooling on flights: groupfit's shrinkage modes against scikit-lego's
HierarchicalRegressor(Ridge), fitted in the same run (see hierarchy.sh).

Rows with a target and every feature are split 60/20/20 at random into
train, valid and test, once per split seed (--splits). Every system trains on train; groupfit chooses
its config and `auto`'s k on valid; all are scored on test. The metric is
the mean over routes (origin/dest in test) of the route's RMSE, and the same
over routes with fewer than 200 training rows. One JSON line per run.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import groupfit as gf

BY = ["origin", "dest"]
TARGET = "arr_delay"
SMALL = 200


def split(data: Path, features, out: Path, seed: int):
    df = pq.read_table(data, columns=BY + features + [TARGET]).to_pandas()
    df = df.dropna(subset=features + [TARGET]).reset_index(drop=True)
    u = np.random.default_rng(seed).random(len(df))
    parts = {"train": df[u < 0.6], "valid": df[(u >= 0.6) & (u < 0.8)], "test": df[u >= 0.8]}
    out.mkdir(parents=True, exist_ok=True)
    for name, part in parts.items():
        pq.write_table(pa.Table.from_pandas(part.reset_index(drop=True), preserve_index=False),
                       out / f"{name}.parquet")
    return parts["train"].reset_index(drop=True), parts["test"].reset_index(drop=True)


def per_route(train, test, pred):
    n_train = train.groupby(BY).size()
    err = test[BY].assign(se=(test[TARGET].to_numpy() - pred) ** 2)
    rmse = err.groupby(BY)["se"].mean() ** 0.5
    rows = n_train.reindex(rmse.index).fillna(0)
    return {
        "route_rmse": float(rmse.mean()),
        "route_rmse_small": float(rmse[rows < SMALL].mean()),
        "routes": int(len(rmse)),
        "routes_small": int((rows < SMALL).sum()),
        "rmse": float(np.sqrt(np.mean(err["se"]))),
    }


RECORDS = []


def emit(record):
    RECORDS.append(record)
    print(json.dumps(record), flush=True)


def run_groupfit(args, train, test, features):
    for family, grid, modes in [
        ("linear", {"C": [0.01, 0.1, 1, 10]}, args.modes.split(",")),
        ("gbdt", {"rounds": [100], "num_leaves": [15], "learning_rate": [0.05, 0.1]}, ["none", "auto"]),
        ("mlp", {"epochs": [20], "hidden": [16], "lr": [0.001, 0.01]}, ["none", "auto"]),
    ]:
        if family not in args.families.split(","):
            continue
        for mode in modes:
            m = gf.fit(args.out / "train.parquet", by=BY, target=TARGET, features=features,
                       valid=args.out / "valid.parquet", model=family, params=grid,
                       hierarchy=True, shrinkage=mode)
            pred = m.predict(test)
            s = m.summary
            emit({"system": f"groupfit-{family}", "mode": mode, "split": args.seed, "configs": s["configs"],
                  "train_s": s["train_s"], "wall_s": s["wall_s"],
                  "k": {lv["key"]: lv["k"] for lv in (s.get("pooling") or {}).get("levels", [])},
                  **per_route(train, test, pred)})
        if family == "linear":
            # The cost of the levels: the finest level alone, and with
            # --hierarchy (its default auto pooling included).
            for hierarchy in (False, True):
                times = []
                for _ in range(args.repeats):
                    m = gf.fit(args.out / "train.parquet", by=BY, target=TARGET, features=features,
                               valid=args.out / "valid.parquet", params=grid, hierarchy=hierarchy)
                    times.append(m.summary["train_s"])
                emit({"system": "groupfit-linear-cost", "hierarchy": hierarchy, "split": args.seed,
                      "train_s": float(np.median(times)), "runs": times})


def cost_at_scale(args):
    """The cost of --hierarchy where passes dominate: the shared Zipf data
    (binary, 32 features) with a region per group (30 regions), linear with
    the 4-config grid, `--by region,group` with and without --hierarchy."""
    out = args.out / "scale"
    if not (out / "train.parquet").exists():
        out.mkdir(parents=True, exist_ok=True)
        for name in ("train", "valid"):
            t = pq.read_table(args.scale_data / f"{name}.parquet")
            g = t.column("group").to_numpy(zero_copy_only=False)
            region = np.array([f"r{hash_key(k) % 30:02d}" for k in g])
            pq.write_table(t.add_column(0, "region", pa.array(region)), out / f"{name}.parquet")
    for hierarchy in (False, True):
        times = []
        for _ in range(args.repeats):
            m = gf.fit(out / "train.parquet", by=["region", "group"], target="label",
                       valid=out / "valid.parquet", params={"C": [0.01, 0.1, 1, 10]},
                       hierarchy=hierarchy)
            times.append(m.summary["train_s"])
        emit({"system": "groupfit-linear-cost-scale", "hierarchy": hierarchy,
              "rows": m.summary["rows_train"], "train_s": float(np.median(times)), "runs": times})


def hash_key(key: str) -> int:
    """A stable hash of a key (Python's own is salted per process)."""
    return sum((i + 1) * ord(ch) for i, ch in enumerate(key))


def run_sklego(args, train, test, features):
    from sklearn.linear_model import Ridge
    from sklego.meta import HierarchicalRegressor

    cols = BY + features
    for mode, kwargs in [(None, None), ("constant", {"alpha": 0.5}), ("equal", None),
                         ("relative", None), ("min_n_obs", {"min_n_obs": SMALL})]:
        est = HierarchicalRegressor(Ridge(), groups=BY, shrinkage=mode, shrinkage_kwargs=kwargs, n_jobs=-1)
        t0 = time.perf_counter()
        est.fit(train[cols], train[TARGET])
        fit_s = time.perf_counter() - t0
        pred = est.predict(test[cols])
        emit({"system": "sklego-ridge", "mode": mode or "none", "split": args.seed, "configs": 1, "fit_s": fit_s,
              **per_route(train, test, pred)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--features", default="month,day,dep_time,sched_dep_time,hour,minute")
    ap.add_argument("--modes", default="none,auto,equal,relative,constant:0.5,min_n_obs:200")
    ap.add_argument("--families", default="linear,gbdt,mlp")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--skip-sklego", action="store_true")
    ap.add_argument("--scale-data", type=Path, help="the shared Zipf data's folder, for the cost at scale")
    args = ap.parse_args()
    features = args.features.split(",")
    for seed in range(args.splits):
        args.seed = seed
        train, test = split(args.data, features, args.out, seed)
        print(f"split {seed}: {len(train)} training rows, {len(test)} test rows, "
              f"{train.groupby(BY).ngroups} routes", file=sys.stderr)
        run_groupfit(args, train, test, features)
        if not args.skip_sklego:
            run_sklego(args, train, test, features)
    if args.scale_data:
        cost_at_scale(args)
    report(RECORDS)


def report(records):
    """The mean over splits of each system and mode, on stderr."""
    df = pd.DataFrame(records)
    for col in ("train_s", "fit_s", "route_rmse", "route_rmse_small", "rmse", "configs", "mode"):
        if col not in df:
            df[col] = np.nan
    runs = df[~df.system.str.startswith("groupfit-linear-cost")]
    table = runs.groupby(["system", "mode"], sort=False).agg(
        route_rmse=("route_rmse", "mean"), route_rmse_small=("route_rmse_small", "mean"),
        rmse=("rmse", "mean"), train_s=("train_s", "mean"), fit_s=("fit_s", "mean"),
        configs=("configs", "first"), splits=("split", "nunique"))
    out = sys.stderr
    print("\n| system | shrinkage | configs | mean route RMSE | routes < 200 rows | row RMSE | fit s |", file=out)
    print("|---|---|---|---|---|---|---|", file=out)
    for (system, mode), r in table.iterrows():
        secs = r.train_s if not np.isnan(r.train_s) else r.fit_s
        # Against the same system's `none` (scikit-lego's: shrinkage=None).
        none = table.route_rmse.get((system, "none"))
        vs = f" ({100 * (r.route_rmse / none - 1):+.2f}%)" if none else ""
        print(f"| {system} | {mode} | {int(r.configs)} | {r.route_rmse:.3f}{vs} | {r.route_rmse_small:.3f} "
              f"| {r.rmse:.3f} | {secs:.3f} |", file=out)
    if "sklego-ridge" in set(runs.system) and ("groupfit-linear", "auto") in table.index:
        auto = table.loc[("groupfit-linear", "auto")]
        base = table.route_rmse.get(("groupfit-linear", "none"), np.nan)
        sk = table.loc["sklego-ridge"]
        print(f"\nauto vs none: {auto.route_rmse:.3f} vs {base:.3f}; best scikit-lego mode "
              f"{sk.route_rmse.idxmin()} {sk.route_rmse.min():.3f}; scikit-lego fit / auto train_s: "
              f"{sk.fit_s.min() / auto.train_s:.0f}x (its fastest mode)", file=out)
    for system, what in [("groupfit-linear-cost", "flights"), ("groupfit-linear-cost-scale", "Zipf 1M rows")]:
        costs = df[df.system == system]
        cost = costs.groupby("hierarchy").train_s.median() if len(costs) else pd.Series(dtype=float)
        if len(cost) == 2:
            print(f"cost of --hierarchy on {what}: train_s {cost[True]:.4f} s vs finest level alone "
                  f"{cost[False]:.4f} s = {cost[True] / cost[False]:.2f}x", file=out)


if __name__ == "__main__":
    main()
