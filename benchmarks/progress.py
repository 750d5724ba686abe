"""How honest the progress estimates are (issue 38), on the benchmark runs.

Each family's benchmark job (the grids of linear.sh, gbdt.sh and mlp.sh on
the shared Zipf data) runs through ``groupfit.fit`` with a callback that
records every event. For each run it prints: the training seconds, the
events, the distinct percentages shown, and at 25% of the work the
estimated time left (the rate so far, as the bar shows it) against the time
that was actually left. Target: within 30%.

    .venv/bin/python benchmarks/progress.py bench-out/zipf-1000000-1000
    FAMILIES=gbdt .venv/bin/python benchmarks/progress.py DATA_DIR
"""

from __future__ import annotations

import os
import sys
import time

import groupfit as gf
import pyarrow.parquet as pq

GRIDS = {
    "linear": dict(model="linear", params={"C": [0.01, 0.1, 1, 10]}),
    "gbdt": dict(
        model="gbdt",
        params={"rounds": [100], "num_leaves": [15, 31], "learning_rate": [0.05, 0.1]},
    ),
    "mlp": dict(
        model="mlp",
        params={"hidden": [64], "lr": [0.001, 0.01], "epochs": [5], "batch_size": [256]},
    ),
}


def run(data: str, family: str, at: float = 0.25) -> dict:
    events = []

    def record(stage, done, total, elapsed):
        events.append((time.monotonic(), stage, done, total))

    t0 = time.monotonic()
    gf.fit(
        os.path.join(data, "train.parquet"),
        by="group",
        target="label",
        valid=os.path.join(data, "valid.parquet"),
        progress=False,
        callback=record,
        **GRIDS[family],
    )
    wall = time.monotonic() - t0
    training = [e for e in events if e[1] == "training"]
    start = training[0][0]
    end = training[-1][0]
    row = dict(family=family, wall_s=wall, train_s=end - start, events=len(training))
    row["percents"] = len({round(100 * d / t) for _, _, d, t in training if t > 0})
    for t, _, d, total in training:
        f = d / total if total > 0 else 0.0
        if f >= at:
            elapsed = t - start
            row["at"] = f
            row["estimate_s"] = elapsed * (1 - f) / f
            row["actual_s"] = end - t
            row["error"] = row["estimate_s"] / row["actual_s"] - 1 if row["actual_s"] > 0 else float("nan")
            break
    return row


def main() -> None:
    data = sys.argv[1]
    rows = pq.ParquetFile(os.path.join(data, "train.parquet")).metadata.num_rows
    print(f"data: {data} ({rows:,} training rows); {os.cpu_count()} cores")
    print("| family | training s | events | distinct % | at | estimated left s | actual left s | error |")
    print("|---|---|---|---|---|---|---|---|")
    for family in os.environ.get("FAMILIES", "linear gbdt mlp").split():
        r = run(data, family)
        print(
            f"| {family} | {r['train_s']:.2f} | {r['events']} | {r['percents']} | "
            f"{100 * r.get('at', float('nan')):.0f}% | {r.get('estimate_s', float('nan')):.2f} | "
            f"{r.get('actual_s', float('nan')):.2f} | {100 * r.get('error', float('nan')):+.0f}% |",
            flush=True,
        )


if __name__ == "__main__":
    main()
