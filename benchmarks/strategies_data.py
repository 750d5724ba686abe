#!/usr/bin/env python3
"""Data for benchmarks/strategies.sh: the same 1M rows in three regimes.

Uses ../shared/bench/datagen.py's generator (same features, same per-group
true models, same train/valid split), only with chosen group sizes:

  skewed4   4 groups, one holding 70 % of the rows
  zipf1000  1,000 groups, Zipf(1.1) sizes (datagen's own law)
  tiny20000 20,000 near-equal groups of ~50 rows

  strategies_data.py --shared ../shared --rows 1000000 --out bench-out/strategies
"""
import argparse
import importlib.util
import os

import numpy as np


def load_datagen(shared):
    spec = importlib.util.spec_from_file_location("datagen", os.path.join(shared, "bench", "datagen.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def regimes(rows):
    rest = rows - int(rows * 0.7)
    return {
        "skewed4": (4, np.array([int(rows * 0.7)] + [rest // 3] * 3)),
        "zipf1000": (1000, None),
        "tiny20000": (20000, np.full(20000, rows // 20000)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dg = load_datagen(a.shared)
    zipf_sizes = dg.group_sizes
    for name, (groups, sizes) in regimes(a.rows).items():
        out = os.path.join(a.out, name)
        if os.path.exists(os.path.join(out, "valid.parquet")):
            continue
        if sizes is None:
            dg.group_sizes = zipf_sizes
        else:
            dg.group_sizes = lambda rows, groups, s, min_rows, rng, sizes=sizes: sizes.copy()
        keys, X, y, v = dg.make(a.rows, a.features, groups, 1.1, "binary", 7)
        os.makedirs(out, exist_ok=True)
        dg.write(os.path.join(out, "train.parquet"), keys[~v], X[~v], y[~v])
        dg.write(os.path.join(out, "valid.parquet"), keys[v], X[v], y[v])
        print(f"{name}: {groups} groups, {len(y)} rows", flush=True)


if __name__ == "__main__":
    main()
