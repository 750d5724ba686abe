#!/usr/bin/env bash
# Two groupfit binaries (before and after a change) on the shared benchmark
# data, runs alternated: wall, train and pass seconds and the validation
# metric per run, then whether both models predict the same.
# Grids: those of linear.sh, gbdt.sh and mlp.sh. The data is the one
# linear.sh generates (bench-out/zipf-1000000-1000).
#
#   N=2 FAMS="linear gbdt mlp" benchmarks/compare_binaries.sh OLD_BIN NEW_BIN
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=$1; NEW=$2; N=${N:-3}
D=${DATA:-$ROOT/bench-out/zipf-1000000-1000}
PY=${PYTHON:-$ROOT/.venv/bin/python}
OUT=${BENCH_OUT:-$ROOT/bench-out}/compare; mkdir -p $OUT
declare -A GRIDS
GRIDS[linear]="--model linear --param C=0.01,0.1,1,10"
GRIDS[gbdt]="--model gbdt --param rounds=100 --param num_leaves=15,31 --param learning_rate=0.05,0.1"
GRIDS[mlp]="--model mlp --param hidden=64 --param lr=0.001,0.01 --param epochs=5 --param batch_size=256"
for fam in ${FAMS:-linear gbdt mlp}; do
  for i in $(seq $N); do
    for which in old new; do
      bin=$OLD; [ $which = new ] && bin=$NEW
      $bin train --data $D/train.parquet --valid $D/valid.parquet --by group --target label ${GRIDS[$fam]} \
        --out $OUT/$fam-$which.gfm --json > $OUT/$fam-$which-$i.json 2>/dev/null
      $PY -c "import json,sys; d=json.load(open('$OUT/$fam-$which-$i.json')); print('$fam', '$which', $i, 'wall', d['wall_s'], 'train', d['train_s'], 'passes_s', round(d['passes_s'],3), 'metric', d.get('valid_logloss') or d.get('valid_rmse'))"
    done
  done
  $OLD predict --model $OUT/$fam-old.gfm --data $D/valid.parquet --out $OUT/$fam-old.parquet >/dev/null 2>&1
  $NEW predict --model $OUT/$fam-new.gfm --data $D/valid.parquet --out $OUT/$fam-new.parquet >/dev/null 2>&1
  $PY -c "
import pyarrow.parquet as pq, numpy as np
a=pq.read_table('$OUT/$fam-old.parquet')['prediction'].to_numpy(); b=pq.read_table('$OUT/$fam-new.parquet')['prediction'].to_numpy()
print('$fam predictions: identical' if np.array_equal(a,b) else f'$fam predictions: max abs diff {np.max(np.abs(a-b)):.3g}')"
done
