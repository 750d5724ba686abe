#!/usr/bin/env bash
# Hierarchies and partial pooling benchmark (issue 32).
#
# ../shared/data/flights.parquet, --by origin,dest, regression of arr_delay
# on the departure's date and time (month, day, dep_time, sched_dep_time,
# hour, minute). Rows are split 60/20/20 into train, valid and test, once
# per split seed. Every system trains on train and is scored on test;
# groupfit chooses its config and auto's k on valid. In the same run:
#   groupfit linear (grid C=0.01,0.1,1,10) --hierarchy with every --shrinkage;
#   scikit-lego HierarchicalRegressor(Ridge()) with each of its modes;
#   groupfit gbdt and mlp, auto against none;
#   the cost: linear train_s with --hierarchy (auto) against the finest level
#   alone, on flights and on the shared Zipf data (1M rows, 1,000 groups in
#   30 regions), where the passes dominate.
# Prints a table (means over splits) and writes one JSON line per run.
#
# Targets: auto's mean route RMSE below none's and every scikit-lego mode's;
# its train_s at least 10x below scikit-lego's fit; --hierarchy at most 2x.
# Figures, with their date, commit and command: docs/benchmarks.md.
#
#   benchmarks/hierarchy.sh
#   SPLITS=1 FAMILIES=linear benchmarks/hierarchy.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
PY=${PYTHON:-$ROOT/.venv/bin/python}
OUT=${BENCH_OUT:-$ROOT/bench-out}
SPLITS=${SPLITS:-5}
REPEATS=${REPEATS:-3}
FAMILIES=${FAMILIES:-linear,gbdt,mlp}
STAMP=$(date +%Y%m%d-%H%M%S)
ZIPF=$OUT/zipf-1000000-1000
mkdir -p "$OUT"
if [ ! -f "$ZIPF/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows 1000000 --features 32 --groups 1000 --zipf 1.1 --out "$ZIPF"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
"$PY" "$ROOT/benchmarks/hierarchy.py" --data "$SHARED/data/flights.parquet" --out "$OUT/hierarchy" \
    --features month,day,dep_time,sched_dep_time,hour,minute \
    --splits "$SPLITS" --repeats "$REPEATS" --families "$FAMILIES" --scale-data "$ZIPF" \
    > "$OUT/hierarchy-$STAMP.jsonl"
echo "runs: $OUT/hierarchy-$STAMP.jsonl" >&2
