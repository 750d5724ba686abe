#!/usr/bin/env bash
# MLP family benchmark (issue 5: grouped MLPs).
#
# Generates the shared Zipf(1.1) data (1M rows, 1,000 groups, 32 features),
# then on the same data and in the same run: `groupfit train --model mlp`
# (hidden=64, lr in {0.001, 0.01}, 5 epochs, batches of 256; best of REPEATS
# runs, the median is reported) and the reference systems torch-loop,
# ray-tasks (family mlp) and torch-ddp from ../shared/bench/baselines.py, each
# once. Also measures the machine's practical f32 peak (a large PyTorch matrix
# product on every core) for the GFLOP/s line. Prints a table of wall times,
# ratios and validation scores (benchmarks/mlp_report.py).
#
# PyTorch is needed only here: it is installed on demand into a
# benchmark-only venv, $OUT/torch-venv (the project's .venv packages are made
# visible to it by a .pth file; torch goes into the benchmark venv only).
#
# Targets: >= 8x faster than the fastest baseline, validation log-loss
# <= torch-loop's + 0.01. Figures, with their date, commit and command:
# docs/benchmarks.md.
#
#   benchmarks/mlp.sh                       # everything
#   SYSTEMS="torch-loop" REPEATS=1 benchmarks/mlp.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${GROUPFIT_SHARED:-$ROOT/../shared}
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=${GROUPFIT_BIN:-$ROOT/target/release/groupfit}
OUT=${BENCH_OUT:-$ROOT/bench-out}
ROWS=${ROWS:-1000000}
N_GROUPS=${N_GROUPS:-1000}
REPEATS=${REPEATS:-3}
SYSTEMS=${SYSTEMS:-"torch-loop ray-tasks torch-ddp"}
DATA=$OUT/zipf-${ROWS}-${N_GROUPS}
RESULTS=$OUT/mlp-$(date +%Y%m%d-%H%M%S).jsonl
mkdir -p "$OUT"

# Benchmark-only environment with PyTorch (CPU use only): sets TPY.
. "$ROOT/benchmarks/torch_venv.sh"

if [ ! -f "$DATA/train.parquet" ]; then
    "$PY" "$SHARED/bench/datagen.py" --rows "$ROWS" --features 32 --groups "$N_GROUPS" --zipf 1.1 --out "$DATA"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# Practical f32 peak of this machine: best of 5 large matrix products on all cores.
"$TPY" - >> "$RESULTS" <<'PYEOF'
import json, os, time, torch
torch.set_num_threads(os.cpu_count())
n = 3072
a, b = torch.randn(n, n), torch.randn(n, n)
a @ b
best = min((lambda t0: (a @ b, time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(5))
print(json.dumps({"system": "peak", "gflops": 2 * n ** 3 / best / 1e9, "threads": os.cpu_count()}))
PYEOF

for i in $(seq "$REPEATS"); do
    GROUPFIT_TRACE=1 "$BIN" train --data "$DATA/train.parquet" --valid "$DATA/valid.parquet" --by group --target label \
        --model mlp --param hidden=64 --param lr=0.001,0.01 --param epochs=5 --param batch_size=256 \
        --out "$OUT/mlp.gfm" --json 2> "$OUT/mlp-trace.txt" \
        | "$PY" -c '
import json, re, sys
d = json.load(sys.stdin); d["system"] = "groupfit"
m = re.search(r"mlp training steps: ([0-9.]+) GFLOP", open(sys.argv[1]).read())
d["train_gflop"] = float(m.group(1)) if m else None
print(json.dumps(d))' "$OUT/mlp-trace.txt" >> "$RESULTS"
done
for s in $SYSTEMS; do
    echo "running $s ..." >&2
    "$TPY" "$SHARED/bench/baselines.py" --data "$DATA" --family mlp --system "$s" >> "$RESULTS"
done
"$PY" "$ROOT/benchmarks/mlp_report.py" "$RESULTS"
