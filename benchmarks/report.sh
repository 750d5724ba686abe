#!/usr/bin/env bash
# The report of a model of many groups (issue 35: 20,000 groups in under
# 2 s and 5 MB). The shared generator makes ROWS rows in NGROUPS Zipf-sized
# groups (8 float32 features); `groupfit train` fits each family in
# MODELS, then `groupfit report` writes the report, timed from the start
# of the process (loading the model included), once without and once with
# --valid (the generator's validation file).
#
#   benchmarks/report.sh
#   NGROUPS=1000 MODELS=gbdt benchmarks/report.sh
#
# Figures, with their date, commit and command: docs/benchmarks.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
[ -d "$SHARED/bench" ] || SHARED=/work/shared
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=${GROUPFIT_BIN:-$ROOT/target/release/groupfit}
OUT=${BENCH_OUT:-$ROOT/bench-out}
ROWS=${ROWS:-2000000}
NGROUPS=${NGROUPS:-20000}
MODELS=${MODELS:-"linear gbdt mlp"}
DATA=$OUT/report-$ROWS-$NGROUPS
mkdir -p "$OUT"
if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows "$ROWS" --features 8 --groups "$NGROUPS" --zipf 0.5 --out "$DATA"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
printf '| model | groups | model file MB | report s | report MB | plots | with --valid s | with --valid MB |\n|---|---|---|---|---|---|---|---|\n'
for m in $MODELS; do
    case $m in
        linear) params=(--param C=0.1,1) ;;
        gbdt) params=(--param rounds=20 --param num_leaves=8,15) ;;
        mlp) params=(--param hidden=8 --param epochs=3 --param lr=0.01,0.1) ;;
    esac
    "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
        --model "$m" "${params[@]}" --out "$DATA/$m.gfm" >/dev/null 2>&1
    plain=$("$BIN" report "$DATA/$m.gfm" --out "$DATA/$m.html" --json)
    valid=$("$BIN" report "$DATA/$m.gfm" --out "$DATA/$m-valid.html" --valid "$DATA/valid.parquet" --json)
    "$PY" - "$m" "$DATA/$m.gfm" "$plain" "$valid" <<'PYEOF'
import json, os, sys
m, model, plain, valid = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
print(f"| {m} | {plain['groups']:,} | {os.path.getsize(model) / 1e6:.1f} | {plain['seconds']:.2f} | "
      f"{plain['bytes'] / 1e6:.2f} | {plain['plots']} | {valid['seconds']:.2f} | {valid['bytes'] / 1e6:.2f} |")
PYEOF
done
