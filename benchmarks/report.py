"""Prints the benchmark table from a JSON-lines file of groupfit and baseline runs.

groupfit's row is the run with the median wall time of its repeats; every
ratio is baseline wall time / groupfit wall time, from the same file (run).
The score difference column is against the first baseline whose name starts
with the reference prefix (argument 2; default `sklearn`).

  python benchmarks/report.py RESULTS.jsonl [REFERENCE_PREFIX]
"""
import json
import statistics
import sys


def main(path, ref_prefix="sklearn"):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    ours = sorted((r for r in runs if r["system"] == "groupfit"), key=lambda r: r["wall_s"])
    if not ours:
        sys.exit("no groupfit run in " + path)
    gf = ours[len(ours) // 2]
    base = [r for r in runs if r["system"] != "groupfit"]
    key = "valid_logloss" if "valid_logloss" in gf else "valid_rmse"
    ref = next((r for r in base if r["system"].startswith(ref_prefix)), None)
    print(f"data: {path}")
    print(f"groupfit: {len(ours)} runs, wall {', '.join('%.3f' % r['wall_s'] for r in ours)} s; "
          f"strategy {gf['strategy']}, {gf['passes']} passes, "
          f"time outside the solver's data passes {100 * (1 - gf['passes_s'] / gf['wall_s']):.0f}% "
          f"(load {gf['load_s']:.3f} s, passes {gf['passes_s']:.3f} s)")
    hdr = f"{'system':<16}{'models':>8}{'wall_s':>9}{'load_s':>8}{'train_s':>9}{'x groupfit':>11}{key:>15}{'valid_auc':>11}"
    if ref:
        hdr += f"{'d ' + key[6:] + ' vs ' + ref['system']:>28}"
    print(hdr)
    for r in [gf] + base:
        ratio = r["wall_s"] / gf["wall_s"]
        line = (f"{r['system']:<16}{r['models']:>8}{r['wall_s']:>9.3f}{r['load_s']:>8.3f}{r['train_s']:>9.3f}"
                f"{ratio:>10.1f}x{r.get(key, float('nan')):>15.5f}{r.get('valid_auc', float('nan')):>11.5f}")
        if ref:
            line += f"{r.get(key, float('nan')) - ref[key]:>+28.5f}"
        print(line)
    print("x groupfit = that system's wall time / groupfit's (higher: groupfit faster)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
