"""Prints a few predicted flights next to their actual delay, showing each route kind."""
import sys

import pyarrow.compute as pc
import pyarrow.parquet as pq

data = pq.read_table(sys.argv[1], columns=["origin", "dest", "carrier", "dep_delay", "arr_delay"])
pred = pq.read_table(sys.argv[2])
rows = []
for route, k in (("own", 5), ("fallback", 2), ("unseen", 2)):
    idx = pc.indices_nonzero(pc.equal(pred["route"], route)).to_pylist()[:k]
    rows += [(i, route) for i in idx]
print(f"{'row':>7}  {'route':<8} {'origin':<6} {'dest':<5} {'carrier':<7} {'dep_delay':>9} {'arr_delay':>9} {'predicted':>9}")
for i, route in rows:
    r = {c: data[c][i].as_py() for c in data.column_names}
    actual = "-" if r["arr_delay"] is None else f"{r['arr_delay']:.0f}"
    dep = "-" if r["dep_delay"] is None else f"{r['dep_delay']:.0f}"
    print(f"{i:>7}  {route:<8} {r['origin']:<6} {r['dest']:<5} {r['carrier']:<7} {dep:>9} {actual:>9} {pred['prediction'][i].as_py():>9.1f}")
counts = {k: v for k, v in zip(*[x.to_pylist() for x in pc.value_counts(pred["route"]).flatten()])}
print(f"routes: {counts}  (own = the route's model; fallback = route too small, global model;"
      " unseen = route had no training rows, global model)")
