#!/usr/bin/env python3
"""Adds three categorical columns to data made by ../shared/bench/datagen.py.

Reads IN/train.parquet and IN/valid.parquet and writes OUT/ with the same
columns plus c4, c30 and c1000: text columns with 4, 30 and 1,000 levels.
Level frequencies follow a Zipf law, so the rare levels of c1000 are rare.
Each group has its own effect per level: e[g] = A[g, c4] + B[g, c30] + C[g, c1000].
The label keeps its features' signal and gains the categories' (binary):
with probability 1/2 a row keeps its label; otherwise it is drawn anew as
Bernoulli(sigmoid(2 e[g])). So both features and categories matter, and
per group.

  categorical_data.py --src bench-out/zipf-1000000-1000 --out bench-out/cat-1000000-1000
"""
import argparse
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

LEVELS = {"c4": 4, "c30": 30, "c1000": 1000}


def level_probs(k, s=1.0):
    w = 1.0 / np.arange(1, k + 1) ** s
    return w / w.sum()


def add_columns(table, effects, group_index, rng):
    n = table.num_rows
    gid = np.array([group_index[k] for k in table.column("group").to_pylist()])
    e = np.zeros(n)
    cols = {}
    for name, k in LEVELS.items():
        codes = rng.choice(k, size=n, p=level_probs(k))
        e += effects[name][gid, codes]
        cols[name] = pa.array(np.array([f"{name}_{c:04d}" for c in range(k)])[codes])
    y = table.column("label").to_numpy()
    redraw = rng.random(n) < 0.5
    p = 1.0 / (1.0 + np.exp(-2.0 * e))
    y = np.where(redraw, (rng.random(n) < p).astype(np.float32), y).astype(np.float32)
    out = table.drop(["label"])
    for name, col in cols.items():
        out = out.append_column(name, col)
    return out.append_column("label", pa.array(y))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    train = pq.read_table(os.path.join(a.src, "train.parquet"))
    valid = pq.read_table(os.path.join(a.src, "valid.parquet"))
    keys = sorted(set(train.column("group").to_pylist()) | set(valid.column("group").to_pylist()))
    group_index = {k: i for i, k in enumerate(keys)}
    effects = {name: rng.standard_normal((len(keys), k)) for name, k in LEVELS.items()}
    os.makedirs(a.out, exist_ok=True)
    for part, t in (("train", train), ("valid", valid)):
        pq.write_table(add_columns(t, effects, group_index, rng),
                       os.path.join(a.out, f"{part}.parquet"), row_group_size=256 * 1024)


if __name__ == "__main__":
    main()
