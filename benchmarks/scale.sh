#!/usr/bin/env bash
# Scale benchmark (issue 34): streaming predict.
#
# Trains a linear model (4 configs, global model) on the shared Zipf(1.1)
# data (1M rows, 1,000 groups, 32 features), then predicts inputs of
# SIZES rows (default 5M and 50M: the shared data's training rows
# repeated, benchmarks/scale_input.py) with `groupfit predict`. For each
# size it prints the rows, the wall seconds, rows per second and the peak
# resident set (`/usr/bin/time -f %M`). Streaming keeps the peak flat:
# memory is bounded by a batch (65,536 rows) and the model, not the input.
# The inputs are deleted at the end (KEEP=1 keeps them); the 50M-row input
# takes about 10 GB of disk.
#
#   benchmarks/scale.sh
#   SIZES="1000000 5000000" benchmarks/scale.sh
#
# Figures, with their date, commit and command: docs/benchmarks.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
[ -d "$SHARED/bench" ] || SHARED=/work/shared
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=${GROUPFIT_BIN:-$ROOT/target/release/groupfit}
OUT=${BENCH_OUT:-$ROOT/bench-out}
SIZES=${SIZES:-"5000000 50000000"}
DATA=$OUT/zipf-1000000-1000
WORK=$OUT/scale
mkdir -p "$WORK"
if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows 1000000 --features 32 --groups 1000 --zipf 1.1 --out "$DATA"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
"$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
    --param C=0.01,0.1,1,10 --out "$WORK/model.gfm" 2>/dev/null
printf '| rows | wall s | rows/s | peak RSS MB |\n|---|---|---|---|\n'
for n in $SIZES; do
    src=$WORK/predict-$n.parquet
    [ -f "$src" ] || "$PY" "$ROOT/benchmarks/scale_input.py" "$DATA/train.parquet" "$src" "$n"
    t0=$(date +%s.%N)
    /usr/bin/time -f %M -o "$WORK/rss" "$BIN" predict --model "$WORK/model.gfm" --data "$src" \
        --out "$WORK/out.parquet" 2>/dev/null
    t1=$(date +%s.%N)
    "$PY" -c "import sys; n, t, kb = int(sys.argv[1]), float(sys.argv[2]), int(open(sys.argv[3]).read().split()[-1]); print(f'| {n:,} | {t:.1f} | {n / t:,.0f} | {kb / 1024:,.0f} |')" \
        "$n" "$(echo "$t1 - $t0" | bc)" "$WORK/rss"
    rm -f "$WORK/out.parquet"
    [ "${KEEP:-0}" = 1 ] || rm -f "$src"
done
