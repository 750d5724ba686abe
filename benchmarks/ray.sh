#!/usr/bin/env bash
# Ray runner benchmark (issues 6 and 33).
#
# Generates the shared Zipf(1.1) data (1M rows, 1,000 groups, 32 features),
# starts a local Ray cluster (`ray start --head --num-cpus 2`), and on the
# same data and cluster, in the same run: groupfit with runner="ray", 2
# actors and global_model=False (benchmarks/ray_bench.py, best-of-REPEATS by
# median) and the ray-tasks baseline (one Ray task per group,
# ../shared/bench/baselines.py, the baselines' grids). Both connect to the
# running cluster through RAY_ADDRESS, as in production, so Ray's start-up is
# in neither timing. The cluster is stopped at the end. Prints the table of
# wall times, ratios and validation scores, and the Ray runner's setup,
# communication and compute seconds. Quote figures from one run only.
#
#   benchmarks/ray.sh                            # linear
#   MODEL=gbdt REPEATS=1 benchmarks/ray.sh       # trees
#   MODEL=mlp REPEATS=1 benchmarks/ray.sh        # networks (ray-tasks needs torch)
#   SYSTEMS="" REPEATS=1 benchmarks/ray.sh       # the Ray runner alone
#
# Targets (issue 33): linear >= 8x, mlp >= 8x, gbdt >= 3x faster than
# ray-tasks. Figures, with their date, commit and command: docs/benchmarks.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
[ -d "$SHARED/bench" ] || SHARED=/work/shared
PY=${PYTHON:-$ROOT/.venv/bin/python}
OUT=${BENCH_OUT:-$ROOT/bench-out}
ROWS=${ROWS:-1000000}
N_GROUPS=${N_GROUPS:-1000}
REPEATS=${REPEATS:-3}
WORKERS=${WORKERS:-2}
MODEL=${MODEL:-linear}
SYSTEMS=${SYSTEMS-"ray-tasks"}
DATA=$OUT/zipf-${ROWS}-${N_GROUPS}
RESULTS=$OUT/ray-$MODEL-$(date +%Y%m%d-%H%M%S).jsonl
mkdir -p "$OUT"

if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows "$ROWS" --features 32 --groups "$N_GROUPS" --zipf 1.1 --out "$DATA"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2

# The networks' baseline trains with PyTorch: a benchmark-only venv (sets
# TPY) runs it and the cluster's workers (it sees the project's packages).
BPY=$PY
if [ "$MODEL" = mlp ] && [ -n "$SYSTEMS" ]; then
    . "$ROOT/benchmarks/torch_venv.sh"
    BPY=$TPY
fi

# One cluster for both systems, stopped however the script ends.
ray_cli() { "$BPY" -m ray.scripts.scripts "$@"; }
ray_cli start --head --num-cpus 2 --include-dashboard=false --disable-usage-stats >/dev/null
trap 'ray_cli stop --force >/dev/null 2>&1 || true' EXIT
export RAY_ADDRESS=auto

for i in $(seq "$REPEATS"); do
    echo "running groupfit runner=ray ($WORKERS actors), run $i ..." >&2
    "$PY" "$ROOT/benchmarks/ray_bench.py" --data "$DATA" --workers "$WORKERS" --model "$MODEL" >> "$RESULTS"
done
for s in $SYSTEMS; do
    echo "running $s ..." >&2
    "$BPY" "$SHARED/bench/baselines.py" --data "$DATA" --family "$MODEL" --system "$s" >> "$RESULTS"
done
"$PY" "$ROOT/benchmarks/report.py" "$RESULTS" --system groupfit-ray
