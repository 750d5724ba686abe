#!/usr/bin/env bash
# Peak memory against the estimate (issue 34): `groupfit train` on the shared
# generator's data (ROWS rows, 80% training, 1,000 Zipf(1.1) groups, 32
# float32 features, a validation file) for every family, with the global
# model. Prints the peak resident set (`/usr/bin/time -f %M`), the estimate
# made before the features were read, their ratio, the peak over the f32
# training matrix, and the estimate's parts (MiB).
#
#   benchmarks/memory.sh
#   ROWS=1000000 MODELS=linear benchmarks/memory.sh
#
# Figures, with their date, commit and command: docs/benchmarks.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
[ -d "$SHARED/bench" ] || SHARED=/work/shared
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=${GROUPFIT_BIN:-$ROOT/target/release/groupfit}
OUT=${BENCH_OUT:-$ROOT/bench-out}
ROWS=${ROWS:-5000000}
MODELS=${MODELS:-"linear gbdt mlp"}
DATA=$OUT/zipf-${ROWS}-1000
mkdir -p "$OUT"
if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows "$ROWS" --features 32 --groups 1000 --zipf 1.1 --out "$DATA"
fi
printf '| model | peak MiB | estimate MiB | estimate / peak | peak / f32 matrix | parts (MiB) |\n|---|---|---|---|---|---|\n'
for m in $MODELS; do
    case $m in
        linear) params=() ;;
        gbdt) params=(--param rounds=20) ;;
        mlp) params=(--param epochs=1) ;;
    esac
    /usr/bin/time -f %M -o "$DATA/rss" "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" \
        --by group --target label --model "$m" "${params[@]}" --out "$DATA/$m.gfm" --json >"$DATA/summary.json" 2>/dev/null
    "$PY" - "$m" "$DATA" <<'PY'
import json, sys
import pyarrow.parquet as pq
m, d = sys.argv[1], sys.argv[2]
memory = json.load(open(f"{d}/summary.json"))["memory"]
peak = int(open(f"{d}/rss").read().split()[-1]) / 1024
est = memory["estimate"]["bytes"] / 2**20
matrix = pq.ParquetFile(f"{d}/train.parquet").metadata.num_rows * 32 * 4 / 2**20
parts = ", ".join(f"{n} {b / 2**20:,.0f}" for n, b in memory["estimate"]["parts"])
print(f"| {m} | {peak:,.0f} | {est:,.0f} | {est / peak:.2f} | {peak / matrix:.2f} | {parts} |")
PY
    rm -f "$DATA/$m.gfm"
done
