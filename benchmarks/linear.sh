#!/usr/bin/env bash
# Linear family benchmark (issue: grouped linear foundation).
#
# Generates the shared Zipf(1.1) data (1M rows, 1,000 groups, 32 features),
# then on the same data and in the same run: `groupfit train --json` (best of
# REPEATS runs) and the reference systems sklearn-loop, sklearn-joblib and
# ray-tasks from ../shared/bench/baselines.py, each once. Prints a table of
# wall times, ratios and validation scores. Quote ratios from one run only.
#
# Targets: >= 20x faster than sklearn-joblib, validation log-loss within
# 0.002. Figures, with their date, commit and command: docs/benchmarks.md.
#
#   benchmarks/linear.sh                 # everything
#   SYSTEMS="sklearn-joblib" benchmarks/linear.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=${GROUPFIT_BIN:-$ROOT/target/release/groupfit}
OUT=${BENCH_OUT:-$ROOT/bench-out}
ROWS=${ROWS:-1000000}
N_GROUPS=${N_GROUPS:-1000}
REPEATS=${REPEATS:-3}
SYSTEMS=${SYSTEMS:-"sklearn-loop sklearn-joblib ray-tasks"}
DATA=$OUT/zipf-${ROWS}-${N_GROUPS}
RESULTS=$OUT/linear-$(date +%Y%m%d-%H%M%S).jsonl
mkdir -p "$OUT"

if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows "$ROWS" --features 32 --groups "$N_GROUPS" --zipf 1.1 --out "$DATA"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2

for i in $(seq "$REPEATS"); do
    "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
        --model linear --param C=0.01,0.1,1,10 --out "$OUT/linear.gfm" --json \
        | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d["system"]="groupfit"; print(json.dumps(d))' >> "$RESULTS"
done
for s in $SYSTEMS; do
    echo "running $s ..." >&2
    "$PY" "$SHARED/bench/baselines.py" --data "$DATA" --family linear --system "$s" >> "$RESULTS"
done
"$PY" "$ROOT/benchmarks/report.py" "$RESULTS"
