#!/usr/bin/env bash
# Driver memory on Ray (issue 33): for a Parquet input of 5M rows (the shared
# generator, 1,000 Zipf(1.1) groups, 32 features), the peak resident set of
# the process calling gf.fit with the native runner and with the Ray runner
# (2 actors on a started local cluster), for every family, no global model.
# gbdt runs 20 rounds and mlp 1 epoch: the data, not the work, sets the memory.
#
#   benchmarks/ray_memory.sh
#
# Target: the Ray driver's peak at most a third of the native runner's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
[ -d "$SHARED/bench" ] || SHARED=/work/shared
PY=${PYTHON:-$ROOT/.venv/bin/python}
OUT=${BENCH_OUT:-$ROOT/bench-out}
ROWS=${ROWS:-5000000}
DATA=$OUT/zipf-${ROWS}-1000
MODELS=${MODELS:-"linear gbdt mlp"}
mkdir -p "$OUT"
if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows "$ROWS" --features 32 --groups 1000 --zipf 1.1 --out "$DATA"
fi
ray_cli() { "$PY" -m ray.scripts.scripts "$@"; }
ray_cli start --head --num-cpus 2 --include-dashboard=false --disable-usage-stats >/dev/null
trap 'ray_cli stop --force >/dev/null 2>&1 || true' EXIT
for m in $MODELS; do
    for r in native ray; do
        if [ "$r" = ray ]; then export RAY_ADDRESS=auto; else unset RAY_ADDRESS; fi
        "$PY" "$ROOT/benchmarks/ray_memory.py" --data "$DATA" --model "$m" --runner "$r" 2>/dev/null
    done
done
