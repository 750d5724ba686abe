"""Peak memory of the process that calls ``gf.fit`` (the driver), for one run.

  python benchmarks/ray_memory.py --data DIR --model linear --runner native|ray

Prints one JSON line: the driver's peak resident set (``ru_maxrss``) and the
wall time. With ``--runner ray`` it connects to the cluster in ``RAY_ADDRESS``;
the actors' memory is theirs, not the driver's. The input is a Parquet path,
so on Ray the driver reads only the keys and the target.
"""

import argparse
import json
import os
import resource
import time

GRIDS = {
    "linear": {"C": [0.01, 0.1, 1, 10]},
    "gbdt": {"rounds": [20], "num_leaves": [15, 31]},
    "mlp": {"hidden": [64], "lr": [0.001, 0.01], "epochs": [1], "batch_size": [256]},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--model", choices=sorted(GRIDS), default="linear")
    ap.add_argument("--runner", choices=["native", "ray"], default="native")
    a = ap.parse_args()
    import groupfit as gf

    runner = "native"
    if a.runner == "ray":
        import ray

        ray.init(log_to_driver=False)
        runner = gf.RayRunner(workers=2, cpus_per_worker=1)
    t0 = time.perf_counter()
    m = gf.fit(
        os.path.join(a.data, "train.parquet"),
        by="group",
        target="label",
        model=a.model,
        params=GRIDS[a.model],
        valid=os.path.join(a.data, "valid.parquet"),
        runner=runner,
        global_model=False,
    )
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"model": a.model, "runner": a.runner, "driver_peak_mb": round(peak_mb, 1),
                      "wall_s": round(wall, 2), "valid_logloss": m.summary.get("valid_logloss")}))


if __name__ == "__main__":
    main()
