#!/usr/bin/env bash
# GBDT family benchmark (issue 3: grouped gradient-boosted trees).
#
# 1. The shared Zipf(1.1) data (1M rows, 1,000 groups, 32 features, binary):
#    `groupfit train --model gbdt --param rounds=100 --param num_leaves=15,31
#    --param learning_rate=0.05,0.1 --json` (best of REPEATS runs, one of them
#    with GROUPFIT_TRACE=1 for the share of time in histogram building) and,
#    on the same data in the same run, lightgbm-joblib and lightgbm-loop from
#    ../shared/bench/baselines.py (4,000 boosters each).
#    With NO_GLOBAL=1 (the default), one more groupfit run with --no-global:
#    4,000 boosters like the baselines, without the global model that sees
#    every row (a second table).
#    With SPLIT_AT=N, the same again on the groups with >= N training rows and
#    on the others, each part alone (benchmarks/gbdt_split.py cuts the data):
#    how far per-booster speed on large groups and per-model overhead on
#    small ones each go.
#    With QUANTIZED=1 (the default), quantized gradients on both sides:
#    groupfit --no-global with use_quantized_grad=true against the baselines
#    with --lgb-param use_quantized_grad=true (a third table).
# 2. The flights data (per-route models of arr_delay): groupfit against a
#    per-route LightGBM loop with the same grid (benchmarks/gbdt_flights.py).
# Prints ratio tables. Quote ratios from one run only.
#
# Target: >= 10x faster than lightgbm-joblib (not met). Figures, with their
# date, commit and command: docs/benchmarks.md.
#
#   benchmarks/gbdt.sh
#   SYSTEMS="lightgbm-joblib" FLIGHTS=0 benchmarks/gbdt.sh
#   SYSTEMS=lightgbm-joblib FLIGHTS=0 REPEATS=1 SPLIT_AT=5000 benchmarks/gbdt.sh
#   SYSTEMS=lightgbm-joblib FLIGHTS=0 REPEATS=1 benchmarks/gbdt.sh   # issue 36's run
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=${GROUPFIT_BIN:-$ROOT/target/release/groupfit}
OUT=${BENCH_OUT:-$ROOT/bench-out}
ROWS=${ROWS:-1000000}
N_GROUPS=${N_GROUPS:-1000}
REPEATS=${REPEATS:-2}
SYSTEMS=${SYSTEMS:-"lightgbm-joblib lightgbm-loop"}
FLIGHTS=${FLIGHTS:-1}
NO_GLOBAL=${NO_GLOBAL:-1}
QUANTIZED=${QUANTIZED:-1}
SPLIT_AT=${SPLIT_AT:-}
DATA=$OUT/zipf-${ROWS}-${N_GROUPS}
STAMP=$(date +%Y%m%d-%H%M%S)
RESULTS=$OUT/gbdt-$STAMP.jsonl
mkdir -p "$OUT"

if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows "$ROWS" --features 32 --groups "$N_GROUPS" --zipf 1.1 --out "$DATA"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2

# Names the system of a `--json` result on stdin (one JSON line out).
tag() {
    "$PY" -c 'import json,sys; d=json.load(sys.stdin); d["system"]=sys.argv[1]; print(json.dumps(d))' "$1"
}

GRID=(--model gbdt --param rounds=100 --param num_leaves=15,31 --param learning_rate=0.05,0.1)
for i in $(seq "$REPEATS"); do
    "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
        "${GRID[@]}" --out "$OUT/gbdt.gfm" --json \
        | tag groupfit >> "$RESULTS"
done
# Like for like with the baselines (4,000 boosters, no global model): one
# run with --no-global, reported in a second table.
if [ "$NO_GLOBAL" = 1 ]; then
    "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
        "${GRID[@]}" --no-global --out "$OUT/gbdt-no-global.gfm" --json \
        | tag groupfit-no-global >> "$RESULTS"
fi
echo "traced run (stage timings, share of time in histogram building):" >&2
GROUPFIT_TRACE=1 "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
    "${GRID[@]}" --out "$OUT/gbdt.gfm" --json 2> "$OUT/gbdt-$STAMP.trace" > /dev/null
grep -v '^\[groupfit\] pass ' "$OUT/gbdt-$STAMP.trace" >&2 || true
for s in $SYSTEMS; do
    echo "running $s ..." >&2
    "$PY" "$SHARED/bench/baselines.py" --data "$DATA" --family gbdt --system "$s" >> "$RESULTS"
done
"$PY" "$ROOT/benchmarks/report.py" "$RESULTS" --reference lightgbm
if [ "$NO_GLOBAL" = 1 ]; then
    echo
    "$PY" "$ROOT/benchmarks/report.py" "$RESULTS" --reference lightgbm --system groupfit-no-global
fi

if [ "$QUANTIZED" = 1 ]; then
    RQ=$OUT/gbdt-$STAMP-quantized.jsonl
    "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
        "${GRID[@]}" --param use_quantized_grad=true --no-global --out "$OUT/gbdt-quantized.gfm" --json \
        | tag groupfit-quantized >> "$RQ"
    for s in $SYSTEMS; do
        echo "running $s with use_quantized_grad=true ..." >&2
        "$PY" "$SHARED/bench/baselines.py" --data "$DATA" --family gbdt --system "$s" \
            --lgb-param use_quantized_grad=true >> "$RQ"
    done
    echo
    echo "quantized gradients on both sides (use_quantized_grad=true, --no-global):"
    "$PY" "$ROOT/benchmarks/report.py" "$RQ" --reference lightgbm --system groupfit-quantized
fi

if [ -n "$SPLIT_AT" ]; then
    # Where the time goes by group size: the groups with >= SPLIT_AT training
    # rows and the others, each trained alone (--no-global) and by each baseline.
    PARTS=$("$PY" "$ROOT/benchmarks/gbdt_split.py" "$DATA" "$SPLIT_AT")
    for part in large small; do
        R=$OUT/gbdt-$STAMP-$part.jsonl
        "$BIN" train --data "$PARTS/$part/train.parquet" --valid "$PARTS/$part/valid.parquet" --by group \
            --target label "${GRID[@]}" --no-global --out "$OUT/gbdt-$part.gfm" --json \
            | tag groupfit >> "$R"
        for s in $SYSTEMS; do
            "$PY" "$SHARED/bench/baselines.py" --data "$PARTS/$part" --family gbdt --system "$s" >> "$R"
        done
        echo
        echo "$part groups (SPLIT_AT=$SPLIT_AT):"
        "$PY" "$ROOT/benchmarks/report.py" "$R" --reference lightgbm
    done
fi

if [ "$FLIGHTS" = 1 ]; then
    echo
    "$PY" "$ROOT/benchmarks/gbdt_flights.py" --bin "$BIN" --data "$ROOT/data/flights.parquet" --out "$OUT/flights"
fi
