"""One timed run of groupfit's Ray runner; prints one JSON line like baselines.py.

wall_s runs from before ``ray.init`` to the fitted model, so it is end to end
(reading Parquet, starting the actors, shipping shards, training, scoring and
selection). With ``RAY_ADDRESS`` set it connects to that running cluster, as
the ray-tasks baseline does; otherwise it starts a local Ray with ``--cpus``
CPUs. There is no global model (``global_model=False``): the baselines fit
one model per group and no other. Also reported: the runner's setup seconds (actor start,
shard transfer, group statistics, layouts), pass seconds, the slowest actor's
compute seconds inside the engine and the rest (communication: scheduling,
transfer, (de)serialisation).

  python benchmarks/ray_bench.py --data DIR [--workers 2] [--cpus 2] [--model linear|gbdt|mlp]

The grids are those of ../shared/bench/baselines.py for the family.
"""

GRIDS = {
    "linear": {"C": [0.01, 0.1, 1, 10]},
    "gbdt": {"rounds": [100], "num_leaves": [15, 31], "learning_rate": [0.05, 0.1]},
    "mlp": {"hidden": [64], "lr": [0.001, 0.01], "epochs": [5], "batch_size": [256]},
}
import argparse
import json
import os
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--model", choices=sorted(GRIDS), default="linear")
    a = ap.parse_args()
    t0 = time.perf_counter()
    import ray

    import groupfit as gf

    if os.environ.get("RAY_ADDRESS"):  # a running cluster (`ray start --head`)
        ray.init(log_to_driver=False)
    else:
        ray.init(num_cpus=a.cpus, include_dashboard=False, log_to_driver=False)
    t_init = time.perf_counter() - t0
    m = gf.fit(
        os.path.join(a.data, "train.parquet"),
        by="group",
        target="label",
        model=a.model,
        params=GRIDS[a.model],
        valid=os.path.join(a.data, "valid.parquet"),
        runner=gf.RayRunner(workers=a.workers, cpus_per_worker=1),
        global_model=False,
    )
    wall = time.perf_counter() - t0
    ray.shutdown()
    s, info = m.summary, m.runner_info
    rec = {
        "system": "groupfit-ray",
        "family": a.model,
        "groups": s["groups"],
        "models": s["models"],
        "load_s": round(t_init + s["load_s"], 3),
        "train_s": round(s["train_s"], 3),
        "wall_s": round(wall, 3),
        "strategy": s["strategy"],
        "passes": s["passes"],
        "passes_s": info["passes_s"],
        "ray_init_s": round(t_init, 3),
        "setup_s": info["setup_s"],
        "compute_s": info["compute_s"],
        "compute_s_per_worker": info.get("compute_s_per_worker"),
        "comm_s": info["comm_s"],
        "shard_rows": info["shard_rows"],
        "shared_groups": info["shared_groups"],
        "placement": info.get("placement"),
    }
    for k in ("valid_logloss", "valid_auc", "valid_rmse"):
        if k in s:
            rec[k] = s[k]
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
