"""Prints the benchmark table from a JSON-lines file of groupfit and baseline runs.

groupfit's row is the run with the median wall time of its repeats; every
ratio is baseline wall time / groupfit wall time, from the same file (run).
The score difference column is against the first baseline whose name starts
with the reference prefix (default `sklearn`).

  report.py RESULTS.jsonl [--reference PREFIX] [--system NAME]
      # NAME: our row's name (default groupfit; groupfit-ray for benchmarks/ray.sh)
"""
import json
import statistics
import sys


def main(path, ref_prefix="sklearn", system="groupfit"):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    ours = sorted((r for r in runs if r["system"] == system), key=lambda r: r["wall_s"])
    if not ours:
        sys.exit(f"no {system} run in " + path)
    gf = ours[len(ours) // 2]
    base = [r for r in runs if r["system"] != system]
    key = "valid_logloss" if "valid_logloss" in gf else "valid_rmse"
    ref = next((r for r in base if r["system"].startswith(ref_prefix)), None)
    print(f"data: {path}")
    print(f"{system}: {len(ours)} runs, wall {', '.join('%.3f' % r['wall_s'] for r in ours)} s; "
          f"strategy {gf['strategy']}, {gf['passes']} pass{'' if gf['passes'] == 1 else 'es'}, "
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
    if "comm_s" in gf:
        print(f"{system} (median run): ray.init {gf['ray_init_s']:.3f} s; runner setup {gf['setup_s']:.3f} s "
              f"(actors, shard transfer, group statistics, layouts), passes {gf['passes_s']:.3f} s; "
              f"compute inside the engine (slowest actor) {gf['compute_s']:.3f} s, "
              f"communication (scheduling, transfer, serialisation) {gf['comm_s']:.3f} s; "
              f"shards {gf['shard_rows']} rows, {gf['shared_groups']} groups sharded")
    print("x groupfit = that system's wall time / groupfit's (higher: groupfit faster)")


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--reference", default="sklearn")
    ap.add_argument("--system", default="groupfit")
    a = ap.parse_args()
    main(a.results, a.reference, a.system)
