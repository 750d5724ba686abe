#!/usr/bin/env python3
"""Tables for benchmarks/strategies.sh, one per model family: wall time per
regime x strategy (best of the repeats), auto against the best fixed
strategy, and 20,000 groups against 4 groups. Also the time inside the
passes (best of the repeats): the cost of the plan itself, which varies far
less from run to run than wall time on a VM whose page faults vary."""
import json
import sys
from collections import defaultdict

REGIMES = ["skewed4", "zipf1000", "tiny20000"]


def report(family, best, passes, explain):
    strategies = []
    for (_, s) in best:
        if s not in strategies:
            strategies.append(s)
    print(f"== {family} ==")
    print(f"{'regime':<10} " + " ".join(f"{s:>9}" for s in strategies)
          + "   auto ran   auto/best   explain picks")
    for r in REGIMES:
        row = {s: best[(r, s)] for s in strategies if best[(r, s)] is not None}
        if not row:
            continue
        cells = " ".join(f"{row[s]['wall_s']:>8.3f}s" if s in row else f"{'-':>9}" for s in strategies)
        fixed = [row[s]["wall_s"] for s in row if s != "auto"]
        ratio = row["auto"]["wall_s"] / min(fixed) if "auto" in row and fixed else float("nan")
        ran = row["auto"]["strategy"] if "auto" in row else "-"
        pick = explain.get(r, {}).get("auto", "-")
        print(f"{r:<10} {cells}   {ran:>8}   {ratio:>9.3f}   {pick:>13}")
    print()
    print("train_s (fit + selection, excluding reading and saving) per regime x strategy:")
    for r in REGIMES:
        row = {s: best[(r, s)] for s in strategies if best[(r, s)] is not None}
        if row:
            print(f"{r:<10} " + " ".join(f"{row[s]['train_s']:>8.3f}s" if s in row else f"{'-':>9}" for s in strategies))
    print()
    print("passes_s (inside the passes: the plan's own cost; best of the repeats) per regime x strategy:")
    for r in REGIMES:
        cells = [passes.get((r, s)) for s in strategies]
        if any(c is not None for c in cells):
            print(f"{r:<10} " + " ".join(f"{c:>8.3f}s" if c is not None else f"{'-':>9}" for c in cells))
    a4, a20 = best[("skewed4", "auto")], best[("tiny20000", "auto")]
    if a4 and a20:
        print()
        print(f"scaling: 20,000 groups / 4 groups (auto): wall {a20['wall_s'] / a4['wall_s']:.2f}x "
              f"({a20['wall_s']:.3f}s / {a4['wall_s']:.3f}s), train {a20['train_s'] / a4['train_s']:.2f}x; "
              f"models {a20['models']} vs {a4['models']}")
    print()
    print("explain's estimate of a first pass (ms) per regime x strategy:")
    for r in REGIMES:
        e = explain.get(r)
        if e:
            print(f"{r:<10} " + " ".join(f"{s['strategy']}={s['pass_s'] * 1e3:.2f}" for s in e["strategies"])
                  + f"  -> {e['auto']}")
    print()


def main(path):
    families = []
    best = defaultdict(lambda: defaultdict(lambda: None))   # family -> (regime, strategy) -> best record
    passes = defaultdict(dict)   # family -> (regime, strategy) -> least passes_s
    explain = defaultdict(dict)
    for line in open(path):
        d = json.loads(line)
        f = d.get("family", "linear")
        if f not in families:
            families.append(f)
        if d["system"] == "explain":
            explain[f][d["regime"]] = d
            continue
        k = (d["regime"], d["requested"])
        if "passes_s" in d:
            passes[f][k] = min(passes[f].get(k, float("inf")), d["passes_s"])
        if best[f][k] is None or d["wall_s"] < best[f][k]["wall_s"]:
            best[f][k] = d
    for f in families:
        report(f, best[f], passes[f], explain[f])


if __name__ == "__main__":
    main(sys.argv[1])
