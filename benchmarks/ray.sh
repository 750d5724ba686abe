#!/usr/bin/env bash
# Ray runner benchmark (issue 6).
#
# Generates the shared Zipf(1.1) data (1M rows, 1,000 groups, 32 features),
# then on the same data and in the same run: groupfit with runner="ray" and 2
# actors (benchmarks/ray_bench.py, best-of-REPEATS by median) and the
# ray-tasks baseline (one Ray task per group, ../shared/bench/baselines.py),
# both end to end from a fresh local Ray with 2 CPUs. Prints the table of wall
# times, ratios and validation scores, and the Ray runner's communication
# versus compute seconds. Quote figures from one run only.
#
#   benchmarks/ray.sh
#   SYSTEMS="" REPEATS=1 benchmarks/ray.sh      # the Ray runner alone
#   MODEL=gbdt REPEATS=1 benchmarks/ray.sh      # trees (mlp: networks; its
#                                               # ray-tasks baseline needs torch,
#                                               # see benchmarks/mlp.sh)
#
# Target: >= 5x faster than ray-tasks (not met). Figures, with their date,
# commit and command: docs/benchmarks.md.
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

for i in $(seq "$REPEATS"); do
    echo "running groupfit runner=ray ($WORKERS actors), run $i ..." >&2
    "$PY" "$ROOT/benchmarks/ray_bench.py" --data "$DATA" --workers "$WORKERS" --model "$MODEL" >> "$RESULTS"
done
for s in $SYSTEMS; do
    echo "running $s ..." >&2
    "$PY" "$SHARED/bench/baselines.py" --data "$DATA" --family "$MODEL" --system "$s" >> "$RESULTS"
done
"$PY" "$ROOT/benchmarks/report.py" "$RESULTS" --system groupfit-ray
