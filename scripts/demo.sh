#!/usr/bin/env bash
# The main job on the shipped real data: one model per NYC route (origin, dest)
# predicting arrival delay from what is known at departure (so no arr_time or
# air_time; the carrier is a categorical feature, the flight number is left
# out), tuned over a C grid, then predictions routed to each flight's route.
# Run through `make demo`, which builds first.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${GROUPFIT_BIN:-target/release/groupfit}
OUT=${DEMO_OUT:-demo-out}
PY=${PYTHON:-.venv/bin/python}
mkdir -p "$OUT"

echo "== groupfit train: ridge regression of arr_delay per route from what is known at departure,"
echo "   carrier one-hot encoded per route, C in {0.01, 0.1, 1, 10}, 20% of rows held out"
"$BIN" train --data data/flights.parquet --by origin,dest --target arr_delay \
    --features month,day,dep_time,sched_dep_time,dep_delay,sched_arr_time,hour,minute,carrier \
    --param C=0.01,0.1,1,10 --out "$OUT/flights.gfm"
echo
echo "== groupfit inspect (10 largest routes)"
"$BIN" inspect "$OUT/flights.gfm" --top 10
echo
echo "== groupfit predict: every flight, routed to its route's model"
"$BIN" predict --model "$OUT/flights.gfm" --data data/flights.parquet \
    --out "$OUT/predictions.parquet" --with-route
echo
"$PY" scripts/show_routed.py data/flights.parquet "$OUT/predictions.parquet"
echo
echo "== groupfit report: what the 222 route models did, as one HTML file"
"$BIN" report "$OUT/flights.gfm" --out "$OUT/report.html"
echo "open $OUT/report.html in a browser"
