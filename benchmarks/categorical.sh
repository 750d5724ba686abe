#!/usr/bin/env bash
# Categorical features benchmark (issue 31).
#
# The shared Zipf(1.1) data (1M rows, 1,000 groups, 32 features, binary) with
# three text columns added by benchmarks/categorical_data.py: c4, c30 and
# c1000 (4, 30 and 1,000 levels, effects that differ by group). On the same
# data, in the same run:
#   linear: `groupfit train --model linear --param C=0.01,0.1,1,10` (one-hot
#           per group, defaults max_cat=64, min_cat_rows=1) against
#           sklearn-joblib-onehot (OneHotEncoder + LogisticRegression per group);
#   gbdt:   `groupfit train --model gbdt` with the shared gbdt grid (native
#           categorical splits) against lightgbm-joblib-cat (categorical_feature).
# Both baselines are benchmarks/categorical_baselines.py. Prints a ratio table
# per family, and with NO_GLOBAL=1 (the default) a second one for one more
# groupfit run with --no-global (4,000 models, like for like).
#
# Targets: linear >= 20x, gbdt >= 3x; validation scores within the parity
# bounds. Figures, with their date, commit and command: docs/benchmarks.md.
#
#   benchmarks/categorical.sh
#   FAMILIES=linear REPEATS=1 benchmarks/categorical.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=${GROUPFIT_BIN:-$ROOT/target/release/groupfit}
OUT=${BENCH_OUT:-$ROOT/bench-out}
ROWS=${ROWS:-1000000}
N_GROUPS=${N_GROUPS:-1000}
REPEATS=${REPEATS:-2}
FAMILIES=${FAMILIES:-"linear gbdt"}
NO_GLOBAL=${NO_GLOBAL:-1}
SRC=$OUT/zipf-${ROWS}-${N_GROUPS}
DATA=$OUT/cat-${ROWS}-${N_GROUPS}
STAMP=$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"

if [ ! -f "$SRC/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows "$ROWS" --features 32 --groups "$N_GROUPS" --zipf 1.1 --out "$SRC"
fi
if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$ROOT/benchmarks/categorical_data.py" --src "$SRC" --out "$DATA"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2

tag() {
    "$PY" -c 'import json,sys; d=json.load(sys.stdin); d["system"]=sys.argv[1]; print(json.dumps(d))' "$1"
}

for family in $FAMILIES; do
    RESULTS=$OUT/categorical-$family-$STAMP.jsonl
    case $family in
        linear) GRID=(--model linear --param C=0.01,0.1,1,10); BASE=sklearn-joblib-onehot; REF=sklearn ;;
        gbdt) GRID=(--model gbdt --param rounds=100 --param num_leaves=15,31 --param learning_rate=0.05,0.1)
              BASE=lightgbm-joblib-cat; REF=lightgbm ;;
        *) echo "unknown family $family" >&2; exit 2 ;;
    esac
    for i in $(seq "$REPEATS"); do
        "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
            "${GRID[@]}" --out "$OUT/categorical-$family.gfm" --json \
            | tag groupfit >> "$RESULTS"
    done
    # Like for like with the baselines (no global model): one more run.
    if [ "$NO_GLOBAL" = 1 ]; then
        "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
            "${GRID[@]}" --no-global --out "$OUT/categorical-$family-no-global.gfm" --json \
            | tag groupfit-no-global >> "$RESULTS"
    fi
    echo "running $BASE ..." >&2
    "$PY" "$ROOT/benchmarks/categorical_baselines.py" --data "$DATA" --system "$BASE" >> "$RESULTS"
    echo "== $family"
    "$PY" "$ROOT/benchmarks/report.py" "$RESULTS" --reference "$REF"
    if [ "$NO_GLOBAL" = 1 ]; then
        echo
        "$PY" "$ROOT/benchmarks/report.py" "$RESULTS" --reference "$REF" --system groupfit-no-global
    fi
    echo
done
