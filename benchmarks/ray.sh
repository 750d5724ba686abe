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
# Status: the target (>= 5x faster than ray-tasks) is not met. 2026-12-04,
# 2-core AMD EPYC VM, `REPEATS=3` at 2d602d7, linear: groupfit-ray 6.63 s
# (median of 5.86, 6.63, 6.64) against ray-tasks 17.28 s (2.6x), same
# valid_logloss (0.47643 vs 0.47642). Of groupfit-ray's 6.63 s, 4.09 s is
# importing Ray and groupfit and `ray.init`, 1.96 s the runner's setup
# (actors, shard transfer, layouts) and 0.30 s the passes: the target
# (<= 3.5 s here) is below the cost of starting Ray. (On the Intel VM of
# 2026-12-03 ray-tasks took 33.3 s.) gbdt, `MODEL=gbdt REPEATS=1` at
# 5f0eeea: groupfit-ray 51.2 s against ray-tasks 101.0 s (2.0x),
# valid_logloss 0.56706 against 0.56884; the actors (whole groups, one of
# them also the global model) computed 41.3 s at most, communication 1.1 s.
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
