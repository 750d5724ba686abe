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
# 2. The flights data (per-route models of arr_delay): groupfit against a
#    per-route LightGBM loop with the same grid (benchmarks/gbdt_flights.py).
# Prints ratio tables. Quote ratios from one run only.
#
# Status: the speed target (>= 10x faster than lightgbm-joblib) is not met
# (2.7x, 3.7x like for like without the global model, at d98d20c; below;
# again at d6af42f: 35.6 s vs 97.9 s = 2.8x, 25.4 s = 3.9x without it,
# valid_logloss 0.56706 vs 0.56884, flights RMSE -0.17% in 4.2 s vs 8.0 s,
# histogram building 41% of the passes' thread time; at 1fffed6: 35.3 s vs
# 88.9 s = 2.5x, 26.4 s = 3.4x without it, same log-loss, flights -0.17% in
# 4.2 s vs 7.1 s, histogram building 36%; the split search was 44% of
# `perf` samples in a 20-round --no-global run; at a9bcbc5, a small leaf's
# nonzero bins listed 8 at a time: 33.1 s vs 92.3 s = 2.8x, 24.0 s = 3.8x
# without it, same log-loss, flights -0.17% in 3.7 s vs 7.2 s, histogram
# building 37%; a 20-round --no-global run 5.63 -> 5.39 s, alternated runs;
# at 8e6414e, boosters placed by their round's cost by group size: 32.5 s
# vs 91.4 s = 2.8x, 24.2 s = 3.8x without it (this grid's four global
# boosters already balanced the two workers), flights 3.9 s vs 7.2 s,
# histogram building 39%).
# 2026-12-04, 2-core AMD EPYC VM, `SYSTEMS=lightgbm-joblib FLIGHTS=1
# REPEATS=1` at 455c9d2 (one run): groupfit 38.8 s wall against
# lightgbm-joblib 100.8 s (2.6x; 2.4x at c9248f7, before the split search's
# seeded filter and the AVX-512 histogram subtraction), valid_logloss
# 0.56706 against 0.56884 (-0.00178). The VM's speed varies by 10-15%
# between runs, so quote ratios from one run only. Histogram building is
# 39% of the thread time in the passes (25.4 of 65.5 thread-s), the split
# search most of the rest (32% of all `perf` samples in a 20-round run).
# Choosing each group's config (scoring every booster on its validation
# rows, tree by tree) takes 3.4 s of the 38.8, 1.8 s of it the global
# model's 200,000 rows. Where the time goes,
# by group size (the same data cut in two, 100 rounds; groupfit's runs
# include a global model over the part's rows, LightGBM's have none): the 21
# groups with >= 5,000 training rows (463,510 of 799,859 rows) take groupfit
# 15.3 s and lightgbm-joblib 26.3 s (1.7x); the other 979 groups take 25.0 s
# and 73.2 s (2.9x). So the 10x target (<= 9.7 s here) is out of reach even
# with the small groups free: on a large group a booster does LightGBM's
# work (per-row histograms, a search over every bin) at about LightGBM's
# speed; only the per-model overhead LightGBM pays on small groups is ours
# to remove (these group-size figures are from c9248f7). Flights (step 2,
# 174 routes, at 455c9d2): groupfit 4.9 s against 8.8 s, validation RMSE
# 19.557 against 19.590 (-0.17%; the target is within 1%).
# Again at 5f89ba6 (binning feature by feature, radix-sorted keys, same
# bins; binning 0.68 s, was ~1.3 s; histogram building 38% of pass
# thread time): groupfit 38.5 s against lightgbm-joblib 99.2 s (2.6x), the same
# valid_logloss 0.56706 against 0.56884; flights 4.4 s against 8.9 s, RMSE
# 19.557 against 19.590 (-0.17%).
# Again on 2026-12-05 at 61b6f0d (a cut booster's shards now build at the
# same time; this grid runs tp, so unchanged): groupfit 37.3 s against
# lightgbm-joblib 94.8 s (2.5x), valid_logloss 0.56706 against 0.56884;
# histogram building 40% of pass thread time (25.8 of 64.1 thread-s),
# binning 0.76 s; flights 4.0 s against 7.4 s, RMSE 19.557 against 19.590
# (-0.17%).
# Again at 5488d98 (trees walked by 8 rows at a time in choosing each
# group's config: 1.3 s, was 3.3 s): groupfit 33.8 s against
# lightgbm-joblib 93.1 s (2.8x), the same valid_logloss 0.56706 against
# 0.56884; histogram building 39% of pass thread time (23.8 of 61.7
# thread-s); flights 3.8 s against 7.6 s, RMSE 19.557 against 19.590.
# Again at d98d20c, with the like-for-like run: groupfit 34.2 s (2.7x)
# and, with --no-global (4,000 boosters like the baselines), 24.6 s (3.7x)
# against lightgbm-joblib 91.3 s; the same valid_logloss 0.56706 (the
# groups' models do not depend on the global model) against 0.56884;
# flights 3.8 s against 7.4 s, RMSE 19.557 against 19.590 (-0.17%).
# Again on 2026-12-05 at 0b4e7b4 (AVX-512 nonzero-bin listing and paired
# running sums in the split search, ea8f6d5), `SYSTEMS=lightgbm-joblib
# FLIGHTS=1 REPEATS=1`, idle machine: groupfit 31.1 s (2.9x) and 21.3 s
# with --no-global (4.2x) against lightgbm-joblib 89.7 s; valid_logloss
# 0.56706 against 0.56884 (-0.00178); histogram building 42% of pass
# thread time (23.5 of 56.1 thread-s), binning 0.67 s; flights 3.7 s
# against 7.3 s, RMSE 19.557 against 19.590 (-0.17%). 10x: not met.
# Again on 2026-12-05 at e072bcb, `SYSTEMS=lightgbm-joblib FLIGHTS=0
# REPEATS=1 SPLIT_AT=5000`, idle machine: groupfit 29.9 s (3.1x) and 20.9 s
# with --no-global (4.4x) against lightgbm-joblib 91.3 s (10x: <= 9.1 s),
# valid_logloss 0.56706 against 0.56884; histogram building 43% of pass
# thread time (24.0 of 55.3 thread-s). By group size, each part alone
# without a global model: the 21 groups with >= 5,000 training rows
# (463,510 rows) 6.9 s against 22.8 s (3.3x), the 979 others (336,349
# rows, 391,600 trees) 14.2 s against 67.6 s (4.7x; ~73 us of thread time a
# tree against LightGBM's ~340; `perf` of that part: the split search 52%
# of samples, histogram building and subtraction 22%). For 10x both parts
# would have to run ~2.3x faster than this (6.9/a + 14.2/a <= 9.1); with
# histogram building free (43% of the passes) the --no-global run would
# still take ~12.6 s (19.2 s of passes x 0.57 + 1.7 s outside them).
#
#   benchmarks/gbdt.sh
#   SYSTEMS="lightgbm-joblib" FLIGHTS=0 benchmarks/gbdt.sh
#   SYSTEMS=lightgbm-joblib FLIGHTS=0 REPEATS=1 SPLIT_AT=5000 benchmarks/gbdt.sh
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
