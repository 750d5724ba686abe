#!/usr/bin/env bash
# One group of 20M rows (issue 34): the shared generator with one group
# (ROWS rows, 32 float32 features, 80% training), trained by `groupfit
# train` for each family in MODELS: linear (4 configs), gbdt (20 rounds, 2
# configs) and mlp (1 epoch, 2 configs). Prints the wall seconds and the
# peak resident set (`/usr/bin/time -f %M`) against the f32 feature matrix
# of the training file's rows. The data is kept under bench-out (about 3 GB;
# KEEP=0 deletes it).
#
#   benchmarks/big_group.sh
#   ROWS=5000000 MODELS=linear benchmarks/big_group.sh
#
# Figures, with their date, commit and command: docs/benchmarks.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
[ -d "$SHARED/bench" ] || SHARED=/work/shared
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=${GROUPFIT_BIN:-$ROOT/target/release/groupfit}
OUT=${BENCH_OUT:-$ROOT/bench-out}
ROWS=${ROWS:-20000000}
MODELS=${MODELS:-"linear gbdt mlp"}
DATA=$OUT/one-group-$ROWS
mkdir -p "$OUT"
if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows "$ROWS" --features 32 --groups 1 --out "$DATA"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
train_rows=$("$PY" -c "import pyarrow.parquet as pq, sys; print(pq.ParquetFile(sys.argv[1]).metadata.num_rows)" "$DATA/train.parquet")
matrix_mb=$((train_rows * 32 * 4 / 1048576))
printf '| model | training rows | wall s | peak RSS MB | f32 matrix MB | peak / matrix |\n|---|---|---|---|---|---|\n'
for m in $MODELS; do
    case $m in
        linear) params=(--param C=0.01,0.1,1,10) ;;
        gbdt) params=(--param rounds=20 --param num_leaves=31 --param learning_rate=0.05,0.1) ;;
        mlp) params=(--param hidden=64 --param epochs=1 --param lr=0.001,0.01) ;;
    esac
    t0=$(date +%s.%N)
    /usr/bin/time -f %M -o "$DATA/rss" "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" \
        --by group --target label --model "$m" "${params[@]}" --out "$DATA/$m.gfm" >/dev/null 2>&1
    t1=$(date +%s.%N)
    "$PY" -c "import sys; m, n, t, kb, mat = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(open(sys.argv[4]).read().split()[-1]), int(sys.argv[5]); print(f'| {m} | {n:,} | {t:.1f} | {kb / 1024:,.0f} | {mat:,} | {kb / 1024 / mat:.2f} |')" \
        "$m" "$train_rows" "$(echo "$t1 - $t0" | bc)" "$DATA/rss" "$matrix_mb"
    rm -f "$DATA/$m.gfm"
done
[ "${KEEP:-1}" = 1 ] || rm -rf "$DATA"
